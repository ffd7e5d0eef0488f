package server_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The landlord tests grant leases through mailbox registrations, under
// this policy: Any gets 2s, nothing gets more than 5s.
const (
	testDefaultLease = 2 * time.Second
	testMaxLease     = 5 * time.Second
)

// landlordFixture is a server whose mailbox grants leases under the test
// policy, a client of it, and a count of the calls the client made.
type landlordFixture struct {
	srv      *server.Server
	c        *client.Client
	landlord djinnpb.LandlordClient
	mailbox  *client.Mailbox
	calls    *callCounter
}

func newLandlordFixture(t *testing.T) *landlordFixture {
	t.Helper()
	cfg := servertest.Config(t)
	cfg.Mailbox.DefaultLease = server.Duration(testDefaultLease)
	cfg.Mailbox.MaxLease = server.Duration(testMaxLease)
	srv := servertest.Start(t, cfg)
	calls := &callCounter{n: map[string]int{}}
	c := servertest.Dial(t, srv.Addr(), client.WithDialOptions(grpc.WithChainUnaryInterceptor(calls.intercept)))
	return &landlordFixture{srv: srv, c: c, landlord: djinnpb.NewLandlordClient(c.ClientConn()), mailbox: c.Mailbox(), calls: calls}
}

// register makes a mailbox registration for d and returns its lease.
func (f *landlordFixture) register(t *testing.T, d time.Duration) *client.MailboxRegistration {
	t.Helper()
	reg, err := f.mailbox.Register(testContext(t), d)
	if err != nil {
		t.Fatalf("register for %v: %v", d, err)
	}
	return reg
}

func (f *landlordFixture) lease(t *testing.T, d time.Duration) *client.Lease {
	t.Helper()
	return f.register(t, d).Lease
}

// registrationGone waits until the registration's lease has ended and the
// mailbox answers NoSuchObject for it (EM.4).
func (f *landlordFixture) registrationGone(t *testing.T, reg *client.MailboxRegistration) {
	t.Helper()
	var last error
	defer func() {
		if t.Failed() {
			t.Logf("last answer: %v", last)
		}
	}()
	servertest.Eventually(t, "the registration to end with its lease", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
		defer cancel()
		_, last = f.mailbox.Registration(ctx, reg.ID)
		return errors.Is(last, djinn.ErrNoSuchObject)
	})
}

// callCounter counts the unary calls a client makes, by method.
type callCounter struct {
	mu sync.Mutex
	n  map[string]int // guarded by mu
}

func (c *callCounter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.n[method[strings.LastIndexByte(method, '/')+1:]]++
	c.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// take returns the counts so far and starts again from zero.
func (c *callCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func idBytes(id djinn.ID) []byte { return id[:] }

// testContext bounds a test's calls; it ends with the test. Loops that
// poll make their own contexts instead.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// wantErr checks err against a wanted kind (nil: no error) and a text the
// message must contain.
func wantErr(t *testing.T, what string, err, kind error, text string) {
	t.Helper()
	switch {
	case kind == nil && err != nil:
		t.Fatalf("%s: %v", what, err)
	case kind == nil:
		return
	case !errors.Is(err, kind):
		t.Fatalf("%s: error %v, want kind %v", what, err, kind)
	case !strings.Contains(err.Error(), text):
		t.Fatalf("%s: error %q does not name %q", what, err, text)
	}
}

func TestLandlordRenew(t *testing.T) {
	t.Parallel()
	f := newLandlordFixture(t)
	cookie := func(l *client.Lease) []byte { return idBytes(l.Cookie()) }
	live := func(d time.Duration) func(t *testing.T) []byte {
		return func(t *testing.T) []byte { return cookie(f.lease(t, d)) }
	}
	tests := []struct {
		name  string
		lease func(t *testing.T) []byte // the cookie to renew
		d     time.Duration
		want  time.Duration // granted, when no error is wanted
		kind  error
		text  string // the error names it
	}{
		{name: "LE.2.2 ANY gets the landlord's default", lease: live(time.Second), d: djinn.Any, want: testDefaultLease},
		{name: "LE.2.2 a duration within the maximum is granted", lease: live(time.Second), d: 3 * time.Second, want: 3 * time.Second},
		{name: "LE.2.2 a duration above the maximum gets the maximum", lease: live(time.Second), d: time.Hour, want: testMaxLease},
		{name: "LE.2.2 FOREVER gets the maximum", lease: live(time.Second), d: djinn.Forever, want: testMaxLease},
		{name: "LE.2.2 a shorter duration than the time left is granted", lease: live(4 * time.Second), d: 500 * time.Millisecond, want: 500 * time.Millisecond},
		{name: "LE.2.1 a renewed lease is just like any other lease: zero is refused as a grant of zero is", lease: live(time.Second), d: 0,
			kind: djinn.ErrInvalidArgument, text: "lease duration 0s: must be positive, Forever or Any"},
		{name: "LE.2.2 a negative duration is an illegal argument naming it", lease: live(time.Second), d: -5 * time.Second,
			kind: djinn.ErrInvalidArgument, text: "-5s"},
		{name: "LE.2.2 a lease the landlord never granted is unknown", lease: func(*testing.T) []byte { return idBytes(djinn.NewID()) },
			d: djinn.Any, kind: djinn.ErrUnknownLease},
		{name: "LE.2.2 a cancelled lease is unknown", lease: func(t *testing.T) []byte {
			l := f.lease(t, time.Minute)
			if err := l.Cancel(testContext(t), f.c); err != nil {
				t.Fatal(err)
			}
			return cookie(l)
		}, d: djinn.Any, kind: djinn.ErrUnknownLease},
		{name: "LE.2.2 an expired lease is unknown", lease: func(t *testing.T) []byte {
			reg := f.register(t, 300*time.Millisecond)
			f.registrationGone(t, reg)
			return cookie(reg.Lease)
		}, d: djinn.Any, kind: djinn.ErrUnknownLease},
		{name: "a cookie that is not 128 bits is an illegal argument", lease: func(*testing.T) []byte { return []byte{1, 2, 3} },
			d: djinn.Any, kind: djinn.ErrInvalidArgument, text: "lease cookie"},
		{name: "a missing cookie is an illegal argument", lease: func(*testing.T) []byte { return nil },
			d: djinn.Any, kind: djinn.ErrInvalidArgument, text: "lease cookie"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.lease(t)
			resp, err := f.landlord.Renew(testContext(t), &djinnpb.RenewRequest{Cookie: c, DurationNanos: int64(tt.d)})
			wantErr(t, "renew", err, tt.kind, tt.text)
			if tt.kind != nil {
				return
			}
			if got := time.Duration(resp.GetGrantedNanos()); got != tt.want {
				t.Errorf("renew for %s granted %v, want %v", djinn.FormatDuration(tt.d), got, tt.want)
			}
		})
	}
}

// TestLandlordRenewThroughLease checks what a holder sees: LE.2.3's
// expiration is the time the request was sent plus the granted duration.
func TestLandlordRenewThroughLease(t *testing.T) {
	t.Parallel()
	f := newLandlordFixture(t)
	l := f.lease(t, time.Second)
	before := time.Now()
	if err := l.Renew(testContext(t), f.c, djinn.Any); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if exp := l.Expiration(); exp.Before(before.Add(testDefaultLease)) || exp.After(after.Add(testDefaultLease)) {
		t.Errorf("renewed for Any: expiration %v, want between %v and %v",
			exp, before.Add(testDefaultLease), after.Add(testDefaultLease))
	}
	if err := l.Renew(testContext(t), f.c, -time.Second); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("renew for -1s: %v, want an illegal argument", err)
	}
}

func TestLandlordCancel(t *testing.T) {
	t.Parallel()
	f := newLandlordFixture(t)
	cancelled := f.register(t, time.Minute)
	if err := cancelled.Lease.Cancel(testContext(t), f.c); err != nil {
		t.Fatalf("LE.2.2 cancel a live lease: %v", err)
	}
	t.Run("EM.4 cancelling the lease ends the registration", func(t *testing.T) {
		_, err := f.mailbox.Registration(testContext(t), cancelled.ID)
		wantErr(t, "get registration", err, djinn.ErrNoSuchObject, "")
	})
	tests := []struct {
		name   string
		cookie []byte
		kind   error
		text   string
	}{
		{"LE.2.2 cancelling a cancelled lease: unknown lease", idBytes(cancelled.Lease.Cookie()), djinn.ErrUnknownLease, ""},
		{"LE.2.2 cancelling a lease never granted: unknown lease", idBytes(djinn.NewID()), djinn.ErrUnknownLease, ""},
		{"a cookie that is not 128 bits is an illegal argument", []byte{1}, djinn.ErrInvalidArgument, "lease cookie"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.landlord.Cancel(testContext(t), &djinnpb.CancelRequest{Cookie: tt.cookie})
			wantErr(t, "cancel", err, tt.kind, tt.text)
		})
	}
	t.Run("LE.2.2 renewing a cancelled lease: unknown lease", func(t *testing.T) {
		err := cancelled.Lease.Renew(testContext(t), f.c, djinn.Any)
		wantErr(t, "renew", err, djinn.ErrUnknownLease, "")
	})
}

// TestLandlordRenewAll: LE.2.2's LeaseMap.renewAll renews every lease in
// one call; the ones that fail leave the map and are reported each with
// its own error.
func TestLandlordRenewAll(t *testing.T) {
	t.Parallel()
	f := newLandlordFixture(t)
	ctx := testContext(t)
	good1, good2 := f.lease(t, time.Second), f.lease(t, time.Second)
	cancelled := f.lease(t, time.Minute)
	if err := cancelled.Cancel(ctx, f.c); err != nil {
		t.Fatal(err)
	}
	unknown := client.NewLease(good1.Landlord(), djinn.NewID(), time.Now().Add(time.Minute))

	m, err := good1.CreateLeaseMap(djinn.Any)
	if err != nil {
		t.Fatal(err)
	}
	for l, d := range map[*client.Lease]time.Duration{good2: time.Hour, cancelled: djinn.Any, unknown: time.Second} {
		if err := m.Put(l, d); err != nil {
			t.Fatalf("put %v: %v", l, err)
		}
	}
	f.calls.take()
	sent := time.Now()
	err = m.RenewAll(ctx, f.c)
	if calls := f.calls.take(); calls["RenewAll"] != 1 || len(calls) != 1 {
		t.Errorf("LE.2.2 renewAll is one call to the landlord: made %v", calls)
	}
	var lme *client.LeaseMapError
	if !errors.As(err, &lme) {
		t.Fatalf("renewAll: %v, want a *client.LeaseMapError", err)
	}
	if lme.Op != "renew" || lme.Total != 4 || len(lme.Failed) != 2 {
		t.Errorf("LeaseMapError: op %q, %d of %d failed; want renew, 2 of 4", lme.Op, len(lme.Failed), lme.Total)
	}
	for _, l := range []*client.Lease{cancelled, unknown} {
		if err := lme.Failed[l]; !errors.Is(err, djinn.ErrUnknownLease) {
			t.Errorf("%v: error %v, want unknown lease", l, err)
		}
		if _, ok := m.Get(l); ok {
			t.Errorf("%v failed but is still in the map", l)
		}
	}
	if !errors.Is(err, djinn.ErrUnknownLease) {
		t.Errorf("errors.Is(%v, ErrUnknownLease) = false", err)
	}
	if m.Len() != 2 {
		t.Errorf("map holds %d leases after renewAll, want the 2 renewed", m.Len())
	}
	for l, want := range map[*client.Lease]time.Duration{good1: testDefaultLease, good2: testMaxLease} {
		if _, ok := m.Get(l); !ok {
			t.Errorf("%v renewed but left the map", l)
		}
		if exp := l.Expiration(); exp.Before(sent.Add(want)) || exp.After(time.Now().Add(want)) {
			t.Errorf("%v: expiration %v, want about %v from %v", l, exp, want, sent)
		}
	}

	t.Run("the compact form: one result per lease, errors by index", func(t *testing.T) {
		unknown := djinn.NewID()
		resp, err := f.landlord.RenewAll(testContext(t), &djinnpb.RenewAllRequest{
			Cookies:       batch.PackCookies([]djinn.ID{good1.Cookie(), unknown, good2.Cookie()}),
			DurationNanos: []int64{int64(djinn.Any), int64(djinn.Any), int64(-2 * time.Second)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if g := resp.GetGrantedNanos(); len(g) != 3 || time.Duration(g[0]) != testDefaultLease || g[1] != 0 || g[2] != 0 {
			t.Errorf("granted %v, want [%d 0 0]", g, testDefaultLease)
		}
		errs, err := batch.ErrorsFrom(3, resp.GetErrors())
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "good lease", errs[0], nil, "")
		wantErr(t, "unknown lease", errs[1], djinn.ErrUnknownLease, "")
		wantErr(t, "negative duration", errs[2], djinn.ErrInvalidArgument, "-2s")
	})
	t.Run("LE.2.2 a LeaseMap holds a lease once: a batch naming one twice is refused, nothing renewed", func(t *testing.T) {
		// Before, each occurrence was renewed in turn and answered with
		// its own grant: the first, asking for the most, was told it had
		// testMaxLease while the second cut the lease back to a second.
		ctx := testContext(t)
		l := f.lease(t, 4*time.Second)
		_, err := f.landlord.RenewAll(ctx, &djinnpb.RenewAllRequest{
			Cookies:       batch.PackCookies([]djinn.ID{good1.Cookie(), l.Cookie(), l.Cookie()}),
			DurationNanos: []int64{int64(djinn.Any), int64(testMaxLease), int64(time.Second)},
		})
		wantErr(t, "renewAll of a lease twice", err, djinn.ErrInvalidArgument, l.Cookie().String()+" listed twice")
		resp, err := f.landlord.Remaining(ctx, &djinnpb.RemainingRequest{Cookie: idBytes(l.Cookie())})
		if err != nil {
			t.Fatal(err)
		}
		if left := time.Duration(resp.GetRemainingNanos()); left > 4*time.Second {
			t.Errorf("the lease has %v left after a refused renewAll, more than the 4s it was granted", left)
		}
	})
	t.Run("an ill-formed batch fails as a whole", func(t *testing.T) {
		tests := []struct {
			name string
			req  *djinnpb.RenewAllRequest
			text string
		}{
			{"cookies that are not whole 16-byte cookies",
				&djinnpb.RenewAllRequest{Cookies: make([]byte, 17), DurationNanos: []int64{int64(djinn.Any)}}, "17 bytes"},
			{"fewer durations than cookies",
				&djinnpb.RenewAllRequest{Cookies: batch.PackCookies([]djinn.ID{good1.Cookie(), good2.Cookie()}), DurationNanos: []int64{1}}, "durations"},
			{"more leases than one batch holds",
				&djinnpb.RenewAllRequest{Cookies: make([]byte, 16*(batch.MaxLeases+1)), DurationNanos: make([]int64, batch.MaxLeases+1)}, "at most"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := f.landlord.RenewAll(testContext(t), tt.req)
				wantErr(t, "renewAll", err, djinn.ErrInvalidArgument, tt.text)
			})
		}
	})
}

// TestLandlordCancelAll: LE.2.2's LeaseMap.cancelAll cancels every lease in
// one call; the ones that fail are reported and leave the map.
func TestLandlordCancelAll(t *testing.T) {
	t.Parallel()
	f := newLandlordFixture(t)
	ctx := testContext(t)
	regs := []*client.MailboxRegistration{f.register(t, time.Minute), f.register(t, time.Minute)}
	gone := f.lease(t, time.Minute)
	if err := gone.Cancel(ctx, f.c); err != nil {
		t.Fatal(err)
	}
	m := client.NewLeaseMap()
	for _, l := range []*client.Lease{regs[0].Lease, regs[1].Lease, gone} {
		if err := m.Put(l, djinn.Any); err != nil {
			t.Fatal(err)
		}
	}
	f.calls.take()
	err := m.CancelAll(ctx, f.c)
	if calls := f.calls.take(); calls["CancelAll"] != 1 || len(calls) != 1 {
		t.Errorf("LE.2.2 cancelAll is one call to the landlord: made %v", calls)
	}
	var lme *client.LeaseMapError
	if !errors.As(err, &lme) {
		t.Fatalf("cancelAll: %v, want a *client.LeaseMapError", err)
	}
	if lme.Op != "cancel" || lme.Total != 3 || len(lme.Failed) != 1 || !errors.Is(lme.Failed[gone], djinn.ErrUnknownLease) {
		t.Errorf("LeaseMapError %v: want cancel, 1 of 3 failed, the cancelled lease unknown", lme)
	}
	if m.Len() != 2 {
		t.Errorf("map holds %d leases, want the 2 cancelled ones", m.Len())
	}
	for _, reg := range regs {
		if _, err := f.mailbox.Registration(ctx, reg.ID); !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Errorf("EM.4 registration after cancelAll: %v, want no such object", err)
		}
		if err := reg.Lease.Renew(ctx, f.c, djinn.Any); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Errorf("LE.2.2 renew after cancelAll: %v, want unknown lease", err)
		}
	}

	t.Run("the compact form: errors by index", func(t *testing.T) {
		l := f.lease(t, time.Minute)
		resp, err := f.landlord.CancelAll(testContext(t), &djinnpb.CancelAllRequest{Cookies: batch.PackCookies([]djinn.ID{djinn.NewID(), l.Cookie()})})
		if err != nil {
			t.Fatal(err)
		}
		errs, err := batch.ErrorsFrom(2, resp.GetErrors())
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, "unknown lease", errs[0], djinn.ErrUnknownLease, "")
		wantErr(t, "live lease", errs[1], nil, "")
		wantErr(t, "renew the cancelled lease", l.Renew(testContext(t), f.c, djinn.Any), djinn.ErrUnknownLease, "")
	})
	t.Run("LE.2.2 a LeaseMap holds a lease once: a batch naming one twice is refused, nothing cancelled", func(t *testing.T) {
		// Before, the first occurrence cancelled the lease and the
		// second was answered unknown lease: one lease, both cancelled
		// and unknown in one answer, and the batch's others cancelled.
		ctx := testContext(t)
		other, l := f.lease(t, time.Minute), f.lease(t, time.Minute)
		_, err := f.landlord.CancelAll(ctx, &djinnpb.CancelAllRequest{Cookies: batch.PackCookies([]djinn.ID{other.Cookie(), l.Cookie(), l.Cookie()})})
		wantErr(t, "cancelAll of a lease twice", err, djinn.ErrInvalidArgument, l.Cookie().String()+" listed twice")
		for _, l := range []*client.Lease{other, l} {
			if err := l.Renew(ctx, f.c, djinn.Any); err != nil {
				t.Errorf("renew %v after a refused cancelAll: %v; want it live", l, err)
			}
		}
	})
	t.Run("cookies that are not whole 16-byte cookies fail the call", func(t *testing.T) {
		_, err := f.landlord.CancelAll(testContext(t), &djinnpb.CancelAllRequest{Cookies: []byte("short")})
		wantErr(t, "cancelAll", err, djinn.ErrInvalidArgument, "5 bytes")
	})
}

// TestLandlordRemaining: the landlord tells a lease's holder how long it
// has left and what it covers; a lease it no longer holds is unknown.
func TestLandlordRemaining(t *testing.T) {
	f := newLandlordFixture(t)
	ctx := testContext(t)
	reg := f.register(t, testMaxLease)
	before, registered := reg.Lease.Expiration(), time.Now()
	covers, err := reg.Lease.Refresh(ctx, f.c)
	if err != nil {
		t.Fatal(err)
	}
	if covers != "mailbox registration" {
		t.Errorf("the lease covers %q, want a mailbox registration", covers)
	}
	// The landlord's answer is at most what was granted, counted from a
	// later send: the expiration does not move past the granted one, which
	// the landlord counted from when the grant reached it — at the latest
	// when its answer came back.
	if exp := reg.Lease.Expiration(); exp.After(registered.Add(testMaxLease)) || exp.Before(before.Add(-testMaxLease)) {
		t.Errorf("expiration %v after the refresh, granted %v", exp, before)
	}
	resp, err := f.landlord.Remaining(ctx, &djinnpb.RemainingRequest{Cookie: idBytes(reg.Lease.Cookie())})
	if err != nil || resp.GetRemainingNanos() <= 0 || resp.GetRemainingNanos() > int64(testMaxLease) {
		t.Errorf("remaining %v %v, want within the 5s granted", resp, err)
	}
	if err := reg.Lease.Cancel(ctx, f.c); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Lease.Refresh(ctx, f.c); !errors.Is(err, djinn.ErrUnknownLease) {
		t.Errorf("refresh of a cancelled lease: %v, want unknown lease", err)
	}
	if _, err := f.landlord.Remaining(ctx, &djinnpb.RemainingRequest{Cookie: []byte{1, 2}}); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("a cookie of 2 bytes: %v, want invalid argument", err)
	}
}
