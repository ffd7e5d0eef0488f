package lookup_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/lookup"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestJoinManagerFollowsTheCluster: DESIGN.md 7a — a registration's
// lease names the cluster, not the member that granted it. A join manager
// registers its item at a cluster's lookup service; the member that led,
// and granted the registration's lease, dies before the manager renewed
// it (its lease is an hour long). Terminate cancels the registration
// through the other members: it succeeds, and the item is gone from the
// lookup service.
func TestJoinManagerFollowsTheCluster(t *testing.T) {
	ss := servertest.StartCluster(t, 3, servertest.Steady)
	dead := servertest.ServingLeader(t, ss...)
	c := servertest.Dial(t, dead.Addr())
	ctx := testContext(t)
	r, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var loc discovery.Locator
	servertest.Eventually(t, "the lookup service's discovery locator", func() bool {
		info, err := r.Info(ctx)
		if err != nil || info.Locator == "" {
			return false
		}
		loc, err = discovery.ParseLocator(info.Locator)
		return err == nil
	})
	dm, err := discovery.NewLookupDiscoveryManager(discovery.LookupDiscoveryManagerConfig{
		DisableMulticast: true,
		Locators:         discovery.LookupLocatorDiscoveryConfig{Locators: []discovery.Locator{loc}, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dm.Close() })
	id := djinn.NewID()
	m := newJoinManager(t, dm, lookup.JoinManagerConfig{Item: lookup.Printer(id, "laser"), LeaseDuration: time.Hour})
	servertest.Eventually(t, "registered", func() bool { return len(m.Registrars()) == 1 })
	reg := m.RegistrationAt(r.Ref().Service)
	if reg == nil {
		t.Fatal("no registration at the cluster's lookup service")
	}
	if reg.Lease.Landlord().Endpoint != dead.Addr() {
		t.Fatalf("registration's lease granted by %s, want the leader %s", reg.Lease.Landlord().Endpoint, dead.Addr())
	}
	// The manager's connections learn the cluster from its landlord, while
	// it answers (without that, renewals and Terminate's cancel, made
	// through them, know only the member that granted the lease).
	servertest.Eventually(t, "the join manager to follow the registration's cluster", func() bool {
		return m.Follows(reg.Lease.Landlord().Service)
	})

	if err := dead.Close(); err != nil {
		t.Fatalf("close the leader: %v", err)
	}
	next := servertest.ServingLeader(t, servertest.Others(ss, dead)...)
	if err := m.Terminate(); err != nil {
		t.Errorf("Terminate after the member that granted the registration died: %v", err)
	}
	c2 := servertest.Dial(t, next.Addr())
	r2, err := c2.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found int
	servertest.Eventually(t, "a lookup at the new leader", func() bool {
		var err error
		found, _, err = r2.LookupN(ctx, client.ServiceTemplate{ID: &id}, 1)
		return err == nil
	})
	if found != 0 {
		t.Errorf("after Terminate the item is still registered")
	}
}

// TestJoinManagerRegistersAtTheClusterWhenItsMemberDies: DESIGN.md 7a —
// the member of a lookup service's cluster that granted a registration
// dies right after answering the Register (here the moment its answer
// arrives), before the join manager could learn the cluster from it. The
// registration it granted is one whose renewals would seek that member
// alone, so the manager makes it again, through the cluster the keeper
// follows: the registration stands at the new leader, its renewals and
// Terminate's cancel follow the cluster, and the item leaves the lookup
// service at Terminate.
func TestJoinManagerRegistersAtTheClusterWhenItsMemberDies(t *testing.T) {
	ss := servertest.StartCluster(t, 3, servertest.Steady)
	leader := servertest.ServingLeader(t, ss...)
	ctx := testContext(t)
	r, err := servertest.Dial(t, leader.Addr()).Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	died := make(chan *server.Server, 1)
	killGranter := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err != nil || method != djinnpb.LookupService_Register_FullMethodName {
			return err
		}
		once.Do(func() {
			granter := reply.(*djinnpb.ServiceRegistration).GetLease().GetLandlord().GetEndpoint()
			for _, s := range ss {
				if s.Advertise() == granter {
					if err := s.Close(); err != nil {
						t.Errorf("close the member that granted the registration: %v", err)
					}
					died <- s
				}
			}
			close(died)
		})
		return err
	})
	dm := newMemDiscovery()
	id := djinn.NewID()
	m := newJoinManager(t, dm, lookup.JoinManagerConfig{Item: lookup.Printer(id, "laser"), LeaseDuration: time.Hour,
		DialOptions: []client.Option{client.WithDialOptions(killGranter)}})
	dm.events <- discovery.Event{Kind: discovery.Discovered, Registrar: discovery.RegistrarInfo{ServiceID: r.Ref().Service, Endpoint: leader.Addr()}}
	var dead *server.Server
	select {
	case dead = <-died:
	case <-ctx.Done():
		t.Fatal("the join manager registered nowhere")
	}
	if dead == nil {
		t.Fatal("the registration's lease names no member of the cluster")
	}

	var reg *client.ServiceRegistration
	servertest.EventuallyWithin(t, servertest.Failover, "the registration made again at a member alive, whose cluster the manager follows", func() bool {
		reg = m.RegistrationAt(r.Ref().Service)
		return reg != nil && reg.Lease.Landlord().Endpoint != dead.Advertise() && m.Follows(reg.Lease.Landlord().Service)
	})
	next := servertest.ServingLeader(t, servertest.Others(ss, dead)...)
	r2, err := servertest.Dial(t, next.Addr()).Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := func() int {
		var n int
		servertest.Eventually(t, "a lookup at the new leader", func() bool {
			var err error
			n, _, err = r2.LookupN(ctx, client.ServiceTemplate{ID: &id}, 1)
			return err == nil
		})
		return n
	}
	if n := found(); n != 1 {
		t.Fatalf("the item registered %d times at the cluster after the member that granted it died, want 1", n)
	}
	if err := m.Terminate(); err != nil {
		t.Errorf("Terminate: %v", err)
	}
	if n := found(); n != 0 {
		t.Errorf("after Terminate the item is still registered")
	}
}
