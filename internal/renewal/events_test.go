package renewal_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/logtest"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// failNow makes the set raise a renewal failure event at once: a lease
// whose actual expiration is past and before its desired one is dropped
// with an event (LR.2).
func (f *fixture) failNow(st renewal.Set, ll *landlord) djinn.ID {
	f.t.Helper()
	l, c := ll.grantAbs(time.Now().Add(-time.Second))
	f.mustRenewFor(st, l, time.Hour, time.Minute)
	synctest.Wait()
	return c
}

func wantSource(t *testing.T, f *fixture, st renewal.Set, src *djinnpb.Ref) {
	t.Helper()
	if djinn.ID(src.GetServiceId()) != f.self.Service || djinn.ID(src.GetObjectId()) != st.Info.ID || src.GetEndpoint() != f.self.Endpoint {
		t.Fatalf("source %v, want the set %v", src, st.Ref)
	}
}

// TestListenRules: the argument rules of the set/clear listener methods,
// one row per rule.
func TestListenRules(t *testing.T) {
	tpb, _ := target("lis")
	for _, tc := range []struct {
		name       string
		eventID    int64
		target     *djinnpb.Ref
		minWarning time.Duration
		clear      bool
		wantErr    djinn.Kind
	}{
		{name: "LR.2.1 setRenewalFailureListener: a null listener is refused (NullPointerException)", eventID: renewal.FailureEventID, wantErr: djinn.InvalidArgument},
		{name: "LR.2.1 setExpirationWarningListener: a null listener is refused (NullPointerException)", eventID: renewal.WarningEventID, wantErr: djinn.InvalidArgument},
		{name: "LR.2.1 setExpirationWarningListener: a negative minWarning is refused", eventID: renewal.WarningEventID, target: tpb, minWarning: -time.Millisecond, wantErr: djinn.InvalidArgument},
		{name: "LR.2.1 setExpirationWarningListener: minWarning Any (-1) is refused", eventID: renewal.WarningEventID, target: tpb, minWarning: djinn.Any, wantErr: djinn.InvalidArgument},
		{name: "LR.2.1 setExpirationWarningListener: a zero minWarning is accepted", eventID: renewal.WarningEventID, target: tpb},
		{name: "LR.2.1 setExpirationWarningListener: a positive minWarning is accepted", eventID: renewal.WarningEventID, target: tpb, minWarning: time.Minute},
		{name: "LR.2.1 setRenewalFailureListener: a listener is accepted", eventID: renewal.FailureEventID, target: tpb},
		{name: "LR.2.1 clearRenewalFailureListener: fine with no registration", eventID: renewal.FailureEventID, clear: true},
		{name: "LR.2.1 clearExpirationWarningListener: fine with no registration", eventID: renewal.WarningEventID, clear: true},
		{name: "LR.2 event ids: only RENEWAL_FAILURE_EVENT_ID (0) and EXPIRATION_WARNING_EVENT_ID (1) exist", eventID: 2, target: tpb, wantErr: djinn.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, renewal.Config{})
				defer f.stop()
				st := f.create(time.Hour)
				ctx := context.Background()
				if tc.clear {
					wantKind(t, f.svc.Clear(ctx, st.Info.ID, tc.eventID), tc.wantErr)
					if f.info(st).Listeners[tc.eventID].Target != nil {
						t.Fatal("a registration after clear")
					}
					return
				}
				reg, err := f.svc.Listen(ctx, st.Info.ID, tc.eventID, tc.target, tc.minWarning, []byte("hb"))
				wantKind(t, err, tc.wantErr)
				if err != nil {
					for eid, l := range f.info(st).Listeners {
						if l.Target != nil {
							t.Fatalf("a refused listener was registered for event id %d", eid)
						}
					}
					return
				}
				// LR.2.1: the registration's event id, source (the set),
				// lease (equal to the set's) and sequence number (the last
				// one used: none yet).
				if reg.GetEventId() != tc.eventID {
					t.Fatalf("registration event id %d, want %d", reg.GetEventId(), tc.eventID)
				}
				wantSource(t, f, st, reg.GetSource())
				if cookieOf(reg.GetLease()) != st.Info.Cookie ||
					djinn.ID(reg.GetLease().GetLandlord().GetServiceId()) != djinn.ID(st.Lease.GetLandlord().GetServiceId()) ||
					djinn.ID(reg.GetLease().GetLandlord().GetObjectId()) != djinn.ID(st.Lease.GetLandlord().GetObjectId()) {
					t.Fatalf("registration lease %v, want the set's %v", reg.GetLease(), st.Lease)
				}
				if reg.GetSequence() != 0 {
					t.Fatalf("registration sequence %d, want 0", reg.GetSequence())
				}
				in := f.info(st).Listeners[tc.eventID]
				if in.Target == nil || in.MinWarning != tc.minWarning || string(in.Handback) != "hb" {
					t.Fatalf("registration recorded as %+v", in)
				}
			})
		})
	}
}

// TestFailureEvents: LR.2.1: renewal failure events carry event id 0, the
// set as source, the handback, the lease and strictly increasing sequence
// numbers.
func TestFailureEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Hour)
		st := f.create(time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		var cookies []djinn.ID
		for range 5 {
			cookies = append(cookies, f.failNow(st, ll))
		}
		evs := f.listener.events(fail)
		if len(evs) != len(cookies) {
			t.Fatalf("%d failure events, want %d", len(evs), len(cookies))
		}
		for i, ev := range evs {
			if ev.GetEventId() != renewal.FailureEventID {
				t.Fatalf("event id %d, want RENEWAL_FAILURE_EVENT_ID (0)", ev.GetEventId())
			}
			wantSource(t, f, st, ev.GetSource())
			if string(ev.GetHandback()) != "hb-fail" {
				t.Fatalf("handback %q", ev.GetHandback())
			}
			if ev.GetSequence() != int64(i+1) {
				t.Fatalf("event %d has sequence %d, want %d", i, ev.GetSequence(), i+1)
			}
			if c := cookieOf(failureOf(t, ev).GetLease()); c != cookies[i] {
				t.Fatalf("event %d for lease %s, want %s", i, c, cookies[i])
			}
		}
		if p := f.info(st).Listeners[renewal.FailureEventID].Pending; p != 0 {
			t.Fatalf("%d events still pending after delivery", p)
		}
	})
}

// TestSequenceAcrossReplacement: LR.2.1: sequence numbers are per set and
// event id, continue across listener replacement and clears, and a
// registration returns the last one used.
func TestSequenceAcrossReplacement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Hour)
		st := f.create(time.Hour)
		other := f.create(time.Hour)
		_, a := f.listen(st, renewal.FailureEventID, "a", 0)
		_, x := f.listen(other, renewal.FailureEventID, "x", 0)
		f.failNow(st, ll)
		f.failNow(st, ll)
		f.failNow(other, ll)
		regB, b := f.listen(st, renewal.FailureEventID, "b", 0)
		if regB.GetSequence() != 2 {
			t.Fatalf("replacing registration returned sequence %d, want 2 (the last used)", regB.GetSequence())
		}
		f.failNow(st, ll)
		if err := f.svc.Clear(context.Background(), st.Info.ID, renewal.FailureEventID); err != nil {
			t.Fatal(err)
		}
		f.failNow(st, ll) // no registration: its sequence number is used all the same
		regC, c := f.listen(st, renewal.FailureEventID, "c", 0)
		if regC.GetSequence() != 4 {
			t.Fatalf("registration after clear returned sequence %d, want 4", regC.GetSequence())
		}
		f.failNow(st, ll)
		_, w := f.listen(st, renewal.WarningEventID, "w", time.Hour)
		synctest.Wait()

		seqs := func(r djinn.Ref) []int64 {
			var out []int64
			for _, ev := range f.listener.events(r) {
				out = append(out, ev.GetSequence())
			}
			return out
		}
		for _, tc := range []struct {
			name string
			ref  djinn.Ref
			want []int64
		}{
			{"first listener", a, []int64{1, 2}},
			{"replacement", b, []int64{3}},
			{"after clear", c, []int64{5}},
			{"another set's own numbers", x, []int64{1}},
			{"the warning event id's own numbers", w, []int64{1}},
		} {
			if got := seqs(tc.ref); !equalSeqs(got, tc.want) {
				t.Errorf("%s got sequence numbers %v, want %v", tc.name, got, tc.want)
			}
		}
	})
}

func equalSeqs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDefiniteDeliveryFailure: LR.2.1: a listener that throws
// UnknownEventException (or another definite exception) loses only that
// registration: the other kind's registration and the set's lease stay.
func TestDefiniteDeliveryFailure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		failing int64
		err     djinn.Kind
	}{
		{"LR.2.1 UnknownEvent from the failure listener clears only that registration", renewal.FailureEventID, djinn.UnknownEvent},
		{"LR.2.1 UnknownEvent from the warning listener clears only that registration", renewal.WarningEventID, djinn.UnknownEvent},
		{"LR.2.1 a bad object exception (NoSuchObject) from the failure listener clears only that registration", renewal.FailureEventID, djinn.NoSuchObject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs := new(logtest.Buffer)
				f := newFixture(t, renewal.Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
				defer f.stop()
				ll := f.landlord(time.Hour)
				st := f.create(10 * time.Minute)
				_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
				_, warn := f.listen(st, renewal.WarningEventID, "warn", time.Minute)
				bad := map[int64]djinn.Ref{renewal.FailureEventID: fail, renewal.WarningEventID: warn}[tc.failing]
				good := map[int64]djinn.Ref{renewal.FailureEventID: warn, renewal.WarningEventID: fail}[tc.failing]
				f.listener.setAnswer(func(to djinn.Ref, _ *djinnpb.RemoteEvent) error {
					if to == bad {
						return djinn.Errorf(tc.err, "not interested")
					}
					return nil
				})
				// Raise one event of each kind: a failure now, a warning
				// shortly before the set lease expires.
				f.failNow(st, ll)
				advance(9*time.Minute + time.Second)
				in := f.info(st)
				if in.Listeners[tc.failing].Target != nil {
					t.Fatalf("registration for event id %d kept after %s", tc.failing, tc.err)
				}
				if in.Listeners[1-tc.failing].Target == nil {
					t.Fatal("the other registration was cleared too")
				}
				if _, err := f.svc.Get(context.Background(), st.Info.ID); err != nil {
					t.Fatalf("the set is gone: %v", err)
				}
				if _, ok := f.lessor.Table().Lookup(st.Info.Cookie, time.Now()); !ok {
					t.Fatal("the set lease was cancelled")
				}
				if got := f.listener.events(good); len(got) != 1 {
					t.Fatalf("the good listener got %d events, want 1", len(got))
				}
				sends := f.listener.sendsTo(bad)
				if sends == 0 {
					t.Fatal("the failing listener was never sent to")
				}
				// Nothing more goes to the cleared registration.
				f.failNow(st, ll)
				if _, err := f.lessor.Renew(context.Background(), st.Info.Cookie, 10*time.Minute); err != nil {
					t.Fatal(err)
				}
				advance(9*time.Minute + time.Second)
				if got := f.listener.sendsTo(bad); got != sends {
					t.Fatalf("the cleared registration's listener got %d more sends", got-sends)
				}
				if got := f.listener.events(good); len(got) != 2 {
					t.Fatalf("the good listener got %d events, want 2", len(got))
				}
				// The log names the set by its fingerprint, as the console
				// does: its id is the capability to the set.
				text := logs.String()
				if !strings.Contains(text, "cleared by a definite delivery failure") || !strings.Contains(text, wire.Fingerprint(st.Info.ID)) {
					t.Errorf("the log does not name the set by its fingerprint %s: %s", wire.Fingerprint(st.Info.ID), text)
				}
				if strings.Contains(text, st.Info.ID.String()) {
					t.Errorf("the log holds the set's id, a capability: %s", text)
				}
			})
		})
	}
}

// TestIndefiniteDeliveryFailure: LR.2.1: indefinite delivery failures are
// retried; the registration stays.
func TestIndefiniteDeliveryFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Hour)
		st := f.create(time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		refused := 0
		f.listener.setAnswer(func(djinn.Ref, *djinnpb.RemoteEvent) error {
			if refused < 4 {
				refused++
				return djinn.Errorf(djinn.Unavailable, "listener unreachable")
			}
			return nil
		})
		f.failNow(st, ll)
		f.failNow(st, ll)
		if got := f.info(st).Listeners[renewal.FailureEventID].Pending; got != 2 {
			t.Fatalf("%d events pending while the listener is unreachable, want 2", got)
		}
		advance(time.Minute)
		evs := f.listener.events(fail)
		if len(evs) != 2 || evs[0].GetSequence() != 1 || evs[1].GetSequence() != 2 {
			t.Fatalf("delivered %v, want sequence numbers 1 and 2", evs)
		}
		in := f.info(st).Listeners[renewal.FailureEventID]
		if in.Target == nil || in.Pending != 0 {
			t.Fatalf("registration after retried delivery: %+v", in)
		}
	})
}

// TestExpirationWarning: LR.2.1: the warning comes at least minWarning
// before the set lease expires, once per expiration, and again when the
// client has renewed the set lease and the new expiration approaches.
func TestExpirationWarning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const minWarning = 2 * time.Minute
		poll := 250 * time.Millisecond // the default WarnPoll
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		st := f.create(10 * time.Minute)
		exp := time.Now().Add(10 * time.Minute)
		_, warn := f.listen(st, renewal.WarningEventID, "warn", minWarning)
		advance(time.Until(exp.Add(-minWarning-poll)) - time.Millisecond)
		if evs := f.listener.events(warn); len(evs) != 0 {
			t.Fatalf("warning %v more than minWarning plus a poll early", evs)
		}
		advance(time.Until(exp.Add(-minWarning)))
		evs := f.listener.events(warn)
		if len(evs) != 1 {
			t.Fatalf("%d warnings at minWarning before expiration, want 1", len(evs))
		}
		checkWarning(t, f, st, evs[0], 1, exp)
		at := f.listener.arrivals(warn)[0]
		if at.After(exp.Add(-minWarning)) || at.Before(exp.Add(-minWarning-poll)) {
			t.Fatalf("warning at %v, want between %v and %v", at, exp.Add(-minWarning-poll), exp.Add(-minWarning))
		}
		advance(time.Minute)
		if evs := f.listener.events(warn); len(evs) != 1 {
			t.Fatalf("%d warnings for one expiration, want 1", len(evs))
		}
		// The client renews the set's lease: a new warning before the new
		// expiration.
		if _, err := f.lessor.Renew(context.Background(), st.Info.Cookie, 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		exp2 := time.Now().Add(10 * time.Minute)
		advance(time.Until(exp2.Add(-minWarning-poll)) - time.Millisecond)
		if evs := f.listener.events(warn); len(evs) != 1 {
			t.Fatalf("%d warnings before the renewed expiration approached, want 1", len(evs))
		}
		advance(time.Until(exp2.Add(-minWarning)))
		evs = f.listener.events(warn)
		if len(evs) != 2 {
			t.Fatalf("%d warnings after the renewed expiration approached, want 2", len(evs))
		}
		checkWarning(t, f, st, evs[1], 2, exp2)
	})
}

func checkWarning(t *testing.T, f *fixture, st renewal.Set, ev *djinnpb.RemoteEvent, seq int64, exp time.Time) {
	t.Helper()
	if ev.GetEventId() != renewal.WarningEventID || ev.GetSequence() != seq || string(ev.GetHandback()) != "hb-warn" {
		t.Fatalf("warning event id %d sequence %d handback %q, want 1, %d, hb-warn", ev.GetEventId(), ev.GetSequence(), ev.GetHandback(), seq)
	}
	wantSource(t, f, st, ev.GetSource())
	sl := warningOf(t, ev).GetSetLease()
	if cookieOf(sl) != st.Info.Cookie || sl.GetExpirationUnixNanos() != exp.UnixNano() {
		t.Fatalf("warning's set lease %v, want cookie %s expiring %v", sl, st.Info.Cookie, exp)
	}
}

// TestExpirationWarningAtOnce: LR.2.1: if the set's lease expires in less
// than minWarning, the warning comes at once.
func TestExpirationWarningAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		st := f.create(time.Minute)
		exp := time.Now().Add(time.Minute)
		advance(10 * time.Second)
		now := time.Now()
		_, warn := f.listen(st, renewal.WarningEventID, "warn", 5*time.Minute)
		synctest.Wait()
		evs := f.listener.events(warn)
		if len(evs) != 1 {
			t.Fatalf("%d warnings, want 1 at once", len(evs))
		}
		if at := f.listener.arrivals(warn)[0]; !at.Equal(now) {
			t.Fatalf("warning at %v, want at once (%v)", at, now)
		}
		checkWarning(t, f, st, evs[0], 1, exp)
	})
}

// TestSetDestroyedWithEventsPending: LR.2/LR.2.1: when the set's lease
// ends, its undelivered events are dropped and nothing more is sent.
func TestSetDestroyedWithEventsPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Hour)
		st := f.create(2 * time.Minute)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		_, warn := f.listen(st, renewal.WarningEventID, "warn", time.Minute)
		f.listener.setAnswer(func(djinn.Ref, *djinnpb.RemoteEvent) error {
			return djinn.Errorf(djinn.Unavailable, "listener unreachable")
		})
		f.failNow(st, ll)
		f.failNow(st, ll)
		advance(90 * time.Second)
		in := f.info(st)
		if in.Listeners[renewal.FailureEventID].Pending != 2 || in.Listeners[renewal.WarningEventID].Pending != 1 {
			t.Fatalf("pending events %+v, want 2 failures and 1 warning", in.Listeners)
		}
		advance(time.Minute)
		if sets, _ := f.svc.Len(); sets != 0 {
			t.Fatal("the set outlived its lease")
		}
		sf, sw := f.listener.sendsTo(fail), f.listener.sendsTo(warn)
		if sf == 0 || sw == 0 {
			t.Fatalf("sends %d and %d: delivery was never tried", sf, sw)
		}
		f.listener.setAnswer(nil)
		advance(5 * time.Minute)
		if f.listener.sendsTo(fail) != sf || f.listener.sendsTo(warn) != sw {
			t.Fatalf("sends went on after the set was destroyed: %d→%d, %d→%d", sf, f.listener.sendsTo(fail), sw, f.listener.sendsTo(warn))
		}
		if q := f.svc.DeliveryStats().Queues; q != 0 {
			t.Fatalf("%d delivery queues left", q)
		}
	})
}

// TestClearStopsEvents: LR.2.1 clear: a cleared registration gets no more
// events; sequence numbers are used all the same.
func TestClearStopsEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Hour)
		st := f.create(10 * time.Minute)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		_, warn := f.listen(st, renewal.WarningEventID, "warn", time.Minute)
		for _, eid := range []int64{renewal.FailureEventID, renewal.WarningEventID} {
			if err := f.svc.Clear(context.Background(), st.Info.ID, eid); err != nil {
				t.Fatal(err)
			}
		}
		f.failNow(st, ll)
		advance(9*time.Minute + time.Second)
		if n, m := f.listener.sendsTo(fail), f.listener.sendsTo(warn); n != 0 || m != 0 {
			t.Fatalf("cleared registrations got %d and %d sends", n, m)
		}
		reg, _ := f.listen(st, renewal.FailureEventID, "fail", 0)
		if reg.GetSequence() != 1 {
			t.Fatalf("registration after an event raised without one returned sequence %d, want 1", reg.GetSequence())
		}
	})
}
