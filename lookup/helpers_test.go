package lookup

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
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
		// A proposal queued when raft shut down is never answered
		// (hashicorp/raft answers queued applies only while a loop
		// runs); its waiter, whose caller has long given up, stays.
		goleak.IgnoreAnyFunction("github.com/djinn-go/djinn/internal/replica.(*Node).Propose.func1"),
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

func name(v string) service.Entry {
	return service.Entry{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString(v)}}}
}

func nameTemplate(v string) service.EntryTemplate {
	return service.EntryTemplate{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString(v)}}}
}

// hasName reports whether it has a Name entry named v.
func hasName(it *service.Item, v string) bool {
	return it != nil && slices.ContainsFunc(it.Entries, func(e service.Entry) bool {
		got, ok := e.Get("name")
		return e.Type == "Name" && ok && got == service.NewString(v)
	})
}

// printer is a printer's item named v.
func printer(id djinn.ID, v string) service.Item {
	return service.Item{ID: id, Service: []byte("127.0.0.1:9"), Types: []string{"Printer"}, Entries: []service.Entry{name(v)}}
}

// memDiscovery is a DiscoveryManagement the test drives by hand: it reports
// what Report sends and records what is discarded.
type memDiscovery struct {
	events chan discovery.Event

	mu        sync.Mutex
	discarded []djinn.ID // guarded by mu
}

var _ DiscoveryManagement = (*memDiscovery)(nil)

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

// recorded is one call to a recorder.
type recorded struct {
	kind      string // added, removed, changed
	pre, post *service.Item
}

// id is the service the call is about.
func (r recorded) id() djinn.ID {
	if r.post != nil {
		return r.post.ID
	}
	return r.pre.ID
}

// recorder is a ServiceDiscoveryListener that records its calls and checks
// that they never overlap.
type recorder struct {
	running atomic.Int32
	overlap atomic.Bool

	mu    sync.Mutex
	calls []recorded // guarded by mu
}

func (r *recorder) record(kind string, ev ServiceDiscoveryEvent) {
	if r.running.Add(1) > 1 {
		r.overlap.Store(true)
	}
	defer r.running.Add(-1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, recorded{kind, ev.Pre, ev.Post})
}

func (r *recorder) ServiceAdded(ev ServiceDiscoveryEvent)   { r.record("added", ev) }
func (r *recorder) ServiceRemoved(ev ServiceDiscoveryEvent) { r.record("removed", ev) }
func (r *recorder) ServiceChanged(ev ServiceDiscoveryEvent) { r.record("changed", ev) }

func (r *recorder) got() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// wait waits until r has n calls and returns them; it fails the test if
// calls overlapped.
func (r *recorder) wait(t *testing.T, n int) []recorded {
	t.Helper()
	servertest.Eventually(t, "listener calls", func() bool { return len(r.got()) >= n })
	if r.overlap.Load() {
		t.Error("listener calls overlapped")
	}
	return r.got()
}

// probe runs f on c's loop, where it may read the loop's state, and waits
// for it: every piece of work queued before it has been done.
func probe(t *testing.T, c *LookupCache, f func()) {
	t.Helper()
	done := make(chan struct{})
	c.in.push(func() {
		defer close(done)
		f()
	})
	select {
	case <-done:
	case <-time.After(servertest.Timeout):
		t.Fatal("the cache's loop did not run the probe")
	}
}

// synced waits until c follows exactly the lookup services ids, each with
// its event registration made and its lookup applied.
func synced(t *testing.T, c *LookupCache, ids ...djinn.ID) {
	t.Helper()
	servertest.Eventually(t, "the cache following its lookup services", func() bool {
		ok := true
		probe(t, c, func() {
			if len(c.regs) != len(ids) {
				ok = false
			}
			for _, id := range ids {
				cr := c.regs[id]
				if cr == nil || cr.er == nil || cr.syncing {
					ok = false
				}
			}
		})
		return ok
	})
}

// holds reports whether the lookup service id holds service sid, as c
// knows it.
func holds(t *testing.T, c *LookupCache, id, sid djinn.ID, check func(service.Item) bool) bool {
	t.Helper()
	ok := false
	probe(t, c, func() {
		if cr := c.regs[id]; cr != nil && !cr.syncing {
			it, has := cr.items[sid]
			ok = has && (check == nil || check(it))
		}
	})
	return ok
}
