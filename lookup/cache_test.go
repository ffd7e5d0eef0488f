package lookup

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/service"
)

// bareCache is a cache with no manager, no network and no loop: the test
// calls the loop's steps itself.
func bareCache(l ServiceDiscoveryListener, filter ItemFilter) *LookupCache {
	return &LookupCache{
		filter: filter, log: slog.New(slog.DiscardHandler),
		regs: map[djinn.ID]*cacheReg{}, services: map[djinn.ID]*cached{},
		view: map[djinn.ID]service.Item{}, listeners: map[uint64]*listening{1: {l: l, active: true}},
		gens: map[djinn.ID]genInfo{}, leases: map[djinn.ID]*client.Lease{}, changed: make(chan struct{}),
	}
}

// follow adds a registrar to c as start does, without a worker: the
// registration is made (event id 7, sequence 0) and the lookup is under
// way.
func follow(c *LookupCache) (*cacheReg, djinn.ID) {
	id := djinn.NewID()
	c.gen++
	cr := &cacheReg{
		reg: &registrar{info: discovery.RegistrarInfo{ServiceID: id}}, gen: c.gen, syncing: true, cancel: func() {},
		resync: make(chan struct{}, 1), items: map[djinn.ID]service.Item{},
		er: &client.EventRegistration{ID: 7},
	}
	c.regs[id] = cr
	return cr, id
}

func serviceEvent(seq int64, tr client.Transition, it service.Item) *client.ServiceEvent {
	ev := &client.ServiceEvent{RemoteEvent: &client.RemoteEvent{ID: 7, Seq: seq}, Transition: tr, ServiceID: it.ID}
	if tr != client.MatchNoMatch {
		ev.Item = &it
	}
	return ev
}

// wantSet checks calls against want in any order: the changes one lookup
// brings come in service id order.
func wantSet(t *testing.T, got []Recorded, want ...string) {
	t.Helper()
	var kinds []string
	for _, c := range got {
		kinds = append(kinds, c.Kind+" "+c.ID().String()[:8])
	}
	slices.Sort(kinds)
	slices.Sort(want)
	if !slices.Equal(kinds, want) {
		t.Fatalf("listener calls %q, want %q in any order", kinds, want)
	}
}

func resyncAsked(cr *cacheReg) bool {
	select {
	case <-cr.resync:
		return true
	default:
		return false
	}
}

// TestCacheSequence: a registrar's events are applied in sequence after the
// lookup they raced with; duplicates are dropped; a gap or an unreadable
// event makes the cache look up again, and the lookup's answer stands.
func TestCacheSequence(t *testing.T) {
	rec := &Recorder{}
	c := bareCache(rec, nil)
	cr, rid := follow(c)
	a, b, z := Printer(djinn.NewID(), "a"), Printer(djinn.NewID(), "b"), Printer(djinn.NewID(), "z")

	// An event that arrives while the first lookup is under way waits
	// for it.
	c.deliver(cr, serviceEvent(1, client.NoMatchMatch, a))
	if len(rec.Got()) != 0 {
		t.Fatal("an event was applied before the lookup")
	}
	c.snapshot(rid, cr.reg, cr.gen, []service.Item{b})
	WantCalls(t, rec.Got(), Call("added", b.ID), Call("added", a.ID))

	c.deliver(cr, serviceEvent(1, client.NoMatchMatch, a)) // a duplicate
	a2 := Printer(a.ID, "a2")
	c.deliver(cr, serviceEvent(2, client.MatchMatch, a2))
	c.deliver(cr, serviceEvent(2, client.MatchMatch, a2))
	other := serviceEvent(3, client.NoMatchMatch, z)
	other.ID = 8 // another registration's
	c.deliver(cr, other)
	WantCalls(t, rec.Got(), Call("added", b.ID), Call("added", a.ID), Call("changed", a.ID))

	// Event 3 is lost: 4 shows the gap, is not applied, and the cache
	// looks up again; what arrives meanwhile waits.
	c.deliver(cr, serviceEvent(4, client.MatchNoMatch, b))
	if !cr.syncing || !resyncAsked(cr) || c.resyncs.Load() != 1 {
		t.Fatalf("after a gap: syncing %v, resyncs %d: want a new lookup", cr.syncing, c.resyncs.Load())
	}
	c.deliver(cr, serviceEvent(5, client.NoMatchMatch, z))
	if n := len(rec.Got()); n != 3 {
		t.Fatalf("events applied during the new lookup: %v", rec.Got())
	}
	// The lookup says b is gone (event 4), a is as event 3 left it; then
	// event 5 adds z.
	a3 := Printer(a.ID, "a3")
	c.snapshot(rid, cr.reg, cr.gen, []service.Item{a3})
	got := rec.Got()
	WantCalls(t, got[len(got)-1:], Call("added", z.ID))
	wantSet(t, got[3:len(got)-1], Call("changed", a.ID), Call("removed", b.ID))
	if cr.syncing || cr.lastSeq != 5 {
		t.Errorf("after the new lookup: syncing %v, last sequence %d", cr.syncing, cr.lastSeq)
	}

	// An unreadable event: look up again, once the lookup under way (if
	// any) is applied.
	c.malformed(rid, cr.gen)
	if !cr.syncing || !resyncAsked(cr) {
		t.Error("an unreadable event did not start a new lookup")
	}
	c.malformed(rid, cr.gen)
	if !cr.again {
		t.Error("an unreadable event during a lookup was forgotten")
	}
	c.snapshot(rid, cr.reg, cr.gen, []service.Item{a3, z})
	if !cr.syncing || !resyncAsked(cr) || cr.again {
		t.Error("the lookup asked for during a lookup did not start")
	}
	// Work of an older generation is ignored.
	c.snapshot(rid, cr.reg, cr.gen-1, nil)
	c.event(rid, cr.gen-1, serviceEvent(6, client.MatchNoMatch, a3))
	if len(c.LookupN(nil, -1)) != 2 {
		t.Errorf("stale work changed the cache: %+v", c.LookupN(nil, -1))
	}
}

// TestCacheServiceAtSeveralRegistrars: a service is in the cache while some
// registrar has it; when the registrars disagree the latest word wins, and
// losing the registrar that said it falls back to another's.
func TestCacheServiceAtSeveralRegistrars(t *testing.T) {
	rec := &Recorder{}
	c := bareCache(rec, nil)
	r1, id1 := follow(c)
	r2, id2 := follow(c)
	x := Printer(djinn.NewID(), "old")
	c.snapshot(id1, r1.reg, r1.gen, []service.Item{x})
	c.snapshot(id2, r2.reg, r2.gen, []service.Item{x})
	WantCalls(t, rec.Got(), Call("added", x.ID))

	xNew := Printer(x.ID, "new")
	c.deliver(r1, serviceEvent(1, client.MatchMatch, xNew))
	c.deliver(r1, serviceEvent(2, client.MatchNoMatch, xNew))
	got := rec.Got()
	WantCalls(t, got, Call("added", x.ID), Call("changed", x.ID), Call("changed", x.ID))
	if !HasName(got[2].Post, "old") {
		t.Errorf("after the registrar with the new item lost it: %+v, want the other's", got[2].Post)
	}
	r2.er = nil // nothing to release: there is no renewer here
	c.detached(r2.reg)
	WantCalls(t, rec.Got(), Call("added", x.ID), Call("changed", x.ID), Call("changed", x.ID), Call("removed", x.ID))
}
