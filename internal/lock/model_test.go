package lock

import (
	"cmp"
	"reflect"
	"slices"

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
	return !m.conflicts(s, mkey(w.Holder), w.Mode) && (i == 0 || w.From != 0 || m.exempt(s, mkey(w.Holder)))
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
		if n.r.From == 0 && !m.exempt(n.set, k) {
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
	if !m.conflicts(s, k, r.Mode) && (len(s.queue) == 0 || r.From != 0 || m.exempt(s, k)) {
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
			if !conflicts(ss, w.Holder, w.Mode) && (i == 0 || w.From != 0 || exempt) {
				t.Fatalf("set %d: waiting request %d (%v, %v) is ready: a lost wake-up", ss.ID, w.ID, w.Holder, w.Mode)
			}
		}
	}
}
