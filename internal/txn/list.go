package txn

// Listing: each principal's transaction ids in order, and the pages of
// them List reads, so that one principal's listing costs what its page
// holds and never holds up the others' calls for the sake of transactions
// not its own.

import (
	"math"
	"slices"
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

// ownedIDs is the state's transaction ids by principal, each principal's
// in order. A principal with none has no entry. It is guarded by the
// state's mutex.
type ownedIDs struct {
	by    map[unique.Handle[string]]*btree.BTreeG[uint64]
	nodes *btree.FreeListG[uint64] // the trees' free nodes
	// visited counts the ids List looked at, heldMost the most it looked
	// at with the state locked once: a test's measure of what a page
	// costs and of how long it holds the others up.
	visited, heldMost int
}

func newOwnedIDs() ownedIDs {
	return ownedIDs{by: map[unique.Handle[string]]*btree.BTreeG[uint64]{}, nodes: btree.NewFreeListG[uint64](btree.DefaultFreeListSize)}
}

func (o *ownedIDs) reset() { clear(o.by) }

func (o *ownedIDs) add(t *transaction) {
	ids := o.by[t.principal]
	if ids == nil {
		ids = btree.NewWithFreeListG(ownedDegree, btree.Less[uint64](), o.nodes)
		o.by[t.principal] = ids
	}
	ids.ReplaceOrInsert(t.id)
}

func (o *ownedIDs) remove(t *transaction) {
	ids := o.by[t.principal]
	if ids == nil {
		return
	}
	ids.Delete(t.id)
	if ids.Len() == 0 {
		delete(o.by, t.principal)
	}
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
	limit = max(limit, 1)
	for {
		out, next, end := s.listSomeLocking(p, after, limit, state)
		if end || len(out) > 0 {
			return out, next
		}
		after = next
	}
}

// listSomeLocking is List's work with the state locked once: the page
// found, the last id looked at and taken or skipped, and whether the ids
// ran out.
func (s *State) listSomeLocking(p unique.Handle[string], after uint64, limit int, state djinnpb.TransactionState) (out []Info, last uint64, end bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.owned.by[p]
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

// All returns up to limit transactions of every principal, newest first.
func (s *State) All(limit int) []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]uint64, 0, len(s.txns))
	for id := range s.txns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	out := make([]Info, 0, min(len(ids), limit))
	for _, id := range ids[:min(len(ids), limit)] {
		out = append(out, s.txns[id].info())
	}
	return out
}
