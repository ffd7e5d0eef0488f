package mailbox_test

// Replacing or stopping a target while deliveries are in flight (EM.4.1).

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// blockingSink holds every send to a chosen target until its context ends.
type blockingSink struct {
	*sink
	block    djinn.Ref
	inFlight atomic.Int32
	after    atomic.Int32 // sends to block that started after replacement
	replaced atomic.Bool
}

func (b *blockingSink) Send(ctx context.Context, target djinn.Ref, events []*djinnpb.RemoteEvent) (int, error) {
	if target == b.block {
		if b.replaced.Load() {
			b.after.Add(1)
		}
		b.inFlight.Add(1)
		defer b.inFlight.Add(-1)
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return b.sink.Send(ctx, target, events)
}

// TestReplacementBlocksUntilOldDeliveryStops: EM.4.1 — when enableDelivery
// or disableDelivery returns, any delivery attempt to the previous target
// has been cancelled, so the client may unexport it.
func TestReplacementBlocksUntilOldDeliveryStops(t *testing.T) {
	for _, replace := range []string{"enable", "disable"} {
		t.Run(replace, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				oldP, oldR := target("old")
				newP, newR := target("new")
				var bs *blockingSink
				f := newFixtureWith(t, 100, func(s *sink) event.Sender {
					bs = &blockingSink{sink: s, block: oldR}
					return bs
				}, nil)
				defer f.stop()
				svc := f.svc

				r, err := svc.Register(context.Background(), time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				if err := svc.EnableDelivery(context.Background(), r.ID, oldP); err != nil {
					t.Fatal(err)
				}
				if err := svc.Notify(context.Background(), r.Listener.Object, ev(1, 1)); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if bs.inFlight.Load() != 1 {
					t.Fatal("no delivery in flight to the old target")
				}
				if replace == "enable" {
					err = svc.EnableDelivery(context.Background(), r.ID, newP)
				} else {
					err = svc.DisableDelivery(context.Background(), r.ID)
				}
				if err != nil {
					t.Fatal(err)
				}
				bs.replaced.Store(true)
				if n := bs.inFlight.Load(); n != 0 {
					t.Fatalf("%s returned with %d deliveries still in flight to the old target", replace, n)
				}
				synctest.Wait()
				if bs.after.Load() != 0 {
					t.Fatal("the old target was sent to after it was replaced")
				}
				if replace == "enable" {
					if got := f.sink.seqs(newR); len(got) != 1 {
						t.Fatalf("the pending event went to the new target %v times", len(got))
					}
				}
			})
		})
	}
}

// slowAcks is a log that cannot record deliveries (as when the log is
// slow or the leader is about to fail): delivered events stay stored.
type slowAcks struct{ *statetest.Log }

func (s slowAcks) ProposeRider(ctx context.Context, c *statepb.Command) (any, error) {
	return s.Propose(ctx, c)
}

func (s slowAcks) Propose(ctx context.Context, c *statepb.Command) (any, error) {
	if c.GetMailboxDelivered() != nil {
		return nil, djinn.Errorf(djinn.Unavailable, "log busy")
	}
	return s.Log.Propose(ctx, c)
}

// TestRetargetDoesNotResendDelivered: events this leader already delivered
// are not sent to a new target just because their delivery is not yet in
// the log.
func TestRetargetDoesNotResendDelivered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixtureWith(t, 100, nil, func(l *statetest.Log) mailbox.Proposer { return slowAcks{l} })
		defer f.stop()
		svc := f.svc

		r, err := svc.Register(context.Background(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		aP, aR := target("a")
		bP, bR := target("b")
		if err := svc.EnableDelivery(context.Background(), r.ID, aP); err != nil {
			t.Fatal(err)
		}
		for i := int64(1); i <= 3; i++ {
			if err := svc.Notify(context.Background(), r.Listener.Object, ev(1, i)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if got := f.sink.seqs(aR); len(got) != 3 {
			t.Fatalf("a got %v", got)
		}
		if err := svc.EnableDelivery(context.Background(), r.ID, bP); err != nil {
			t.Fatal(err)
		}
		if err := svc.Notify(context.Background(), r.Listener.Object, ev(1, 4)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := f.sink.seqs(bR); len(got) != 1 || got[0] != 4 {
			t.Fatalf("the new target got %v, want only the new event 4", got)
		}
	})
}

// TestNotifyBatch: a batch is stored in order, in one log entry, up to the
// first event refused; the answer says how many were taken and why the
// next was not.
func TestNotifyBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 5)
		defer f.stop()
		r := f.register(time.Hour)
		before := len(f.log.Commands())
		n, err := f.svc.NotifyBatch(context.Background(), r.Listener.Object, []*djinnpb.RemoteEvent{ev(1, 1), ev(1, 2), ev(1, 3)})
		if n != 3 || err != nil || len(f.log.Commands()) != before+1 {
			t.Fatalf("batch of 3 = %d, %v in %d entries", n, err, len(f.log.Commands())-before)
		}
		n, err = f.svc.NotifyBatch(context.Background(), r.Listener.Object, []*djinnpb.RemoteEvent{ev(1, 4), ev(1, 5), ev(1, 6)})
		if n != 2 || !errors.Is(err, djinn.ErrResourceExhausted) {
			t.Fatalf("batch past the bound = %d, %v; want 2 and resource exhausted", n, err)
		}
		n, err = f.svc.NotifyBatch(context.Background(), r.Listener.Object, []*djinnpb.RemoteEvent{nil})
		if n != 0 || !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Fatalf("a bad first event = %d, %v", n, err)
		}
		got, _, _ := f.state.After(r.ID, 0, 0, 10) // no pull stream yet: number 0
		for i, s := range got {
			if s.Event.Sequence != int64(i+1) {
				t.Fatalf("stored out of order: %v", got)
			}
		}
	})
}

// TestFollowerDoesNotAnswer: a node that is not serving as leader does not
// know whether a lease was renewed (renewals are not logged), so it answers
// Unavailable — never a false NoSuchObject — and the edge points the caller
// at the leader.
func TestFollowerDoesNotAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 100)
		r := f.register(time.Minute)
		f.stop() // no longer leading
		tp, _ := target("t")
		for name, err := range map[string]error{
			"register": func() error { _, err := f.svc.Register(context.Background(), time.Minute); return err }(),
			"get":      func() error { _, err := f.svc.Get(context.Background(), r.ID); return err }(),
			"notify":   f.notify(r, ev(1, 1)),
			"enable":   f.svc.EnableDelivery(context.Background(), r.ID, tp),
			"ack":      f.svc.Ack(context.Background(), r.ID, 1),
		} {
			if !errors.Is(err, djinn.ErrUnavailable) {
				t.Errorf("%s on a follower = %v, want Unavailable", name, err)
			}
		}
	})
}

// slowDisable holds a delivery failure's disable until released, as a
// busy log would.
type slowDisable struct {
	*statetest.Log
	release chan struct{}
}

func (s slowDisable) Propose(ctx context.Context, c *statepb.Command) (any, error) {
	if d := c.GetMailboxDisable(); d != nil && d.GetDeliveryFailed() {
		<-s.release
	}
	return s.Log.Propose(ctx, c)
}

// TestStoppedDeliveryLosesNothing: after a definite failure stops delivery,
// events arriving before the disable is recorded are not delivered past the
// undelivered ones (which would forget them).
func TestStoppedDeliveryLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		f := newFixtureWith(t, 100, nil, func(l *statetest.Log) mailbox.Proposer { return slowDisable{l, release} })
		defer f.stop()
		f.sink.answer = func(_ djinn.Ref, e *djinnpb.RemoteEvent) error {
			if e.Sequence == 1 {
				return djinn.Errorf(djinn.InvalidArgument, "cannot take event 1")
			}
			return nil
		}
		r := f.register(time.Hour)
		tp, tr := target("t")
		for i := int64(1); i <= 3; i++ {
			if err := f.notify(r, ev(1, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := f.notify(r, ev(1, 4)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		close(release)
		synctest.Wait()
		if got := f.sink.seqs(tr); len(got) != 0 {
			t.Fatalf("delivered %v after a definite failure stopped delivery", got)
		}
		g, err := f.svc.Get(context.Background(), r.ID)
		if err != nil || g.Stored != 4 || g.Target != nil {
			t.Fatalf("after the failure: %d stored, target %v, %v; want all 4 kept and delivery disabled", g.Stored, g.Target, err)
		}
	})
}

// TestStaleFailureDoesNotDisableANewEnable: a delivery failure recorded
// after the client enabled delivery again — even to the same listener —
// does not disable it.
func TestStaleFailureDoesNotDisableANewEnable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		f := newFixtureWith(t, 100, nil, func(l *statetest.Log) mailbox.Proposer { return slowDisable{l, release} })
		defer f.stop()
		fail := true
		f.sink.answer = func(djinn.Ref, *djinnpb.RemoteEvent) error {
			if fail {
				return djinn.Errorf(djinn.NoSuchObject, "listener gone")
			}
			return nil
		}
		r := f.register(time.Hour)
		tp, tr := target("t")
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		if err := f.notify(r, ev(1, 1)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the failure's disable waits in the log
		f.sink.mu.Lock()
		fail = false
		f.sink.mu.Unlock()
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		close(release)
		synctest.Wait()
		g, err := f.svc.Get(context.Background(), r.ID)
		if err != nil || g.Target == nil {
			t.Fatalf("a stale failure disabled the new enable: target %v, %v", g.Target, err)
		}
		if got := f.sink.seqs(tr); len(got) != 1 {
			t.Fatalf("the re-enabled target got %v", got)
		}
	})
}
