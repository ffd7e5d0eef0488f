package lock_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// gate holds the lock requests of one owner on their way to the log, one
// at a time, until let lets one through (a call under way), or until shut
// is closed (the test ends).
type gate struct {
	lock.Proposer
	owner      []byte
	open, shut chan struct{}
}

func (g *gate) Propose(ctx context.Context, cmd *statepb.Command) (any, error) {
	if a := cmd.GetLockAcquire(); a != nil && bytes.Equal(a.GetHolder().GetOwner(), g.owner) {
		select {
		case <-g.open:
		case <-g.shut:
		}
	}
	return g.Proposer.Propose(ctx, cmd)
}

// let lets the request held, if one is, on to the log.
func (g *gate) let() {
	synctest.Wait()
	select {
	case g.open <- struct{}{}:
	default:
	}
}

type lockAnswer struct {
	ok    bool
	fence uint64
	err   error
}

// TestAnotherHoldersCallUnderTheSameID: a request id names its own
// holder's request (requests.go; CC 1.2.3, a lock is a single client's),
// and so does a Lock call under way here. Another holder's call under
// the same id, held on its way to the log, never makes the holder's
// retry answer Unavailable, nor hears what becomes of the holder's
// request, nor makes the holder's call hear what becomes of its own; it
// is answered for itself, NoSuchObject while the id names the holder's
// request. Before, calls under way were known by request id alone.
func TestAnotherHoldersCallUnderTheSameID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := statetest.For(newLockState)
		g := &gate{Proposer: log, open: make(chan struct{}), shut: make(chan struct{})}
		f := startWith(t, log, &joiner{}, g)
		defer f.stop()
		defer close(g.shut)
		ctx := context.Background()
		set, a, victim, impostor := f.set(false), f.owner(), f.owner(), f.owner()
		g.owner = impostor.GetOwner()
		call := func(h *djinnpb.LockHolder, m lock.Mode, req uint64) <-chan lockAnswer {
			ch := make(chan lockAnswer, 1)
			go func() {
				ok, fence, err := f.svc.Lock(ctx, set, h, m, 0, false, req)
				ch <- lockAnswer{ok, fence, err}
			}()
			synctest.Wait()
			return ch
		}
		refused := func(what string, ch <-chan lockAnswer) {
			t.Helper()
			g.let()
			if got := <-ch; !errors.Is(got.err, djinn.ErrNoSuchObject) {
				t.Errorf("%s: %v %d %v, want NoSuchObject (the id names another holder's request)", what, got.ok, got.fence, got.err)
			}
		}
		f.lock(set, a, lock.W, 1)

		// CC 2.3: the victim's request 8 waits behind a's W; the
		// impostor's call under 8 is under way as it is granted.
		waited := call(victim, lock.W, 8)
		taken := call(impostor, lock.R, 8)
		if err := f.svc.Unlock(ctx, set, a, lock.W); err != nil {
			t.Fatal(err)
		}
		got := <-waited
		if !got.ok || got.err != nil {
			t.Fatalf("the waiting request, granted while another holder's call under its id was under way: %v %d %v, want granted", got.ok, got.fence, got.err)
		}
		refused("another holder's call under a waiting request's id", taken)

		// CC 2.3: the victim's retry of its granted request 8 (its
		// answer lost) while the impostor's call under 8 is under way.
		taken = call(impostor, lock.R, 8)
		if ok, fence, err := f.svc.Lock(ctx, set, victim, lock.W, 0, false, 8); !ok || fence != got.fence || err != nil {
			t.Errorf("the holder's retry of its granted request while another holder's call under its id is under way: %v %d %v, want its grant, fence %d", ok, fence, err, got.fence)
		}
		refused("another holder's call under a granted request's id", taken)

		// The victim's request 9 ends as its owner's lease does
		// (UnknownLease) while the impostor's call under 9 is under way:
		// once the request is gone the id is free, and the impostor's
		// request waits for the victim's W as its own, deaf to the end
		// of the request before it.
		short, err := f.svc.CreateOwner(ctx, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		ended := call(&djinnpb.LockHolder{Owner: short.ID[:]}, lock.R, 9)
		own := call(impostor, lock.R, 9)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := <-ended; !errors.Is(got.err, djinn.ErrUnknownLease) {
			t.Fatalf("a request whose owner's lease ended: %v %d %v, want UnknownLease", got.ok, got.fence, got.err)
		}
		g.let()
		synctest.Wait()
		select {
		case got := <-own:
			t.Fatalf("a request under a freed id, queued: answered %v %d %v before it was granted", got.ok, got.fence, got.err)
		default:
		}
		if err := f.svc.Unlock(ctx, set, victim, lock.W); err != nil {
			t.Fatal(err)
		}
		if got := <-own; !got.ok || got.err != nil {
			t.Errorf("a request under a freed id, once the lock it waited for was released: %v %d %v, want granted", got.ok, got.fence, got.err)
		}
	})
}
