package mailbox_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/logtest"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// sink is an in-memory listener: it records what it is sent and answers
// with the error its script gives.
type sink struct {
	mu     sync.Mutex
	got    map[djinn.Ref][]*djinnpb.RemoteEvent
	answer func(target djinn.Ref, ev *djinnpb.RemoteEvent) error
	calls  int
}

var _ event.Sender = (*sink)(nil)

func (s *sink) Send(ctx context.Context, target djinn.Ref, events []*djinnpb.RemoteEvent) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	for i, ev := range events {
		if s.answer != nil {
			if err := s.answer(target, ev); err != nil {
				return i, err
			}
		}
		s.got[target] = append(s.got[target], ev)
	}
	return len(events), nil
}

func (s *sink) seqs(target djinn.Ref) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, ev := range s.got[target] {
		out = append(out, ev.Sequence)
	}
	return out
}

type fixture struct {
	t      *testing.T
	log    *statetest.Log
	state  *mailbox.State
	lessor *lease.Lessor
	svc    *mailbox.Service
	sink   *sink
	self   djinn.Ref
	stop   func()
	logs   *logtest.Buffer // what the service logged
}

func newFixture(t *testing.T, maxStored int) *fixture {
	return newFixtureWith(t, maxStored, nil, nil)
}

// newFixtureWith lets a test put its own sender in front of the recording
// sink, or its own log in front of the state machine.
func newFixtureWith(t *testing.T, maxStored int, wrap func(*sink) event.Sender, wrapLog func(*statetest.Log) mailbox.Proposer) *fixture {
	f := &fixture{t: t, log: statetest.New(), sink: &sink{got: map[djinn.Ref][]*djinnpb.RemoteEvent{}}, logs: new(logtest.Buffer)}
	f.state = statetest.Add(f.log.M, mailbox.NewState(f.log.M.Leases, mailbox.DefaultMaxStored, f.log.M.ServiceID))
	f.self = djinn.Ref{Endpoint: "127.0.0.1:4161", Service: f.log.M.ServiceID(), Object: djinn.ID{'m'}}
	f.lessor = lease.NewLessor(f.log.M.Leases, f.log, lease.Config{Slack: 10 * time.Second})
	var sender event.Sender = f.sink
	if wrap != nil {
		sender = wrap(f.sink)
	}
	var log mailbox.Proposer = f.log
	if wrapLog != nil {
		log = wrapLog(f.log)
	}
	svc, err := mailbox.New(f.state, f.lessor, log, time.Now, func() djinn.Ref { return f.self }, mailbox.Config{
		Lease:     lease.Policy{Default: time.Minute, Max: time.Hour},
		MaxStored: maxStored,
		Delivery:  event.Config{Sender: sender, MaxBatch: 8, MinBackoff: time.Second, MaxBackoff: 8 * time.Second},
		Logger:    slog.New(slog.NewTextHandler(f.logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); f.lessor.Run(ctx) }()
	go func() { defer wg.Done(); svc.Run(ctx) }()
	f.stop = func() { cancel(); wg.Wait() }
	synctest.Wait()
	return f
}

func (f *fixture) register(d time.Duration) mailbox.Registration {
	f.t.Helper()
	r, err := f.svc.Register(context.Background(), d)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

var source = &djinnpb.Ref{Endpoint: "127.0.0.1:9", ServiceId: make([]byte, 16), ObjectId: []byte("generator-object")}

func ev(id, seq int64) *djinnpb.RemoteEvent {
	return &djinnpb.RemoteEvent{Source: source, EventId: id, Sequence: seq, Handback: []byte("hb")}
}

func target(name string) (*djinnpb.Ref, djinn.Ref) {
	var obj djinn.ID
	copy(obj[:], name)
	r := djinn.Ref{Endpoint: "127.0.0.1:7777", Service: djinn.ID{'l', 's', 'n'}, Object: obj}
	return &djinnpb.Ref{Endpoint: r.Endpoint, ServiceId: r.Service[:], ObjectId: r.Object[:]}, r
}

func (f *fixture) notify(r mailbox.Registration, e *djinnpb.RemoteEvent) error {
	return f.svc.Notify(context.Background(), r.Listener.Object, e)
}

func TestRegisterArguments(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		ok   bool
		want time.Duration
	}{
		{"EM.3 a positive duration is granted (capped by policy)", 2 * time.Hour, true, time.Hour},
		{"EM.3 Any is allowed and gets the default", djinn.Any, true, time.Minute},
		{"EM.3 Forever is positive: accepted, capped by policy", djinn.Forever, true, time.Hour},
		{"EM.3 -2, next to Any, is an illegal argument", -2, false, 0},
		{"EM.3 zero is an illegal argument", 0, false, 0},
		{"EM.3 negative is an illegal argument", -time.Second, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, 100)
				defer f.stop()
				r, err := f.svc.Register(context.Background(), tt.d)
				if !tt.ok {
					if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), djinn.FormatDuration(tt.d)) {
						t.Fatalf("Register(%v) = %v, want invalid argument naming the value", tt.d, err)
					}
					return
				}
				if err != nil || time.Duration(r.Lease.DurationNanos) != tt.want {
					t.Fatalf("Register(%v) = %v, %v; want lease of %v", tt.d, r.Lease, err, tt.want)
				}
			})
		})
	}
}

func TestEachRegisterIsNew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 100)
		defer f.stop()
		a, b := f.register(time.Minute), f.register(time.Minute)
		if a.ID == b.ID || a.Listener.Equal(b.Listener) {
			t.Fatal("EM.3: two registrations share an id or listener")
		}
		again, err := f.svc.Get(context.Background(), a.ID)
		if err != nil || !again.Listener.Equal(a.Listener) {
			t.Fatalf("EM.4.1: getListener is not stable: %v %v", again.Listener, err)
		}
	})
}

func TestListenerValidOnlyWhileLeaseLives(t *testing.T) {
	for _, how := range []string{"expired", "cancelled"} {
		t.Run("EM.4.1 listener after the lease "+how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, 100)
				defer f.stop()
				r := f.register(time.Minute)
				if err := f.notify(r, ev(1, 1)); err != nil {
					t.Fatal(err)
				}
				if how == "expired" {
					time.Sleep(time.Minute)
					synctest.Wait()
				} else {
					var c djinn.ID
					copy(c[:], r.Lease.Cookie)
					if err := f.lessor.Cancel(context.Background(), []djinn.ID{c})[0]; err != nil {
						t.Fatal(err)
					}
				}
				if err := f.notify(r, ev(1, 2)); !errors.Is(err, djinn.ErrNoSuchObject) {
					t.Errorf("notify = %v, want NoSuchObject", err)
				}
				tp, _ := target("t")
				for name, err := range map[string]error{
					"get":     func() error { _, err := f.svc.Get(context.Background(), r.ID); return err }(),
					"enable":  f.svc.EnableDelivery(context.Background(), r.ID, tp),
					"disable": f.svc.DisableDelivery(context.Background(), r.ID),
					"ack":     f.svc.Ack(context.Background(), r.ID, 1),
				} {
					if !errors.Is(err, djinn.ErrNoSuchObject) {
						t.Errorf("EM.4: %s after the lease ended = %v, want NoSuchObject", name, err)
					}
				}
				if regs, events := f.state.Len(); regs != 0 || events != 0 {
					t.Errorf("%d registrations, %d events left", regs, events)
				}
			})
		})
	}
}

func TestOwnListenerRefusedAsTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 100)
		defer f.stop()
		a, b := f.register(time.Minute), f.register(time.Minute)
		for _, l := range []djinn.Ref{a.Listener, b.Listener} {
			p := &djinnpb.Ref{Endpoint: l.Endpoint, ServiceId: l.Service[:], ObjectId: l.Object[:]}
			if err := f.svc.EnableDelivery(context.Background(), a.ID, p); !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Errorf("EM.4.1: enabling a mailbox listener = %v, want invalid argument", err)
			}
		}
	})
}

func TestDeliveryInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		for i := int64(1); i <= 20; i++ {
			if err := f.notify(r, ev(1, i)); err != nil {
				t.Fatal(err)
			}
		}
		tp, tr := target("t")
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		for i := int64(21); i <= 30; i++ {
			if err := f.notify(r, ev(1, i)); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		got := f.sink.seqs(tr)
		if len(got) != 30 {
			t.Fatalf("delivered %d events, want 30", len(got))
		}
		for i, s := range got {
			if s != int64(i+1) {
				t.Fatalf("delivery out of arrival order: %v", got)
			}
		}
		if _, events := f.state.Len(); events != 0 {
			t.Fatalf("%d delivered events still stored", events)
		}
	})
}

func TestDisableStopsAndReenableResumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		tp, tr := target("t")
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.DisableDelivery(context.Background(), r.ID); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.DisableDelivery(context.Background(), r.ID); err != nil {
			t.Fatalf("EM.4.1: disabling when disabled must be fine: %v", err)
		}
		if err := f.notify(r, ev(1, 1)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if len(f.sink.seqs(tr)) != 0 {
			t.Fatal("EM.4.1: delivered while disabled")
		}
		// EM.4.1: enabling with a nil target is the same as disabling.
		if err := f.svc.EnableDelivery(context.Background(), r.ID, nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if len(f.sink.seqs(tr)) != 0 {
			t.Fatal("EM.4.1: enable(nil) delivered")
		}
		tp2, tr2 := target("u")
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp2); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := f.sink.seqs(tr2); len(got) != 1 {
			t.Fatalf("stored event not delivered to the new target: %v", got)
		}
	})
}

func TestUnknownEventList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		tp, tr := target("t")
		f.sink.answer = func(_ djinn.Ref, e *djinnpb.RemoteEvent) error {
			if e.EventId == 7 {
				return djinn.Errorf(djinn.UnknownEvent, "not interested in 7")
			}
			return nil
		}
		for i := int64(1); i <= 3; i++ {
			if err := f.notify(r, ev(7, i)); err != nil {
				t.Fatal(err)
			}
			if err := f.notify(r, ev(8, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var ids []int64
		f.sink.mu.Lock()
		for _, e := range f.sink.got[tr] {
			ids = append(ids, e.EventId)
		}
		f.sink.mu.Unlock()
		for _, id := range ids {
			if id == 7 {
				t.Fatal("EM.4.1: a stored event on the unknown list was delivered")
			}
		}
		if len(ids) != 3 {
			t.Fatalf("delivered %v, want the three id-8 events", ids)
		}
		// EM.4.1: generators now get UnknownEvent for (source, 7).
		if err := f.notify(r, ev(7, 4)); !errors.Is(err, djinn.ErrUnknownEvent) {
			t.Fatalf("notify of an unknown kind = %v, want UnknownEvent", err)
		}
		if err := f.notify(r, ev(8, 4)); err != nil {
			t.Fatalf("other kinds are still accepted: %v", err)
		}
		// EM.4.1: re-enabling clears the list.
		f.sink.mu.Lock()
		f.sink.answer = nil
		f.sink.mu.Unlock()
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		if err := f.notify(r, ev(7, 5)); err != nil {
			t.Fatalf("after re-enable, notify of id 7 = %v", err)
		}
	})
}

func TestDefiniteFailureDisablesDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		tp, _ := target("t")
		f.sink.answer = func(djinn.Ref, *djinnpb.RemoteEvent) error {
			return djinn.Errorf(djinn.NoSuchObject, "listener gone")
		}
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		if err := f.notify(r, ev(1, 1)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		got, err := f.svc.Get(context.Background(), r.ID)
		if err != nil || got.Target != nil {
			t.Fatalf("EM.4.1: delivery still enabled after a definite failure: %v %v", got.Target, err)
		}
		if got.Stored != 1 {
			t.Fatalf("the undelivered event was lost: %d stored", got.Stored)
		}
		// The log names the registration by its fingerprint, as the
		// console does: its id is the capability to its events.
		logs := f.logs.String()
		if !strings.Contains(logs, "disabled by a definite failure") || !strings.Contains(logs, wire.Fingerprint(r.ID)) {
			t.Errorf("the log does not name the registration by its fingerprint %s: %s", wire.Fingerprint(r.ID), logs)
		}
		if strings.Contains(logs, r.ID.String()) {
			t.Errorf("the log holds the registration's id, a capability: %s", logs)
		}
	})
}

func TestIndefiniteFailureRetriesWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		tp, tr := target("t")
		fails := 3
		f.sink.answer = func(djinn.Ref, *djinnpb.RemoteEvent) error {
			if fails > 0 {
				fails--
				return djinn.Errorf(djinn.Unavailable, "connection refused")
			}
			return nil
		}
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		if err := f.notify(r, ev(1, 1)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if len(f.sink.seqs(tr)) != 0 {
			t.Fatal("delivered despite failures")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := f.sink.seqs(tr); len(got) != 1 {
			t.Fatalf("not delivered after retries: %v", got)
		}
		f.sink.mu.Lock()
		calls := f.sink.calls
		f.sink.mu.Unlock()
		if calls != 4 {
			t.Fatalf("%d send attempts, want 4 (3 failures with backoff, then success)", calls)
		}
	})
}

func TestStoredEventBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 3)
		defer f.stop()
		r := f.register(time.Hour)
		for i := int64(1); i <= 3; i++ {
			if err := f.notify(r, ev(1, i)); err != nil {
				t.Fatal(err)
			}
		}
		err := f.notify(r, ev(1, 4))
		if !errors.Is(err, djinn.ErrResourceExhausted) || !strings.Contains(err.Error(), "3") {
			t.Fatalf("notify beyond the bound = %v, want resource exhausted naming the bound", err)
		}
		if n := f.svc.RefusedFull.Load(); n != 1 {
			t.Fatalf("%d refusals counted, want 1", n)
		}
	})
}

func TestBadEventsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 3)
		defer f.stop()
		r := f.register(time.Hour)
		big := ev(1, 1)
		big.Handback = make([]byte, mailbox.DefaultMaxEventBytes+1)
		for name, e := range map[string]*djinnpb.RemoteEvent{
			"nil event":    nil,
			"no source":    {EventId: 1},
			"short source": {Source: &djinnpb.Ref{ServiceId: []byte{1}, ObjectId: []byte{2}}},
			"zero source":  {Source: &djinnpb.Ref{ServiceId: make([]byte, 16), ObjectId: make([]byte, 16)}},
			"too large":    big,
		} {
			if err := f.notify(r, e); !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Errorf("%s: %v, want invalid argument", name, err)
			}
		}
	})
}

func TestPullAndAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		for i := int64(1); i <= 5; i++ {
			if err := f.notify(r, ev(1, i)); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan mailbox.Stored, 100)
		done := make(chan error)
		go func() {
			done <- f.svc.Pull(ctx, r.ID, 2, 2, func(b []mailbox.Stored) error {
				for _, s := range b {
					got <- s
				}
				return nil
			})
		}()
		synctest.Wait()
		if err := f.notify(r, ev(1, 6)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("pull ended with %v", err)
		}
		close(got)
		var idx []uint64
		for s := range got {
			idx = append(idx, s.Index)
		}
		if len(idx) != 4 || idx[0] != 3 || idx[3] != 6 {
			t.Fatalf("pulled indexes %v, want 3..6 (resume after 2, then the new one)", idx)
		}
		if err := f.svc.Ack(context.Background(), r.ID, 4); err != nil {
			t.Fatal(err)
		}
		if g, _ := f.svc.Get(context.Background(), r.ID); g.Stored != 2 {
			t.Fatalf("after ack through 4: %d stored, want 2", g.Stored)
		}
		if err := f.svc.AddUnknownEvents(context.Background(), r.ID, []*djinnpb.EventKey{{Source: source, EventId: 1}}); err != nil {
			t.Fatal(err)
		}
		if g, _ := f.svc.Get(context.Background(), r.ID); g.Stored != 0 || len(g.Unknown) != 1 {
			t.Fatalf("after add unknown: %d stored, %d unknown", g.Stored, len(g.Unknown))
		}
	})
}

// TestOtherPrincipalsSeeNothing: DESIGN.md 7 — a registration belongs to
// the principal that made it; to any other it does not exist. Event
// generators, whoever they are, may still notify its listener.
func TestOtherPrincipalsSeeNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 100)
		defer f.stop()
		alice := principal.With(context.Background(), "cn:alice")
		bob := principal.With(context.Background(), "cn:bob")
		r, err := f.svc.Register(alice, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Get(alice, r.ID); err != nil {
			t.Fatalf("owner cannot read its registration: %v", err)
		}
		tp, _ := target("t")
		for name, err := range map[string]error{
			"get":       func() error { _, err := f.svc.Get(bob, r.ID); return err }(),
			"anonymous": func() error { _, err := f.svc.Get(context.Background(), r.ID); return err }(),
			"enable":    f.svc.EnableDelivery(bob, r.ID, tp),
			"disable":   f.svc.DisableDelivery(bob, r.ID),
			"ack":       f.svc.Ack(bob, r.ID, 1),
		} {
			if !errors.Is(err, djinn.ErrNoSuchObject) {
				t.Errorf("%s by another principal = %v, want NoSuchObject", name, err)
			}
		}
		if err := f.svc.Notify(bob, r.Listener.Object, ev(1, 1)); err != nil {
			t.Errorf("a generator of another principal cannot notify the listener: %v", err)
		}
	})
}
