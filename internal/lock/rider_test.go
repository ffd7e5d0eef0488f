package lock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestWaitingRequestRides: a blocking request that will wait (spec
// 1.3.1.3: a conflicting holder, or requests already waiting) rides in
// the next command's log entry, the holder's unlock's, rather than taking
// a write of its own ahead of it; it is queued before that unlock applies
// and granted by it, in first-come order. A request granted at once, a
// try and a change of mode are written at once.
func TestWaitingRequestRides(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := statetest.For(newLockState)
		log.RiderDelay = time.Hour // a rider goes only with another command
		f := start(t, log, &joiner{})
		defer f.stop()
		ctx := context.Background()
		set, a, b, c, r1, r2 := f.set(false), f.owner(), f.owner(), f.owner(), f.owner(), f.owner()
		other := f.set(false)
		f.lock(set, a, lock.W, 1)
		f.lock(other, r1, lock.R, 2) // shared: no wait
		f.lock(other, r2, lock.R, 3)
		if ok, _, err := f.svc.Lock(ctx, set, c, lock.W, 0, true, 4); ok || err != nil {
			t.Fatalf("try on a held lock: %v %v, want refused", ok, err)
		}
		if n := log.Rode(); n != 0 {
			t.Fatalf("%d riders after grants at once and a try, want 0", n)
		}
		got := make(chan lockAnswer, 2)
		for i, who := range []*djinnpb.LockHolder{b, c} {
			go func() {
				ok, fence, err := f.svc.Lock(ctx, set, who, lock.W, 0, false, uint64(5+i))
				got <- lockAnswer{ok, fence, err}
			}()
			synctest.Wait()
		}
		if v, _, err := f.svc.Describe(ctx, set); err != nil || len(v.Waiters) != 0 {
			t.Fatalf("waiters before the next command: %+v %v, want none yet (riding)", v.Waiters, err)
		}
		if err := f.svc.Unlock(ctx, set, a, lock.W); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := log.Rode(); n != 2 {
			t.Fatalf("%d riders, want the 2 waiting requests", n)
		}
		first := <-got
		if !first.ok || first.err != nil || first.fence != 2 {
			t.Fatalf("first waiter: %+v, want granted with fence 2 by the unlock it rode with", first)
		}
		v, _, err := f.svc.Describe(ctx, set)
		if err != nil || len(v.Holders) != 1 || len(v.Waiters) != 1 || v.Waiters[0].Request != 6 {
			t.Fatalf("after the unlock: %+v %v, want the first waiter holding and the second waiting", v, err)
		}
		if err := f.svc.Unlock(ctx, set, b, lock.W); err != nil {
			t.Fatal(err)
		}
		if second := <-got; !second.ok || second.err != nil || second.fence != 3 {
			t.Fatalf("second waiter: %+v, want granted with fence 3", second)
		}
	})
}
