package lock

import (
	"cmp"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The run that drives the table and the model (model_test.go) with the
// same random calls and compares them.

type harness struct {
	t       *rapid.T
	u       *universe
	tbl     *Table
	m       *model
	nextReq uint64
}

// pick draws an int in [0, n), uniformly: rapid's integers lean to small
// values, which would skew the mix of calls.
func (h *harness) pick(label string, n int) int {
	x := rapid.Uint64().Draw(h.t, label)
	x ^= x >> 30 // splitmix64's finalizer
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int(x % uint64(n))
}

// chance draws true pct times in 100.
func (h *harness) chance(label string, pct int) bool { return h.pick(label, 100) < pct }

func sample[T any](h *harness, label string, xs []T) T { return xs[h.pick(label, len(xs))] }

func (h *harness) drawHolder(label string) Holder {
	n := h.pick(label, h.u.owners+len(h.u.lineage))
	if n < h.u.owners {
		return Owner(uint64(n + 1))
	}
	return h.u.holder(mKey{true, uint64(n - h.u.owners + 1)})
}

// drawSet draws an existing set, mostly, or any id up to one past the
// universe's sets.
func (h *harness) drawSet(label string) uint64 {
	if ids := h.m.setIDs(); len(ids) > 0 && h.chance(label+"-existing", 90) {
		return sample(h, label, ids)
	}
	return uint64(h.pick(label, h.u.sets+2))
}

func (h *harness) drawMode(label string) Mode {
	switch n := h.pick(label, 50); n {
	case 0:
		return 0
	case 1:
		return W + 1
	default:
		return modes[n%len(modes)]
	}
}

// heldMode draws a mode holder holds in set sid, or any mode.
func (h *harness) heldMode(sid uint64, k mKey, label string) Mode {
	if s, ok := h.m.sets[sid]; ok {
		if hd := h.m.holding(s, k); hd != nil && h.chance(label+"-held", 85) {
			return sample(h, label, hd.locks).Mode
		}
	}
	return h.drawMode(label)
}

func (h *harness) waitingIDs() []uint64 {
	var ids []uint64
	for _, id := range h.m.setIDs() {
		for _, w := range h.m.sets[id].queue {
			ids = append(ids, w.ID)
		}
	}
	return ids
}

func (h *harness) step(i int) {
	t := h.t
	same := func(what string, got, want any) {
		t.Helper()
		if !same(got, want) {
			t.Fatalf("step %d: %s:\n got %+v\nwant %+v", i, what, got, want)
		}
	}
	sameErr := func(what string, got, want error) {
		t.Helper()
		if kindOf(got) != kindOf(want) {
			t.Fatalf("step %d: %s: got error %v (%s), want %s", i, what, got, kindOf(got), kindOf(want))
		}
	}
	switch op := h.pick("op", 100); {
	case op < 50: // Acquire
		r := Request{Set: h.drawSet("set"), Holder: h.drawHolder("holder"), Try: h.chance("try", 25)}
		r.Mode = h.drawMode("mode")
		if h.chance("change", 25) {
			if s, ok := h.m.sets[r.Set]; ok && len(s.holders) > 0 && h.chance("change-holder", 80) {
				r.Holder = h.u.holder(sample(h, "changer", s.holders).k)
			}
			r.From = h.heldMode(r.Set, mkey(r.Holder), "from")
		}
		h.nextReq++
		r.ID = h.nextReq
		if ids := h.waitingIDs(); len(ids) > 0 && h.chance("dup", 3) {
			r.ID = sample(h, "dup-id", ids)
		}
		t.Logf("step %d: Acquire(%+v)", i, r)
		got, gerr := h.tbl.Acquire(r)
		want, werr := h.m.acquire(r)
		sameErr("Acquire", gerr, werr)
		same("Acquire", got, want)
	case op < 65: // Release
		sid, holder := h.drawSet("set"), h.drawHolder("holder")
		if s, ok := h.m.sets[sid]; ok && len(s.holders) > 0 && h.chance("held", 80) {
			holder = h.u.holder(sample(h, "holding", s.holders).k)
		}
		mode := h.heldMode(sid, mkey(holder), "mode")
		t.Logf("step %d: Release(%d, %v, %v)", i, sid, holder, mode)
		got, gerr := h.tbl.Release(sid, holder, mode)
		want, werr := h.m.release(sid, holder, mode)
		sameErr("Release", gerr, werr)
		same("Release", got, want)
	case op < 71: // Cancel
		id := uint64(h.pick("request", int(h.nextReq)+2))
		if ids := h.waitingIDs(); len(ids) > 0 && h.chance("waiting", 85) {
			id = sample(h, "waiting-id", ids)
		}
		t.Logf("step %d: Cancel(%d)", i, id)
		got, gerr := h.tbl.Cancel(id)
		want, werr := h.m.cancel(id)
		sameErr("Cancel", gerr, werr)
		same("Cancel", got, want)
	case op < 75: // DropHolder
		holder := h.drawHolder("holder")
		t.Logf("step %d: DropHolder(%v)", i, holder)
		got, err := h.tbl.DropHolder(holder)
		sameErr("DropHolder", err, nil)
		same("DropHolder", got, h.m.dropHolder(holder))
	case op < 78: // DropGroup
		sid, holder := h.drawSet("set"), h.drawHolder("holder")
		t.Logf("step %d: DropGroup(%d, %v)", i, sid, holder)
		got, gerr := h.tbl.DropGroup(sid, holder)
		want, werr := h.m.dropGroup(sid, holder)
		sameErr("DropGroup", gerr, werr)
		same("DropGroup", got, want)
	case op < 86: // CommitTxn
		id := uint64(1 + h.pick("txn", len(h.u.lineage)))
		t.Logf("step %d: CommitTxn(%d)", i, id)
		got, err := h.tbl.CommitTxn(id)
		sameErr("CommitTxn", err, nil)
		same("CommitTxn", got, h.m.endTxn(id, true))
	case op < 91: // AbortTxn
		id := uint64(1 + h.pick("txn", len(h.u.lineage)))
		t.Logf("step %d: AbortTxn(%d)", i, id)
		got, err := h.tbl.AbortTxn(id)
		sameErr("AbortTxn", err, nil)
		same("AbortTxn", got, h.m.endTxn(id, false))
	case op < 93: // RemoveSet, then CreateSet again
		sid := h.drawSet("set")
		t.Logf("step %d: RemoveSet(%d)", i, sid)
		got, gerr := h.tbl.RemoveSet(sid)
		want, werr := h.m.removeSet(sid)
		sameErr("RemoveSet", gerr, werr)
		same("RemoveSet", got, want)
		fallthrough
	case op < 96: // CreateSet
		sid, related := h.drawSet("new-set"), h.drawSet("related")
		var missing []uint64
		for id := uint64(1); id <= uint64(h.u.sets); id++ {
			if h.m.sets[id] == nil {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 && h.chance("missing", 85) {
			sid = sample(h, "missing-set", missing)
		}
		if _, ok := h.m.sets[related]; !ok && h.chance("unknown-related", 80) || h.chance("unrelated", 50) {
			related = 0
		}
		txn := h.chance("transactional", 25)
		t.Logf("step %d: CreateSet(%d, %d, %v)", i, sid, related, txn)
		sameErr("CreateSet", h.tbl.CreateSet(sid, related, txn), h.m.createSet(sid, related, txn))
	default: // a restart from a snapshot
		t.Logf("step %d: Import(Export())", i)
		snap := h.tbl.Export()
		tbl, err := Import(snap)
		if err != nil {
			t.Fatalf("step %d: Import: %v", i, err)
		}
		same("Export after Import", tbl.Export(), snap)
		h.tbl = tbl
	}
	h.compare(i)
}

// compare checks the table's whole state against the model's.
func (h *harness) compare(i int) {
	t := h.t
	snap := h.tbl.Export()
	var want Snapshot
	for _, id := range h.m.setIDs() {
		want.Sets = append(want.Sets, h.m.state(id))
	}
	if !same(snap, want) {
		t.Fatalf("step %d: state:\n got %+v\nwant %+v", i, snap, want)
	}
	for _, ss := range want.Sets {
		hs, err := h.tbl.Holders(ss.ID)
		if err != nil || !same(hs, ss.Holders) {
			t.Fatalf("step %d: Holders(%d) = %+v, %v; want %+v", i, ss.ID, hs, err, ss.Holders)
		}
		ws, err := h.tbl.Waiters(ss.ID)
		if err != nil || !same(ws, ss.Waiters) {
			t.Fatalf("step %d: Waiters(%d) = %+v, %v; want %+v", i, ss.ID, ws, err, ss.Waiters)
		}
		live := map[uint64]bool{}
		for _, hi := range ss.Holders {
			for _, l := range hi.Locks {
				live[l.Fence] = true
			}
		}
		for f := uint64(1); f <= ss.Fence; f++ {
			if ok, err := h.tbl.Validate(ss.ID, f); err != nil || ok != live[f] {
				t.Fatalf("step %d: Validate(%d, %d) = %v, %v; want %v", i, ss.ID, f, ok, err, live[f])
			}
		}
	}
	checkInvariants(t, snap)
	// The table's indexes agree with its sets.
	if err := h.tbl.check(); err != nil {
		t.Fatalf("step %d: %v", i, err)
	}
}

// drawUniverse draws up to owners owners, sets sets and txns transactions.
func drawUniverse(t *rapid.T, owners, sets, txns int) *universe {
	h0 := &harness{t: t}
	u := &universe{
		owners:  1 + h0.pick("owners", owners),
		sets:    1 + h0.pick("sets", sets),
		lineage: map[uint64][]uint64{},
	}
	n := 1 + h0.pick("transactions", txns)
	for id := uint64(1); id <= uint64(n); id++ {
		var l []uint64
		if id > 1 {
			if p := uint64(h0.pick(fmt.Sprintf("parent-%d", id), int(id))); p != 0 && len(u.lineage[p]) < 3 {
				l = append([]uint64{p}, u.lineage[p]...)
			}
		}
		u.lineage[id] = l
	}
	return u
}

// TestTableAgainstModel: spec 1.3–1.5 and chapter 2, by random calls
// against the model, with every answer and the whole state compared after
// each call, and the invariants checked on the table's own state.
//
// Two mixes: a few holders over a few sets, and a crowd over one or two
// sets, for long queues.
func TestTableAgainstModel(t *testing.T) {
	t.Run("few", func(t *testing.T) { rapid.Check(t, modelRun(3, 4, 7)) })
	t.Run("crowd", func(t *testing.T) { rapid.Check(t, modelRun(6, 2, 12)) })
}

func modelRun(owners, sets, txns int) func(*rapid.T) {
	return func(t *rapid.T) {
		u := drawUniverse(t, owners, sets, txns)
		h := &harness{t: t, u: u, tbl: New(), m: &model{u: u, sets: map[uint64]*mSet{}}}
		for id := uint64(1); id <= uint64(u.sets); id++ {
			related := uint64(0)
			if id > 1 && h.chance("related", 35) {
				related = uint64(1 + h.pick("related-to", int(id-1)))
			}
			txn := h.chance("transactional", 25)
			if kindOf(h.tbl.CreateSet(id, related, txn)) != kindOf(h.m.createSet(id, related, txn)) {
				t.Fatalf("CreateSet(%d, %d, %v): table and model disagree", id, related, txn)
			}
		}
		steps := 100 + h.pick("steps", 200)
		for i := range steps {
			h.step(i)
		}
	}
}

// check verifies the table's indexes against its sets: parties, their set
// lists and waiting requests, the tree of known transactions, groups.
func (t *Table) check() error {
	holdings := map[*party]int{}
	waits := map[*party]int{}
	if n := len(t.sets.ids()); n != t.sets.len() {
		return fmt.Errorf("%d sets counted, %d live", t.sets.len(), n)
	}
	for _, sid := range t.sets.ids() {
		s := t.sets.at(sid)
		if s.more != nil && len(s.more.queue) == 0 && s.more.group == nil {
			return fmt.Errorf("set %d: empty more", sid)
		}
		if s.more != nil && s.more.group != nil {
			g := s.more.group
			if len(g.members) < 2 || !slices.IsSorted(g.members) || !slices.Contains(g.members, sid) {
				return fmt.Errorf("set %d: group %v", sid, g.members)
			}
			for _, o := range g.members {
				if os, ok := t.sets.get(o); !ok || os.more == nil || os.more.group != g {
					return fmt.Errorf("set %d: group member %d does not share the group", sid, o)
				}
			}
		}
		for i, h := range s.holders {
			if i > 0 && s.holders[i-1].p.key >= h.p.key {
				return fmt.Errorf("set %d: holders out of order", sid)
			}
			if t.parties[h.p.key] != h.p {
				return fmt.Errorf("set %d: holder %v not known", sid, h.p.key)
			}
			if h.idx >= len(h.p.sets) || h.p.sets[h.idx] != sid {
				return fmt.Errorf("set %d: holder %v: idx %d in %v", sid, h.p.key, h.idx, h.p.sets)
			}
			if len(h.grants) == 0 || !slices.IsSorted(h.grants) {
				return fmt.Errorf("set %d: holder %v: grants %v", sid, h.p.key, h.grants)
			}
			holdings[h.p]++
		}
		for _, w := range s.queue() {
			if t.waiting[w.id] != w || w.set != sid || t.parties[w.p.key] != w.p || !slices.Contains(w.p.waits(), w) {
				return fmt.Errorf("set %d: waiter %d not indexed", sid, w.id)
			}
			waits[w.p]++
		}
	}
	n := 0
	for _, c := range waits {
		n += c
	}
	if n != len(t.waiting) {
		return fmt.Errorf("%d waiting requests indexed, %d queued", len(t.waiting), n)
	}
	for k, p := range t.parties {
		if p.key != k {
			return fmt.Errorf("party %v under key %v", p.key, k)
		}
		if p.idle() {
			return fmt.Errorf("party %v: idle but known", k)
		}
		if len(p.sets) != holdings[p] || len(p.waits()) != waits[p] {
			return fmt.Errorf("party %v: %d sets listed, %d held; %d waits listed, %d queued", k, len(p.sets), holdings[p], len(p.waits()), waits[p])
		}
		if !slices.IsSortedFunc(p.waits(), func(a, b *waiter) int { return cmp.Compare(a.id, b.id) }) ||
			!slices.IsSortedFunc(p.kids(), func(a, b *party) int { return cmp.Compare(a.key, b.key) }) {
			return fmt.Errorf("party %v: waits or kids out of order", k)
		}
		if p.more != nil && len(p.more.waits) == 0 && len(p.more.kids) == 0 {
			return fmt.Errorf("party %v: empty more", k)
		}
		for _, c := range p.kids() {
			if t.parties[c.key] != c || c.up != p {
				return fmt.Errorf("party %v: kid %v not linked", k, c.key)
			}
		}
		if p.up != nil && (t.parties[p.up.key] != p.up || !slices.Contains(p.up.kids(), p)) {
			return fmt.Errorf("party %v: not a kid of its parent %v", k, p.up.key)
		}
		if p.up != nil && (!k.txn() || !p.up.key.txn()) {
			return fmt.Errorf("party %v: an owner in a lineage", k)
		}
	}
	return nil
}
