package lock

import (
	"maps"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/statepb"
)

// snapshot is the state as a LockRecord holds it.
type snapshot struct {
	Table    Snapshot
	Sets     []snapSet
	NextSet  uint64
	FreeSets []uint64 `json:",omitempty"` // in the order they are taken again (last first)
	Holders  []snapHolder
	NextID   uint64
	Recent   []uint64 // request id, fence pairs, oldest first
	// Waiting are the principals of waiting requests, by request id.
	Waiting map[uint64]string `json:",omitempty"`
	// Aborted are the ABORTED votes kept, oldest first (votes.go).
	Aborted []snapVote `json:",omitempty"`
}

type snapSet struct {
	ID     djinn.ID
	Cookie djinn.ID
	Table  uint64
}

type snapHolder struct {
	ID     uint64
	Owner  djinn.ID  `json:",omitempty"`
	Txn    *TxnKey   `json:",omitempty"`
	Secret *djinn.ID `json:",omitempty"`
	Holder uint64    `json:"-"`
}

// Records returns the state as snapshot records.
func (s *State) Records() ([]*statepb.LockRecord, error) {
	var out []*statepb.LockRecord
	err := s.export().encode(wire.RecordSize, func(r *statepb.LockRecord) error { out = append(out, r); return nil })
	return out, err
}

// export copies the state, as plain values that no later change touches.
// Snapshots are written from a view instead (view.go), which copies
// nothing; export is what a view must write, byte for byte.
func (s *State) export() snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := snapshot{Table: s.table.Export(), NextSet: s.nextSet, NextID: s.nextID}
	for tid, in := range s.setInfo {
		if !in.id.IsZero() {
			snap.Sets = append(snap.Sets, snapSet{ID: in.id, Cookie: in.cookie, Table: uint64(tid)})
		}
	}
	rest := s.exportRest()
	snap.FreeSets, snap.Waiting, snap.Recent, snap.Aborted = rest.FreeSets, rest.Waiting, rest.Recent, rest.Aborted
	for id, n := range s.holders {
		snap.Holders = append(snap.Holders, holderSnap(id, n))
	}
	slices.SortFunc(snap.Holders, func(a, b snapHolder) int { return cmpUint(a.ID, b.ID) })
	return snap
}

// exportRest copies the free table ids, the waiting requests' principals,
// the recent grants and the ABORTED votes.
func (s *State) exportRest() snapshot {
	snap := snapshot{FreeSets: slices.Clone(s.freeSets), Waiting: maps.Clone(s.waiting), Aborted: s.votes.export()}
	n := len(s.recent.order)
	for i := range n {
		req := s.recent.order[(s.recent.head+i)%n]
		snap.Recent = append(snap.Recent, req, s.recent.fence[req])
	}
	return snap
}

// holderSnap is holder id's name as a snapshot holds it.
func holderSnap(id uint64, n holderName) snapHolder {
	h := snapHolder{ID: id}
	if n.isTxn {
		k := n.txn
		h.Txn = &k
		if !n.secret.IsZero() {
			sec := n.secret
			h.Secret = &sec
		}
	} else {
		h.Owner = n.owner
	}
	return h
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Reset empties the state before a restore.
func (s *State) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restoring = nil
	s.epoch++ // views of the state before see it no more
	s.table, s.nextSet, s.nextID = New(), 0, 0
	s.sets, s.setInfo, s.freeSets = s.newSetIndex(), []setInfo{{}}, nil
	s.owners, s.txns, s.holders = map[djinn.ID]uint64{}, map[TxnKey]uint64{}, map[uint64]holderName{}
	s.recent = recentGrants{}
	s.waiting = map[uint64]string{}
	s.votes = abortedVotes{}
}
