package txn

// Listing: each principal's transaction ids in order, and every
// principal's, and the pages of them List, ListEvery and Highest read, so
// that a listing costs what its page holds and never holds up the others'
// calls for the sake of transactions not its own, nor for a copy of them
// all.

import (
	"math"
	"unique"

	"github.com/google/btree"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// ownedDegree is the degree of a principal's ids: nodes of 31 to 63 ids.
// Ids come in increasing order, so most nodes are left half full: some
// 16 bytes an id (BENCHMARKS.md, "Memory of a remembered transaction").
const ownedDegree = 32

// listSkips bounds the transactions of other states than the one asked
// that List looks at with the state locked once (see List): about as
// long as a page of 1000 takes to copy. A variable for tests.
var listSkips = 4096

// walkStep bounds the transactions Highest takes with the state locked
// once. A variable for tests.
var walkStep = 256

// ownedIDs is the state's transaction ids, every principal's in order
// (all) and each principal's in order (by), with how many are in each
// state, of each principal and of all. A principal with none has no
// entry. It is guarded by the state's mutex.
type ownedIDs struct {
	by     map[unique.Handle[string]]*owned
	all    *btree.BTreeG[uint64]
	states [numStates]int
	nodes  *btree.FreeListG[uint64] // the trees' free nodes
	// visited counts the ids a listing looked at, heldMost the most it
	// looked at with the state locked once: a test's measure of what a
	// page costs and of how long it holds the others up.
	visited, heldMost int
}

// owned is one principal's ids, and how many are in each state.
type owned struct {
	ids    *btree.BTreeG[uint64]
	states [numStates]int
}

// numStates bounds the transaction states' values (ABORTED is the last).
const numStates = int(Aborted) + 1

func newOwnedIDs() ownedIDs {
	nodes := btree.NewFreeListG[uint64](btree.DefaultFreeListSize)
	return ownedIDs{by: map[unique.Handle[string]]*owned{}, nodes: nodes, all: btree.NewWithFreeListG(ownedDegree, btree.Less[uint64](), nodes)}
}

func (o *ownedIDs) reset() {
	clear(o.by)
	o.all.Clear(false)
	o.states = [numStates]int{}
}

func (o *ownedIDs) add(t *transaction) {
	p := o.by[t.principal]
	if p == nil {
		p = &owned{ids: btree.NewWithFreeListG(ownedDegree, btree.Less[uint64](), o.nodes)}
		o.by[t.principal] = p
	}
	p.ids.ReplaceOrInsert(t.id)
	o.all.ReplaceOrInsert(t.id)
	p.states[t.state]++
	o.states[t.state]++
}

func (o *ownedIDs) remove(t *transaction) {
	o.all.Delete(t.id)
	o.states[t.state]--
	p := o.by[t.principal]
	if p == nil {
		return
	}
	p.ids.Delete(t.id)
	p.states[t.state]--
	if p.ids.Len() == 0 {
		delete(o.by, t.principal)
	}
}

// setStateLocked moves t to state to, counting it there.
func (s *State) setStateLocked(t *transaction, to djinnpb.TransactionState) {
	s.owned.states[t.state]--
	s.owned.states[to]++
	if p := s.owned.by[t.principal]; p != nil {
		p.states[t.state]--
		p.states[to]++
	}
	t.state = to
}

// addLocked adds t to the transactions (in place of one of its id, which
// only a damaged snapshot repeats).
func (s *State) addLocked(t *transaction) {
	if old, ok := s.txns[t.id]; ok {
		s.owned.remove(old)
	}
	s.txns[t.id] = t
	s.owned.add(t)
}

// removeLocked drops t from the transactions.
func (s *State) removeLocked(t *transaction) {
	delete(s.txns, t.id)
	s.owned.remove(t)
}

// List returns a page of principal's transactions with ids above after,
// in state (0: any), by id, at most limit (at least one), and next: the
// id to list after for the following page, or 0 when none follow. A next
// comes only with a page of at least one, and is its last id or past it:
// a transaction in another state than the one asked, skipped.
//
// It reads principal's own ids only, from after. With the state locked,
// which every transaction call waits for, it looks at the page's
// transactions, one past them and at most listSkips of other states.
// When those run out with some of the page found, it returns them, next
// the last looked at; with none found, it unlocks and carries on from
// there. So a page costs what it holds and the transactions it skips,
// never other principals' transactions, and keeps the others waiting
// only that long, however many transactions of other states are passed
// on the way to the page's first (all of principal's, in the one call,
// when none is in state).
func (s *State) List(principal string, after uint64, limit int, state djinnpb.TransactionState) ([]Info, uint64) {
	p := unique.Make(principal)
	return s.list(func() *btree.BTreeG[uint64] {
		if o := s.owned.by[p]; o != nil {
			return o.ids
		}
		return nil
	}, after, limit, state)
}

// ListEvery is List over every principal's transactions (an operator's
// listing): a page costs what it holds and the transactions of other
// states it skips, with the state locked as List locks it.
func (s *State) ListEvery(after uint64, limit int, state djinnpb.TransactionState) ([]Info, uint64) {
	return s.list(func() *btree.BTreeG[uint64] { return s.owned.all }, after, limit, state)
}

// list is List's and ListEvery's work over the ids ids returns (nil for
// none), with the state locked.
func (s *State) list(ids func() *btree.BTreeG[uint64], after uint64, limit int, state djinnpb.TransactionState) ([]Info, uint64) {
	limit = max(limit, 1)
	for {
		out, next, end := s.listSomeLocking(ids, after, limit, state)
		if end || len(out) > 0 {
			return out, next
		}
		after = next
	}
}

// listSomeLocking is list's work with the state locked once: the page
// found, the last id looked at and taken or skipped, and whether the ids
// ran out.
func (s *State) listSomeLocking(tree func() *btree.BTreeG[uint64], after uint64, limit int, state djinnpb.TransactionState) (out []Info, last uint64, end bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := tree()
	if ids == nil || after == math.MaxUint64 {
		return nil, 0, true
	}
	end, last = true, after
	looked, skipped := 0, 0
	ids.AscendGreaterOrEqual(after+1, func(id uint64) bool {
		looked++
		t := s.txns[id]
		if state == 0 || t.state == state {
			if len(out) == limit {
				end = false
				return false
			}
			out, last = append(out, t.info()), id
			return true
		}
		skipped, last = skipped+1, id
		if skipped == listSkips {
			end = false
			return false
		}
		return true
	})
	s.owned.visited += looked
	s.owned.heldMost = max(s.owned.heldMost, looked)
	if end {
		last = 0
	}
	return out, last, end
}

// Count returns how many of principal's transactions are in state (0:
// any): the total of List's pages.
func (s *State) Count(principal string, state djinnpb.TransactionState) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owned.by[unique.Make(principal)]
	switch {
	case o == nil:
		return 0
	case state == 0:
		return o.ids.Len()
	case state > 0 && int(state) < numStates:
		return o.states[state]
	}
	return 0
}

// CountEvery returns how many transactions of every principal are in
// state (0: any): the total of ListEvery's pages.
func (s *State) CountEvery(state djinnpb.TransactionState) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case state == 0:
		return s.owned.all.Len()
	case state > 0 && int(state) < numStates:
		return s.owned.states[state]
	}
	return 0
}

// Highest returns up to limit transactions of every principal, by id
// from the highest down (the console's view; ids are drawn at random, so
// these are a sample, not the newest). It locks the state for walkStep of
// them at a time and unlocks it between, so that however many it takes,
// the other transaction calls wait no longer than a step; a step starts
// below the last id the one before took, so each transaction comes at
// most once (those created meanwhile above it are left out).
func (s *State) Highest(limit int) []Info {
	return s.highest(func() *btree.BTreeG[uint64] { return s.owned.all }, limit)
}

// HighestOf is Highest of principal's transactions alone (the console's
// view for a reader who sees only its own): it reads principal's own ids,
// never the others'.
func (s *State) HighestOf(principal string, limit int) []Info {
	p := unique.Make(principal)
	return s.highest(func() *btree.BTreeG[uint64] {
		if o := s.owned.by[p]; o != nil {
			return o.ids
		}
		return nil
	}, limit)
}

// highest is Highest over the ids ids returns (nil: none), called with the
// state locked.
func (s *State) highest(ids func() *btree.BTreeG[uint64], limit int) []Info {
	var out []Info
	below := uint64(0) // 0: from the highest
	for len(out) < limit {
		step, last := s.highestSomeLocking(ids, below, min(walkStep, limit-len(out)))
		out = append(out, step...)
		if len(step) == 0 || last == 0 {
			break
		}
		below = last
	}
	return out
}

// highestSomeLocking is highest's work with the state locked once: at most
// n transactions of ids with ids below below (0: any), highest first, and
// the last id taken (0: none left).
func (s *State) highestSomeLocking(ids func() *btree.BTreeG[uint64], below uint64, n int) (out []Info, last uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tree := ids()
	if tree == nil {
		return nil, 0
	}
	take := func(id uint64) bool {
		if len(out) == n {
			return false
		}
		out, last = append(out, s.txns[id].info()), id
		return true
	}
	if below == 0 {
		tree.Descend(take)
	} else if below > 1 {
		tree.DescendLessOrEqual(below-1, take)
	}
	s.owned.visited += len(out)
	s.owned.heldMost = max(s.owned.heldMost, len(out))
	if len(out) < n {
		last = 0 // the ids ran out
	}
	return out, last
}

// ListVisits returns the transactions listings (List, ListEvery, Highest)
// looked at so far, and the most one looked at with the state locked
// once: the measure of what a page costs and of how long it holds up the
// other calls, which tests check.
func (s *State) ListVisits() (visited, heldMost int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owned.visited, s.owned.heldMost
}
