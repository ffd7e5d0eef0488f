package lock

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/djinn-go/djinn"
)

// The model is the lock table written the obvious way: plain slices, and
// every answer recomputed from the rules of spec 1.3–1.5 as the package
// doc states them. TestTableAgainstModel drives the table and the model
// with the same random calls and compares every answer and the whole state
// after each call.

type mKey struct {
	txn bool
	id  uint64
}

// universe fixes the holders a run draws from: owners 1..owners and
// transactions 1..len(lineage) nested as lineage says (depth ≤ 3).
type universe struct {
	owners  int
	lineage map[uint64][]uint64
	sets    int
}

func (u *universe) holder(k mKey) Holder {
	if !k.txn {
		return Owner(k.id)
	}
	return Holder{Txn: true, ID: k.id, Lineage: slices.Clone(u.lineage[k.id])}
}

type mHolding struct {
	k     mKey
	locks []Lock // by fence
}

type mSet struct {
	txn     bool
	group   int
	fence   uint64
	holders []mHolding // owners by id, then transactions by id
	queue   []Request
}

type model struct {
	u         *universe
	sets      map[uint64]*mSet
	nextGroup int
}

func mkey(h Holder) mKey { return mKey{txn: h.Txn, id: h.ID} }

func (a mKey) less(b mKey) bool {
	if a.txn != b.txn {
		return b.txn
	}
	return a.id < b.id
}

func (m *model) lineage(k mKey) []uint64 {
	if !k.txn {
		return nil
	}
	return m.u.lineage[k.id]
}

// rel: holder h is committed relative to requester q.
func (m *model) rel(h, q mKey) bool {
	return h == q || (h.txn && q.txn && slices.Contains(m.lineage(q), h.id))
}

func (m *model) family(k mKey) uint64 {
	if !k.txn {
		return 0
	}
	if l := m.lineage(k); len(l) > 0 {
		return l[len(l)-1]
	}
	return k.id
}

func (m *model) conflicts(s *mSet, q mKey, mode Mode) bool {
	for _, h := range s.holders {
		if m.rel(h.k, q) {
			continue
		}
		for _, l := range h.locks {
			if Conflicts(l.Mode, mode) {
				return true
			}
		}
	}
	return false
}

func (m *model) exempt(s *mSet, q mKey) bool {
	if !q.txn {
		return false
	}
	for _, h := range s.holders {
		if h.k.txn && m.family(h.k) == m.family(q) {
			return true
		}
	}
	return false
}

func (m *model) ready(s *mSet, i int) bool {
	w := s.queue[i]
	return !m.conflicts(s, mkey(w.Holder), w.Mode) && (i == 0 || m.exempt(s, mkey(w.Holder)))
}

func (m *model) holding(s *mSet, k mKey) *mHolding {
	for i := range s.holders {
		if s.holders[i].k == k {
			return &s.holders[i]
		}
	}
	return nil
}

func (m *model) count(s *mSet, k mKey, mode Mode) int {
	n := 0
	if h := m.holding(s, k); h != nil {
		for _, l := range h.locks {
			if l.Mode == mode {
				n++
			}
		}
	}
	return n
}

func (m *model) claimed(s *mSet, k mKey, mode Mode) int {
	n := 0
	for _, w := range s.queue {
		if mkey(w.Holder) == k && w.From == mode {
			n++
		}
	}
	return n
}

func (m *model) grant(s *mSet, k mKey, mode, from Mode) uint64 {
	s.fence++
	h := m.holding(s, k)
	if h == nil {
		i := 0
		for i < len(s.holders) && s.holders[i].k.less(k) {
			i++
		}
		s.holders = slices.Insert(s.holders, i, mHolding{k: k})
		h = &s.holders[i]
	}
	if from != 0 {
		for i := len(h.locks) - 1; i >= 0; i-- {
			if h.locks[i].Mode == from {
				h.locks = slices.Delete(h.locks, i, i+1)
				break
			}
		}
	}
	h.locks = append(h.locks, Lock{Mode: mode, Fence: s.fence})
	return s.fence
}

func (m *model) setIDs() []uint64 {
	var ids []uint64
	for id := range m.sets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// wake grants, in every set, the first ready request until none is.
func (m *model) wake() []Grant {
	var out []Grant
	for _, id := range m.setIDs() {
		s := m.sets[id]
		for {
			i := 0
			for i < len(s.queue) && !m.ready(s, i) {
				i++
			}
			if i == len(s.queue) {
				break
			}
			w := s.queue[i]
			s.queue = slices.Delete(s.queue, i, i+1)
			out = append(out, Grant{Request: w.ID, Set: id, Fence: m.grant(s, mkey(w.Holder), w.Mode, w.From)})
		}
	}
	return out
}

func (m *model) waiting(id uint64) bool {
	for _, s := range m.sets {
		for _, w := range s.queue {
			if w.ID == id {
				return true
			}
		}
	}
	return false
}

func errOf(k djinn.Kind) error { return djinn.Errorf(k, "model") }

func (m *model) createSet(id, related uint64, txn bool) error {
	if id == 0 {
		return errOf(djinn.InvalidArgument)
	}
	if _, ok := m.sets[id]; ok {
		return errOf(djinn.InvalidArgument)
	}
	g := 0
	if related != 0 {
		r, ok := m.sets[related]
		if !ok {
			return errOf(djinn.NoSuchObject)
		}
		if r.txn != txn {
			return errOf(djinn.InvalidArgument)
		}
		g = r.group
	} else {
		m.nextGroup++
		g = m.nextGroup
	}
	m.sets[id] = &mSet{txn: txn, group: g}
	return nil
}

func (m *model) removeSet(id uint64) ([]uint64, error) {
	s, ok := m.sets[id]
	if !ok {
		return nil, errOf(djinn.NoSuchObject)
	}
	var out []uint64
	for _, w := range s.queue {
		out = append(out, w.ID)
	}
	slices.Sort(out)
	delete(m.sets, id)
	return out, nil
}

// deadlocks reports whether queuing q closes a cycle of waits-for edges:
// the graph is built whole, over every waiting request and q.
func (m *model) deadlocks(q Request) bool {
	type node struct {
		r   Request
		set *mSet
		pos int
	}
	nodes := map[uint64]node{}
	for _, s := range m.sets {
		for i, w := range s.queue {
			nodes[w.ID] = node{w, s, i}
		}
	}
	qs := m.sets[q.Set]
	nodes[q.ID] = node{q, qs, len(qs.queue)}
	succ := func(n node) []uint64 {
		var out []uint64
		k := mkey(n.r.Holder)
		for _, h := range n.set.holders {
			if m.rel(h.k, k) {
				continue
			}
			c := false
			for _, l := range h.locks {
				c = c || Conflicts(l.Mode, n.r.Mode)
			}
			if !c {
				continue
			}
			for id, o := range nodes {
				if mkey(o.r.Holder) == h.k {
					out = append(out, id)
				}
			}
		}
		if !m.exempt(n.set, k) {
			for _, w := range n.set.queue[:n.pos] {
				out = append(out, w.ID)
			}
		}
		return out
	}
	seen := map[uint64]bool{}
	todo := succ(nodes[q.ID])
	for len(todo) > 0 {
		id := todo[0]
		todo = todo[1:]
		if id == q.ID {
			return true
		}
		if !seen[id] {
			seen[id] = true
			todo = append(todo, succ(nodes[id])...)
		}
	}
	return false
}

func (m *model) acquire(r Request) (Result, error) {
	if r.ID == 0 || m.waiting(r.ID) {
		return Result{}, errOf(djinn.InvalidArgument)
	}
	s, ok := m.sets[r.Set]
	if !ok {
		return Result{}, errOf(djinn.NoSuchObject)
	}
	if !r.Mode.Valid() || (r.From != 0 && !r.From.Valid()) || r.Holder.ID == 0 || (s.txn && !r.Holder.Txn) {
		return Result{}, errOf(djinn.InvalidArgument)
	}
	k := mkey(r.Holder)
	if r.From != 0 {
		if n := m.count(s, k, r.From); n == 0 || n <= m.claimed(s, k, r.From) {
			return Result{}, errOf(djinn.LockNotHeld)
		}
	}
	if !m.conflicts(s, k, r.Mode) && (len(s.queue) == 0 || m.exempt(s, k)) {
		f := m.grant(s, k, r.Mode, r.From)
		return Result{Outcome: Granted, Fence: f, Grants: m.wake()}, nil
	}
	if r.Try {
		return Result{Outcome: Refused}, nil
	}
	if m.deadlocks(r) {
		return Result{}, errOf(djinn.Deadlock)
	}
	r.Try = false
	s.queue = append(s.queue, r)
	return Result{Outcome: Queued}, nil
}

func (m *model) release(sid uint64, h Holder, mode Mode) ([]Grant, error) {
	s, ok := m.sets[sid]
	if !ok {
		return nil, errOf(djinn.NoSuchObject)
	}
	if !mode.Valid() || h.ID == 0 {
		return nil, errOf(djinn.InvalidArgument)
	}
	k := mkey(h)
	if n := m.count(s, k, mode); n == 0 || n <= m.claimed(s, k, mode) {
		return nil, errOf(djinn.LockNotHeld)
	}
	hd := m.holding(s, k)
	for i := len(hd.locks) - 1; i >= 0; i-- {
		if hd.locks[i].Mode == mode {
			hd.locks = slices.Delete(hd.locks, i, i+1)
			break
		}
	}
	m.prune(s)
	return m.wake(), nil
}

func (m *model) prune(s *mSet) {
	s.holders = slices.DeleteFunc(s.holders, func(h mHolding) bool { return len(h.locks) == 0 })
}

func (m *model) cancel(id uint64) ([]Grant, error) {
	for _, s := range m.sets {
		for i, w := range s.queue {
			if w.ID == id {
				s.queue = slices.Delete(s.queue, i, i+1)
				return m.wake(), nil
			}
		}
	}
	return nil, errOf(djinn.NoSuchObject)
}

// drop cancels k's requests and drops its locks in the sets in (all if nil).
func (m *model) drop(k mKey, in func(*mSet) bool, e *Effects) {
	for _, s := range m.sets {
		if in != nil && !in(s) {
			continue
		}
		s.queue = slices.DeleteFunc(s.queue, func(w Request) bool {
			if mkey(w.Holder) == k {
				e.Cancelled = append(e.Cancelled, w.ID)
				return true
			}
			return false
		})
		s.holders = slices.DeleteFunc(s.holders, func(h mHolding) bool { return h.k == k })
	}
}

func (m *model) finish(e Effects) Effects {
	slices.Sort(e.Cancelled)
	e.Grants = m.wake()
	return e
}

func (m *model) dropHolder(h Holder) Effects {
	var e Effects
	m.drop(mkey(h), nil, &e)
	return m.finish(e)
}

func (m *model) dropGroup(sid uint64, h Holder) (Effects, error) {
	s, ok := m.sets[sid]
	if !ok {
		return Effects{}, errOf(djinn.NoSuchObject)
	}
	var e Effects
	m.drop(mkey(h), func(o *mSet) bool { return o.group == s.group }, &e)
	return m.finish(e), nil
}

// known: some holder or waiter is the transaction or nested in it.
func (m *model) known(id uint64) bool {
	is := func(k mKey) bool { return k.txn && (k.id == id || slices.Contains(m.lineage(k), id)) }
	for _, s := range m.sets {
		for _, h := range s.holders {
			if is(h.k) {
				return true
			}
		}
		for _, w := range s.queue {
			if is(mkey(w.Holder)) {
				return true
			}
		}
	}
	return false
}

func (m *model) endTxn(id uint64, commit bool) Effects {
	if !m.known(id) {
		return Effects{}
	}
	var e Effects
	for d, l := range m.u.lineage {
		if slices.Contains(l, id) {
			m.drop(mKey{true, d}, nil, &e)
		}
	}
	k := mKey{true, id}
	l := m.u.lineage[id]
	if !commit || len(l) == 0 {
		m.drop(k, nil, &e)
		return m.finish(e)
	}
	parent := mKey{true, l[0]}
	for _, s := range m.sets {
		s.queue = slices.DeleteFunc(s.queue, func(w Request) bool {
			if mkey(w.Holder) == k {
				e.Cancelled = append(e.Cancelled, w.ID)
				return true
			}
			return false
		})
		h := m.holding(s, k)
		if h == nil {
			continue
		}
		locks := h.locks
		s.holders = slices.DeleteFunc(s.holders, func(h mHolding) bool { return h.k == k })
		if p := m.holding(s, parent); p != nil {
			p.locks = append(p.locks, locks...)
			slices.SortFunc(p.locks, func(a, b Lock) int { return cmp.Compare(a.Fence, b.Fence) })
			continue
		}
		i := 0
		for i < len(s.holders) && s.holders[i].k.less(parent) {
			i++
		}
		s.holders = slices.Insert(s.holders, i, mHolding{k: parent, locks: locks})
	}
	return m.finish(e)
}

func (m *model) state(id uint64) SetState {
	s := m.sets[id]
	g := id
	for o, os := range m.sets {
		if os.group == s.group && o < g {
			g = o
		}
	}
	st := SetState{ID: id, Group: g, Transactional: s.txn, Fence: s.fence}
	for _, h := range s.holders {
		st.Holders = append(st.Holders, HolderInfo{Holder: m.u.holder(h.k), Locks: slices.Clone(h.locks)})
	}
	for _, w := range s.queue {
		w.Holder = m.u.holder(mkey(w.Holder))
		st.Waiters = append(st.Waiters, w)
	}
	return st
}

// --- comparing ---

func kindOf(err error) string {
	if err == nil {
		return "ok"
	}
	return string(djinn.KindOf(err))
}

// norm makes empty slices nil, so that equal states compare equal.
func norm[T any](v T) T {
	normValue(reflect.ValueOf(&v).Elem())
	return v
}

func normValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		for i := range v.Len() {
			normValue(v.Index(i))
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		c := reflect.New(v.Elem().Type()).Elem()
		c.Set(v.Elem())
		normValue(c)
		v.Set(c)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Field(i).CanSet() {
				normValue(v.Field(i))
			}
		}
	}
}

func same(a, b any) bool { return reflect.DeepEqual(norm(a), norm(b)) }

// checkInvariants checks the table's own state, without the model: no two
// holders that are not committed relative to each other hold conflicting
// locks, and no waiting request is ready.
func checkInvariants(t rapid.TB, snap Snapshot) {
	t.Helper()
	rel := func(h, q Holder) bool {
		return (h.Txn == q.Txn && h.ID == q.ID) || (h.Txn && q.Txn && slices.Contains(q.Lineage, h.ID))
	}
	conflicts := func(ss SetState, q Holder, m Mode) bool {
		for _, h := range ss.Holders {
			for _, l := range h.Locks {
				if !rel(h.Holder, q) && Conflicts(l.Mode, m) {
					return true
				}
			}
		}
		return false
	}
	for _, ss := range snap.Sets {
		for i, a := range ss.Holders {
			for _, b := range ss.Holders[i+1:] {
				for _, la := range a.Locks {
					for _, lb := range b.Locks {
						if Conflicts(la.Mode, lb.Mode) && !rel(a.Holder, b.Holder) && !rel(b.Holder, a.Holder) {
							t.Fatalf("set %d: %v holds %v and %v holds %v, and neither is committed relative to the other", ss.ID, a.Holder, la, b.Holder, lb)
						}
					}
				}
			}
		}
		for i, w := range ss.Waiters {
			exempt := false
			for _, h := range ss.Holders {
				exempt = exempt || (w.Holder.Txn && h.Holder.Txn && h.Holder.Family() == w.Holder.Family())
			}
			if !conflicts(ss, w.Holder, w.Mode) && (i == 0 || exempt) {
				t.Fatalf("set %d: waiting request %d (%v, %v) is ready: a lost wake-up", ss.ID, w.ID, w.Holder, w.Mode)
			}
		}
	}
}

// --- the test ---

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
	for sid, s := range t.sets {
		if s.more != nil && len(s.more.queue) == 0 && s.more.group == nil {
			return fmt.Errorf("set %d: empty more", sid)
		}
		if s.more != nil && s.more.group != nil {
			g := s.more.group
			if len(g.members) < 2 || !slices.IsSorted(g.members) || !slices.Contains(g.members, sid) {
				return fmt.Errorf("set %d: group %v", sid, g.members)
			}
			for _, o := range g.members {
				if os := t.sets[o]; os == nil || os.more == nil || os.more.group != g {
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
