package renewal_test

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestCreateRules: the argument rules of createLeaseRenewalSet, one row per
// rule. The fixture's set lease policy gives Any an hour and at most a day.
func TestCreateRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		d       time.Duration
		wantErr djinn.Kind
		granted time.Duration
	}{
		{"LR.2 createLeaseRenewalSet: a positive duration is accepted and granted as asked", 10 * time.Minute, "", 10 * time.Minute},
		{"LR.2 createLeaseRenewalSet: the granted duration is never longer than asked (policy cap)", 48 * time.Hour, "", 24 * time.Hour},
		{"LR.2 createLeaseRenewalSet: Forever is accepted (granted the policy maximum)", djinn.Forever, "", 24 * time.Hour},
		{"LR.2 createLeaseRenewalSet: Any is accepted (granted the policy default)", djinn.Any, "", time.Hour},
		{"LR.2 createLeaseRenewalSet: zero is refused (IllegalArgumentException)", 0, djinn.InvalidArgument, 0},
		{"LR.2 createLeaseRenewalSet: a negative duration other than Any is refused", -5 * time.Second, djinn.InvalidArgument, 0},
		{"LR.2 createLeaseRenewalSet: -2 (next to Any) is refused", -2, djinn.InvalidArgument, 0},
		{"LR.2 createLeaseRenewalSet: the most negative duration is refused", math.MinInt64, djinn.InvalidArgument, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, renewal.Config{})
				defer f.stop()
				st, err := f.svc.Create(context.Background(), tc.d)
				wantKind(t, err, tc.wantErr)
				if err != nil {
					if sets, _ := f.svc.Len(); sets != 0 {
						t.Fatalf("a refused create left %d sets", sets)
					}
					return
				}
				if got := time.Duration(st.Lease.GetDurationNanos()); got != tc.granted {
					t.Fatalf("granted %v, want %v", got, tc.granted)
				}
				if tc.d > 0 && time.Duration(st.Lease.GetDurationNanos()) > tc.d {
					t.Fatalf("granted %v: longer than asked %v", time.Duration(st.Lease.GetDurationNanos()), tc.d)
				}
				li, ok := f.lessor.Table().Lookup(st.Info.Cookie, time.Now())
				if !ok || !li.Expires.Equal(time.Now().Add(tc.granted)) || li.Owner.Kind != renewal.LeaseKind || li.Owner.ID != st.Info.ID {
					t.Fatalf("set lease in the table: %+v %v", li, ok)
				}
				if cookieOf(st.Lease) != st.Info.Cookie || djinn.ID(st.Lease.GetLandlord().GetServiceId()) != f.self.Service {
					t.Fatalf("set lease %v: want cookie %s granted by service %s", st.Lease, st.Info.Cookie, f.self.Service)
				}
				if st.Ref.Service != f.self.Service || st.Ref.Object != st.Info.ID || st.Ref.Endpoint != f.self.Endpoint {
					t.Fatalf("set reference %v", st.Ref)
				}
			})
		})
	}
}

// TestCreateNeverEqual: LR.2 createLeaseRenewalSet: two calls never return
// equal sets (nor sets sharing a lease).
func TestCreateNeverEqual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		seen := map[djinn.Ref]bool{}
		cookies := map[djinn.ID]bool{}
		for range 50 {
			st := f.create(time.Hour)
			if seen[st.Ref] || cookies[st.Info.Cookie] {
				t.Fatalf("set %v (lease %s) returned twice", st.Ref, st.Info.Cookie)
			}
			seen[st.Ref], cookies[st.Info.Cookie] = true, true
		}
	})
}

// renewForRow is one argument rule of renewFor (LR.2). Each row runs in a
// fresh fixture with a set whose failure listener is "fail".
type renewForRow struct {
	name string
	// lease returns the lease to add (nil: a null lease).
	lease           func(f *fixture, ll *landlord, st renewal.Set) *djinnpb.Lease
	desired, renew  time.Duration
	wantErr         djinn.Kind
	wantKept        bool
	wantEvent       bool
	wantDesired     func(now time.Time) time.Time // if set, the recorded desired expiration
	wantRenew       time.Duration                 // if set, the recorded renew duration
	wantLandlordNot bool                          // the lease must not be renewed at once
}

func leaseFor(d time.Duration) func(*fixture, *landlord, renewal.Set) *djinnpb.Lease {
	return func(_ *fixture, ll *landlord, _ renewal.Set) *djinnpb.Lease {
		l, _ := ll.grant(d)
		return l
	}
}

func leaseExpiredAgo(d time.Duration) func(*fixture, *landlord, renewal.Set) *djinnpb.Lease {
	return func(_ *fixture, ll *landlord, _ renewal.Set) *djinnpb.Lease {
		l, _ := ll.grantAbs(time.Now().Add(-d))
		return l
	}
}

func TestRenewForRules(t *testing.T) {
	for _, tc := range []renewForRow{
		{name: "LR.2 renewFor: a null lease is refused (NullPointerException)",
			lease: func(*fixture, *landlord, renewal.Set) *djinnpb.Lease { return nil }, desired: time.Hour, renew: time.Minute, wantErr: djinn.InvalidArgument},
		{name: "LR.2 renewFor: a positive renew duration is accepted",
			lease: leaseFor(10 * time.Minute), desired: time.Hour, renew: time.Minute, wantKept: true, wantRenew: time.Minute},
		{name: "LR.2 renewFor: renew duration Any is accepted when desired is exactly Forever",
			lease: leaseFor(10 * time.Minute), desired: djinn.Forever, renew: djinn.Any, wantKept: true, wantRenew: djinn.Any},
		{name: "LR.2 renewFor: renew duration Any is refused when desired is finite",
			lease: leaseFor(10 * time.Minute), desired: time.Hour, renew: djinn.Any, wantErr: djinn.InvalidArgument},
		{name: "LR.2 renewFor: renew duration Any is refused when desired is Long.MAX_VALUE-1 (not exactly Forever)",
			lease: leaseFor(10 * time.Minute), desired: djinn.Forever - 1, renew: djinn.Any, wantErr: djinn.InvalidArgument},
		{name: "LR.2 renewFor: renew duration 0 is refused",
			lease: leaseFor(10 * time.Minute), desired: time.Hour, renew: 0, wantErr: djinn.InvalidArgument},
		{name: "LR.2 renewFor: renew duration 0 is refused even with desired Forever",
			lease: leaseFor(10 * time.Minute), desired: djinn.Forever, renew: 0, wantErr: djinn.InvalidArgument},
		{name: "LR.2 renewFor: a negative renew duration is refused",
			lease: leaseFor(10 * time.Minute), desired: time.Hour, renew: -5 * time.Second, wantErr: djinn.InvalidArgument},
		{name: "LR.2 renewFor: a negative renew duration other than Any is refused even with desired Forever",
			lease: leaseFor(10 * time.Minute), desired: djinn.Forever, renew: -2, wantErr: djinn.InvalidArgument},
		{name: "LR.2 renewFor: the two-argument form is renew duration Forever",
			lease: leaseFor(10 * time.Minute), desired: time.Hour, renew: djinn.Forever, wantKept: true, wantRenew: djinn.Forever},
		{name: "LR.2 renewFor: a negative desired duration drops the lease at once, no event when actual is after desired",
			lease: leaseFor(10 * time.Minute), desired: -time.Second, renew: time.Minute},
		{name: "LR.2 renewFor: desired duration Any (negative) drops the lease at once, no event",
			lease: leaseFor(10 * time.Minute), desired: djinn.Any, renew: djinn.Forever},
		{name: "LR.2 renewFor: a negative desired duration with actual before desired drops the lease with a failure event",
			lease: leaseExpiredAgo(10 * time.Second), desired: -5 * time.Second, renew: time.Minute, wantEvent: true},
		{name: "LR.2 renewFor: actual expiration past and before desired: dropped with a failure event, no error",
			lease: leaseExpiredAgo(time.Second), desired: time.Hour, renew: time.Minute, wantEvent: true},
		{name: "LR.2 renewFor: actual expiration past and equal to desired: dropped, no event",
			lease: leaseExpiredAgo(time.Second), desired: -time.Second, renew: time.Minute},
		{name: "LR.2 renewFor: actual expiration past and after desired: dropped, no event",
			lease: leaseExpiredAgo(time.Second), desired: -time.Minute, renew: time.Minute},
		{name: "LR.2 renewFor: a desired duration that overflows saturates to Forever",
			lease: leaseFor(10 * time.Minute), desired: djinn.Forever - 1, renew: time.Minute, wantKept: true,
			wantDesired: func(time.Time) time.Time { return djinn.EndOfTime }},
		{name: "LR.2 renewFor: desired expiration is the service's clock plus desired duration",
			lease: leaseFor(10 * time.Minute), desired: 90 * time.Minute, renew: time.Minute, wantKept: true,
			wantDesired: func(now time.Time) time.Time { return now.Add(90 * time.Minute) }},
		{name: "LR.2 renewFor: a lease whose actual expiration is beyond desired is kept and not renewed",
			lease: leaseFor(time.Hour), desired: 10 * time.Minute, renew: time.Minute, wantKept: true, wantLandlordNot: true},
		{name: "LR.2 renewFor: a live lease granted by this service (this set's lease) is refused",
			lease:   func(_ *fixture, _ *landlord, st renewal.Set) *djinnpb.Lease { return st.Lease },
			desired: time.Hour, renew: time.Minute, wantErr: djinn.InvalidArgument},
		{name: "LR.2 renewFor: a live lease granted by this service (another set's lease) is refused",
			lease:   func(f *fixture, _ *landlord, _ renewal.Set) *djinnpb.Lease { return f.create(time.Hour).Lease },
			desired: time.Hour, renew: time.Minute, wantErr: djinn.InvalidArgument},
		{name: "LR.2 renewFor: an expired lease granted by this service is accepted, then dropped as expired",
			lease: func(f *fixture, _ *landlord, _ renewal.Set) *djinnpb.Lease {
				other := f.create(time.Minute)
				exp := time.Now().Add(time.Minute)
				advance(2 * time.Minute)
				if _, err := f.svc.Get(context.Background(), other.Info.ID); !djinn.IsDefinite(err) {
					f.t.Fatalf("set whose lease expired: %v", err)
				}
				l := lease.Proto(f.self, other.Info.Cookie, 0)
				l.DurationNanos, l.ExpirationUnixNanos, l.Format = 0, exp.UnixNano(), djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE
				return l
			},
			desired: time.Hour, renew: time.Minute, wantEvent: true},
		{name: "LR.2 renewFor: a lease in another set of this service is refused",
			lease: func(f *fixture, ll *landlord, _ renewal.Set) *djinnpb.Lease {
				l, _ := ll.grant(10 * time.Minute)
				f.mustRenewFor(f.create(time.Hour), l, time.Hour, time.Minute)
				return l
			},
			desired: time.Hour, renew: time.Minute, wantErr: djinn.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t, renewal.Config{})
				defer f.stop()
				ll := f.landlord(time.Hour)
				st := f.create(2 * time.Hour)
				_, fail := f.listen(st, renewal.FailureEventID, "fail", 0)
				l := tc.lease(f, ll, st)
				now := time.Now()
				sets, before := f.svc.Len()
				err := f.renewFor(st, l, tc.desired, tc.renew)
				wantKind(t, err, tc.wantErr)
				synctest.Wait()
				if err != nil {
					if s, n := f.svc.Len(); s != sets || n != before {
						t.Fatalf("a refused renewFor changed the state: %d sets %d leases, was %d %d", s, n, sets, before)
					}
					if len(f.leases(st)) != 0 {
						t.Fatalf("a refused lease is in the set: %v", f.leases(st))
					}
				}
				if err == nil {
					cl := f.leaseOf(st, cookieOf(l))
					if (cl != nil) != tc.wantKept {
						t.Fatalf("lease kept %v, want %v (%v)", cl != nil, tc.wantKept, cl)
					}
					if cl != nil && tc.wantDesired != nil {
						if got, want := cl.GetDesiredExpirationUnixNanos(), tc.wantDesired(now); got != nanosOf(want) {
							t.Fatalf("desired expiration %v, want %v", time.Unix(0, got), want)
						}
					}
					if cl != nil && tc.wantRenew != 0 && time.Duration(cl.GetRenewDurationNanos()) != tc.wantRenew {
						t.Fatalf("renew duration %v, want %v", time.Duration(cl.GetRenewDurationNanos()), tc.wantRenew)
					}
				}
				evs := f.listener.events(fail)
				switch {
				case tc.wantEvent && len(evs) != 1:
					t.Fatalf("failure events %v, want one", evs)
				case !tc.wantEvent && len(evs) != 0:
					t.Fatalf("failure events %v, want none", evs)
				case tc.wantEvent:
					p := failureOf(t, evs[0])
					if cookieOf(p.GetLease()) != cookieOf(l) || p.GetError() != nil {
						t.Fatalf("failure event for %v with error %v: want lease %s and no error", p.GetLease(), p.GetError(), cookieOf(l))
					}
					if p.GetLease().GetExpirationUnixNanos() != l.GetExpirationUnixNanos() {
						t.Fatalf("failure event lease expires %v, want %v", time.Unix(0, p.GetLease().GetExpirationUnixNanos()), time.Unix(0, l.GetExpirationUnixNanos()))
					}
				}
				if tc.wantLandlordNot {
					advance(9 * time.Minute)
					if calls, _, _, _ := ll.stats(); calls != 0 {
						t.Fatalf("a lease whose actual expiration is beyond its desired one was renewed (%d calls)", calls)
					}
				}
			})
		})
	}
}

func nanosOf(t time.Time) int64 {
	if !t.Before(djinn.EndOfTime) {
		return math.MaxInt64
	}
	return t.UnixNano()
}

// TestRenewForSameLeaseAgain: LR.2 renewFor: a lease equal to one already
// in the set gets the new desired and renew durations; the original copy
// is kept (one entry), and repeating the call changes nothing more.
func TestRenewForSameLeaseAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		ll := f.landlord(time.Hour)
		st := f.create(2 * time.Hour)
		l, c := ll.grant(10 * time.Minute)
		f.mustRenewFor(st, l, time.Hour, time.Minute)
		origExp := time.Now().Add(10 * time.Minute)
		advance(30 * time.Second)
		// A copy of the same lease in another form (another remaining time).
		again := lease.Proto(ll.Ref(), c, time.Minute)
		for range 2 {
			now := time.Now()
			f.mustRenewFor(st, again, 2*time.Hour, 5*time.Minute)
			ls := f.leases(st)
			if len(ls) != 1 {
				t.Fatalf("%d entries for one lease: %v", len(ls), ls)
			}
			cl := ls[0]
			if got := cl.GetDesiredExpirationUnixNanos(); got != now.Add(2*time.Hour).UnixNano() {
				t.Fatalf("desired %v, want %v", time.Unix(0, got), now.Add(2*time.Hour))
			}
			if got := time.Duration(cl.GetRenewDurationNanos()); got != 5*time.Minute {
				t.Fatalf("renew %v, want 5m", got)
			}
			// The original copy: its expiration, not the new copy's.
			if got := time.Now().Add(time.Duration(cl.GetLease().GetDurationNanos())); !got.Equal(origExp) {
				t.Fatalf("lease expires %v, want the original copy's %v", got, origExp)
			}
		}
		// Negative desired duration on the lease already in the set: it
		// leaves at once.
		f.mustRenewFor(st, again, -time.Second, time.Minute)
		if ls := f.leases(st); len(ls) != 0 {
			t.Fatalf("lease still in the set after a negative desired duration: %v", ls)
		}
	})
}
