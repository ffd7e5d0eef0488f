package client

import (
	"context"
	"fmt"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LockSetDescription is what the service holds for a lock set, for
// operators (Describe).
type LockSetDescription struct {
	ID            djinn.ID
	Transactional bool
	// Related are the other sets sharing the set's lock coordinator (CC
	// 2.5's create_related).
	Related []djinn.ID
	// Lease is the set's lease as the service holds it, with the time it
	// had left; nil once it ended, and for anyone but the set's creator
	// (its principal): a set's id lets one lock in it, not keep it alive
	// or end it.
	Lease *Lease
	// Holders hold locks, in the service's order; Waiters wait for one, in
	// queue order (CC 1.3.1.3). Of a very busy set they are the first
	// that fit in what a client receives by default (4 MiB): HoldersTotal
	// and WaitersTotal count them all.
	Holders []LockHolding
	Waiters []LockWaiter
	// HoldersTotal and WaitersTotal are how many holders and waiters the
	// set has; more than len(Holders) and len(Waiters) when the
	// description lists only the first.
	HoldersTotal, WaitersTotal int
	// LastFence is the fencing token of the set's last grant (0 before
	// the first).
	LastFence uint64
}

// LockHolding is what one holder holds in a set.
type LockHolding struct {
	Holder LockHolder
	// Counts is the number of locks held in each mode, for the modes held
	// (CC 1.3.2's multiple possession).
	Counts map[LockMode]int
	// Fences are the fencing tokens of the live grants.
	Fences []uint64
}

// LockWaiter is a request waiting in a set's queue.
type LockWaiter struct {
	Holder LockHolder
	Mode   LockMode
	// Held is the mode of the lock a change_mode changes (CC 2.3), zero
	// for a lock request.
	Held      LockMode
	RequestID uint64
}

// Describe returns the set's holders with their locks, its waiters in
// queue order, its related sets and its lease. Of a set whose holders and
// waiters pass what a client receives by default, it returns the first
// of them, with their totals.
func (s *LockSet) Describe(ctx context.Context) (*LockSetDescription, error) {
	lc, err := s.client()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	pb, err := lc.Describe(ctx, &djinnpb.LockSetRequest{SetId: s.id[:], Partial: true})
	if err != nil {
		return nil, err
	}
	return lockSetDescriptionFrom(s.s.c, pb, sent)
}

// lockSetDescriptionFrom converts Describe's answer to a request sent at
// sent; c reaches the holders' transaction managers.
func lockSetDescriptionFrom(c Connector, pb *djinnpb.LockSetDescription, sent time.Time) (*LockSetDescription, error) {
	id, err := djinn.IDFromBytes("lock set id", pb.GetSetId())
	if err != nil {
		return nil, err
	}
	d := &LockSetDescription{ID: id, Transactional: pb.GetTransactional(), LastFence: pb.GetLastFence()}
	for i, b := range pb.GetRelated() {
		r, err := djinn.IDFromBytes(fmt.Sprintf("related lock set %d", i), b)
		if err != nil {
			return nil, err
		}
		d.Related = append(d.Related, r)
	}
	if pb.GetLease() != nil {
		if d.Lease, err = LeaseFromProto(pb.GetLease(), sent); err != nil {
			return nil, err
		}
	}
	for i, hp := range pb.GetHolders() {
		what := fmt.Sprintf("lock holder %d", i)
		h, err := holderFromProto(what, c, hp.GetHolder())
		if err != nil {
			return nil, err
		}
		hd := LockHolding{Holder: h, Counts: map[LockMode]int{}, Fences: hp.GetFences()}
		for m, n := range hp.GetCounts() {
			if n == 0 {
				continue
			}
			if !LockMode(m).valid() {
				return nil, djinn.Errorf(djinn.InvalidArgument, "%s: %d locks in %s", what, n, LockMode(m))
			}
			hd.Counts[LockMode(m)] = int(n)
		}
		d.Holders = append(d.Holders, hd)
	}
	for i, wp := range pb.GetWaiters() {
		what := fmt.Sprintf("lock waiter %d", i)
		h, err := holderFromProto(what, c, wp.GetHolder())
		if err != nil {
			return nil, err
		}
		w := LockWaiter{Holder: h, Mode: LockMode(wp.GetMode()), Held: LockMode(wp.GetHeld()), RequestID: wp.GetRequestId()}
		if err := checkLockMode(what+" mode", w.Mode); err != nil {
			return nil, err
		}
		if w.Held != 0 {
			if err := checkLockMode(what+" held mode", w.Held); err != nil {
				return nil, err
			}
		}
		d.Waiters = append(d.Waiters, w)
	}
	// A service from before the totals lists every holder and waiter.
	d.HoldersTotal = max(int(pb.GetHoldersTotal()), len(d.Holders))
	d.WaitersTotal = max(int(pb.GetWaitersTotal()), len(d.Waiters))
	return d, nil
}
