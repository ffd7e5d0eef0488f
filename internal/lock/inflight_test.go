package lock_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// gate holds the lock requests of one owner on their way to the log, one
// at a time, until let lets one through (a call under way), or until shut
// is closed (the test ends). A gate that holds answers holds them instead
// on their way back, the log having applied the request. A gate that
// holds orphans holds, instead of any request, the service's own cancel
// of the requests nobody came back for (one that names no holder) on its
// way to the log.
type gate struct {
	lock.Proposer
	owner      []byte
	answers    bool
	orphans    bool
	open, shut chan struct{}
}

func (g *gate) Propose(ctx context.Context, cmd *statepb.Command) (any, error) {
	a := cmd.GetLockAcquire()
	held := a != nil && bytes.Equal(a.GetHolder().GetOwner(), g.owner)
	if c := cmd.GetLockCancel(); g.orphans {
		held = c != nil && c.GetHolder() == nil
	}
	if held && !g.answers {
		g.hold()
	}
	res, err := g.Proposer.Propose(ctx, cmd)
	if held && g.answers {
		g.hold()
	}
	return res, err
}

func (g *gate) hold() {
	select {
	case <-g.open:
	case <-g.shut:
	}
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

// call starts a blocking Lock call of h under request id req and returns
// its answer to come, once the call has gone as far as it can.
func (f *fixture) call(set []byte, h *djinnpb.LockHolder, m lock.Mode, req uint64) <-chan lockAnswer {
	ch := make(chan lockAnswer, 1)
	go func() {
		ok, fence, err := f.svc.Lock(context.Background(), set, h, m, 0, false, req)
		ch <- lockAnswer{ok, fence, err}
	}()
	synctest.Wait()
	return ch
}

// granted fails t unless the call whose answer ch brings was granted.
func granted(t *testing.T, ch <-chan lockAnswer, what string) {
	t.Helper()
	if got := <-ch; !got.ok || got.err != nil {
		t.Fatalf("%s: %v %d %v, want granted", what, got.ok, got.fence, got.err)
	}
}

// waiting fails t if the call whose answer ch brings has been answered;
// while says why it should still wait.
func waiting(t *testing.T, ch <-chan lockAnswer, what, while string) {
	t.Helper()
	select {
	case got := <-ch:
		t.Fatalf("%s: answered %v %d %v %s", what, got.ok, got.fence, got.err, while)
	default:
	}
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
			return f.call(set, h, m, req)
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
		waiting(t, own, "a request under a freed id, queued", "before it was granted")
		if err := f.svc.Unlock(ctx, set, victim, lock.W); err != nil {
			t.Fatal(err)
		}
		granted(t, own, "a request under a freed id, once the lock it waited for was released")
	})
}

// TestGraceEndCountsTheHoldersOwnCalls: as a new leader's grace period
// ends, a request left waiting under the last leader stays only if a Lock
// call of its own holder under its id is under way here, its caller come
// back (a request is a single client's, CC 1.2.3 and 1.5, and lock blocks
// that client until granted, 2.3). Another holder's call under the id,
// its answer (NoSuchObject) on its way back as the period ends, is no
// caller of it: the request is cancelled as orphaned, and the lock it
// held up is free for the others. Before, any call under the id kept it.
// Under rules 2 ids alone named requests and such a call took the
// request, its answer among it: the request stays, for that call.
func TestGraceEndCountsTheHoldersOwnCalls(t *testing.T) {
	for _, c := range []struct {
		name  string
		rules uint32 // 0: the newest
		back  bool   // the victim's own call is under way too
		kept  bool
	}{
		{"CC 1.2.3 another holder's call alone under the id: orphaned", 0, false, false},
		{"CC 2.3 the holder's own call, with another's under the id: kept", 0, true, true},
		{"rules 2: another holder's call under the id took the request: kept", 2, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				newState := newLockState
				if c.rules != 0 {
					newState = func(m *state.Machine) *lock.State {
						return lock.NewState(m.Leases, func() uint32 { return c.rules })
					}
				}
				f := start(t, statetest.For(newState), &joiner{})
				set, a, victim, impostor, other := f.set(false), f.owner(), f.owner(), f.owner(), f.owner()
				f.lock(set, a, lock.W, 1)
				ctx, cancel := context.WithCancel(context.Background())
				go func() { _, _, _ = f.svc.Lock(ctx, set, victim, lock.R, 0, false, 2) }()
				synctest.Wait()
				// The leader fails over while the victim's request 2 waits
				// behind a's W.
				f.stop()
				cancel()
				log, err := statetest.Restart(f.log.Log, newState)
				if err != nil {
					t.Fatal(err)
				}
				g := &gate{Proposer: log, owner: impostor.GetOwner(), answers: true, open: make(chan struct{}), shut: make(chan struct{})}
				f = startWith(t, log, f.j, g)
				defer f.stop()
				defer close(g.shut)

				taken := f.call(set, impostor, lock.R, 2)
				var mine <-chan lockAnswer
				if c.back {
					mine = f.call(set, victim, lock.R, 2)
				}
				time.Sleep(11 * time.Second) // past the grace period, on the bubble's clock
				synctest.Wait()
				want := []uint64{}
				if c.kept {
					want = []uint64{2}
				}
				if got := f.log.State.Waiting(); len(got) != len(want) || len(got) > 0 && got[0] != 2 {
					t.Fatalf("waiting after the grace period: %v, want %v", got, want)
				}
				g.let()
				if c.rules == 0 {
					if got := <-taken; !errors.Is(got.err, djinn.ErrNoSuchObject) {
						t.Errorf("the other holder's call under the id: %v %d %v, want NoSuchObject (the id names the victim's request)", got.ok, got.fence, got.err)
					}
				}
				if err := f.svc.Unlock(context.Background(), set, a, lock.W); err != nil {
					t.Fatal(err)
				}
				switch {
				case c.back:
					granted(t, mine, "the victim's call come back, once a's W was released")
				case c.rules != 0:
					if got := <-taken; !got.ok || got.err != nil {
						t.Errorf("rules %d: the other holder's call that took the request, once a's W was released: %v %d %v, want the request's grant", c.rules, got.ok, got.fence, got.err)
					}
				}
				ok, _, err := f.svc.Lock(context.Background(), set, other, lock.W, 0, true, 3)
				if err != nil || ok == c.kept {
					t.Errorf("a third owner's try_lock W once a's W was released: %v %v, want granted %v (the victim's request kept: %v)", ok, err, !c.kept, c.kept)
				}
			})
		})
	}
}

// TestCallAttachedAsItsOrphanIsCancelled: a request left waiting under
// the last leader whose caller was not back by the new leader's grace end
// is cancelled as orphaned. A Lock call of its holder under its id that
// comes back after the orphans were listed but before their cancel
// applied finds the request still waiting and waits for it (CC 2.3):
// once the cancel applies it is answered at once, Unavailable, told its
// request was cancelled and to retry with the same id, which queues it
// anew — as a call that comes back once the cancel applied does. The
// cancel wakes no other holder's call. Before, the cancel, naming no
// holder, took the request out with no word to the call, which waited
// until its context ended (here its deadline, a minute on) or the leader
// stepped down.
func TestCallAttachedAsItsOrphanIsCancelled(t *testing.T) {
	for _, c := range []struct {
		name     string
		rules    uint32 // 0: the newest
		attached bool   // the call comes back before the cancel applied
	}{
		{"CC 2.3 back between the orphans listed and their cancel applied: answered", 0, true},
		{"CC 2.3 back once the cancel applied: queued anew", 0, false},
		{"rules 2 back between the orphans listed and their cancel applied: answered", 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				newState := newLockState
				if c.rules != 0 {
					newState = func(m *state.Machine) *lock.State {
						return lock.NewState(m.Leases, func() uint32 { return c.rules })
					}
				}
				bg := context.Background()
				f := start(t, statetest.For(newState), &joiner{})
				set, a, victim, other := f.set(false), f.owner(), f.owner(), f.owner()
				f.lock(set, a, lock.W, 1)
				ctx, cancel := context.WithCancel(bg)
				go func() { _, _, _ = f.svc.Lock(ctx, set, victim, lock.R, 0, false, 2) }()
				synctest.Wait()
				// The leader fails over while the victim's request 2 waits
				// behind a's W.
				f.stop()
				cancel()
				log, err := statetest.Restart(f.log.Log, newState)
				if err != nil {
					t.Fatal(err)
				}
				g := &gate{Proposer: log, orphans: true, open: make(chan struct{}), shut: make(chan struct{})}
				f = startWith(t, log, f.j, g)
				defer f.stop()
				defer close(g.shut)

				// Another owner's request 3, under this leader, waits
				// behind a's W and the victim's R.
				others := f.call(set, other, lock.W, 3)
				deadline, done := context.WithTimeout(bg, time.Minute)
				defer done()
				back := func() <-chan lockAnswer {
					ch := make(chan lockAnswer, 1)
					go func() {
						ok, fence, err := f.svc.Lock(deadline, set, victim, lock.R, 0, false, 2)
						ch <- lockAnswer{ok, fence, err}
					}()
					synctest.Wait()
					return ch
				}
				time.Sleep(11 * time.Second) // past the grace period, on the bubble's clock
				synctest.Wait()
				// The orphans are listed, request 2 among them; their
				// cancel is held on its way to the log.
				var mine <-chan lockAnswer
				if c.attached {
					mine = back()
				}
				if got := f.log.State.Waiting(); !slices.Equal(got, []uint64{2, 3}) {
					t.Fatalf("waiting as the cancel of the orphans is on its way: %v, want [2 3]", got)
				}
				g.let()
				synctest.Wait()
				if got := f.log.State.Waiting(); !slices.Equal(got, []uint64{3}) {
					t.Fatalf("waiting once the cancel of the orphans applied: %v, want [3]", got)
				}
				if c.attached {
					got := <-mine
					if !errors.Is(got.err, djinn.ErrUnavailable) || got.ok || !strings.Contains(got.err.Error(), "grace") || !strings.Contains(got.err.Error(), "retry") {
						t.Fatalf("the holder's call that found its request waiting as its cancel was on its way: %v %d %v, want Unavailable saying the request was cancelled at the grace end and to retry (before: it waited until its context ended)", got.ok, got.fence, got.err)
					}
				}
				select {
				case got := <-others:
					t.Fatalf("another holder's waiting call, as the orphan was cancelled: answered %v %d %v, want still waiting", got.ok, got.fence, got.err)
				default:
				}
				// Back (again) with the same id: a new request, behind
				// the other owner's.
				mine = back()
				if got := f.log.State.Waiting(); !slices.Equal(got, []uint64{2, 3}) {
					t.Fatalf("waiting once the victim came back after the cancel: %v, want [2 3]", got)
				}
				if err := f.svc.Unlock(bg, set, a, lock.W); err != nil {
					t.Fatal(err)
				}
				granted(t, others, "the other owner's W, once a's W was released")
				waiting(t, mine, "the victim's new request, queued behind the other owner's W", "while that W is held")
				if err := f.svc.Unlock(bg, set, other, lock.W); err != nil {
					t.Fatal(err)
				}
				granted(t, mine, "the victim's new request, once the other owner's W was released")
			})
		})
	}
}

// TestACallUnderTheIDLeavingUnderRules2: under rules 2 a request id
// alone named a request, and a call of any holder under a waiting
// request's id took it (requests.go): when one of the calls under the id
// gives up (its context ends), its cancel takes the request out of the
// queue as it did then — replayed entries decide as before — and the
// other call, that waits for the request, is answered at once,
// Unavailable, told another call under its id cancelled it and to retry
// with the same id, which queues a request anew (CC 2.3: lock blocks its
// client until granted, and then answers). Before, it heard nothing and
// waited until its context ended (here its deadline, a minute on) or the
// leader stepped down.
func TestACallUnderTheIDLeavingUnderRules2(t *testing.T) {
	for _, c := range []struct {
		name         string
		holderLeaves bool // the request's own holder gives up, not the other
	}{
		{"CC 2.3 another holder's call under the id gives up: the holder's call answered", false},
		{"CC 2.3 the holder's call gives up: another holder's call that took the request answered", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rules2 := func(m *state.Machine) *lock.State {
					return lock.NewState(m.Leases, func() uint32 { return 2 })
				}
				f := start(t, statetest.For(rules2), &joiner{})
				defer f.stop()
				bg := context.Background()
				set, a, holder, other := f.set(false), f.owner(), f.owner(), f.owner()
				f.lock(set, a, lock.W, 1)
				deadline, done := context.WithTimeout(bg, time.Minute)
				defer done()
				lctx, leave := context.WithCancel(bg)
				defer leave()
				stays, leaves := deadline, lctx
				if c.holderLeaves {
					stays, leaves = lctx, deadline
				}
				lockIn := func(ctx context.Context, h *djinnpb.LockHolder) <-chan lockAnswer {
					ch := make(chan lockAnswer, 1)
					go func() {
						ok, fence, err := f.svc.Lock(ctx, set, h, lock.R, 0, false, 8)
						ch <- lockAnswer{ok, fence, err}
					}()
					synctest.Wait()
					return ch
				}
				mine := lockIn(stays, holder)
				theirs := lockIn(leaves, other)
				if c.holderLeaves {
					mine, theirs = theirs, mine
				}
				// mine is the call that stays, theirs the one that leaves.
				if got := f.log.State.Waiting(); !slices.Equal(got, []uint64{8}) {
					t.Fatalf("waiting with both calls under request 8: %v, want [8]", got)
				}
				leave()
				synctest.Wait()
				if got := f.log.State.Waiting(); len(got) != 0 {
					t.Fatalf("waiting once a call under request 8 gave up: %v, want none (under rules 2 its cancel takes the request)", got)
				}
				if got := <-theirs; !errors.Is(got.err, context.Canceled) {
					t.Errorf("the call that gave up: %v %d %v, want its context's end", got.ok, got.fence, got.err)
				}
				got := <-mine
				if !errors.Is(got.err, djinn.ErrUnavailable) || got.ok || !strings.Contains(got.err.Error(), "another call under its id") || !strings.Contains(got.err.Error(), "retry") {
					t.Fatalf("the call whose request another call under its id cancelled: %v %d %v, want Unavailable saying so and to retry (before: it waited until its context ended)", got.ok, got.fence, got.err)
				}
				retry := holder
				if c.holderLeaves {
					retry = other
				}
				mine = lockIn(deadline, retry)
				if got := f.log.State.Waiting(); !slices.Equal(got, []uint64{8}) {
					t.Fatalf("waiting once the call that stayed retried under the id: %v, want [8], queued anew", got)
				}
				if err := f.svc.Unlock(bg, set, a, lock.W); err != nil {
					t.Fatal(err)
				}
				granted(t, mine, "the retry, once a's W was released")
			})
		})
	}
}
