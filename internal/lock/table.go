package lock

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/djinn-go/djinn"
)

// Table is the lock table of the concurrency-control service: lock sets,
// their holders and their queues of waiting requests. See the package doc
// for the rules it follows.
//
// A Table is deterministic — the same calls give the same answers and the
// same state on every member — and not safe for concurrent use: the caller
// serializes calls.
type Table struct {
	sets    setStore
	parties map[partyKey]*party
	waiting map[uint64]*waiter // by request id
	// gen counts the views taken; views are those still open (see
	// view.go).
	gen   uint32
	views []*tableView
}

// New returns an empty table.
func New() *Table {
	return &Table{parties: make(map[partyKey]*party), waiting: make(map[uint64]*waiter)}
}

// modeBits is how many low bits of a packed grant hold its mode; the rest
// hold its fence.
const modeBits = 3

// maxFence is the largest fence a grant can carry. At a million grants a
// second a set would reach it in 73,000 years; Acquire refuses requests
// that could pass it rather than wrap.
const maxFence = 1<<(64-modeBits) - 1

func pack(fence uint64, m Mode) uint64 { return fence<<modeBits | uint64(m) }

func unpack(g uint64) (fence uint64, m Mode) { return g >> modeBits, modeOf(g) }

// set is a lock set. Its fields are laid out to fill a 48-byte size class.
type set struct {
	// fence is the last fence granted in the set (0: none yet).
	fence uint64
	// holders are the set's holders, by key: owners by id, then
	// transactions by id.
	holders []holding
	// more is nil while the set has no waiters and no related sets: most
	// of the time.
	more *setMore
	// txn is set for a transactional lock set (spec 2.4): every holder
	// is a transaction.
	txn bool
	// gen is the table's gen when the set was made or last changed: the
	// views taken after it see the set as it is until it changes.
	gen uint32
}

type setMore struct {
	queue []*waiter // waiting requests, first come first
	group *group    // nil: no related set
}

// group is a related group of sets (spec 2.5, create_related): they share a
// lock coordinator and drop a transaction's locks together.
type group struct {
	members []uint64 // ascending
}

// holding is one holder's locks in a set.
type holding struct {
	p *party
	// idx is the index of the set in p.sets.
	idx int
	// grants are the live grants, each packed with pack, by fence: a
	// count per mode is the number of grants in that mode (spec 1.3.2).
	grants []uint64
}

// waiter is a waiting request.
type waiter struct {
	id   uint64
	set  uint64
	p    *party
	mode Mode
	from Mode // not 0: a change_mode from this mode
}

func (s *set) queue() []*waiter {
	if s.more == nil {
		return nil
	}
	return s.more.queue
}

func (s *set) members(id uint64) []uint64 {
	if s.more == nil || s.more.group == nil {
		return []uint64{id}
	}
	return slices.Clone(s.more.group.members)
}

func (s *set) ensureMore() *setMore {
	if s.more == nil {
		s.more = &setMore{}
	}
	return s.more
}

func (s *set) setQueue(q []*waiter) {
	if len(q) == 0 {
		q = nil
	}
	if s.more == nil && q == nil {
		return
	}
	s.ensureMore().queue = q
	if s.more.queue == nil && s.more.group == nil {
		s.more = nil
	}
}

// find returns the index of k's holding in s, or where it would go.
func (s *set) find(k partyKey) (int, bool) {
	return slices.BinarySearchFunc(s.holders, k, func(h holding, k partyKey) int { return cmp.Compare(h.p.key, k) })
}

func (s *set) count(k partyKey, m Mode) int {
	if i, ok := s.find(k); ok {
		return s.holders[i].count(m)
	}
	return 0
}

// blocks reports whether a lock in mode m requested by p conflicts with a
// lock held in s (spec 1.3.1.3, 1.3.2, 1.5): whether a holder that is not
// committed relative to p holds a lock in a mode that conflicts with m.
func (s *set) blocks(p *party, m Mode) bool {
	for i := range s.holders {
		h := &s.holders[i]
		if !committedRelative(h.p, p) && h.conflicts(m) {
			return true
		}
	}
	return false
}

// exempt reports whether p passes the queue of s (spec 1.3.1.3, last
// sentence): p is a transaction of the same family as a holder of s.
func (s *set) exempt(p *party) bool {
	f := p.family()
	if f == nil {
		return false
	}
	for i := range s.holders {
		if s.holders[i].p.family() == f {
			return true
		}
	}
	return false
}

func modeOf(g uint64) Mode { return Mode(g & (1<<modeBits - 1)) }

func (h *holding) count(m Mode) int {
	n := 0
	for _, g := range h.grants {
		if modeOf(g) == m {
			n++
		}
	}
	return n
}

func (h *holding) conflicts(m Mode) bool {
	for _, g := range h.grants {
		if Conflicts(modeOf(g), m) {
			return true
		}
	}
	return false
}

// removeNewest removes the grant in mode m with the highest fence.
func (h *holding) removeNewest(m Mode) {
	for i := len(h.grants) - 1; i >= 0; i-- {
		if modeOf(h.grants[i]) == m {
			h.grants = slices.Delete(h.grants, i, i+1)
			return
		}
	}
}

// Request is a lock or change_mode request (spec 2.3, 2.4).
type Request struct {
	// ID names the request; the caller assigns it. It must be non-zero
	// and differ from every waiting request's: Cancel and the grants a
	// call reports name requests by it. The table forgets a request once
	// it is granted, refused or cancelled.
	ID     uint64
	Set    uint64
	Holder Holder
	Mode   Mode
	// From, when not zero, makes the request a change_mode from From to
	// Mode: the holder must hold a lock in From that no other waiting
	// change_mode of its claims; that lock stays held while the request
	// waits, and the grant replaces it.
	From Mode
	// Try makes the request a try_lock: if it cannot be granted at once
	// it is refused, and nothing changes.
	Try bool
}

// Outcome is what became of a request.
type Outcome uint8

// The outcomes of Acquire.
const (
	Granted Outcome = iota + 1 // the lock is held
	Queued                     // the request waits; a later call will report its grant
	Refused                    // a try that could not be granted at once; nothing changed
)

func (o Outcome) String() string {
	switch o {
	case Granted:
		return "granted"
	case Queued:
		return "queued"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Result is Acquire's answer.
type Result struct {
	Outcome Outcome
	// Fence is the grant's fencing token, when Outcome is Granted.
	Fence uint64
	// Grants are the waiting requests a granted change_mode let through
	// (it gives up a lock), in the order they were granted.
	Grants []Grant
}

// Grant reports that a waiting request was granted, with its fence.
type Grant struct {
	Request uint64
	Set     uint64
	Fence   uint64
}

// Effects are what a call did to requests other than its own: the waiting
// requests it granted, in the order it granted them (sets in ascending id
// order, each set's queue in order), and those it cancelled, by ascending
// id.
type Effects struct {
	Grants    []Grant
	Cancelled []uint64
}

func (t *Table) set(id uint64) (*set, error) {
	s, ok := t.sets.get(id)
	if !ok {
		return nil, djinn.Errorf(djinn.NoSuchObject, "lock set %d: unknown (never created, or removed)", id)
	}
	return s, nil
}

// CreateSet creates lock set id (spec 2.5). related is 0, or an existing
// set whose related group — the sets that share its lock coordinator and
// drop a transaction's locks together — the new set joins; it must be of
// the same kind. A transactional set (create_transactional) takes
// requests from transactions only.
func (t *Table) CreateSet(id, related uint64, transactional bool) error {
	if id == 0 {
		return djinn.Errorf(djinn.InvalidArgument, "lock set 0: a set id must be non-zero")
	}
	if _, ok := t.sets.get(id); ok {
		return djinn.Errorf(djinn.InvalidArgument, "lock set %d: already exists", id)
	}
	var r *set
	if related != 0 {
		var ok bool
		if r, ok = t.sets.get(related); !ok {
			return djinn.Errorf(djinn.NoSuchObject, "related lock set %d: unknown (never created, or removed)", related)
		}
		if r.txn != transactional {
			return djinn.Errorf(djinn.InvalidArgument, "related lock set %d: %s, but set %d is to be %s", related, kindName(r.txn), id, kindName(transactional))
		}
	}
	s := t.sets.add(id)
	s.txn, s.gen = transactional, t.gen
	if r != nil {
		t.touchGroup(related, r)
		g := r.ensureMore().group
		if g == nil {
			g = &group{members: []uint64{related}}
			r.more.group = g
		}
		i, _ := slices.BinarySearch(g.members, id)
		g.members = slices.Insert(g.members, i, id)
		s.more = &setMore{group: g}
	}
	return nil
}

func kindName(txn bool) string {
	if txn {
		return "transactional"
	}
	return "not transactional"
}

// RemoveSet removes lock set id: its locks are dropped and its waiting
// requests cancelled. It returns the cancelled request ids, ascending.
func (t *Table) RemoveSet(id uint64) ([]uint64, error) {
	s, err := t.set(id)
	if err != nil {
		return nil, err
	}
	t.touchGroup(id, s)
	var cancelled []uint64
	var parties []*party
	for _, w := range s.queue() {
		cancelled = append(cancelled, w.id)
		parties = append(parties, w.p)
		delete(t.waiting, w.id)
		w.p.removeWait(w)
	}
	s.setQueue(nil)
	for len(s.holders) > 0 {
		parties = append(parties, s.holders[0].p)
		t.dropHolding(id, s, 0)
	}
	if s.more != nil && s.more.group != nil {
		g := s.more.group
		i, _ := slices.BinarySearch(g.members, id)
		g.members = slices.Delete(g.members, i, i+1)
		if len(g.members) == 1 {
			last := t.sets.at(g.members[0])
			last.more.group = nil
			last.setQueue(last.queue()) // drops more if empty
		}
	}
	t.sets.del(id)
	for _, p := range parties {
		t.forget(p)
	}
	slices.Sort(cancelled)
	return cancelled, nil
}

// Acquire runs a lock, try_lock or change_mode request (spec 2.3, 2.4).
//
// The request is granted at once when no holder that is not committed
// relative to the requester holds a conflicting lock, and either no request
// waits in the set, the request is a change_mode, or the requester is a
// transaction of the same family as a holder of the set. Otherwise a try is refused and any other request is
// queued — unless queuing it would close a cycle of waiting requests (see
// the package doc), in which case Acquire returns an error of kind
// djinn.Deadlock and nothing changes: the requester is the victim.
//
// A granted change_mode gives up one lock in From; the waiting requests
// that lets through are granted too and listed in the Result.
func (t *Table) Acquire(r Request) (Result, error) {
	if r.ID == 0 {
		return Result{}, djinn.Errorf(djinn.InvalidArgument, "request id 0: must be non-zero")
	}
	if w, ok := t.waiting[r.ID]; ok {
		return Result{}, djinn.Errorf(djinn.InvalidArgument, "request %d: already waiting, in lock set %d", r.ID, w.set)
	}
	s, err := t.set(r.Set)
	if err != nil {
		return Result{}, err
	}
	if err := checkMode("lock mode", r.Mode); err != nil {
		return Result{}, err
	}
	if r.From != 0 {
		if err := checkMode("held mode", r.From); err != nil {
			return Result{}, err
		}
	}
	if err := r.Holder.check(); err != nil {
		return Result{}, err
	}
	if s.txn && !r.Holder.Txn {
		return Result{}, djinn.Errorf(djinn.InvalidArgument, "lock set %d: transactional, and %s is not a transaction", r.Set, r.Holder)
	}
	p, err := t.lookup(r.Holder)
	if err != nil {
		return Result{}, err
	}
	if r.From != 0 {
		if err := t.checkHeld(r.Set, s, p.key, r.From, "change"); err != nil {
			return Result{}, err
		}
	}
	if s.fence > maxFence-uint64(len(s.queue()))-1 {
		return Result{}, djinn.Errorf(djinn.ResourceExhausted, "lock set %d: its fencing tokens are used up", r.Set)
	}
	if !s.blocks(p, r.Mode) && (len(s.queue()) == 0 || r.From != 0 || s.exempt(p)) {
		t.link(p)
		res := Result{Outcome: Granted, Fence: t.grant(r.Set, s, p, r.Mode, r.From)}
		if r.From != 0 {
			res.Grants = t.wake(r.Set, s, nil)
		}
		return res, nil
	}
	if r.Try {
		return Result{Outcome: Refused}, nil
	}
	w := &waiter{id: r.ID, set: r.Set, p: p, mode: r.Mode, from: r.From}
	if err := t.deadlock(w, s); err != nil {
		return Result{}, err
	}
	t.link(p)
	t.touch(r.Set, s)
	s.setQueue(append(s.queue(), w))
	t.waiting[w.id] = w
	p.addWait(w)
	return Result{Outcome: Queued}, nil
}

// waits reports whether a request of the owner k (no transaction) in mode
// m on set sid, no change of mode and no try, would queue as the table
// stands: Acquire's test for it.
func (t *Table) waits(sid uint64, k partyKey, m Mode) bool {
	s, ok := t.sets.get(sid)
	if !ok || s.txn {
		return false
	}
	if len(s.queue()) > 0 {
		return true
	}
	for i := range s.holders {
		if h := &s.holders[i]; h.p.key != k && h.conflicts(m) {
			return true
		}
	}
	return false
}

// checkHeld checks that k holds a lock in m in set id that no waiting
// change_mode of its claims.
func (t *Table) checkHeld(id uint64, s *set, k partyKey, m Mode, verb string) error {
	n := s.count(k, m)
	if n == 0 {
		return djinn.Errorf(djinn.LockNotHeld, "lock set %d: %s holds no %s lock to %s", id, k, m, verb)
	}
	if c := t.claimed(id, k, m); n <= c {
		return djinn.Errorf(djinn.LockNotHeld, "lock set %d: %s holds %d %s lock(s), all claimed by its waiting change_mode requests, so none to %s", id, k, n, m, verb)
	}
	return nil
}

// claimed counts k's waiting change_mode requests from m in set id.
func (t *Table) claimed(id uint64, k partyKey, m Mode) int {
	p, ok := t.parties[k]
	if !ok {
		return 0
	}
	n := 0
	for _, w := range p.waits() {
		if w.set == id && w.from == m {
			n++
		}
	}
	return n
}

// Release drops one of holder's locks in mode m in set id (spec 2.3
// unlock): the one granted last, whose fence stops validating. A lock
// claimed by a waiting change_mode of the holder's cannot be released.
// Release returns the waiting requests it let through.
func (t *Table) Release(id uint64, holder Holder, m Mode) ([]Grant, error) {
	s, err := t.set(id)
	if err != nil {
		return nil, err
	}
	if err := checkMode("lock mode", m); err != nil {
		return nil, err
	}
	if err := holder.checkID(); err != nil {
		return nil, err
	}
	k := key(holder)
	if err := t.checkHeld(id, s, k, m, "release"); err != nil {
		return nil, err
	}
	i, _ := s.find(k)
	t.touch(id, s)
	h := &s.holders[i]
	p := h.p
	h.removeNewest(m)
	if len(h.grants) == 0 {
		t.dropHolding(id, s, i)
		t.forget(p)
	}
	return t.wake(id, s, nil), nil
}

// Cancel withdraws waiting request id (its caller timed out or went away)
// and returns the waiting requests that lets through.
func (t *Table) Cancel(id uint64) ([]Grant, error) {
	w, ok := t.waiting[id]
	if !ok {
		return nil, djinn.Errorf(djinn.NoSuchObject, "request %d: not waiting (granted, cancelled, or never queued)", id)
	}
	s := t.sets.at(w.set)
	t.unqueue(s, w)
	t.forget(w.p)
	return t.wake(w.set, s, nil), nil
}

// DropHolder drops every lock holder holds, in every set, and cancels its
// waiting requests: its owner lease ended. It drops nothing of the
// transactions nested in a transaction holder (AbortTxn does). An unknown
// holder has nothing to drop.
func (t *Table) DropHolder(holder Holder) (Effects, error) {
	if err := holder.checkID(); err != nil {
		return Effects{}, err
	}
	p, ok := t.parties[key(holder)]
	if !ok {
		return Effects{}, nil
	}
	var e Effects
	touched := t.clear(p, nil, &e)
	t.forget(p)
	e.Grants = t.wakeSets(touched)
	return e, nil
}

// DropGroup is LockCoordinator.drop_locks (spec 2.2) for holder over the
// related group of set id: it drops holder's locks in every set of the
// group and cancels its waiting requests there. It drops nothing of the
// transactions nested in a transaction holder.
func (t *Table) DropGroup(id uint64, holder Holder) (Effects, error) {
	s, err := t.set(id)
	if err != nil {
		return Effects{}, err
	}
	if err := holder.checkID(); err != nil {
		return Effects{}, err
	}
	p, ok := t.parties[key(holder)]
	if !ok {
		return Effects{}, nil
	}
	var e Effects
	touched := t.clear(p, s.members(id), &e)
	t.forget(p)
	e.Grants = t.wakeSets(touched)
	return e, nil
}

// clear cancels p's waiting requests and drops its locks, in the sets
// listed in only (ascending) or, if only is nil, everywhere. It adds what it cancelled
// to e and returns the sets it touched.
func (t *Table) clear(p *party, only []uint64, e *Effects) []uint64 {
	var touched []uint64
	in := func(sid uint64) bool {
		_, ok := slices.BinarySearch(only, sid)
		return only == nil || ok
	}
	for _, w := range slices.Clone(p.waits()) {
		if in(w.set) {
			e.Cancelled = append(e.Cancelled, w.id)
			touched = append(touched, w.set)
			t.unqueue(t.sets.at(w.set), w)
		}
	}
	for _, sid := range slices.Clone(p.sets) {
		if in(sid) {
			s := t.sets.at(sid)
			i, _ := s.find(p.key)
			t.dropHolding(sid, s, i)
			touched = append(touched, sid)
		}
	}
	slices.Sort(e.Cancelled)
	return touched
}

// grant gives p a lock in mode m in set sid, giving up one in from if from
// is not 0, and returns its fence.
func (t *Table) grant(sid uint64, s *set, p *party, m, from Mode) uint64 {
	t.touch(sid, s)
	if !plantedStaleFence || s.fence == 0 {
		s.fence++
	}
	i, ok := s.find(p.key)
	if !ok {
		s.holders = slices.Insert(s.holders, i, holding{p: p, idx: len(p.sets)})
		p.sets = append(p.sets, sid)
	}
	h := &s.holders[i]
	if from != 0 {
		h.removeNewest(from)
	}
	h.grants = append(h.grants, pack(s.fence, m))
	return s.fence
}

// dropHolding removes holding i of set sid, and the set from its party's
// list. The caller forgets the party if it may now be idle.
func (t *Table) dropHolding(sid uint64, s *set, i int) {
	t.touch(sid, s)
	h := s.holders[i]
	p := h.p
	last := len(p.sets) - 1
	if h.idx != last {
		moved := p.sets[last]
		p.sets[h.idx] = moved
		ms := t.sets.at(moved)
		j, _ := ms.find(p.key)
		ms.holders[j].idx = h.idx
	}
	p.sets = p.sets[:last]
	if len(p.sets) == 0 {
		p.sets = nil
	}
	s.holders = slices.Delete(s.holders, i, i+1)
	if len(s.holders) == 0 {
		s.holders = nil
	}
}

// unqueue removes waiting request w from set s. The caller forgets w's
// party if it may now be idle.
func (t *Table) unqueue(s *set, w *waiter) {
	t.touch(w.set, s)
	q := s.queue()
	if i := slices.Index(q, w); i >= 0 {
		s.setQueue(slices.Delete(q, i, i+1))
	}
	delete(t.waiting, w.id)
	w.p.removeWait(w)
}

// wake grants the waiting requests of set sid that can now be granted, and
// appends their grants to out. The rule (see the package doc): while some
// waiting request is ready — no conflicting lock held by a holder not
// committed relative to it, and either first in the queue, a change_mode
// or a transaction of a holder's family — grant the first ready one.
//
// In one pass over the queue that is: grant each request that does not
// conflict, until one cannot be granted; after it, grant only those that
// do not conflict and are change_modes or of a holder's family. A grant only adds locks,
// so it makes no request earlier in the queue ready — except a granted
// change_mode, which gives a lock up: after one, the pass starts again.
func (t *Table) wake(sid uint64, s *set, out []Grant) []Grant {
	for again := true; again; {
		again = false
		q := s.queue()
		kept := q[:0]
		blocked := false
		for _, w := range q {
			if again || s.blocks(w.p, w.mode) || (blocked && w.from == 0 && !s.exempt(w.p)) {
				blocked = true
				kept = append(kept, w)
				continue
			}
			delete(t.waiting, w.id)
			w.p.removeWait(w)
			out = append(out, Grant{Request: w.id, Set: sid, Fence: t.grant(sid, s, w.p, w.mode, w.from)})
			again = w.from != 0
		}
		clear(q[len(kept):])
		s.setQueue(kept)
	}
	return out
}

// wakeSets wakes the listed sets that still exist, in ascending id order.
func (t *Table) wakeSets(ids []uint64) []Grant {
	slices.Sort(ids)
	var out []Grant
	for _, id := range slices.Compact(ids) {
		if s, ok := t.sets.get(id); ok {
			out = t.wake(id, s, out)
		}
	}
	return out
}

// lookup returns the party of holder h: the known one, or a new one not
// yet linked into the table, above known or new ancestors. It refuses a
// lineage that contradicts what the table knows.
func (t *Table) lookup(h Holder) (*party, error) {
	k := key(h)
	if p, ok := t.parties[k]; ok {
		if l := p.lineage(); !slices.Equal(l, h.Lineage) {
			return nil, djinn.Errorf(djinn.InvalidArgument, "%s: lineage %v: known as nested in %v", k, h.Lineage, l)
		}
		return p, nil
	}
	// The ancestors of a known transaction are known: the first known
	// ancestor vouches for the rest.
	var up *party
	n := len(h.Lineage)
	for i, a := range h.Lineage {
		if p, ok := t.parties[txnKey(a)]; ok {
			if l, want := p.lineage(), h.Lineage[i+1:]; !slices.Equal(l, want) {
				return nil, djinn.Errorf(djinn.InvalidArgument, "%s: lineage %v: transaction %d is known as nested in %v, not %v", k, h.Lineage, a, l, want)
			}
			up, n = p, i
			break
		}
	}
	for i := n - 1; i >= 0; i-- {
		up = &party{key: txnKey(h.Lineage[i]), up: up}
	}
	return &party{key: k, up: up}, nil
}

// link adds p, and its ancestors as needed, to the known parties.
func (t *Table) link(p *party) {
	for ; p != nil; p = p.up {
		if _, ok := t.parties[p.key]; ok {
			return
		}
		t.parties[p.key] = p
		if p.up != nil {
			p.up.addKid(p)
		}
	}
}

// forget drops p, and then its ancestors, while they are idle.
func (t *Table) forget(p *party) {
	for p != nil && p.idle() && t.parties[p.key] == p {
		delete(t.parties, p.key)
		if p.up != nil {
			p.up.removeKid(p)
		}
		p = p.up
	}
}

// waitIDs returns the ids of the waiting requests of holder id.
func (t *Table) waitIDs(id uint64) []uint64 {
	p, ok := t.parties[txnKey(id)]
	if !ok {
		return nil
	}
	var out []uint64
	for _, w := range p.waits() {
		out = append(out, w.id)
	}
	return out
}
