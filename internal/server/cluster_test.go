package server_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// TestCluster runs three servers in this process: one bootstraps, two join
// it. Calls reach the leader through any member; when the leader goes, the
// other two elect a new one, which keeps the registrations and leases.
func TestCluster(t *testing.T) {
	t.Parallel()
	// Timeouts longer than a single node's: under the race detector and
	// parallel tests, short leader leases make leaders flap.
	ss := servertest.StartCluster(t, 3, servertest.Steady)
	clients := map[*server.Server]*client.Client{}
	direct := map[*server.Server]*grpc.ClientConn{} // to the one server
	for _, s := range ss {
		clients[s] = servertest.Dial(t, s.Addr())
		direct[s] = servertest.Conn(t, s.Addr())
	}
	// leader waits for the current leader among some servers (leadership
	// may move under load) and returns it with the others.
	leader := func(t *testing.T, among ...*server.Server) (*server.Server, []*server.Server) {
		t.Helper()
		var l *server.Server
		servertest.EventuallyWithin(t, servertest.Failover, "a leader", func() bool {
			l = servertest.Leader(among...)
			return l != nil
		})
		return l, servertest.Others(among, l)
	}

	t.Run("every member is a voter with its address", func(t *testing.T) {
		var st *djinnpb.StatusResponse
		servertest.Eventually(t, "a follower's status naming the leader", func() bool {
			l, others := leader(t, ss...)
			var err error
			st, err = servertest.Status(djinnpb.NewAdminClient(direct[others[0]]))
			return err == nil && st.GetState() == "Follower" && st.GetLeaderAddress() == l.Addr()
		})
		var addrs []string
		for _, m := range st.GetMembers() {
			if !m.GetVoter() {
				t.Errorf("member %s is not a voter", m.GetNodeId())
			}
			addrs = append(addrs, m.GetGrpcAddress())
		}
		for _, s := range ss {
			if !slices.Contains(addrs, s.Addr()) {
				t.Errorf("members %v lack %s", addrs, s.Addr())
			}
		}
	})

	t.Run("a lookup stream opened at a follower follows the leader", func(t *testing.T) {
		// A follower answers no lookup: a stream that succeeds went where
		// the follower's trailer named. (Tried again only if leadership
		// moves meanwhile.)
		ctx := testContext(t)
		servertest.Eventually(t, "a lookup over a stream opened at a follower", func() bool {
			_, others := leader(t, ss...)
			f := others[0]
			s, err := client.NewRegistrar(clients[f], djinn.Ref{Endpoint: f.Addr()}).Stream(ctx)
			if err != nil {
				return false
			}
			defer s.Close()
			total, _, err := s.LookupN(ctx, service.Template{}, 0)
			return err == nil && total >= 1 // the registrar's own item at least
		})
	})

	t.Run("a follower sends a registration to the leader", func(t *testing.T) {
		// Tried again only if leadership moves meanwhile.
		var l *server.Server
		var reg *client.MailboxRegistration
		retryUnavailable(t, "register through a follower", func(ctx context.Context) (err error) {
			var others []*server.Server
			l, others = leader(t, ss...)
			reg, err = clients[others[0]].Mailbox().Register(ctx, time.Minute)
			if err == nil && servertest.Leader(ss...) != l {
				return djinn.Errorf(djinn.Unavailable, "leadership moved during the call")
			}
			return err
		})
		if reg.Lease.Landlord().Endpoint != l.Addr() {
			t.Errorf("lease granted by %s, want the leader %s", reg.Lease.Landlord().Endpoint, l.Addr())
		}
	})

	var old *client.MailboxRegistration
	retryUnavailable(t, "register at the leader", func(ctx context.Context) (err error) {
		l, _ := leader(t, ss...)
		old, err = clients[l].Mailbox().Register(ctx, time.Minute)
		return err
	})
	// Storing an event is a log write: a follower refuses it naming the
	// leader in the "djinn-leader" trailer, and the client library follows.
	ev := &client.RemoteEvent{Source: djinn.Ref{Service: djinn.NewID(), Object: djinn.NewID()}, ID: 1, Seq: 1}
	retryUnavailable(t, "notify through a follower", func(ctx context.Context) error {
		l, others := leader(t, ss...)
		if others[0].Node().AppliedIndex() < l.Node().AppliedIndex() {
			return djinn.Errorf(djinn.Unavailable, "follower %s behind the leader", others[0].NodeID())
		}
		return client.Notify(ctx, clients[others[0]], old.Listener, ev)
	})

	dead, survivors := leader(t, ss...)
	if err := dead.Close(); err != nil {
		t.Fatalf("close the leader: %v", err)
	}

	// The new leader serves once its lessor has taken the leases over.
	var (
		fresh *client.MailboxRegistration
		next  *server.Server
	)
	retryUnavailable(t, "register at the new leader", func(ctx context.Context) (err error) {
		next, _ = leader(t, survivors...)
		fresh, err = clients[next].Mailbox().Register(ctx, time.Minute)
		return err
	})
	if fresh.Lease.Landlord().Endpoint != next.Addr() {
		t.Errorf("new lease granted by %s, want %s", fresh.Lease.Landlord().Endpoint, next.Addr())
	}

	// The old lease names the old leader as its landlord; the new leader
	// renews it by its cookie.
	var granted time.Duration
	retryUnavailable(t, "renew the old lease at the new leader", func(ctx context.Context) error {
		next, _ = leader(t, survivors...)
		resp, err := djinnpb.NewLandlordClient(clients[next].ClientConn()).Renew(ctx,
			&djinnpb.RenewRequest{Cookie: idBytes(old.Lease.Cookie()), DurationNanos: int64(time.Minute)})
		granted = time.Duration(resp.GetGrantedNanos())
		return err
	})
	if granted != time.Minute {
		t.Errorf("renewing the old lease at the new leader granted %v, want 1m", granted)
	}
	var reg *client.MailboxRegistration
	retryUnavailable(t, "read the registration at the new leader", func(ctx context.Context) (err error) {
		next, _ = leader(t, survivors...)
		reg, err = clients[next].Mailbox().Registration(ctx, old.ID)
		return err
	})
	if reg.Stored != 1 {
		t.Errorf("after failover the registration holds %d events, want 1", reg.Stored)
	}
	for se, err := range reg.Pull(testContext(t), 0) {
		if err != nil {
			t.Fatal(err)
		}
		if se.Event.Seq != ev.Seq || !se.Event.Source.Equal(ev.Source) {
			t.Errorf("pulled seq %d from %v, want seq %d from %v", se.Event.Seq, se.Event.Source, ev.Seq, ev.Source)
		}
		break
	}

	t.Run("the surviving follower sends a renewal to the new leader", func(t *testing.T) {
		var follower *server.Server
		servertest.Eventually(t, "the surviving follower to know the new leader", func() bool {
			l, others := leader(t, survivors...)
			follower = others[0]
			st, err := servertest.Status(djinnpb.NewAdminClient(direct[follower]))
			return err == nil && st.GetLeaderAddress() == l.Addr()
		})
		// The leader may still be starting its lessor (Unavailable): ask
		// again, always through the follower.
		landlord := djinnpb.NewLandlordClient(direct[follower])
		retryUnavailable(t, "renew through the surviving follower", func(ctx context.Context) error {
			_, err := landlord.Renew(ctx, &djinnpb.RenewRequest{Cookie: idBytes(fresh.Lease.Cookie()), DurationNanos: int64(djinn.Any)})
			return err
		})
	})
}

// retryUnavailable calls f until it succeeds or fails otherwise than with
// Unavailable: a cluster answers Unavailable while a new leader takes over.
func retryUnavailable(t *testing.T, what string, f func(ctx context.Context) error) {
	t.Helper()
	var err error
	servertest.EventuallyWithin(t, servertest.Failover, what, func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
		defer cancel()
		err = f(ctx)
		return !errors.Is(err, djinn.ErrUnavailable)
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestFailoverHonoursRenewals: DESIGN.md 2 — a renewal served from the old
// leader's memory (not logged) is honoured by the new leader: the lease
// does not expire at its logged expiration, because the new leader gives
// every lease its logged horizon.
func TestFailoverHonoursRenewals(t *testing.T) {
	t.Parallel()
	ss := servertest.StartCluster(t, 3, servertest.Steady)
	l := servertest.ServingLeader(t, ss...)
	c := servertest.Dial(t, l.Addr())
	var reg *client.MailboxRegistration
	retryUnavailable(t, "register", func(ctx context.Context) (err error) {
		reg, err = c.Mailbox().Register(ctx, time.Second)
		return err
	})
	logged := reg.Lease.Expiration()
	retryUnavailable(t, "renew", func(ctx context.Context) error { return reg.Lease.Renew(ctx, c, 20*time.Second) })
	// The member that served the renewal from its memory goes.
	l = servertest.ServingLeader(t, ss...)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	survivors := servertest.Others(ss, l)
	// Wait until the expiration in the log has passed.
	servertest.Eventually(t, "the logged expiration to pass", func() bool { return time.Now().After(logged.Add(time.Second)) })
	next := servertest.ServingLeader(t, survivors...)
	c2 := servertest.Dial(t, next.Addr())
	retryUnavailable(t, "read the registration at the new leader", func(ctx context.Context) error {
		_, err := c2.Mailbox().Registration(ctx, reg.ID)
		return err
	})
	var resp *djinnpb.RenewResponse
	retryUnavailable(t, "renew at the new leader a lease renewed on the old leader (it expired after failover if not found)", func(ctx context.Context) (err error) {
		resp, err = djinnpb.NewLandlordClient(c2.ClientConn()).Renew(ctx,
			&djinnpb.RenewRequest{Cookie: idBytes(reg.Lease.Cookie()), DurationNanos: int64(time.Minute)})
		return err
	})
	if time.Duration(resp.GetGrantedNanos()) != time.Minute {
		t.Fatalf("granted %v", time.Duration(resp.GetGrantedNanos()))
	}
}
