package lookup_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/lookup"
	"github.com/djinn-go/djinn/service"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// raft's transport and the WAL leave background goroutines that
		// exit shortly after Shutdown.
		goleak.IgnoreTopFunction("github.com/hashicorp/raft.(*NetworkTransport).listen"),
		goleak.IgnoreTopFunction("github.com/hashicorp/raft-wal.(*WAL).runRotate"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*netPipeline).decodeResponses"),
		goleak.IgnoreAnyFunction("github.com/hashicorp/raft.(*NetworkTransport).handleConn"),
	)
}

// lookupServer is a djinn server running a lookup service.
type lookupServer struct {
	srv *server.Server
	c   *client.Client    // a client of it, also a Connector for its leases
	r   *client.Registrar // its lookup service
	id  djinn.ID          // the lookup service's service id
	loc discovery.Locator // where it answers unicast discovery
}

// startLookup starts a server whose lookup service answers unicast
// discovery on a port of its own choosing, and waits until it does.
func startLookup(t *testing.T) *lookupServer {
	t.Helper()
	s := &lookupServer{srv: servertest.Start(t, servertest.Config(t))}
	s.c = servertest.Dial(t, s.srv.Addr())
	ctx := testContext(t)
	var err error
	if s.r, err = s.c.Lookup(ctx); err != nil {
		t.Fatal(err)
	}
	s.id = s.r.Ref().Service
	var locator string
	servertest.Eventually(t, "the lookup service's discovery locator", func() bool {
		info, err := s.r.Info(ctx)
		if err == nil {
			locator = info.Locator
		}
		return locator != ""
	})
	if s.loc, err = discovery.ParseLocator(locator); err != nil {
		t.Fatal(err)
	}
	return s
}

// found returns the item registered with id at s, nil when there is none.
func (s *lookupServer) found(t *testing.T, id djinn.ID) *service.Item {
	t.Helper()
	_, items, err := s.r.LookupN(testContext(t), service.Template{ID: &id}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) == 0 {
		return nil
	}
	return &items[0]
}

// register registers it at s for a minute.
func (s *lookupServer) register(t *testing.T, it service.Item) *client.ServiceRegistration {
	t.Helper()
	reg, err := s.r.Register(testContext(t), it, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// discoverAt returns a discovery manager that finds the lookup services of
// servers by their locators only (no multicast), closed when the test ends.
func discoverAt(t *testing.T, servers ...*lookupServer) *discovery.LookupDiscoveryManager {
	t.Helper()
	var locs []discovery.Locator
	for _, s := range servers {
		locs = append(locs, s.loc)
	}
	dm, err := discovery.NewLookupDiscoveryManager(discovery.LookupDiscoveryManagerConfig{
		DisableMulticast: true,
		Locators:         discovery.LookupLocatorDiscoveryConfig{Locators: locs, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dm.Close() })
	return dm
}

// testContext bounds a test's calls.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// memDiscovery is a lookup.DiscoveryManagement the test drives by hand: it reports
// what Report sends and records what is discarded.
type memDiscovery struct {
	events chan discovery.Event

	mu        sync.Mutex
	discarded []djinn.ID // guarded by mu
}

var _ lookup.DiscoveryManagement = (*memDiscovery)(nil)

func newMemDiscovery() *memDiscovery { return &memDiscovery{events: make(chan discovery.Event, 16)} }

func (d *memDiscovery) Events() <-chan discovery.Event { return d.events }

func (d *memDiscovery) Discard(id djinn.ID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.discarded = append(d.discarded, id)
}

func (d *memDiscovery) wasDiscarded(id djinn.ID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.discarded, id)
}

// waitCalls waits until r has n calls and returns them; it fails the
// test if calls overlapped.
func waitCalls(t *testing.T, r *lookup.Recorder, n int) []lookup.Recorded {
	t.Helper()
	servertest.Eventually(t, "listener calls", func() bool { return len(r.Got()) >= n })
	if r.Overlapped() {
		t.Error("listener calls overlapped")
	}
	return r.Got()
}

// probe runs f on c's loop, where it may read c.Registrations(), and
// waits for it: every piece of work queued before it has been done.
func probe(t *testing.T, c *lookup.LookupCache, f func()) {
	t.Helper()
	select {
	case <-c.OnLoop(f):
	case <-time.After(servertest.Timeout):
		t.Fatal("the cache's loop did not run the probe")
	}
}

// synced waits until c follows exactly the lookup services ids, each with
// its event registration made and its lookup applied.
func synced(t *testing.T, c *lookup.LookupCache, ids ...djinn.ID) {
	t.Helper()
	servertest.Eventually(t, "the cache following its lookup services", func() bool {
		ok := true
		probe(t, c, func() {
			regs := c.Registrations()
			if len(regs) != len(ids) {
				ok = false
			}
			for _, id := range ids {
				cr, has := regs[id]
				if !has || cr.ER == nil || cr.Syncing {
					ok = false
				}
			}
		})
		return ok
	})
}

// holds reports whether the lookup service id holds service sid, as c
// knows it.
func holds(t *testing.T, c *lookup.LookupCache, id, sid djinn.ID, check func(service.Item) bool) bool {
	t.Helper()
	ok := false
	probe(t, c, func() {
		if cr, ok2 := c.Registrations()[id]; ok2 && !cr.Syncing {
			it, has := cr.Items[sid]
			ok = has && (check == nil || check(it))
		}
	})
	return ok
}
