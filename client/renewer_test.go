package client

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client/clienttest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// renewerRig is a Renewer over an in-process landlord, for tests in a
// synctest bubble, with failures collected on a channel.
type renewerRig struct {
	ll       *clienttest.Landlord
	r        *Renewer
	failures chan Failure
	t0       time.Time
}

func newRig(t *testing.T, opts ...RenewerOption) *renewerRig {
	t.Helper()
	ll := clienttest.NewLandlord(time.Minute, time.Minute)
	return newRigDial(t, ll, inProcess(ll), opts...)
}

// newRigDial is newRig with its own way to reach landlords.
func newRigDial(t *testing.T, ll *clienttest.Landlord, dial landlordDialer, opts ...RenewerOption) *renewerRig {
	t.Helper()
	g := &renewerRig{ll: ll, failures: make(chan Failure, 100), t0: time.Now()}
	opts = append([]RenewerOption{WithFailureHandler(func(f Failure) { g.failures <- f })}, opts...)
	r, err := newRenewer(dial, opts...)
	if err != nil {
		t.Fatal(err)
	}
	g.r = r
	t.Cleanup(func() { r.Close() })
	return g
}

// at returns the time d after the rig started.
func (g *renewerRig) at(d time.Duration) time.Time { return g.t0.Add(d) }

// recv waits for a value from ch, failing the test after a day of the
// bubble's fake time (a broken test must not spin forever on the renewer's
// timers).
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(24 * time.Hour):
		t.Fatal("nothing came within a day of fake time")
		var zero T
		return zero
	}
}

// call waits for the landlord's next call and checks when it came.
func (g *renewerRig) call(t *testing.T, method string, at time.Duration) clienttest.Call {
	t.Helper()
	c := recv(t, g.ll.Calls())
	if c.Method != method || !c.At.Equal(g.at(at)) {
		t.Fatalf("call %s at +%v, want %s at +%v", c.Method, c.At.Sub(g.t0), method, at)
	}
	return c
}

// advanceTo waits on a timer until t in the bubble's fake clock, then until
// every goroutine is idle: how a test checks that nothing happened before t.
func advanceTo(t time.Time) {
	<-time.NewTimer(time.Until(t)).C
	synctest.Wait()
}

func TestRenewerSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t)
		g.ll.SetLatency(time.Second)
		l := grant(t, g.ll, time.Minute)
		if err := g.r.Renew(l, djinn.EndOfTime); err != nil {
			t.Fatal(err)
		}
		// LE.3.1: renewed at half the grant; the request reaches the
		// landlord a second later.
		c := g.call(t, "RenewAll", 31*time.Second)
		if c.Durations[0] != djinn.Any {
			t.Errorf("requested %v, want Any", c.Durations[0])
		}
		// LE.2.3: the new expiration counts from the send (+30s), not
		// from the answer (+32s); the next renewal is half a grant later.
		g.call(t, "RenewAll", 61*time.Second)
		if want := g.at(90 * time.Second); !l.Expiration().Equal(want) {
			t.Errorf("expiration +%v, want +90s", l.Expiration().Sub(g.t0))
		}
		if until, err := g.r.Expiration(l); err != nil || !until.Equal(djinn.EndOfTime) {
			t.Errorf("desired expiration %v %v", until, err)
		}
	})
}

func TestRenewerMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, WithRenewMargin(20*time.Second))
		g.ll.Default = 30 * time.Second
		l := grant(t, g.ll, djinn.Any)
		g.r.Renew(l, djinn.EndOfTime)
		// A 30s grant: half is +15s, the margin asks for +10s.
		g.call(t, "RenewAll", 10*time.Second)
		// Past the margin, never more often than a quarter of the grant.
		short := grant(t, g.ll, 8*time.Second)
		g.r.Renew(short, djinn.EndOfTime)
		c := g.call(t, "RenewAll", 12*time.Second)
		if !slices.Contains(c.Cookies, short.Cookie()) {
			t.Errorf("renewed %v, want the short lease", c.Cookies)
		}
	})
}

func TestRenewerBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ll := clienttest.NewLandlord(time.Minute, 10*time.Minute)
		other := clienttest.NewLandlord(time.Minute, time.Minute)
		g := newRigDial(t, ll, func(landlord djinn.Ref) (djinnpb.LandlordClient, error) {
			if landlord.Endpoint == other.Ref().Endpoint {
				return other.Client(), nil
			}
			return ll.Client(), nil
		})
		a, b := grant(t, ll, time.Minute), grant(t, ll, time.Minute)
		soon := grant(t, ll, 70*time.Second)  // due at +35s: within the margin
		later := grant(t, ll, 10*time.Minute) // due at +5m
		elsewhere := grant(t, other, time.Minute)
		for _, l := range []*Lease{a, b, soon, later, elsewhere} {
			g.r.Renew(l, djinn.EndOfTime)
		}
		c := g.call(t, "RenewAll", 30*time.Second)
		if !sameIDs(c.Cookies, []djinn.ID{a.Cookie(), b.Cookie(), soon.Cookie()}) {
			t.Errorf("LE.3.1 one RenewAll for the landlord's due leases: got %d cookies, want a, b and soon", len(c.Cookies))
		}
		if oc := recv(t, other.Calls()); oc.Method != "RenewAll" || len(oc.Cookies) != 1 || oc.Cookies[0] != elsewhere.Cookie() ||
			!oc.At.Equal(g.at(30*time.Second)) {
			t.Errorf("other landlord saw %+v", oc)
		}
	})
}

func sameIDs(a, b []djinn.ID) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

func TestRenewerDesiredExpiration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t)
		l := grant(t, g.ll, time.Minute)
		g.r.Renew(l, g.at(100*time.Second))
		// LE.3.1: renewals never ask past the desired expiration.
		if c := g.call(t, "RenewAll", 30*time.Second); c.Durations[0] != 70*time.Second {
			t.Errorf("asked %v, want 70s", c.Durations[0])
		}
		if c := g.call(t, "RenewAll", 60*time.Second); c.Durations[0] != 40*time.Second {
			t.Errorf("asked %v, want 40s", c.Durations[0])
		}
		advanceTo(g.at(100 * time.Second))
		if _, err := g.r.Expiration(l); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Errorf("reached lease still managed: %v", err)
		}
		if calls := pending(g.ll); len(calls) != 0 {
			t.Errorf("calls after the desired expiration: %+v", calls)
		}
		select {
		case f := <-g.failures:
			t.Errorf("reaching the desired expiration is no failure: %v", f.Err)
		default:
		}
	})
}

func TestRenewerSetExpiration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t)
		l := grant(t, g.ll, time.Minute)
		g.r.Renew(l, g.at(20*time.Second)) // the lease already lasts longer
		if err := g.r.SetExpiration(l, djinn.EndOfTime); err != nil {
			t.Fatal(err)
		}
		g.call(t, "RenewAll", 30*time.Second)
		if err := g.r.SetExpiration(grant(t, g.ll, time.Minute), djinn.EndOfTime); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Errorf("LE.3.1 setExpiration of an unmanaged lease: %v", err)
		}
	})
}

func TestRenewerDefiniteFailure(t *testing.T) {
	for _, tt := range []struct {
		name   string
		inject func(*clienttest.Landlord, *Lease)
		want   error
	}{
		{"LE.2.2 unknown lease stops renewal", func(ll *clienttest.Landlord, l *Lease) { ll.Forget(l.Cookie()) }, djinn.ErrUnknownLease},
		{"LE.2.2 denied renewal stops renewal", func(ll *clienttest.Landlord, l *Lease) {
			ll.FailRenewals(l.Cookie(), djinn.Errorf(djinn.LeaseDenied, "quota"))
		}, djinn.ErrLeaseDenied},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := newRig(t)
				l, keep := grant(t, g.ll, time.Minute), grant(t, g.ll, time.Minute)
				g.r.Renew(l, djinn.EndOfTime)
				g.r.Renew(keep, djinn.EndOfTime)
				tt.inject(g.ll, l)
				f := recv(t, g.failures)
				if f.Lease != l || !errors.Is(f.Err, tt.want) || !time.Now().Equal(g.at(30*time.Second)) {
					t.Fatalf("failure %v at +%v", f.Err, time.Since(g.t0))
				}
				if _, err := g.r.Expiration(l); !errors.Is(err, djinn.ErrUnknownLease) {
					t.Error("a failed lease must leave the renewer")
				}
				pending(g.ll)
				if c := g.call(t, "RenewAll", 60*time.Second); len(c.Cookies) != 1 || c.Cookies[0] != keep.Cookie() {
					t.Errorf("renewed %v, want only the other lease", c.Cookies)
				}
			})
		})
	}
}

func TestRenewerIndefiniteFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t)
		l := grant(t, g.ll, time.Minute)
		g.ll.SetDown(djinn.Errorf(djinn.Unavailable, "network partition"))
		g.r.Renew(l, djinn.EndOfTime)
		// LR: indefinite failures are retried with a doubling backoff, and
		// always once more in the second half of the time left.
		want := []time.Duration{30 * time.Second, 31 * time.Second, 33 * time.Second, 37 * time.Second,
			45 * time.Second, 52500 * time.Millisecond, 56250 * time.Millisecond, 58125 * time.Millisecond,
			59062500 * time.Microsecond, 59531250 * time.Microsecond, 59781250 * time.Microsecond}
		var failure Failure
		var got []time.Duration
	wait:
		for {
			select {
			case c := <-g.ll.Calls():
				got = append(got, c.At.Sub(g.t0))
			case failure = <-g.failures:
				break wait
			case <-time.After(24 * time.Hour):
				t.Fatal("no failure within a day of fake time")
			}
		}
		got = append(got, durations(pending(g.ll), g.t0)...)
		if !slices.Equal(got, want) {
			t.Errorf("attempts at %v\nwant %v", got, want)
		}
		if !time.Now().Equal(g.at(time.Minute)) {
			t.Errorf("reported at +%v, want at expiry +1m", time.Since(g.t0))
		}
		if !errors.Is(failure.Err, djinn.ErrUnknownLease) || !errors.Is(failure.Err, djinn.ErrUnavailable) ||
			!strings.Contains(failure.Err.Error(), "network partition") {
			t.Errorf("failure %v: want expiry with the last error", failure.Err)
		}
	})
}

func durations(calls []clienttest.Call, t0 time.Time) []time.Duration {
	var out []time.Duration
	for _, c := range calls {
		out = append(out, c.At.Sub(t0))
	}
	return out
}

func TestRenewerRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t)
		l := grant(t, g.ll, time.Minute)
		g.ll.SetDown(djinn.Errorf(djinn.Unavailable, "blip"))
		g.r.Renew(l, djinn.EndOfTime)
		g.call(t, "RenewAll", 30*time.Second)
		g.call(t, "RenewAll", 31*time.Second)
		g.ll.SetDown(nil)
		g.call(t, "RenewAll", 33*time.Second)
		// Renewed from +33s: the backoff is forgotten.
		g.call(t, "RenewAll", 63*time.Second)
		select {
		case f := <-g.failures:
			t.Errorf("unexpected failure %v", f.Err)
		default:
		}
	})
}

func TestRenewerExpiredOnArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t)
		l := NewLease(g.ll.Ref(), djinn.NewID(), time.Now().Add(-time.Second))
		g.r.Renew(l, djinn.EndOfTime)
		f := recv(t, g.failures)
		if !errors.Is(f.Err, djinn.ErrUnknownLease) || !strings.Contains(f.Err.Error(), "expired before it could be renewed") {
			t.Errorf("failure %v", f.Err)
		}
	})
}

func TestRenewerRemoveCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t)
		ctx := context.Background()
		removed, cancelled := grant(t, g.ll, time.Minute), grant(t, g.ll, time.Minute)
		g.r.Renew(removed, djinn.EndOfTime)
		g.r.Renew(cancelled, djinn.EndOfTime)
		if err := g.r.Remove(removed); err != nil {
			t.Fatal(err)
		}
		if err := g.r.Remove(removed); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Errorf("second remove: %v", err)
		}
		if err := g.r.Cancel(ctx, cancelled); err != nil {
			t.Fatal(err)
		}
		if c := recv(t, g.ll.Calls()); c.Method != "Cancel" || c.Cookies[0] != cancelled.Cookie() {
			t.Errorf("landlord saw %+v", c)
		}
		// LE.3.1: cancel of a lease not held is UnknownLease, and is not sent.
		if err := g.r.Cancel(ctx, removed); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Errorf("cancel of an unmanaged lease: %v", err)
		}
		if _, live := g.ll.Expiration(removed.Cookie()); !live {
			t.Error("a removed lease must not be cancelled")
		}
		advanceTo(g.at(2 * time.Minute))
		if calls := pending(g.ll); len(calls) != 0 {
			t.Errorf("calls for leases no longer managed: %+v", calls)
		}
	})
}

func TestRenewerRenewDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t, WithRenewDuration(20*time.Second))
		l := grant(t, g.ll, time.Minute)
		g.r.RenewFor(l, djinn.Forever)
		if c := g.call(t, "RenewAll", 30*time.Second); c.Durations[0] != 20*time.Second {
			t.Errorf("asked %v, want 20s", c.Durations[0])
		}
		g.call(t, "RenewAll", 40*time.Second)
	})
}

func TestRenewerClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t)
		g.ll.SetLatency(time.Hour) // a renewal in flight at Close
		l := grant(t, g.ll, time.Minute)
		g.r.Renew(l, djinn.EndOfTime)
		advanceTo(g.at(45 * time.Second))
		g.r.Close()
		select {
		case <-g.r.Done():
		default:
			t.Fatal("Done not closed after Close")
		}
		if err := g.r.Renew(l, djinn.EndOfTime); !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("renew after close: %v", err)
		}
		g.r.Close() // idempotent
	})
}

func TestRenewerArguments(t *testing.T) {
	for _, tt := range []struct {
		name string
		opt  RenewerOption
		want string
	}{
		{"negative renew duration", WithRenewDuration(-2 * time.Second), "renew duration -2s"},
		{"zero renew duration", WithRenewDuration(0), "renew duration 0s"},
		{"negative margin", WithRenewMargin(-time.Second), "renew margin -1s"},
		{"zero backoff", WithRetryBackoff(0, time.Second), "retry backoff 0s to 1s"},
		{"max below min", WithRetryBackoff(time.Minute, time.Second), "retry backoff 1m0s to 1s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPool()
			defer p.Close()
			_, err := NewRenewer(p, tt.opt)
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want invalid argument containing %q", err, tt.want)
			}
		})
	}
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t)
		if err := g.r.Renew(nil, djinn.EndOfTime); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("renew nil: %v", err)
		}
		if err := g.r.RenewFor(grant(t, g.ll, time.Minute), -time.Second); !errors.Is(err, djinn.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), "-1s") {
			t.Errorf("renew for -1s: %v", err)
		}
	})
}

// TestRenewerGRPC runs the Renewer over a real connection.
func TestRenewerGRPC(t *testing.T) {
	ll, p := startLandlord(t, time.Minute, time.Minute)
	l := grant(t, ll, time.Minute)
	// The holder believes the lease ends soon, so the renewer renews at once.
	short := NewLease(l.Landlord(), l.Cookie(), time.Now().Add(200*time.Millisecond))
	failures := make(chan Failure, 1)
	r, err := NewRenewer(p, WithFailureHandler(func(f Failure) { failures <- f }))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Renew(short, djinn.EndOfTime); err != nil {
		t.Fatal(err)
	}
	if c := nextCall(t, ll); c.Method != "RenewAll" || c.Cookies[0] != l.Cookie() {
		t.Fatalf("landlord saw %+v", c)
	}
	if exp, _ := ll.Expiration(l.Cookie()); exp.Before(time.Now().Add(30 * time.Second)) {
		t.Errorf("landlord holds the lease until %v", exp)
	}
	ll.Forget(l.Cookie())
	if err := r.Cancel(context.Background(), short); !errors.Is(err, djinn.ErrUnknownLease) {
		t.Errorf("cancel of a lease the landlord forgot: %v", err)
	}
}

func TestRenewerSameLeaseTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newRig(t)
		g.ll.SetLatency(time.Second) // answers come after the landlord's record
		l := grant(t, g.ll, time.Minute)
		copied := NewLease(l.Landlord(), l.Cookie(), l.Expiration()) // say, parsed from l's token
		g.r.Renew(l, djinn.EndOfTime)
		g.r.Renew(copied, djinn.EndOfTime)
		if c := g.call(t, "RenewAll", 31*time.Second); len(c.Cookies) != 1 {
			t.Errorf("one lease, renewed %d times", len(c.Cookies))
		}
		g.call(t, "RenewAll", 61*time.Second)
		if want := g.at(90 * time.Second); !copied.Expiration().Equal(want) {
			t.Errorf("the newest lease value expires +%v, want +90s", copied.Expiration().Sub(g.t0))
		}
	})
}

// LE.3.1 (River's LeaseRenewalManager): a lease leaves the Renewer at its
// desired expiration — also one granted past it, which needs no renewal —
// and the desired-expiration handler hears of it then; reaching it is no
// failure.
func TestLE31RenewerLeaseLeavesAtItsDesiredExpiration(t *testing.T) {
	for _, tt := range []struct {
		name    string
		grant   time.Duration
		desired time.Duration
		calls   int // renewals before the desired expiration
	}{
		{"LE.3.1 a lease granted past its desired expiration leaves at the desired expiration", time.Hour, 20 * time.Second, 0},
		{"LE.3.1 a lease renewed up to its desired expiration leaves then", time.Minute, 100 * time.Second, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				reached := make(chan *Lease, 10)
				ll := clienttest.NewLandlord(time.Minute, time.Hour)
				g := newRigDial(t, ll, inProcess(ll), WithDesiredExpirationHandler(func(l *Lease) { reached <- l }))
				l := grant(t, g.ll, tt.grant)
				if err := g.r.Renew(l, g.at(tt.desired)); err != nil {
					t.Fatal(err)
				}
				got := recv(t, reached)
				if got != l || !time.Now().Equal(g.at(tt.desired)) {
					t.Fatalf("handler heard of %v at +%v, want the lease at +%v", got, time.Since(g.t0), tt.desired)
				}
				if _, err := g.r.Expiration(l); !errors.Is(err, djinn.ErrUnknownLease) {
					t.Errorf("a lease past its desired expiration is still managed: %v", err)
				}
				if n := len(pending(g.ll)); n != tt.calls {
					t.Errorf("%d renewals, want %d", n, tt.calls)
				}
				synctest.Wait()
				select {
				case f := <-g.failures:
					t.Errorf("reaching the desired expiration is no failure: %v", f.Err)
				case l := <-reached:
					t.Errorf("handler told twice, again of %v", l)
				default:
				}
			})
		})
	}
}

// TestRenewerRefusesZeroDesiredExpiration: the zero time is what an unset
// desired expiration reads as, and it is always past: a lease given it
// would leave at once, unrenewed. Renew and SetExpiration refuse it.
func TestRenewerRefusesZeroDesiredExpiration(t *testing.T) {
	ll, p := startLandlord(t, time.Minute, time.Hour)
	r, err := NewRenewer(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l := grant(t, ll, time.Minute)
	if err := r.Renew(l, time.Time{}); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("Renew with the zero time: %v, want invalid argument", err)
	}
	if _, err := r.Expiration(l); !errors.Is(err, djinn.ErrUnknownLease) {
		t.Errorf("the lease refused is managed: %v", err)
	}
	if err := r.Renew(l, djinn.EndOfTime); err != nil {
		t.Fatal(err)
	}
	if err := r.SetExpiration(l, time.Time{}); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("SetExpiration with the zero time: %v, want invalid argument", err)
	}
	if until, err := r.Expiration(l); err != nil || !until.Equal(djinn.EndOfTime) {
		t.Errorf("after a refused SetExpiration the desired expiration is %v, %v; want the end of time", until, err)
	}
}
