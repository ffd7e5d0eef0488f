package lock_test

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestHandOffCostsTheSameWithManyWaiting: a hand-off on one lock — the
// holder's unlock granting the first waiting request (spec 1.3.1.3: the
// clients waiting are served first in, first out) — writes the unlock
// alone and answers the one call granted, whether 2 calls wait or 64: no
// other waiting call is answered, and none proposes anything, as the
// lock passes down the queue. What a hand-off costs does not grow with
// the requests waiting behind it.
func TestHandOffCostsTheSameWithManyWaiting(t *testing.T) {
	for _, n := range []int{2, 64} {
		t.Run(strconv.Itoa(n)+" waiting", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { handOffs(t, n) })
		})
	}
}

// handOffs queues n blocking requests behind a holder, then passes the
// lock down the queue, one unlock at a time.
func handOffs(t *testing.T, n int) {
	log := statetest.For(newLockState)
	log.RiderDelay = time.Hour // a waiting request rides with the next command
	f := start(t, log, &joiner{})
	defer f.stop()
	ctx := context.Background()
	set, holder := f.set(false), f.owner()
	f.lock(set, holder, lock.W, 1)
	owners := make([]*djinnpb.LockHolder, n)
	answers := make([]chan lockAnswer, n)
	for i := range n {
		owners[i], answers[i] = f.owner(), make(chan lockAnswer, 1)
	}
	for i := range n {
		go func() {
			ok, fence, err := f.svc.Lock(ctx, set, owners[i], lock.W, 0, false, uint64(100+i))
			answers[i] <- lockAnswer{ok, fence, err}
		}()
		synctest.Wait()
	}
	last := holder
	for round := range n {
		before := len(log.Commands())
		if err := f.svc.Unlock(ctx, set, last, lock.W); err != nil {
			t.Fatalf("hand-off %d: unlock: %v", round, err)
		}
		synctest.Wait()
		want := 1 // the unlock
		if round == 0 {
			want += n // the waiting requests, which rode with the first unlock
		}
		if got := len(log.Commands()) - before; got != want {
			t.Fatalf("hand-off %d: %d commands applied, want %d", round, got, want)
		}
		for j := round + 1; j < n; j++ {
			if len(answers[j]) != 0 {
				t.Fatalf("hand-off %d: the call of waiter %d was answered (%+v), want it still waiting behind waiter %d", round, j, <-answers[j], round)
			}
		}
		select {
		case a := <-answers[round]:
			if !a.ok || a.err != nil || a.fence != uint64(round+2) {
				t.Fatalf("hand-off %d: waiter %d answered %+v, want granted with fence %d", round, round, a, round+2)
			}
		default:
			t.Fatalf("hand-off %d: the call of waiter %d, first in the queue, not answered", round, round)
		}
		last = owners[round]
	}
	if err := f.svc.Unlock(ctx, set, last, lock.W); err != nil {
		t.Fatal(err)
	}
	if v, _, err := f.svc.Describe(ctx, set); err != nil || len(v.Holders) != 0 || len(v.Waiters) != 0 {
		t.Fatalf("after the last unlock: %+v %v, want the set empty", v, err)
	}
}
