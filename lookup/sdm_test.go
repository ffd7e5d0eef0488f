package lookup_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/lookup"
	"github.com/djinn-go/djinn/service"
)

func newSDM(t *testing.T, dm lookup.DiscoveryManagement, leaseDuration time.Duration) *lookup.ServiceDiscoveryManager {
	t.Helper()
	m, err := lookup.NewServiceDiscoveryManager(dm, lookup.ServiceDiscoveryManagerConfig{
		LeaseDuration: leaseDuration, RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Terminate() })
	return m
}

func newCache(t *testing.T, m *lookup.ServiceDiscoveryManager, filter lookup.ItemFilter, l lookup.ServiceDiscoveryListener) *lookup.LookupCache {
	t.Helper()
	c, err := m.CreateLookupCache(testContext(t), service.Template{Types: []string{"Printer"}}, filter, l)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// connectedTo waits until m is connected to exactly the lookup services ids.
func connectedTo(t *testing.T, m *lookup.ServiceDiscoveryManager, ids ...djinn.ID) {
	t.Helper()
	servertest.Eventually(t, "the manager connected to its lookup services", func() bool {
		got := registrarIDs(m.Registrars())
		return len(got) == len(ids) && !slices.ContainsFunc(ids, func(id djinn.ID) bool { return !slices.Contains(got, id) })
	})
}

// TestLookupCacheOneServiceAtTwoLookupServices: a service registered at
// two lookup services is one service to the cache: added when the first
// has it, changed when its item changes, still there when one loses it,
// removed when both have.
func TestLookupCacheOneServiceAtTwoLookupServices(t *testing.T) {
	s1, s2 := startLookup(t), startLookup(t)
	m := newSDM(t, discoverAt(t, s1, s2), djinn.Any)
	rec := &lookup.Recorder{}
	c := newCache(t, m, nil, rec)
	synced(t, c, s1.id, s2.id)
	if got := c.LookupN(nil, -1); len(got) != 0 {
		t.Fatalf("an empty registry's cache holds %v", got)
	}
	ctx := testContext(t)

	x := djinn.NewID()
	reg1 := s1.register(t, lookup.Printer(x, "laser"))
	calls := waitCalls(t, rec, 1)
	lookup.WantCalls(t, calls, lookup.Call("added", x))
	if !lookup.HasName(calls[0].Post, "laser") || calls[0].Pre != nil {
		t.Errorf("added: %+v", calls[0])
	}

	reg2 := s2.register(t, lookup.Printer(x, "laser"))
	servertest.Eventually(t, "the cache to see the second registration", func() bool { return holds(t, c, s2.id, x, nil) })

	if err := reg1.SetAttributes(ctx, []service.Entry{lookup.NameEntry("inkjet")}); err != nil {
		t.Fatal(err)
	}
	calls = waitCalls(t, rec, 2)
	lookup.WantCalls(t, calls, lookup.Call("added", x), lookup.Call("changed", x))
	if !lookup.HasName(calls[1].Pre, "laser") || !lookup.HasName(calls[1].Post, "inkjet") {
		t.Errorf("changed: pre %+v post %+v", calls[1].Pre, calls[1].Post)
	}
	// The other lookup service catching up is no change.
	if err := reg2.SetAttributes(ctx, []service.Entry{lookup.NameEntry("inkjet")}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the cache to see the second lookup service catch up", func() bool {
		return holds(t, c, s2.id, x, func(it service.Item) bool { return lookup.HasName(&it, "inkjet") })
	})

	if err := reg1.Lease.Cancel(ctx, s1.c); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the cache to see the first lookup service lose it", func() bool { return !holds(t, c, s1.id, x, nil) })
	if it := c.Lookup(nil); it == nil || it.ID != x || !lookup.HasName(it, "inkjet") {
		t.Errorf("Lookup with the service at one lookup service of two: %+v", it)
	}

	if err := reg2.Lease.Cancel(ctx, s2.c); err != nil {
		t.Fatal(err)
	}
	calls = waitCalls(t, rec, 3)
	lookup.WantCalls(t, calls, lookup.Call("added", x), lookup.Call("changed", x), lookup.Call("removed", x))
	if !lookup.HasName(calls[2].Pre, "inkjet") || calls[2].Post != nil {
		t.Errorf("removed: %+v", calls[2])
	}
	if it := c.Lookup(nil); it != nil {
		t.Errorf("Lookup after the service left: %+v", it)
	}
}

// TestLookupCacheRegistrarDiscarded: when discovery discards a lookup
// service, the services only it had leave the cache; the others stay.
func TestLookupCacheRegistrarDiscarded(t *testing.T) {
	s1, s2 := startLookup(t), startLookup(t)
	dm := discoverAt(t, s1, s2)
	m := newSDM(t, dm, djinn.Any)
	only1, both := djinn.NewID(), djinn.NewID()
	s1.register(t, lookup.Printer(only1, "one"))
	s1.register(t, lookup.Printer(both, "both"))
	s2.register(t, lookup.Printer(both, "both"))
	rec := &lookup.Recorder{}
	c := newCache(t, m, nil, rec)
	synced(t, c, s1.id, s2.id)
	if got := c.LookupN(nil, -1); len(got) != 2 {
		t.Fatalf("cache holds %d services, want 2", len(got))
	}
	n := len(waitCalls(t, rec, 2))
	if err := dm.RemoveLocators(s1.loc); err != nil {
		t.Fatal(err)
	}
	calls := waitCalls(t, rec, n+1)
	lookup.WantCalls(t, calls[n:], lookup.Call("removed", only1))
	synced(t, c, s2.id)
	if got := c.LookupN(nil, -1); len(got) != 1 || got[0].ID != both {
		t.Errorf("after the discard the cache holds %+v, want only the service at both", got)
	}
}

// TestLookupCacheFilter: the filter decides what is in the cache, again at
// every change of an item.
func TestLookupCacheFilter(t *testing.T) {
	s1 := startLookup(t)
	m := newSDM(t, discoverAt(t, s1), djinn.Any)
	rec := &lookup.Recorder{}
	notHidden := func(it service.Item) bool { return !lookup.HasName(&it, "hidden") }
	c := newCache(t, m, notHidden, rec)
	synced(t, c, s1.id)
	x, y := djinn.NewID(), djinn.NewID()
	regX := s1.register(t, lookup.Printer(x, "hidden"))
	s1.register(t, lookup.Printer(y, "shown"))
	calls := waitCalls(t, rec, 1)
	lookup.WantCalls(t, calls, lookup.Call("added", y))
	ctx := testContext(t)
	if err := regX.SetAttributes(ctx, []service.Entry{lookup.NameEntry("visible")}); err != nil {
		t.Fatal(err)
	}
	if err := regX.SetAttributes(ctx, []service.Entry{lookup.NameEntry("hidden")}); err != nil {
		t.Fatal(err)
	}
	calls = waitCalls(t, rec, 3)
	lookup.WantCalls(t, calls, lookup.Call("added", y), lookup.Call("added", x), lookup.Call("removed", x))
	if got := c.LookupN(nil, -1); len(got) != 1 || got[0].ID != y {
		t.Errorf("cache holds %+v, want only the shown service", got)
	}
	// A lookup's own filter narrows further.
	if got := c.Lookup(func(it service.Item) bool { return it.ID == x }); got != nil {
		t.Errorf("Lookup of a service the cache's filter refuses: %+v", got)
	}
}

// TestServiceDiscoveryManagerLookup: a one-off lookup asks every lookup
// service and returns each service once.
func TestServiceDiscoveryManagerLookup(t *testing.T) {
	s1, s2 := startLookup(t), startLookup(t)
	m := newSDM(t, discoverAt(t, s1, s2), djinn.Any)
	a, b := djinn.NewID(), djinn.NewID()
	s1.register(t, lookup.Printer(a, "a"))
	s2.register(t, lookup.Printer(a, "a"))
	s2.register(t, lookup.Printer(b, "b"))
	connectedTo(t, m, s1.id, s2.id)
	ctx := testContext(t)
	tmpl := service.Template{Types: []string{"Printer"}}

	got, err := m.Lookup(ctx, tmpl, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []djinn.ID
	for _, it := range got {
		ids = append(ids, it.ID)
	}
	if len(ids) != 2 || !slices.Contains(ids, a) || !slices.Contains(ids, b) {
		t.Errorf("Lookup found %v, want %s and %s once each", ids, a, b)
	}
	if got, err := m.Lookup(ctx, tmpl, nil, 1); err != nil || len(got) != 1 {
		t.Errorf("Lookup of at most 1: %d items, %v", len(got), err)
	}
	onlyB := func(it service.Item) bool { return lookup.HasName(&it, "b") }
	if got, err := m.Lookup(ctx, tmpl, onlyB, 10); err != nil || len(got) != 1 || got[0].ID != b {
		t.Errorf("Lookup with a filter: %+v, %v", got, err)
	}
	if _, err := m.Lookup(ctx, tmpl, nil, -1); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "-1") {
		t.Errorf("Lookup with max -1: %v, want InvalidArgument naming it", err)
	}
	if _, err := m.CreateLookupCache(ctx, service.Template{Types: []string{""}}, nil, nil); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("CreateLookupCache with an empty type name: %v, want InvalidArgument", err)
	}
}

// TestLookupCacheRegistersAgain: when the cache's event registration is
// lost (its lease cancelled behind its back) the cache registers again and
// keeps following, without reporting changes that did not happen.
func TestLookupCacheRegistersAgain(t *testing.T) {
	s1 := startLookup(t)
	m := newSDM(t, discoverAt(t, s1), time.Second)
	rec := &lookup.Recorder{}
	c := newCache(t, m, nil, rec)
	x := djinn.NewID()
	s1.register(t, lookup.Printer(x, "before"))
	waitCalls(t, rec, 1)
	synced(t, c, s1.id)
	var lost *client.EventRegistration
	probe(t, c, func() { lost = c.Registrations()[s1.id].ER })
	if err := lost.Lease.Cancel(testContext(t), s1.c); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "a new event registration", func() bool {
		again := false
		probe(t, c, func() {
			cr := c.Registrations()[s1.id]
			again = cr.ER != nil && cr.ER.Lease.Cookie() != lost.Lease.Cookie() && !cr.Syncing
		})
		return again
	})
	y := djinn.NewID()
	s1.register(t, lookup.Printer(y, "after"))
	calls := waitCalls(t, rec, 2)
	lookup.WantCalls(t, calls, lookup.Call("added", x), lookup.Call("added", y))
}

// TestLookupCacheWaitAndAddListener: Wait returns when a matching service
// arrives; a listener added later first hears of what the cache holds.
func TestLookupCacheWaitAndAddListener(t *testing.T) {
	s1 := startLookup(t)
	m := newSDM(t, discoverAt(t, s1), djinn.Any)
	c := newCache(t, m, nil, nil)
	ctx := testContext(t)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if it, err := c.Wait(short, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on an empty cache: %+v, %v", it, err)
	}
	x := djinn.NewID()
	got := make(chan *service.Item, 1)
	go func() {
		it, err := c.Wait(ctx, func(it service.Item) bool { return it.ID == x })
		if err != nil {
			t.Error(err)
		}
		got <- it
	}()
	s1.register(t, lookup.Printer(x, "awaited"))
	if it := <-got; it == nil || it.ID != x {
		t.Errorf("Wait returned %+v", it)
	}
	rec := &lookup.Recorder{}
	remove := c.AddListener(rec)
	lookup.WantCalls(t, waitCalls(t, rec, 1), lookup.Call("added", x))
	remove()
	y := djinn.NewID()
	s1.register(t, lookup.Printer(y, "unheard"))
	servertest.Eventually(t, "the cache to hold the second service", func() bool { return len(c.LookupN(nil, -1)) == 2 })
	if calls := rec.Got(); len(calls) != 1 {
		t.Errorf("a removed listener heard %v", calls)
	}
}

// TestLookupCacheTerminate: Terminate cancels the event registrations,
// empties the cache and is idempotent; the manager's Terminate ends the
// caches left.
func TestLookupCacheTerminate(t *testing.T) {
	s1, s2 := startLookup(t), startLookup(t)
	m := newSDM(t, discoverAt(t, s1, s2), djinn.Any)
	s1.register(t, lookup.Printer(djinn.NewID(), "x"))
	c1 := newCache(t, m, nil, nil)
	c2 := newCache(t, m, nil, nil)
	synced(t, c1, s1.id, s2.id)
	synced(t, c2, s1.id, s2.id)
	var leases []*client.Lease
	probe(t, c1, func() {
		for _, cr := range c1.Registrations() {
			leases = append(leases, cr.ER.Lease)
		}
	})
	if err := c1.Terminate(); err != nil {
		t.Fatal(err)
	}
	if err := c1.Terminate(); err != nil {
		t.Errorf("Terminate again: %v", err)
	}
	ctx := testContext(t)
	for _, l := range leases {
		if err := l.Renew(ctx, s1.c, time.Minute); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Errorf("renewing a terminated cache's event registration: %v, want UnknownLease", err)
		}
	}
	if it := c1.Lookup(nil); it != nil {
		t.Errorf("Lookup on a terminated cache: %+v", it)
	}
	if _, err := c1.Wait(ctx, nil); !errors.Is(err, lookup.ErrTerminated) {
		t.Errorf("Wait on a terminated cache: %v, want lookup.ErrTerminated", err)
	}
	if err := m.Terminate(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c2.Done():
	default:
		t.Error("the manager's Terminate left a cache running")
	}
	if _, err := m.CreateLookupCache(ctx, service.Template{}, nil, nil); !errors.Is(err, lookup.ErrTerminated) {
		t.Errorf("CreateLookupCache after Terminate: %v", err)
	}
	if _, err := m.Lookup(ctx, service.Template{}, nil, 1); !errors.Is(err, lookup.ErrTerminated) {
		t.Errorf("Lookup after Terminate: %v", err)
	}
}

// TestServiceDiscoveryManagerDiscardsMisnamedRegistrar: an endpoint that
// serves a lookup service with another id than discovery reported is
// discarded.
func TestServiceDiscoveryManagerDiscardsMisnamedRegistrar(t *testing.T) {
	s1 := startLookup(t)
	dm := newMemDiscovery()
	m := newSDM(t, dm, djinn.Any)
	wrong := djinn.NewID()
	dm.events <- discovery.Event{Kind: discovery.Discovered, Registrar: discovery.RegistrarInfo{ServiceID: wrong, Endpoint: s1.srv.Addr()}}
	servertest.Eventually(t, "the misnamed registrar discarded", func() bool { return dm.wasDiscarded(wrong) })
	if got := m.Registrars(); len(got) != 0 {
		t.Errorf("connected to a misnamed registrar: %v", got)
	}
}
