package renewal_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestRequestedDurations: what the service asks landlords for (LR.2): the
// renewal duration, unless the remaining desired duration is shorter; Any
// as is when desired is Forever and the renewal duration Any.
func TestRequestedDurations(t *testing.T) {
	for _, tc := range []struct {
		name           string
		desired, renew time.Duration
		max            time.Duration // the landlord's longest grant
		run            time.Duration
	}{
		{"LR.2 requested duration: the renewal duration while the remaining desired duration is longer, then what remains", 150 * time.Second, time.Minute, time.Hour, 3 * time.Minute},
		{"LR.2 requested duration: the remaining desired duration when the renewal duration is Forever (two-argument form)", 10 * time.Minute, djinn.Forever, 2 * time.Minute, 11 * time.Minute},
		{"LR.2 requested duration: the renewal duration when desired is Forever", djinn.Forever, 30 * time.Second, time.Hour, 3 * time.Minute},
		{"LR.2 requested duration: Any is asked as Any when desired is Forever and renew is Any", djinn.Forever, djinn.Any, 20 * time.Second, 3 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Renewals only: probes (which ask for the time left)
				// have their own tests.
				f := newFixture(t, renewal.Config{Probe: -1})
				defer f.stop()
				ll := f.landlord(tc.max)
				st := f.create(time.Hour)
				_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
				l, c := ll.grant(30 * time.Second)
				added := time.Now()
				f.mustRenewFor(st, l, tc.desired, tc.renew)
				desired := djinn.AddDuration(added, tc.desired)
				advance(tc.run)
				_, lapsed, asked, at := ll.stats()
				if len(asked) < 2 {
					t.Fatalf("asked %v: want at least two renewals", asked)
				}
				for i, a := range asked {
					want := tc.renew
					if tc.renew != djinn.Any && desired.Before(djinn.EndOfTime) {
						want = min(tc.renew, desired.Sub(at[i]))
					}
					if a != want {
						t.Fatalf("renewal %d at +%v asked %v, want %v (all: %v)", i, at[i].Sub(added), a, want, asked)
					}
				}
				if lapsed != 0 {
					t.Fatalf("%d renewals came after the lease had lapsed", lapsed)
				}
				if evs := f.listener.events(fail); len(evs) != 0 {
					t.Fatalf("failure events %v", evs)
				}
				inSet := f.leaseOf(st, c) != nil
				if wantIn := time.Now().Before(desired); inSet != wantIn {
					t.Fatalf("lease in set %v at +%v, want %v (desired +%v)", inSet, time.Since(added), wantIn, tc.desired)
				}
			})
		})
	}
}

// TestBeyondDesiredNotRenewed: LR.2: a lease whose actual expiration is
// later than its desired one is not renewed; it stays until its desired
// expiration and then leaves with no event, and is not cancelled.
func TestBeyondDesiredNotRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Hour)
		st := f.create(time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		l, c := ll.grant(10 * time.Minute)
		f.mustRenewFor(st, l, 5*time.Minute, time.Minute)
		advance(5*time.Minute - time.Millisecond)
		if f.leaseOf(st, c) == nil {
			t.Fatal("lease left before its desired expiration")
		}
		advance(time.Millisecond)
		if f.leaseOf(st, c) != nil {
			t.Fatal("lease still in the set at its desired expiration")
		}
		if calls, _, _, _ := ll.stats(); calls != 0 {
			t.Fatalf("%d renewal calls for a lease already beyond its desired expiration", calls)
		}
		if evs := f.listener.events(fail); len(evs) != 0 {
			t.Fatalf("failure events %v", evs)
		}
		if !ll.holds(c) {
			t.Fatal("lease cancelled at its landlord")
		}
	})
}

// TestSetDestroyed: LR.2: when the set's lease expires or is cancelled the
// set is destroyed: its leases are no longer renewed, nor cancelled, and
// every operation on the set fails with NoSuchObject.
func TestSetDestroyed(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(f *fixture, st renewal.Set)
	}{
		{"LR.2 removal: the set's lease expires", func(f *fixture, st renewal.Set) { advance(2 * time.Minute) }},
		{"LR.2 removal: the set's lease is cancelled", func(f *fixture, st renewal.Set) {
			advance(30 * time.Second)
			if errs := f.lessor.Cancel(context.Background(), []djinn.ID{st.Info.Cookie}); errs[0] != nil {
				f.t.Fatalf("cancel the set lease: %v", errs[0])
			}
			synctest.Wait()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, renewal.Config{})
				defer f.stop()
				ll := f.landlord(10 * time.Second)
				st := f.create(time.Minute)
				_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
				var cookies []djinn.ID
				var leases []*djinnpb.Lease
				for range 3 {
					l, c := ll.grant(10 * time.Second)
					f.mustRenewFor(st, l, djinn.Forever, time.Minute)
					cookies, leases = append(cookies, c), append(leases, l)
				}
				tc.end(f, st)
				if _, n := f.svc.Len(); n != 0 {
					t.Fatalf("%d client leases left after the set was destroyed", n)
				}
				calls, _, _, _ := ll.stats()
				if calls == 0 {
					t.Fatal("leases were never renewed while the set lived")
				}
				advance(time.Minute)
				if after, _, _, _ := ll.stats(); after != calls {
					t.Fatalf("renewal calls went on after the set was destroyed: %d, then %d", calls, after)
				}
				for _, c := range cookies {
					if !ll.holds(c) {
						t.Fatalf("lease %s cancelled at its landlord", c)
					}
				}
				if evs := f.listener.events(fail); len(evs) != 0 {
					t.Fatalf("failure events %v for leases of a destroyed set", evs)
				}
				ctx := context.Background()
				id := st.Info.ID
				tpb, _ := target("other")
				for name, err := range map[string]error{
					"get":                          func() error { _, err := f.svc.Get(ctx, id); return err }(),
					"renewFor":                     f.svc.RenewFor(ctx, id, leases[0], time.Hour, time.Minute),
					"remove":                       func() error { _, err := f.svc.Remove(ctx, id, leases[0]); return err }(),
					"getLeases":                    func() error { _, err := f.svc.Leases(ctx, id); return err }(),
					"setRenewalFailureListener":    func() error { _, err := f.svc.Listen(ctx, id, renewal.FailureEventID, tpb, 0, nil); return err }(),
					"setExpirationWarningListener": func() error { _, err := f.svc.Listen(ctx, id, renewal.WarningEventID, tpb, 0, nil); return err }(),
					"clearRenewalFailureListener":  f.svc.Clear(ctx, id, renewal.FailureEventID),
					"clearExpirationWarning":       f.svc.Clear(ctx, id, renewal.WarningEventID),
				} {
					if djinn.KindOf(err) != djinn.NoSuchObject {
						t.Errorf("%s on a destroyed set: %v, want NoSuchObject", name, err)
					}
				}
			})
		})
	}
}

// TestRemove: LR.2 remove: returns the lease with its last recorded
// expiration, does not cancel it, stops its renewal; removing it again
// returns null.
func TestRemove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(30 * time.Second)
		st := f.create(time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		l, c := ll.grant(30 * time.Second)
		f.mustRenewFor(st, l, djinn.Forever, time.Minute)
		advance(45 * time.Second)
		calls, _, _, _ := ll.stats()
		if calls == 0 {
			t.Fatal("not renewed yet")
		}
		got, err := f.svc.Remove(context.Background(), st.Info.ID, l)
		if err != nil {
			t.Fatal(err)
		}
		if cookieOf(got) != c {
			t.Fatalf("removed %v, want lease %s", got, c)
		}
		if exp := time.Now().Add(time.Duration(got.GetDurationNanos())); !exp.Equal(ll.expiration(c)) {
			t.Fatalf("removed lease expires %v, want the last renewal's %v", exp, ll.expiration(c))
		}
		if got.GetFormat() != l.GetFormat() {
			t.Fatalf("removed lease in format %v, want %v", got.GetFormat(), l.GetFormat())
		}
		again, err := f.svc.Remove(context.Background(), st.Info.ID, l)
		if err != nil || again != nil {
			t.Fatalf("second remove: %v, %v; want null", again, err)
		}
		if ls := f.leases(st); len(ls) != 0 {
			t.Fatalf("leases after remove: %v", ls)
		}
		advance(5 * time.Minute)
		if after, _, _, _ := ll.stats(); after != calls {
			t.Fatalf("removed lease renewed: %d calls, then %d", calls, after)
		}
		if !ll.holds(c) {
			t.Fatal("removed lease cancelled at its landlord")
		}
		if evs := f.listener.events(fail); len(evs) != 0 {
			t.Fatalf("failure events %v for a removed lease", evs)
		}
		// A lease that was never in the set: null.
		other, _ := ll.grant(time.Minute)
		if got, err := f.svc.Remove(context.Background(), st.Info.ID, other); err != nil || got != nil {
			t.Fatalf("remove of a lease not in the set: %v, %v", got, err)
		}
		if _, err := f.svc.Remove(context.Background(), st.Info.ID, nil); djinn.KindOf(err) != djinn.InvalidArgument {
			t.Fatalf("remove of a null lease: %v", err)
		}
	})
}

// TestRemoveDuringRenewal: LR.2 remove: the call is not blocked by a
// renewal in progress; the outcome of that renewal does not put the lease
// back.
func TestRemoveDuringRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Minute)
		st := f.create(time.Hour)
		l, c := ll.grant(30 * time.Second)
		f.mustRenewFor(st, l, djinn.Forever, time.Minute)
		release := ll.Hold()
		advance(21 * time.Second) // the renewal is taken at 19s and times out at 24.5s
		if waiting := ll.Waiting(); waiting != 1 {
			t.Fatalf("%d renewal calls in progress, want 1", waiting)
		}
		done := make(chan struct{})
		var removed *djinnpb.Lease
		var err error
		go func() {
			defer close(done)
			removed, err = f.svc.Remove(context.Background(), st.Info.ID, l)
		}()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("remove blocked by the renewal in progress")
		}
		if err != nil || cookieOf(removed) != c {
			t.Fatalf("remove: %v, %v", removed, err)
		}
		release()
		synctest.Wait()
		if ls := f.leases(st); len(ls) != 0 {
			t.Fatalf("the renewal in progress put the removed lease back: %v", ls)
		}
		calls, _, _, _ := ll.stats()
		advance(5 * time.Minute)
		if after, _, _, _ := ll.stats(); after != calls {
			t.Fatalf("removed lease renewed again: %d calls, then %d", calls, after)
		}
	})
}

// TestDesiredReached: LR.2 removal: a lease leaves its set when its desired
// expiration arrives, with no event and without being cancelled.
func TestDesiredReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(20 * time.Second)
		st := f.create(time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		l, c := ll.grant(20 * time.Second)
		f.mustRenewFor(st, l, 100*time.Second, time.Minute)
		desired := time.Now().Add(100 * time.Second)
		advance(100*time.Second - time.Millisecond)
		if f.leaseOf(st, c) == nil {
			t.Fatal("lease left before its desired expiration")
		}
		advance(time.Millisecond)
		if f.leaseOf(st, c) != nil {
			t.Fatal("lease still in the set at its desired expiration")
		}
		if evs := f.listener.events(fail); len(evs) != 0 {
			t.Fatalf("failure events %v", evs)
		}
		if !ll.holds(c) || !ll.expiration(c).Equal(desired) {
			t.Fatalf("landlord's lease: held %v, expires %v; want held until the desired %v", ll.holds(c), ll.expiration(c), desired)
		}
	})
}

// TestActualReached: LR.2 removal: a lease that reaches its actual
// expiration (here its landlord is unreachable until then) leaves its set
// with a renewal failure event carrying the last error.
func TestActualReached(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Minute)
		st := f.create(time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		l, c := ll.grant(30 * time.Second)
		exp := time.Now().Add(30 * time.Second)
		f.mustRenewFor(st, l, djinn.Forever, time.Minute)
		ll.SetDown(djinn.Errorf(djinn.Unavailable, "landlord down"))
		advance(25 * time.Second)
		cl := f.leaseOf(st, c)
		if cl == nil {
			t.Fatal("lease left before its actual expiration")
		}
		// getLeases (LR.2): the last recorded expiration and the last error.
		if got := time.Now().Add(time.Duration(cl.GetLease().GetDurationNanos())); !got.Equal(exp) {
			t.Fatalf("lease expires %v, want the recorded %v", got, exp)
		}
		if cl.GetLastError().GetKind() != string(djinn.Unavailable) {
			t.Fatalf("last error %v, want Unavailable", cl.GetLastError())
		}
		calls, _, _, _ := ll.stats()
		if calls < 2 {
			t.Fatalf("%d renewal attempts: an indefinite failure must be retried", calls)
		}
		advance(5*time.Second - time.Millisecond)
		if f.leaseOf(st, c) == nil {
			t.Fatal("lease left before its actual expiration")
		}
		if evs := f.listener.events(fail); len(evs) != 0 {
			t.Fatalf("failure event before the actual expiration: %v", evs)
		}
		advance(time.Millisecond)
		if f.leaseOf(st, c) != nil {
			t.Fatal("lease still in the set at its actual expiration")
		}
		evs := f.listener.events(fail)
		if len(evs) != 1 {
			t.Fatalf("failure events %v, want one", evs)
		}
		p := failureOf(t, evs[0])
		if cookieOf(p.GetLease()) != c || p.GetLease().GetExpirationUnixNanos() != exp.UnixNano() {
			t.Fatalf("failure event lease %v, want %s expiring %v", p.GetLease(), c, exp)
		}
		if p.GetError().GetKind() != string(djinn.Unavailable) {
			t.Fatalf("failure event error %v, want the last one (Unavailable)", p.GetError())
		}
		// Retries are spaced out: no more than one attempt a MinRetry/2.
		if calls, _, _, _ := ll.stats(); calls > 2*30 {
			t.Fatalf("%d renewal attempts in 30s: retries are not backed off", calls)
		}
	})
}

// TestDefiniteFailure: LR.2 removal: a renewal that meets a definite
// exception removes the lease at once, with a failure event carrying it.
func TestDefiniteFailure(t *testing.T) {
	for _, k := range []djinn.Kind{djinn.UnknownLease, djinn.LeaseDenied, djinn.InvalidArgument} {
		t.Run("LR.2 removal: definite exception "+string(k)+" removes the lease with a failure event", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, renewal.Config{})
				defer f.stop()
				ll := f.landlord(time.Minute)
				st := f.create(time.Hour)
				_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
				bad, c := ll.grant(30 * time.Second)
				good, g := ll.grant(30 * time.Second)
				f.mustRenewFor(st, bad, djinn.Forever, time.Minute)
				f.mustRenewFor(st, good, djinn.Forever, time.Minute)
				ll.FailRenewalsWith(func(x djinn.ID) error {
					if x == c {
						return djinn.Errorf(k, "lease %s: refused", x)
					}
					return nil
				})
				advance(20 * time.Second)
				calls, _, _, _ := ll.stats()
				if calls != 1 {
					t.Fatalf("%d renewal calls: want the one that failed, not retried", calls)
				}
				if f.leaseOf(st, c) != nil {
					t.Fatal("lease still in the set after a definite failure")
				}
				if f.leaseOf(st, g) == nil {
					t.Fatal("the other lease of the batch left too")
				}
				evs := f.listener.events(fail)
				if len(evs) != 1 {
					t.Fatalf("failure events %v, want one", evs)
				}
				p := failureOf(t, evs[0])
				if cookieOf(p.GetLease()) != c || p.GetError().GetKind() != string(k) {
					t.Fatalf("failure event for %v with %v, want %s with %s", p.GetLease(), p.GetError(), c, k)
				}
			})
		})
	}
}

// TestIndefiniteFailureRetried: LR.2: indefinite failures are retried; a
// landlord back before the lease expires keeps it, with no event.
func TestIndefiniteFailureRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Minute)
		st := f.create(time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		l, c := ll.grant(30 * time.Second)
		f.mustRenewFor(st, l, djinn.Forever, time.Minute)
		ll.SetDown(djinn.Errorf(djinn.Unavailable, "landlord down"))
		advance(25 * time.Second)
		ll.SetDown(nil)
		advance(5 * time.Second)
		cl := f.leaseOf(st, c)
		if cl == nil {
			t.Fatal("lease left the set though its landlord came back in time")
		}
		if cl.GetLastError() != nil {
			t.Fatalf("last error %v after a successful renewal", cl.GetLastError())
		}
		if !ll.expiration(c).After(time.Now().Add(30 * time.Second)) {
			t.Fatalf("lease not renewed: expires %v", ll.expiration(c))
		}
		advance(5 * time.Minute)
		if f.leaseOf(st, c) == nil {
			t.Fatal("lease left the set")
		}
		if evs := f.listener.events(fail); len(evs) != 0 {
			t.Fatalf("failure events %v", evs)
		}
		if _, lapsed, _, _ := ll.stats(); lapsed != 0 {
			t.Fatalf("%d renewals of lapsed leases", lapsed)
		}
	})
}

// TestShortenedGrant: LR.2: a landlord may grant less than asked; the
// lease is renewed again before the shorter grant lapses.
func TestShortenedGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(3 * time.Second)
		st := f.create(time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		l, c := ll.grant(3 * time.Second)
		f.mustRenewFor(st, l, 10*time.Minute, 5*time.Minute)
		for range 9 {
			advance(time.Minute)
			if !ll.expiration(c).After(time.Now()) {
				t.Fatalf("lease lapsed at its landlord: expires %v", ll.expiration(c))
			}
		}
		calls, lapsed, asked, _ := ll.stats()
		if lapsed != 0 {
			t.Fatalf("%d renewals came after the lease lapsed", lapsed)
		}
		if calls < 9*60/3 {
			t.Fatalf("%d renewals in 9m of 3s grants", calls)
		}
		if asked[0] != 5*time.Minute {
			t.Fatalf("asked %v first, want the renew duration", asked[0])
		}
		if f.leaseOf(st, c) == nil {
			t.Fatal("lease left the set")
		}
		if evs := f.listener.events(fail); len(evs) != 0 {
			t.Fatalf("failure events %v", evs)
		}
	})
}

// TestBatching: LR.1/LR.2: leases of one landlord due together are renewed
// in few calls, also when their due times are spread within the window.
func TestBatching(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spread time.Duration // between consecutive renewFor calls
	}{
		{"LR.1 batching: leases added together are renewed together", 0},
		{"LR.1 batching: leases added within the window share renewal calls", 5 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, renewal.Config{})
				defer f.stop()
				ll := f.landlord(time.Minute)
				st := f.create(time.Hour)
				const n = 100
				for range n {
					l, _ := ll.grant(time.Minute)
					f.mustRenewFor(st, l, djinn.Forever, time.Minute)
					if tc.spread > 0 {
						time.Sleep(tc.spread)
					}
				}
				advance(10 * time.Minute)
				calls, lapsed, asked, _ := ll.stats()
				renewals := len(asked)
				if renewals < 10*n {
					t.Fatalf("%d renewals of %d leases in 10m of 1m grants", renewals, n)
				}
				if lapsed != 0 {
					t.Fatalf("%d renewals of lapsed leases", lapsed)
				}
				// Ten rounds of renewals: a few calls each, not one per lease.
				if calls > renewals/10 {
					t.Fatalf("%d calls for %d renewals: leases are not batched", calls, renewals)
				}
				t.Logf("%d calls for %d renewals", calls, renewals)
			})
		})
	}
}

// TestUnrecorded: LR.2 asks that renewals be recorded; a renewal the log
// does not take is made again a little later (MinRetry), not at once and
// not in a loop, and recorded once the log takes commands again.
func TestUnrecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(30 * time.Second)
		st := f.create(time.Hour)
		_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
		l, c := ll.grant(30 * time.Second)
		f.mustRenewFor(st, l, djinn.Forever, 30*time.Second)
		advance(15 * time.Second)
		f.gate.close(djinn.Errorf(djinn.Unavailable, "log unavailable"))
		advance(10 * time.Second)
		calls, _, _, _ := ll.stats()
		refused := f.gate.refusals()
		// The renewal at 20s and its repeats, at most one a MinRetry (1s).
		if calls < 2 || calls > 10 || refused > 2*calls {
			t.Fatalf("%d renewal calls and %d refused records in 5s of an unavailable log", calls, refused)
		}
		f.gate.close(nil)
		advance(2 * time.Second)
		cl := f.leaseOf(st, c)
		if cl == nil {
			t.Fatal("lease left the set")
		}
		if got := time.Now().Add(time.Duration(cl.GetLease().GetDurationNanos())); !got.Equal(ll.expiration(c)) {
			t.Fatalf("recorded expiration %v, want the landlord's %v", got, ll.expiration(c))
		}
		advance(time.Minute)
		if evs := f.listener.events(fail); len(evs) != 0 {
			t.Fatalf("failure events %v", evs)
		}
		if _, lapsed, _, _ := ll.stats(); lapsed != 0 {
			t.Fatalf("%d renewals of lapsed leases", lapsed)
		}
	})
}

// TestGetLeases: LR.2 getLeases: every client lease of the set, with its
// last recorded expiration (in its own serial format), desired expiration
// and renew duration, and the last error while renewals fail.
func TestGetLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Minute)
		st := f.create(time.Hour)
		l1, c1 := ll.grant(30 * time.Second)
		l2, c2 := ll.grantAbs(time.Now().Add(30 * time.Second))
		t0 := time.Now()
		f.mustRenewFor(st, l1, 10*time.Minute, 45*time.Second)
		f.mustRenewFor(st, l2, djinn.Forever, djinn.Any)
		if ls := f.leases(st); len(ls) != 2 {
			t.Fatalf("getLeases %v, want 2 leases", ls)
		}
		advance(25 * time.Second) // both renewed at 20s
		for _, tc := range []struct {
			c       djinn.ID
			format  djinnpb.SerialFormat
			desired int64
			renew   time.Duration
		}{
			{c1, djinnpb.SerialFormat_SERIAL_FORMAT_DURATION, t0.Add(10 * time.Minute).UnixNano(), 45 * time.Second},
			{c2, djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE, nanosOf(djinn.EndOfTime), djinn.Any},
		} {
			cl := f.leaseOf(st, tc.c)
			if cl == nil {
				t.Fatalf("lease %s missing", tc.c)
			}
			pl := cl.GetLease()
			exp := time.Unix(0, pl.GetExpirationUnixNanos())
			if pl.GetFormat() != djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE {
				exp = time.Now().Add(time.Duration(pl.GetDurationNanos()))
			}
			if pl.GetFormat() != tc.format || !exp.Equal(ll.expiration(tc.c)) || !exp.After(t0.Add(30*time.Second)) {
				t.Fatalf("lease %s: format %v expires %v, want %v and the last renewal's %v", tc.c, pl.GetFormat(), exp, tc.format, ll.expiration(tc.c))
			}
			if cl.GetDesiredExpirationUnixNanos() != tc.desired || time.Duration(cl.GetRenewDurationNanos()) != tc.renew || cl.GetLastError() != nil {
				t.Fatalf("lease %s: desired %d renew %v last error %v, want %d %v none", tc.c, cl.GetDesiredExpirationUnixNanos(), time.Duration(cl.GetRenewDurationNanos()), cl.GetLastError(), tc.desired, tc.renew)
			}
		}
		recorded := ll.expiration(c1)
		ll.SetDown(djinn.Errorf(djinn.Unavailable, "landlord down"))
		advance(time.Until(recorded.Add(-5 * time.Second)))
		cl := f.leaseOf(st, c1)
		if cl == nil {
			t.Fatal("lease left the set while its landlord is down")
		}
		if got := time.Now().Add(time.Duration(cl.GetLease().GetDurationNanos())); !got.Equal(recorded) {
			t.Fatalf("expiration %v while renewals fail, want the last recorded %v", got, recorded)
		}
		if cl.GetLastError().GetKind() != string(djinn.Unavailable) {
			t.Fatalf("last error %v, want the landlord's Unavailable", cl.GetLastError())
		}
	})
}
