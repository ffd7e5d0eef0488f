// Package clienttest holds test doubles for programs built on package
// client. Landlord is djinn's one in-memory landlord — for the client's
// tests, the renewal service's tests and the renewal bench alike: it grants,
// renews and cancels leases with LE.2.2's duration negotiation, serves the
// Landlord gRPC service on a real port, or answers directly through an
// in-process client when a test runs under testing/synctest, where network
// listeners cannot be used. Failures, latency and held calls can be
// injected; every call is recorded and counted, and a renewal that comes
// after its lease expired is counted as a lapse.
package clienttest

import (
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LandlordObject is the object id of every test landlord's reference, the
// same as a djinn server's landlord.
var LandlordObject = djinn.ID{'l', 'a', 'n', 'd', 'l', 'o', 'r', 'd'}

// Call is one call a Landlord answered: the method ("Renew", "RenewAll",
// "RenewStream", "Cancel" or "CancelAll"), when it was handled, and the
// cookies and requested durations (renewals only) it named.
type Call struct {
	Method    string
	At        time.Time
	Cookies   []djinn.ID
	Durations []time.Duration
}

// Counts are a landlord's counters at one time. Every counter only grows
// but Live.
type Counts struct {
	RenewCalls, RenewAllCalls, StreamRenewals int64 // calls, and requests on RenewStream streams
	Renewed                                   int64 // leases renewed, by any call
	Lapses                                    int64 // leases found expired, by a renewal or Sweep: once each
	Unknown                                   int64 // renewals of cookies not held: never granted, cancelled, forgotten, or after a lapse
	Cancelled                                 int64
	Live                                      int64 // leases granted and not yet expired or cancelled
}

// Add returns the sum of a and b.
func (a Counts) Add(b Counts) Counts {
	return Counts{a.RenewCalls + b.RenewCalls, a.RenewAllCalls + b.RenewAllCalls, a.StreamRenewals + b.StreamRenewals,
		a.Renewed + b.Renewed, a.Lapses + b.Lapses, a.Unknown + b.Unknown, a.Cancelled + b.Cancelled, a.Live + b.Live}
}

// Sub returns a − b for the counters; Live stays a's.
func (a Counts) Sub(b Counts) Counts {
	return Counts{a.RenewCalls - b.RenewCalls, a.RenewAllCalls - b.RenewAllCalls, a.StreamRenewals - b.StreamRenewals,
		a.Renewed - b.Renewed, a.Lapses - b.Lapses, a.Unknown - b.Unknown, a.Cancelled - b.Cancelled, a.Live}
}

// record is one lease the landlord granted.
type record struct {
	expires time.Time
	lapsed  bool // found expired, and counted as a lapse
}

// Landlord is an in-memory landlord. Any gets Default; longer requests get
// Max (djinn.Forever allows Forever leases). Time comes from time.Now, so
// under testing/synctest it is the bubble's fake clock. It is safe for
// concurrent use.
type Landlord struct {
	djinnpb.UnimplementedLandlordServer
	Default, Max time.Duration

	calls chan Call

	mu        sync.Mutex
	ref       djinn.Ref                   // guarded by mu
	leases    map[djinn.ID]*record        // guarded by mu: until cancelled or forgotten, lapsed ones too
	fail      map[djinn.ID]error          // guarded by mu: injected renewal errors
	failWith  func(cookie djinn.ID) error // guarded by mu: injected renewal errors, by rule
	down      error                       // guarded by mu: injected whole-call error
	latency   time.Duration               // guarded by mu: each way, in-process client only
	held      chan struct{}               // guarded by mu: while set, calls wait until it is closed
	waiting   int                         // guarded by mu: calls waiting on held
	recording bool                        // guarded by mu
	counts    Counts                      // guarded by mu; Live is computed
}

// NewLandlord returns a landlord granting def for Any and at most max. Until
// Listen its reference's endpoint is a placeholder of its own that only the
// in-process client can reach.
func NewLandlord(def, max time.Duration) *Landlord {
	svc := djinn.NewID()
	return &Landlord{
		Default: def, Max: max,
		calls:     make(chan Call, 4096),
		ref:       djinn.Ref{Endpoint: "landlord-" + svc.String()[:8] + ".test:1", Service: svc, Object: LandlordObject},
		leases:    map[djinn.ID]*record{},
		fail:      map[djinn.ID]error{},
		recording: true,
	}
}

// Ref returns the landlord's reference.
func (l *Landlord) Ref() djinn.Ref {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ref
}

// Listen serves the landlord over gRPC on addr ("127.0.0.1:0" picks a
// port) and makes that its reference's endpoint. stop stops the server and
// waits for it.
func (l *Landlord) Listen(addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	// The policy of client.ServerKeepalive (which this package cannot
	// import: the client's tests import it): a pool's pings are welcome.
	srv := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	djinnpb.RegisterLandlordServer(srv, l)
	l.mu.Lock()
	l.ref.Endpoint = ln.Addr().String()
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return func() {
		srv.Stop()
		<-done
	}, nil
}

// Calls returns the calls answered, oldest first. Up to 4096 unread calls
// are kept; later ones are dropped.
func (l *Landlord) Calls() <-chan Call { return l.calls }

// SetRecording turns the record of calls on (the default) or off: a load
// that renews millions of leases must not keep them all.
func (l *Landlord) SetRecording(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recording = on
}

// Counts returns the landlord's counters.
func (l *Landlord) Counts() Counts {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.counts
	now := time.Now()
	for _, r := range l.leases {
		if r.expires.After(now) {
			c.Live++
		}
	}
	return c
}

// Sweep counts every lease that expired unrenewed, and not counted yet, as
// a lapse, and returns how many leases are live.
func (l *Landlord) Sweep() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	live := 0
	for _, r := range l.leases {
		if r.expires.After(now) {
			live++
			continue
		}
		if !r.lapsed {
			r.lapsed = true
			l.counts.Lapses++
		}
	}
	return live
}

// Grant grants a lease for d (positive, Forever or Any), negotiated as a
// djinn service would, and returns it as it travels: the time left.
func (l *Landlord) Grant(d time.Duration) (*djinnpb.Lease, error) {
	if err := djinn.CheckLeaseDuration("lease duration", d); err != nil {
		return nil, err
	}
	g := l.negotiate(d)
	cookie := djinn.NewID()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leases[cookie] = &record{expires: djinn.AddDuration(time.Now(), g)}
	return l.protoLocked(cookie, g), nil
}

// GrantExpiring grants a lease that expires at exp, whatever the policy
// says (a lease granted earlier, or under another policy). In the duration
// serial format it carries the time left; in the absolute format exp
// itself, which may already be past.
func (l *Landlord) GrantExpiring(exp time.Time, format djinnpb.SerialFormat) (*djinnpb.Lease, djinn.ID) {
	cookie := djinn.NewID()
	return l.GrantCookie(cookie, exp, format), cookie
}

// GrantCookie is GrantExpiring with the cookie given: landlords are
// separate name spaces, so two of them may hold the same cookie.
func (l *Landlord) GrantCookie(cookie djinn.ID, exp time.Time, format djinnpb.SerialFormat) *djinnpb.Lease {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leases[cookie] = &record{expires: exp}
	pb := l.protoLocked(cookie, max(0, djinn.Remaining(exp, time.Now())))
	if format == djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE {
		pb.DurationNanos, pb.ExpirationUnixNanos, pb.Format = 0, exp.UnixNano(), format
	}
	return pb
}

func (l *Landlord) protoLocked(cookie djinn.ID, remaining time.Duration) *djinnpb.Lease {
	return &djinnpb.Lease{
		Landlord:      &djinnpb.Ref{Endpoint: l.ref.Endpoint, ServiceId: l.ref.Service[:], ObjectId: l.ref.Object[:]},
		Cookie:        cookie[:],
		DurationNanos: int64(remaining),
		Format:        djinnpb.SerialFormat_SERIAL_FORMAT_DURATION,
	}
}

// Expiration returns when the lease with cookie expires here, and whether
// the landlord holds it (granted, not cancelled, not expired).
func (l *Landlord) Expiration(cookie djinn.ID) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.leases[cookie]
	if !ok {
		return time.Time{}, false
	}
	return r.expires, r.expires.After(time.Now())
}

// Known reports whether the landlord still knows the lease: it was granted
// and neither cancelled nor forgotten. It may have expired.
func (l *Landlord) Known(cookie djinn.ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.leases[cookie]
	return ok
}

// Forget drops a lease, as if another holder had cancelled it.
func (l *Landlord) Forget(cookie djinn.ID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.leases, cookie)
}

// FailRenewals makes every renewal of cookie fail with err; nil ends it.
func (l *Landlord) FailRenewals(cookie djinn.ID, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		delete(l.fail, cookie)
		return
	}
	l.fail[cookie] = err
}

// FailRenewalsWith makes each renewal of a held lease fail with what fail
// returns for its cookie (nil: renewed); a nil fail ends it.
func (l *Landlord) FailRenewalsWith(fail func(cookie djinn.ID) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failWith = fail
}

// SetDown makes every call fail with err, as an unreachable landlord would
// (use an error of kind djinn.Unavailable); nil brings it back.
func (l *Landlord) SetDown(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = err
}

// SetLatency delays each call of the in-process client by d on the way to
// the landlord and again on the way back.
func (l *Landlord) SetLatency(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.latency = d
}

// Hold makes every call wait, before the landlord acts, until release is
// called or the call's context ends (the call then fails as unavailable
// and nothing changed). Waiting says how many calls wait.
func (l *Landlord) Hold() (release func()) {
	ch := make(chan struct{})
	l.mu.Lock()
	l.held = ch
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			if l.held == ch {
				l.held = nil
			}
			l.mu.Unlock()
			close(ch)
		})
	}
}

// Waiting returns the number of calls waiting on a Hold.
func (l *Landlord) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting
}

func (l *Landlord) negotiate(d time.Duration) time.Duration {
	switch {
	case d == djinn.Any:
		return l.Default
	case d > l.Max:
		return l.Max
	}
	return d
}
