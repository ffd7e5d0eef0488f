package lock_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/statepb"
)

// TestRequestHoldersReplayByRulesVersion: a log replayed after a
// restart, from a snapshot taken at any entry, decides each lock request
// entry by the rules version in force at it. Under rules version 2 ids
// alone matched: mallory's retry of b's waiting request id attached to it
// and her cancel took it out of its queue, and the replay does the same
// (the entries are acknowledged history). After the raise to 3 the same
// entries are refused NoSuchObject (a retry) and skipped (a cancel): a
// lock and the request waiting for it are one client's (spec CC 1.2.3,
// 1.5; 2.3 lock blocks the calling client until it is granted).
func TestRequestHoldersReplayByRulesVersion(t *testing.T) {
	set, a, b, m := djinn.NewID(), djinn.NewID(), djinn.NewID(), djinn.NewID()
	owner := func(c djinn.ID) *statepb.LockHolderState { return &statepb.LockHolderState{Owner: c[:]} }
	cmd := func(c any) *statepb.Command {
		out := &statepb.Command{NowUnixNanos: 1}
		switch c := c.(type) {
		case *statepb.LockCreateSet:
			out.Op = &statepb.Command_LockCreateSet{LockCreateSet: c}
		case *statepb.LockCreateOwner:
			out.Op = &statepb.Command_LockCreateOwner{LockCreateOwner: c}
		case *statepb.LockAcquire:
			out.Op = &statepb.Command_LockAcquire{LockAcquire: c}
		case *statepb.LockCancel:
			out.Op = &statepb.Command_LockCancel{LockCancel: c}
		case *statepb.RulesRaise:
			out.Op = &statepb.Command_RulesRaise{RulesRaise: c}
		}
		return out
	}
	acquire := func(h djinn.ID, m lock.Mode, req uint64) *statepb.Command {
		return cmd(&statepb.LockAcquire{SetId: set[:], Holder: owner(h), Mode: int32(m), RequestId: req, Principal: "p"})
	}
	id := djinn.NewID()
	log := []*statepb.Command{
		{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: id[:], RulesVersion: 2}}},
		cmd(&statepb.LockCreateSet{SetId: set[:], Cookie: set[:], ExpiresUnixNanos: 1 << 62, Principal: "p"}),
		cmd(&statepb.LockCreateOwner{Cookie: a[:], ExpiresUnixNanos: 1 << 62, Principal: "p"}),
		cmd(&statepb.LockCreateOwner{Cookie: b[:], ExpiresUnixNanos: 1 << 62, Principal: "p"}),
		cmd(&statepb.LockCreateOwner{Cookie: m[:], ExpiresUnixNanos: 1 << 62, Principal: "mallory"}),
		acquire(a, lock.W, 1), // 5: granted
		acquire(b, lock.R, 2), // 6: waits
		acquire(m, lock.R, 2), // 7: rules 2: attached to b's request
		cmd(&statepb.LockCancel{RequestIds: []uint64{2}, Holder: owner(m)}), // 8: rules 2: cancels b's request
		acquire(b, lock.R, 3), // 9: waits
		cmd(&statepb.RulesRaise{Version: 3}),
		acquire(m, lock.R, 3), // 11: refused
		cmd(&statepb.LockCancel{RequestIds: []uint64{3}, Holder: owner(m)}), // 12: skipped
		acquire(m, lock.W, 1), // 13: refused: a's grant is a's
		acquire(a, lock.W, 1), // 14: a's own retry gets its grant
	}
	for cut := 1; cut <= len(log); cut++ {
		got, st := replayCutAt(t, log, cut)
		if r, ok := got[7].(lock.Result); !ok || r.Outcome != lock.Queued {
			t.Errorf("snapshot after entry %d: mallory's retry of b's request id under rules 2: %v, want queued, as it was decided", cut, got[7])
		}
		for _, i := range []int{11, 13} {
			if err, _ := got[i].(error); !errors.Is(err, djinn.ErrNoSuchObject) {
				t.Errorf("snapshot after entry %d: mallory's retry of another's request id under rules 3 (entry %d): %v, want NoSuchObject", cut, i, got[i])
			}
		}
		if r, ok := got[14].(lock.Result); !ok || r.Outcome != lock.Granted || r.Fence != 1 {
			t.Errorf("snapshot after entry %d: a's own retry of its grant under rules 3: %v, want granted with fence 1", cut, got[14])
		}
		if w := st.Waiting(); !slices.Equal(w, []uint64{3}) {
			t.Errorf("snapshot after entry %d: waiting %v, want 3 alone (2 cancelled under rules 2, 3 kept under 3)", cut, w)
		}
	}
}

// TestGraceKeepsRequestsTheirHolders: during a new leader's grace
// window, while the callers of requests that waited under the last one
// come back, another holder that knows a waiting request's id (it is on
// the set owner's console) and a granted one's cannot take their answers
// nor, by giving up, cancel the wait: it finds no request (spec CC
// 1.2.3, a lock and the request for it are a single client's; 2.3 lock
// blocks the calling client until granted). The request's own caller
// comes back and is granted.
func TestGraceKeepsRequestsTheirHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		set, a, b, m := f.set(false), f.owner(), f.owner(), f.owner()
		f.lock(set, a, lock.W, 1)
		ctx, cancel := context.WithCancel(context.Background())
		go func() { _, _, _ = f.svc.Lock(ctx, set, b, lock.R, 0, false, 2) }()
		synctest.Wait()
		// b's node dies before b can leave the queue or hear its answer.
		f.stop()
		cancel()
		g := f.restart()
		defer func() { g.stop() }()

		mctx, mcancel := context.WithTimeout(context.Background(), time.Second)
		defer mcancel()
		if ok, fence, err := g.svc.Lock(mctx, set, m, lock.R, 0, false, 2); !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("another owner's lock with the waiting request's id: %v %d %v, want NoSuchObject", ok, fence, err)
		}
		if ok, fence, err := g.svc.Lock(context.Background(), set, m, lock.W, 0, true, 1); !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("another owner's lock with the granted request's id: %v %d %v, want NoSuchObject", ok, fence, err)
		}
		synctest.Wait()
		v, _, err := g.svc.Describe(context.Background(), set)
		if err != nil || len(v.Waiters) != 1 || v.Waiters[0].Request != 2 {
			t.Fatalf("waiters after the other owner's calls: %+v %v, want b's request 2", v.Waiters, err)
		}
		back := make(chan error, 1)
		go func() { _, _, err := g.svc.Lock(context.Background(), set, b, lock.R, 0, false, 2); back <- err }()
		synctest.Wait()
		if err := g.svc.Unlock(context.Background(), set, a, lock.W); err != nil {
			t.Fatal(err)
		}
		if err := <-back; err != nil {
			t.Fatalf("b coming back for its request: %v", err)
		}
	})
}
