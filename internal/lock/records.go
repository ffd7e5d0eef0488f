package lock

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/quota"
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

// export copies the state, as plain values that no later change touches:
// a snapshot encodes them afterwards, while applies go on.
func (s *State) export() snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := snapshot{Table: s.table.Export(), NextSet: s.nextSet, NextID: s.nextID}
	for tid, in := range s.setInfo {
		if !in.id.IsZero() {
			snap.Sets = append(snap.Sets, snapSet{ID: in.id, Cookie: in.cookie, Table: uint64(tid)})
		}
	}
	snap.FreeSets = slices.Clone(s.freeSets)
	snap.Waiting = maps.Clone(s.waiting)
	for id, n := range s.holders {
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
		snap.Holders = append(snap.Holders, h)
	}
	slices.SortFunc(snap.Holders, func(a, b snapHolder) int { return cmpUint(a.ID, b.ID) })
	n := len(s.recent.order)
	for i := range n {
		req := s.recent.order[(s.recent.head+i)%n]
		snap.Recent = append(snap.Recent, req, s.recent.fence[req])
	}
	return snap
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

// Restore adds a snapshot record; the last one replaces the state with
// the records' (leases are restored separately).
func (s *State) Restore(r *statepb.LockRecord) error {
	s.mu.Lock()
	s.restoring = append(s.restoring, r.GetTable()...)
	b := s.restoring
	if r.GetLast() {
		s.restoring = nil
	}
	s.mu.Unlock()
	if !r.GetLast() {
		return nil
	}
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return djinn.Errorf(djinn.Internal, "lock state snapshot: %v", err)
	}
	// Every table id up to NextSet is a live set's or a free one.
	if snap.NextSet > uint64(len(snap.Sets)+len(snap.FreeSets)) {
		return djinn.Errorf(djinn.Internal, "lock state snapshot: table ids up to %d, but %d sets and %d free ids", snap.NextSet, len(snap.Sets), len(snap.FreeSets))
	}
	t, err := Import(snap.Table)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.table, s.nextSet, s.nextID = t, snap.NextSet, snap.NextID
	s.sets, s.setInfo, s.freeSets = map[djinn.ID]uint64{}, make([]setInfo, snap.NextSet+1), snap.FreeSets
	for _, ss := range snap.Sets {
		if ss.ID.IsZero() {
			return djinn.Errorf(djinn.Internal, "lock state snapshot: a set with the zero id")
		}
		if ss.Table == 0 || ss.Table > snap.NextSet {
			return djinn.Errorf(djinn.Internal, "lock state snapshot: set %s has table id %d, beyond %d", ss.ID, ss.Table, snap.NextSet)
		}
		s.sets[ss.ID] = ss.Table
		s.setInfo[ss.Table] = setInfo{id: ss.ID, cookie: ss.Cookie}
	}
	s.owners, s.txns, s.holders = map[djinn.ID]uint64{}, map[TxnKey]uint64{}, map[uint64]holderName{}
	for _, h := range snap.Holders {
		if h.Txn != nil {
			s.txns[*h.Txn] = h.ID
			n := holderName{txn: *h.Txn, isTxn: true}
			if h.Secret != nil {
				n.secret = *h.Secret
			}
			s.holders[h.ID] = n
		} else {
			s.owners[h.Owner] = h.ID
			s.holders[h.ID] = holderName{owner: h.Owner}
		}
	}
	s.recent = recentGrants{}
	if len(snap.Recent)%2 != 0 {
		return djinn.Errorf(djinn.Internal, "lock state snapshot: odd recent grants")
	}
	for i := 0; i < len(snap.Recent); i += 2 {
		s.recent.add(snap.Recent[i], snap.Recent[i+1])
	}
	s.waiting = map[uint64]string{}
	for id, p := range snap.Waiting {
		s.waiting[id] = p
		s.leases.Quotas().Add(p, quota.LockWaiters, 1)
	}
	return nil
}

// Reset empties the state before a restore.
func (s *State) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.table, s.nextSet, s.nextID = New(), 0, 0
	s.sets, s.setInfo, s.freeSets = map[djinn.ID]uint64{}, []setInfo{{}}, nil
	s.owners, s.txns, s.holders = map[djinn.ID]uint64{}, map[TxnKey]uint64{}, map[uint64]holderName{}
	s.recent = recentGrants{}
	s.restoring = nil
	s.waiting = map[uint64]string{}
}
