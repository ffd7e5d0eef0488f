package lock_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/statepb"
)

// lateGiveUp is a log on which the caller of one owner's lock request
// gives up (giveUp) once the request is on its way, taken into an entry:
// the entry still applies, and a proposal whose context has ended by
// then is answered as the replicated log answers it, "may or may not
// have been made".
type lateGiveUp struct {
	lock.Proposer
	owner  []byte
	giveUp context.CancelFunc
}

func (l *lateGiveUp) Propose(ctx context.Context, cmd *statepb.Command) (any, error) {
	a := cmd.GetLockAcquire()
	if a == nil || !bytes.Equal(a.GetHolder().GetOwner(), l.owner) {
		return l.Proposer.Propose(ctx, cmd)
	}
	res, err := l.Proposer.Propose(ctx, cmd)
	l.giveUp()
	if ctx.Err() != nil {
		return nil, errors.Join(ctx.Err(), djinn.Errorf(djinn.Unavailable, "gave up waiting for the log: the change may or may not have been made"))
	}
	return res, err
}

// TestCallerGivingUpOnTheWayLeavesNoRequest: a blocking lock call whose
// caller gives up (its context ends: it leaves the queue, CC 2.3's lock
// blocks only its caller) while its request is on its way to the log —
// taken into an entry, so the log can no longer say whether it was made —
// leaves nothing behind: the request, made, is cancelled, and a grant it
// got at once is given back. Before, the call returned the log's
// indefinite error and left the request made for nobody: it waited, and
// then held the lock, while its owner's lease lived, blocking every
// other holder (the new leader's grace rule, the one that cancels
// requests whose callers are gone, runs only as a leader starts).
func TestCallerGivingUpOnTheWayLeavesNoRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		held bool // another holder holds the lock: the request waits
	}{
		{"waits", true},
		{"granted at once", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := statetest.For(newLockState)
				g := &lateGiveUp{Proposer: log}
				f := startWith(t, log, &joiner{}, g)
				defer f.stop()
				set, a, b := f.set(false), f.owner(), f.owner()
				g.owner = b.GetOwner()
				if tc.held {
					f.lock(set, a, lock.W, 1)
				}
				ctx, cancel := context.WithCancel(context.Background())
				g.giveUp = cancel
				ok, _, err := f.svc.Lock(ctx, set, b, lock.W, 0, false, 2)
				if ok || !errors.Is(err, context.Canceled) {
					t.Fatalf("lock given up on the way: %v %v, want not granted, context.Canceled", ok, err)
				}
				if tc.held {
					if err := f.svc.Unlock(context.Background(), set, a, lock.W); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait()
				v, _, err := f.svc.Describe(context.Background(), set)
				if err != nil || len(v.Holders) != 0 || len(v.Waiters) != 0 {
					t.Fatalf("set after the call gave up (and the holder unlocked): holders %+v, waiters %+v, %v; want none: nobody waits for the request", v.Holders, v.Waiters, err)
				}
			})
		})
	}
}
