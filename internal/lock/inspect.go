package lock

import (
	"github.com/djinn-go/djinn"
)

// Lock is one granted lock: its mode and its fencing token.
type Lock struct {
	Mode  Mode
	Fence uint64
}

// HolderInfo is a holder's locks in a set.
type HolderInfo struct {
	Holder Holder
	// Locks are the holder's live grants, by fence. A mode's count
	// (spec 1.3.2) is how many of them are in that mode.
	Locks []Lock
}

// Count returns how many locks in mode m the holder holds.
func (h HolderInfo) Count(m Mode) int {
	n := 0
	for _, l := range h.Locks {
		if l.Mode == m {
			n++
		}
	}
	return n
}

// SetState is a lock set, as Set and Export show it.
type SetState struct {
	ID uint64
	// Group names the set's related group: the smallest id among the
	// set and the sets related to it.
	Group         uint64
	Transactional bool
	// Fence is the last fencing token the set granted (0: none yet).
	Fence   uint64
	Holders []HolderInfo // by holder: owners by id, then transactions by id
	Waiters []Request    // in queue order
}

// Holders returns the holders of set id and their locks: owners by id,
// then transactions by id.
func (t *Table) Holders(id uint64) ([]HolderInfo, error) {
	s, err := t.set(id)
	if err != nil {
		return nil, err
	}
	return s.holderInfo(), nil
}

// Waiters returns the waiting requests of set id, in queue order.
func (t *Table) Waiters(id uint64) ([]Request, error) {
	s, err := t.set(id)
	if err != nil {
		return nil, err
	}
	return s.waiterInfo(), nil
}

// Set returns lock set id: its configuration, holders and waiters.
func (t *Table) Set(id uint64) (SetState, error) {
	s, err := t.set(id)
	if err != nil {
		return SetState{}, err
	}
	return s.state(id), nil
}

// Validate reports whether the grant that was given fencing token fence in
// set id is still held (by its holder, or by the parent it committed
// into). A grant stops validating when its lock is released, changed by
// change_mode, dropped or aborted. A fence the set never gave is an
// invalid argument.
func (t *Table) Validate(id, fence uint64) (bool, error) {
	s, err := t.set(id)
	if err != nil {
		return false, err
	}
	if fence == 0 || fence > s.fence {
		return false, djinn.Errorf(djinn.InvalidArgument, "fence %d: never granted by lock set %d (its last is %d)", fence, id, s.fence)
	}
	for i := range s.holders {
		for _, g := range s.holders[i].grants {
			if f, _ := unpack(g); f == fence {
				return true, nil
			}
		}
	}
	return false, nil
}

func (s *set) holderInfo() []HolderInfo {
	if len(s.holders) == 0 {
		return nil
	}
	out := make([]HolderInfo, len(s.holders))
	for i := range s.holders {
		h := &s.holders[i]
		locks := make([]Lock, len(h.grants))
		for j, g := range h.grants {
			f, m := unpack(g)
			locks[j] = Lock{Mode: m, Fence: f}
		}
		out[i] = HolderInfo{Holder: h.p.holder(), Locks: locks}
	}
	return out
}

func (s *set) waiterInfo() []Request {
	q := s.queue()
	if len(q) == 0 {
		return nil
	}
	out := make([]Request, len(q))
	for i, w := range q {
		out[i] = w.request()
	}
	return out
}

func (w *waiter) request() Request {
	return Request{ID: w.id, Set: w.set, Holder: w.p.holder(), Mode: w.mode, From: w.from}
}

func (s *set) state(id uint64) SetState {
	g := id
	if s.more != nil && s.more.group != nil {
		g = s.more.group.members[0]
	}
	return SetState{ID: id, Group: g, Transactional: s.txn, Fence: s.fence, Holders: s.holderInfo(), Waiters: s.waiterInfo()}
}

// sortedSets returns the ids of the table's sets, ascending.
func (t *Table) sortedSets() []uint64 {
	return t.sets.ids()
}
