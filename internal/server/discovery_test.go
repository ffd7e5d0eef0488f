package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// memberLocator waits for a member to serve unicast discovery and returns
// its locator.
func memberLocator(t *testing.T, s *server.Server) discovery.Locator {
	t.Helper()
	var addr string
	servertest.Eventually(t, "member "+s.NodeID()+" serving unicast discovery", func() bool {
		addr = s.DiscoveryAddr()
		return addr != ""
	})
	loc, err := discovery.ParseLocator("jini://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// clusterServiceID is the cluster's service id, as the leader tells it.
func clusterServiceID(t *testing.T, leader *server.Server) djinn.ID {
	t.Helper()
	st, err := servertest.Status(djinnpb.NewAdminClient(servertest.Conn(t, leader.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	var id djinn.ID
	copy(id[:], st.GetServiceId())
	return id
}

// TestEveryMemberAnswersDiscovery: every member of a cluster answers
// unicast discovery (DJ.2.6), for as long as it runs, with the cluster's
// lookup service id, the group and its own gRPC endpoint; a client given a
// follower's locator finds services through it, and a locator stays good
// when leadership moves.
func TestEveryMemberAnswersDiscovery(t *testing.T) {
	t.Parallel()
	ss := servertest.StartCluster(t, 3, servertest.Steady)
	leader := servertest.ServingLeader(t, ss...)
	id := clusterServiceID(t, leader)
	ctx := testContext(t)
	locs := make(map[*server.Server]discovery.Locator)
	for _, s := range ss {
		locs[s] = memberLocator(t, s)
		info, err := discovery.Unicast(ctx, locs[s])
		if err != nil {
			t.Fatalf("unicast discovery at member %s: %v", s.NodeID(), err)
		}
		if info.ServiceID != id || info.Endpoint != s.Advertise() || len(info.Groups) != 1 || info.Groups[0] != "" {
			t.Errorf("member %s (leader %v) answered %+v, want service id %s, its endpoint %s and the public group", s.NodeID(), s == leader, info, id, s.Advertise())
		}
	}
	var follower *server.Server
	for _, s := range ss {
		if s != leader {
			follower = s
			break
		}
	}
	find := func(at *server.Server) error {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		f, err := client.Find(fctx, service.TransactionManagerType, client.AtLocators(locs[at].String()))
		if err == nil {
			f.Close()
		}
		return err
	}
	if err := find(follower); err != nil {
		t.Fatalf("find the transaction manager by a follower's locator: %v", err)
	}

	// The leader goes: the others' locators still answer, with the same
	// service id, and lead to the services under the new leader.
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	rest := servertest.Others(ss, leader)
	servertest.ServingLeader(t, rest...)
	for _, s := range rest {
		if got, _ := discovery.ParseLocator("jini://" + s.DiscoveryAddr()); got != locs[s] {
			t.Errorf("member %s serves discovery on %s after the leader went, want %s as before", s.NodeID(), got, locs[s])
		}
		info, err := discovery.Unicast(ctx, locs[s])
		if err != nil || info.ServiceID != id || info.Endpoint != s.Advertise() {
			t.Errorf("member %s after the leader went: %+v, %v; want service id %s at %s", s.NodeID(), info, err, id, s.Advertise())
		}
		servertest.EventuallyWithin(t, servertest.Failover, "the transaction manager found by member "+s.NodeID()+"'s locator", func() bool {
			return find(s) == nil
		})
	}
	if _, err := discovery.Unicast(ctx, locs[leader]); err == nil {
		t.Errorf("the closed member's locator %s still answers", locs[leader])
	}
}

// TestDiscoveryMulticastLeaderOnly: with multicast on, the leader alone
// serves discovery — it announces the cluster's lookup service (DJ.2.4)
// and answers at the locator its announcements name, which another answer
// would contradict — and when it goes, its final announcement has the
// lookup service discarded and the new leader's has it discovered again,
// at the new leader's locator. In a private network namespace where
// loopback carries multicast.
func TestDiscoveryMulticastLeaderOnly(t *testing.T) {
	if !inMulticastNetns(t, "^TestDiscoveryMulticastLeaderOnly$") {
		return
	}
	ss := servertest.StartCluster(t, 3, func(c *server.Config) {
		servertest.Steady(c)
		c.Lookup.Multicast, c.Lookup.Interfaces = true, []string{"lo"}
		c.Lookup.Announce = server.Duration(200 * time.Millisecond)
	})
	leader := servertest.ServingLeader(t, ss...)
	id := clusterServiceID(t, leader)
	ctx := testContext(t)
	leaderLoc := memberLocator(t, leader)
	if info, err := discovery.Unicast(ctx, leaderLoc); err != nil || info.ServiceID != id || info.Endpoint != leader.Advertise() {
		t.Fatalf("unicast discovery at the leader: %+v, %v", info, err)
	}
	for _, s := range ss {
		if s != leader && s.DiscoveryAddr() != "" {
			t.Errorf("follower %s serves discovery on %s with multicast on, want the leader alone", s.NodeID(), s.DiscoveryAddr())
		}
	}
	d, err := discovery.NewLookupDiscovery(discovery.LookupDiscoveryConfig{Groups: []string{""}, Interfaces: []string{"lo"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	next := func(what string) discovery.Event {
		t.Helper()
		select {
		case e := <-d.Events():
			return e
		case <-ctx.Done():
			t.Fatalf("no event: %s", what)
			return discovery.Event{}
		}
	}
	e := next("the cluster's lookup service discovered")
	if e.Kind != discovery.Discovered || e.Registrar.ServiceID != id || e.Registrar.Locator != leaderLoc {
		t.Fatalf("first event %v, want the cluster's lookup service %s discovered at the leader's locator %s", e, id, leaderLoc)
	}

	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	if e := next("the lookup service discarded on the leader's final announcement"); e.Kind != discovery.Discarded || e.Reason != discovery.Left {
		t.Fatalf("after the leader closed: %v, want the lookup service discarded as left", e)
	}
	rest := servertest.Others(ss, leader)
	next2 := servertest.ServingLeader(t, rest...)
	e = next("the lookup service discovered again at the new leader")
	if want := memberLocator(t, next2); e.Kind != discovery.Discovered || e.Registrar.ServiceID != id || e.Registrar.Locator != want {
		t.Fatalf("after a new leader: %v, want %s discovered again at the new leader's locator %s", e, id, want)
	}
}
