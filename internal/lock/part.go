package lock

import (
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The kinds of the lock service's leases.
const (
	SetLeaseKind   lease.Kind = 4 // a lock set's
	OwnerLeaseKind lease.Kind = 5 // a lock owner's
)

// Part is the lock service's share of the replicated state machine: its
// commands, its snapshot records and its leases.
func (s *State) Part() state.Part {
	return state.Part{
		Name: "lock",
		Commands: []state.Command{
			state.On(func(_ int64, c *statepb.LockCreateSet) any { return s.ApplyCreateSet(c) }),
			state.On(func(_ int64, c *statepb.LockCreateOwner) any { return s.ApplyCreateOwner(c) }),
			state.On(func(_ int64, c *statepb.LockAcquire) any { return state.Result(s.ApplyAcquire(c)) }),
			state.On(func(_ int64, c *statepb.LockRelease) any { return s.ApplyRelease(c) }),
			state.On(func(_ int64, c *statepb.LockCancel) any { s.ApplyCancel(c); return nil }),
			state.On(func(now int64, c *statepb.LockTxnEnd) any { s.ApplyTxnEnd(now, c); return nil }),
			state.On(func(_ int64, c *statepb.LockDrop) any { return s.ApplyDrop(c) }),
		},
		Records:  []state.Record{state.Restores(s.Restore)},
		View:     s.View, // taken between applies; written while they go on
		Reset:    s.Reset,
		Restored: s.Restored,
		Leases: []state.LeaseKind{
			{Kind: SetLeaseKind, Name: "lock set", Quota: quota.LockSets, Ended: s.LeaseEnded},
			{Kind: OwnerLeaseKind, Name: "lock owner", Quota: quota.LockOwners, Ended: s.LeaseEnded},
		},
	}
}
