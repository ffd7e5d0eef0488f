package lock_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/statepb"
)

// lostAnswer is a log on which the first lock request of one owner is
// written and applied, and its caller's answer is lost: before the call
// hears of its entry, its caller gives up (giveUp), and the call is
// answered as the replicated log answers a proposal whose context ended
// ("may or may not have been made") — or, proposed under a context its
// caller's end does not reach, with the entry's result.
type lostAnswer struct {
	lock.Proposer
	owner  []byte
	giveUp context.CancelFunc
	once   sync.Once
}

func (l *lostAnswer) Propose(ctx context.Context, cmd *statepb.Command) (any, error) {
	a := cmd.GetLockAcquire()
	first := false
	if a != nil && bytes.Equal(a.GetHolder().GetOwner(), l.owner) {
		l.once.Do(func() { first = true })
	}
	res, err := l.Proposer.Propose(ctx, cmd)
	if !first {
		return res, err
	}
	l.giveUp()
	if ctx.Err() != nil {
		return nil, errors.Join(ctx.Err(), djinn.Errorf(djinn.Unavailable, "gave up waiting for the log: the change may or may not have been made"))
	}
	return res, err
}

// TestRetryUnderTheIDKeepsTheGrant: a caller that lost the answer to its
// lock request finds it by asking again under the same request id (CC
// 2.3's lock, made idempotent by djinn's request ids): a grant made for
// the request stays its holder's until the holder unlocks it or its
// lease ends, though the call that asked gave up. The robust suite's lock
// history was not linearizable when such a grant was given back by the
// service as the call left: another owner was refused the lock while the
// grant lasted, then took it, though its holder never unlocked it.
func TestRetryUnderTheIDKeepsTheGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := statetest.For(newLockState)
		l := &lostAnswer{Proposer: log}
		f := startWith(t, log, &joiner{}, l)
		defer f.stop()
		set, b := f.set(false), f.owner()
		l.owner = b.GetOwner()
		ctx, cancel := context.WithCancel(context.Background())
		l.giveUp = cancel
		if ok, _, err := f.svc.Lock(ctx, set, b, lock.W, 0, true, 7); ok || err == nil {
			t.Fatalf("the first call, its answer lost: %v %v; want an error", ok, err)
		}
		synctest.Wait()
		retried, retryFence, retryErr := f.svc.Lock(context.Background(), set, b, lock.W, 0, true, 7)
		if !retried || retryErr != nil || retryFence == 0 {
			t.Fatalf("the retry under the same request id: %v fence %d, %v; want granted with a fence", retried, retryFence, retryErr)
		}
		synctest.Wait()
		v, _, err := f.svc.Describe(context.Background(), set)
		if err != nil || len(v.Holders) != 1 {
			t.Fatalf("set after the retry was told of its grant: holders %+v, %v; want the retry's holder", v.Holders, err)
		}
		if ok, err := f.svc.Validate(set, retryFence); err != nil || !ok {
			t.Fatalf("the retry's fence %d: valid %v, %v; want valid: the grant it was told of stands", retryFence, ok, err)
		}
	})
}
