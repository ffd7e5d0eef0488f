package lock

import (
	"slices"

	"github.com/djinn-go/djinn"
)

// SetView is a lock set as Describe shows it.
type SetView struct {
	ID            djinn.ID
	Cookie        djinn.ID
	Transactional bool
	Related       []djinn.ID
	// relatedCookies are the lease cookies of Related, in order.
	relatedCookies []djinn.ID
	Fence          uint64
	Holders        []HolderView
	Waiters        []WaiterView
}

// HolderView is a holder by its world name.
type HolderView struct {
	Owner djinn.ID // zero for a transaction
	Txn   TxnKey
	IsTxn bool
	Locks []Lock
}

// WaiterView is a waiting request.
type WaiterView struct {
	HolderView
	Mode, From Mode
	Request    uint64
}

func (s *State) nameLocked(h Holder) HolderView {
	n := s.holders[h.ID]
	return HolderView{Owner: n.owner, Txn: n.txn, IsTxn: n.isTxn}
}

// Describe returns lock set id.
func (s *State) Describe(b []byte) (SetView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tid, id, err := s.setLocked(b)
	if err != nil {
		return SetView{}, err
	}
	st, err := s.table.Set(tid)
	if err != nil {
		return SetView{}, err
	}
	v := SetView{ID: id, Cookie: s.setInfo[tid].cookie, Transactional: st.Transactional, Fence: st.Fence}
	for _, m := range s.table.groupOf(tid) {
		if m != tid {
			v.Related = append(v.Related, s.setInfo[m].id)
			v.relatedCookies = append(v.relatedCookies, s.setInfo[m].cookie)
		}
	}
	for _, h := range st.Holders {
		hv := s.nameLocked(h.Holder)
		hv.Locks = h.Locks
		v.Holders = append(v.Holders, hv)
	}
	for _, w := range st.Waiters {
		v.Waiters = append(v.Waiters, WaiterView{HolderView: s.nameLocked(w.Holder), Mode: w.Mode, From: w.From, Request: w.ID})
	}
	return v, nil
}

// Validate reports whether the grant with fencing token fence in set b is
// still held.
func (s *State) Validate(b []byte, fence uint64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tid, id, err := s.setLocked(b)
	if err != nil {
		return false, err
	}
	ok, err := s.table.Validate(tid, fence)
	if djinn.KindOf(err) == djinn.InvalidArgument {
		// The table names the set by its own number: the caller knows it
		// by its id.
		st, _ := s.table.Set(tid)
		return false, djinn.Errorf(djinn.InvalidArgument, "fence %d: never granted by lock set %s (its last is %d)", fence, id, st.Fence)
	}
	return ok, err
}

// Transactional reports whether set b is transactional.
func (s *State) Transactional(b []byte) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tid, _, err := s.setLocked(b)
	if err != nil {
		return false, err
	}
	// Every lock and unlock asks this: read the flag alone, not the
	// set's holders and waiters.
	return s.table.transactional(tid)
}

// TxnSecret returns the secret a lock request presented for transaction k,
// when one did, or the manager presented with the ABORTED vote kept.
func (s *State) TxnSecret(k TxnKey) (djinn.ID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.txns[k]; ok && !s.holders[id].secret.IsZero() {
		return s.holders[id].secret, true
	}
	if v, ok := s.votes.by[k]; ok && !v.secret.IsZero() {
		return v.secret, true
	}
	return djinn.ID{}, false
}

// HoldsAny reports whether transaction k holds or waits for any lock here.
func (s *State) HoldsAny(k TxnKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.txns[k]
	return ok
}

// Knows reports whether the state holds transaction k: it holds or waits
// for a lock here, or is the ancestor of one that does, or the service's
// ABORTED vote for it is kept.
func (s *State) Knows(k TxnKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, held := s.txns[k]
	_, voted := s.votes.by[k]
	return held || voted
}

// WaitsAny reports whether transaction k has a lock request waiting here.
func (s *State) WaitsAny(k TxnKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.txns[k]
	if !ok {
		return false
	}
	p, ok := s.table.parties[txnKey(id)]
	return ok && len(p.waits()) > 0
}

// Waiting returns the ids of every waiting request, sorted.
func (s *State) Waiting() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint64
	for _, tid := range s.table.sortedSets() {
		for _, w := range s.table.waitersOf(tid) {
			out = append(out, w.ID)
		}
	}
	slices.Sort(out)
	return out
}

// Len returns the numbers of lock sets and owners.
func (s *State) Len() (sets, owners int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sets.Len(), len(s.owners)
}
