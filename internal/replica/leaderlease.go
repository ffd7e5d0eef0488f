package replica

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A leader lease lets the leader answer from its own state, without a
// quorum round trip, for a bounded time after a quorum last confirmed it
// leads: until then no other member can have been elected, so nothing can
// have been committed that this node has not seen.
//
// The argument, for the hashicorp/raft version this module pins (v1.7):
//
//  1. A confirmation is a barrier: an entry appended to the log after the
//     confirmation starts, at time S on this node's monotonic clock, and
//     committed in this node's term. Its commit means a majority M of the
//     voters stored it, each from an AppendEntries request this leader sent
//     after S. (raft's VerifyLeader does not serve: it may count the answer
//     to a heartbeat sent before it was asked, so its quorum may predate S.)
//  2. A follower that accepts an AppendEntries (raft.go appendEntries)
//     records its sender as the known leader and sets lastContact to its
//     own now, so each member X of M did so at a time t_X ≥ S.
//  3. A follower with a known leader rejects every vote request but the
//     leader's own and a leadership transfer's (requestVote: "rejecting
//     vote request since we have a leader"). It forgets the leader only
//     when its heartbeat timer fires and at least HeartbeatTimeout has
//     passed since lastContact (runFollower), when it becomes a candidate
//     (the same timer, or a transfer's TimeoutNow), on a newer leader's
//     AppendEntries (that leader was elected already), or when it stops.
//     A member that voted in a later term before t_X rejected this
//     leader's request at t_X (its term is higher), so it is not in M.
//  4. Another member's election needs the votes of a majority, which
//     shares a member X with M; X votes no earlier than t_X +
//     HeartbeatTimeout on X's clock. The successor commits, and so cancels
//     or expires anything, only after it is elected.
//  5. The lease ends at S + bound on this node's clock, bound =
//     HeartbeatTimeout·3/4. With both clocks' rates within a factor
//     (1+ρ) of real time, the lease ends before any successor exists as
//     long as (1+ρ)² < 4/3, that is ρ below 15% — far beyond the drift of
//     any working clock.
//
// What the argument needs of the rest of the node:
//
//   - a leadership transfer elects the successor without waiting (its
//     TimeoutNow and the vote requests it sends carry the transfer flag),
//     so TransferLeadership revokes the lease, and holds off new ones,
//     before it starts;
//   - a restarted member forgets the leader it knew, so Open waits one
//     HeartbeatTimeout before a member with existing state starts Raft;
//   - membership changes are made one voter at a time, so the old and new
//     configurations' majorities overlap (step 4);
//   - when this node observes it lost leadership, or its term ends, the
//     lease is revoked at once; answers then take the quorum round trip.
//
// The lease is only confirmed while it is used: a loop on the leader
// confirms every bound/3 while callers asked for the lease since the last
// confirmation, so an idle cluster writes no barriers. A caller that finds
// no valid lease confirms with VerifyLeader itself and wakes the loop.
type leaderLease struct {
	bound time.Duration // how long after a confirmation's start it holds
	base  time.Time     // the monotonic origin of until
	until atomic.Int64  // the lease's end in nanoseconds since base; 0: none
	asked atomic.Bool   // the lease was asked for since the last confirmation

	mu    sync.Mutex
	epoch uint64 // guarded by mu; a revocation increments it
	held  int    // guarded by mu; transfers under way: no lease meanwhile
}

// leaseBound is how long a leader lease lasts after its confirmation
// starts, for a heartbeat timeout hb (the argument above).
func leaseBound(hb time.Duration) time.Duration { return hb * 3 / 4 }

func newLeaderLease(bound time.Duration, now time.Time) *leaderLease {
	return &leaderLease{bound: bound, base: now}
}

// valid reports whether the lease holds at now, and records that it was
// asked for.
func (l *leaderLease) valid(now time.Time) bool {
	if !l.asked.Load() {
		l.asked.Store(true)
	}
	return now.Sub(l.base) < time.Duration(l.until.Load())
}

// begin starts a confirmation: it returns the epoch the confirmation
// belongs to. Take the confirmation's start time after calling it.
func (l *leaderLease) begin() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// confirmed extends the lease to start + bound after a confirmation of
// epoch that started at start succeeded — unless the lease was revoked
// since, or a transfer is under way.
func (l *leaderLease) confirmed(epoch uint64, start time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if epoch != l.epoch || l.held > 0 {
		return
	}
	if end := int64(start.Sub(l.base) + l.bound); end > l.until.Load() {
		l.until.Store(end)
	}
}

// revoke ends the lease now; confirmations under way do not restore it.
func (l *leaderLease) revoke() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.revokeLocked()
}

func (l *leaderLease) revokeLocked() {
	l.epoch++
	l.until.Store(0)
}

// hold revokes the lease and grants none until release is called.
func (l *leaderLease) hold() (release func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held++
	l.revokeLocked()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.held--
		})
	}
}

// run keeps the lease confirmed while this node leads and the lease is
// used, until ctx ends; then it revokes the lease. confirm commits an
// entry in the current term (a barrier); now is the monotonic clock.
func (l *leaderLease) run(ctx context.Context, confirm func() error, now func() time.Time) {
	defer l.revoke()
	tick := time.NewTicker(max(l.bound/3, time.Millisecond))
	defer tick.Stop()
	for {
		if l.asked.Swap(false) {
			epoch := l.begin()
			start := now()
			if confirm() == nil && ctx.Err() == nil {
				l.confirmed(epoch, start)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
