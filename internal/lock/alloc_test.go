package lock_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state/statetest"
)

// TestLockCycleAllocations pins what an uncontended lock and unlock of an
// owner's costs the service in allocations, the log's included: a call
// proposes its command, op and holder made together, and a Lock waits on
// a channel of no pointers.
func TestLockCycleAllocations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		defer f.stop()
		set, o := f.set(false), f.owner()
		ctx := context.Background()
		n := testing.AllocsPerRun(200, func() {
			if _, _, err := f.svc.Lock(ctx, set, o, lock.W, 0, false, 0); err != nil {
				t.Fatal(err)
			}
			if err := f.svc.Unlock(ctx, set, o, lock.W); err != nil {
				t.Fatal(err)
			}
		})
		// 29 when each call made its command, op, holder and (Lock) a
		// channel of events apart; 22 made together.
		if n > 24 {
			t.Fatalf("an uncontended lock and unlock: %.1f allocations, want at most 24", n)
		}
	})
}
