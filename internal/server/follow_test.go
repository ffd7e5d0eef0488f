package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// followCluster starts a three-member cluster with timeouts that keep
// leadership steady under the race detector and parallel tests.
func followCluster(t *testing.T) []*server.Server {
	return servertest.StartCluster(t, 3, func(c *server.Config) {
		c.Raftcfg.HeartbeatTimeout = server.Duration(500 * time.Millisecond)
		c.Raftcfg.ElectionTimeout = server.Duration(500 * time.Millisecond)
	})
}

func leaderOf(t *testing.T, ss ...*server.Server) *server.Server {
	t.Helper()
	var l *server.Server
	servertest.Eventually(t, "a leader", func() bool { l = servertest.Leader(ss...); return l != nil })
	return l
}

// heldLeases is one lease of every service of a cluster, with the service
// clients that made them.
type heldLeases struct {
	names  []string
	leases []*client.Lease

	mailbox   *client.Mailbox
	mreg      *client.MailboxRegistration
	tx        *client.Transaction
	locks     *client.LockSet
	owner     *client.LockOwner
	registrar *client.Registrar
	item      *client.ServiceRegistration
	renewals  *client.RenewalSet
	lds       *client.LDSRegistration
}

func (h *heldLeases) add(name string, l *client.Lease) {
	h.names = append(h.names, name)
	h.leases = append(h.leases, l)
}

// holdLeases takes a lease of every service through c.
func holdLeases(t *testing.T, c *client.Client) *heldLeases {
	t.Helper()
	ctx := testContext(t)
	h := &heldLeases{mailbox: c.Mailbox()}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	var err error
	h.mreg, err = h.mailbox.Register(ctx, time.Minute)
	must("mailbox register", err)
	h.add("mailbox registration", h.mreg.Lease)
	ev := &client.RemoteEvent{Source: djinn.Ref{Service: djinn.NewID(), Object: djinn.NewID()}, ID: 1, Seq: 7}
	must("store an event", client.Notify(ctx, c, h.mreg.Listener, ev))
	mgr, err := c.TransactionManager(ctx)
	must("transaction manager", err)
	h.tx, err = mgr.Create(ctx, time.Minute)
	must("create transaction", err)
	h.add("transaction", h.tx.Lease())
	ls, err := c.LockService(ctx)
	must("lock service", err)
	h.locks, err = ls.CreateSet(ctx, client.LockSetOptions{Lease: time.Minute})
	must("create lock set", err)
	h.add("lock set", h.locks.Lease())
	h.owner, err = ls.CreateOwner(ctx, time.Minute)
	must("create lock owner", err)
	h.add("lock owner", h.owner.Lease())
	_, err = h.locks.Lock(ctx, client.HeldByOwner(h.owner), client.LockW)
	must("lock", err)
	h.registrar, err = c.Lookup(ctx)
	must("lookup service", err)
	h.item, err = h.registrar.Register(ctx, client.ServiceItem{Service: []byte("127.0.0.1:9"), Types: []string{"Failover"}}, time.Minute)
	must("register item", err)
	h.add("lookup item", h.item.Lease)
	h.renewals, err = c.RenewalService().CreateSet(ctx, time.Minute)
	must("create renewal set", err)
	h.add("renewal set", h.renewals.Lease())
	lds, err := c.LookupDiscovery(ctx)
	must("lookup discovery service", err)
	h.lds, err = lds.Register(ctx, client.Groups{}, nil, djinn.Ref{Endpoint: "127.0.0.1:9", Service: djinn.NewID(), Object: djinn.NewID()}, nil, time.Minute)
	must("lds register", err)
	h.add("lds registration", h.lds.EventRegistration().Lease)
	return h
}

// TestClientFollowsTheCluster: DESIGN.md 7a — references to cluster
// services name the cluster, not one node. A client dialled at the leader
// alone holds a lease of every service, all granted by that leader, and a
// client of every service. The leader dies. Once the client has failed
// over (its first renewal that succeeds), every lease renews through the
// other members with no change to the lease or the caller — 0 failed
// renewals — and every service client made before works unchanged.
func TestClientFollowsTheCluster(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	dead := leaderOf(t, ss...)
	c := servertest.Dial(t, dead.Addr())
	h := holdLeases(t, c)
	for i, l := range h.leases {
		if l.Landlord().Endpoint != dead.Addr() {
			t.Fatalf("%s granted by %s, want the leader %s", h.names[i], l.Landlord().Endpoint, dead.Addr())
		}
	}
	// A program that only has a lease's token and a pool that reached its
	// landlord once follows the cluster too.
	pool := client.NewPool()
	t.Cleanup(func() { pool.Close() })
	token, err := client.ParseToken(h.mreg.Lease.Token())
	if err != nil {
		t.Fatal(err)
	}
	if err := token.Renew(testContext(t), pool, time.Minute); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the pool to follow the lease's cluster", func() bool {
		return pool.Follows(token.Landlord().Service)
	})

	if err := dead.Close(); err != nil {
		t.Fatalf("close the leader: %v", err)
	}
	retryUnavailable(t, "the first renewal after the leader died", func(ctx context.Context) error {
		return h.leases[0].Renew(ctx, c, time.Minute)
	})
	ctx := testContext(t)
	failed := 0
	for round := range 5 {
		for i, l := range append(h.leases, token) {
			if err := l.Renew(ctx, c, time.Minute); err != nil {
				failed++
				t.Errorf("round %d: renewing the %s granted by the dead member: %v", round, append(h.names, "token")[i], err)
			}
		}
	}
	if err := token.Renew(ctx, pool, time.Minute); err != nil {
		failed++
		t.Errorf("renewing the token's lease through the pool: %v", err)
	}
	t.Logf("renewals failed after failover: %d of %d", failed, 5*(len(h.leases)+1)+1)
	checkServiceClients(t, ctx, h)
}

// checkServiceClients uses every service client of h, made before the
// member they were dialled at died.
func checkServiceClients(t *testing.T, ctx context.Context, h *heldLeases) {
	t.Helper()
	if reg, err := h.mailbox.Registration(ctx, h.mreg.ID); err != nil || reg.ID != h.mreg.ID {
		t.Errorf("mailbox registration after failover: %v", err)
	}
	// The new leader's mailbox may still be starting (Unavailable): a
	// caller tries again, as with any indefinite failure.
	retryUnavailable(t, "mailbox pull after failover", func(ctx context.Context) error {
		for se, err := range h.mreg.Pull(ctx, 0) {
			if err != nil {
				return err
			}
			if se.Event.Seq != 7 {
				t.Errorf("mailbox pull after failover: seq %d; want the event stored before, 7", se.Event.Seq)
			}
			break
		}
		return nil
	})
	if st, err := h.tx.State(ctx); err != nil || st != client.TxnActive {
		t.Errorf("transaction state after failover: %v, %v", st, err)
	}
	if err := h.tx.Commit(ctx); err != nil {
		t.Errorf("commit after failover: %v", err)
	}
	if err := h.locks.Unlock(ctx, client.HeldByOwner(h.owner), client.LockW); err != nil {
		t.Errorf("unlock after failover: %v", err)
	}
	if it, err := h.registrar.Lookup(ctx, client.ServiceTemplate{ID: &h.item.ID}); err != nil || it == nil {
		t.Errorf("lookup after failover: %v, %v", it, err)
	}
	if _, err := h.renewals.Leases(ctx); err != nil {
		t.Errorf("renewal set after failover: %v", err)
	}
	if _, err := h.lds.Groups(ctx); err != nil {
		t.Errorf("lds registration after failover: %v", err)
	}
}

// TestRenewalServiceFollowsTheCluster: the renewal service keeps a lease
// granted by a member that died alive: its new leader renews the lease
// through the others.
func TestRenewalServiceFollowsTheCluster(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	dead := leaderOf(t, ss...)
	c := servertest.Dial(t, strings.Join([]string{dead.Addr(), ss[0].Addr(), ss[1].Addr(), ss[2].Addr()}, ","))
	ctx := testContext(t)
	const leaseFor = 8 * time.Second // renewed with a third left: room for a failover
	reg, err := c.Mailbox().Register(ctx, leaseFor)
	if err != nil {
		t.Fatal(err)
	}
	set, err := c.RenewalService().CreateSet(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.RenewForDesired(ctx, reg.Lease, djinn.Forever); err != nil {
		t.Fatal(err)
	}
	if err := dead.Close(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	servertest.Eventually(t, "the renewal service's new leader to renew the lease", func() bool {
		leases, err := set.Leases(ctx)
		switch {
		case errors.Is(err, djinn.ErrUnavailable):
			return false // the new leader is taking over
		case err != nil:
			t.Fatal(err)
		case len(leases) != 1:
			t.Fatalf("renewal set holds %d leases after the failover, want 1", len(leases))
		}
		return leases[0].Lease.Expiration().After(killed.Add(leaseFor))
	})
	retryUnavailable(t, "read the registration kept alive by the renewal service", func(ctx context.Context) error {
		_, err := c.Mailbox().Registration(ctx, reg.ID)
		return err
	})
}

// TestDialSeveralEndpoints: client.Dial takes several endpoints; dead ones
// among them do not matter while one answers, and a name that is no
// endpoint is refused naming it.
func TestDialSeveralEndpoints(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	ctx := testContext(t)
	c, err := client.Dial(ctx, fmt.Sprintf("127.0.0.1:1,%s", ss[1].Addr()))
	if err != nil {
		t.Fatalf("dial with a dead endpoint first: %v", err)
	}
	defer c.Close()
	if c.ServiceID().IsZero() {
		t.Error("the client did not learn the cluster's service id")
	}
	if _, err := c.Mailbox().Register(ctx, time.Minute); err != nil {
		t.Errorf("register through a client dialled at several endpoints: %v", err)
	}
	for _, bad := range []string{"", "127.0.0.1:1,nohost", "127.0.0.1"} {
		if _, err := client.Dial(ctx, bad); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("dial %q: %v, want invalid argument", bad, err)
		}
	}
	if _, err := client.Dial(ctx, "127.0.0.1:1,127.0.0.1:2"); !errors.Is(err, djinn.ErrUnavailable) {
		t.Errorf("dial two dead endpoints: %v, want unavailable", err)
	}
}
