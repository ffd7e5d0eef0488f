// Package clienttest holds test doubles for programs built on package
// client. Landlord is an in-memory djinn landlord: it grants, renews and
// cancels leases with LE.2.2's duration negotiation, serves the Landlord gRPC
// service on a real port, or answers directly through an in-process client
// when a test runs under testing/synctest, where network listeners cannot be
// used. Failures and latency can be injected, and every call is recorded.
package clienttest

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LandlordObject is the object id of every test landlord's reference.
var LandlordObject = djinn.ID{'l', 'a', 'n', 'd', 'l', 'o', 'r', 'd'}

// Call is one call a Landlord answered: the method ("Renew", "RenewAll",
// "Cancel" or "CancelAll"), when it was handled, and the cookies and
// requested durations (renewals only) it named.
type Call struct {
	Method    string
	At        time.Time
	Cookies   []djinn.ID
	Durations []time.Duration
}

// Landlord is an in-memory landlord. Any gets Default; longer requests get
// Max (djinn.Forever allows Forever leases). Time comes from time.Now, so
// under testing/synctest it is the bubble's fake clock. It is safe for
// concurrent use.
type Landlord struct {
	djinnpb.UnimplementedLandlordServer
	Default, Max time.Duration

	calls chan Call

	mu      sync.Mutex
	ref     djinn.Ref              // guarded by mu
	leases  map[djinn.ID]time.Time // guarded by mu: cookie -> expiration
	fail    map[djinn.ID]error     // guarded by mu: injected renewal errors
	down    error                  // guarded by mu: injected whole-call error
	latency time.Duration          // guarded by mu: each way, in-process client only
}

var _ djinnpb.LandlordServer = (*Landlord)(nil)

// NewLandlord returns a landlord granting def for Any and at most max. Until
// Listen its reference's endpoint is a placeholder of its own that only the
// in-process client can reach.
func NewLandlord(def, max time.Duration) *Landlord {
	svc := djinn.NewID()
	return &Landlord{
		Default: def, Max: max,
		calls:  make(chan Call, 4096),
		ref:    djinn.Ref{Endpoint: "landlord-" + svc.String()[:8] + ".test:1", Service: svc, Object: LandlordObject},
		leases: map[djinn.ID]time.Time{},
		fail:   map[djinn.ID]error{},
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
	srv := grpc.NewServer()
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
	l.leases[cookie] = djinn.AddDuration(time.Now(), g)
	return &djinnpb.Lease{
		Landlord:      &djinnpb.Ref{Endpoint: l.ref.Endpoint, ServiceId: l.ref.Service[:], ObjectId: l.ref.Object[:]},
		Cookie:        cookie[:],
		DurationNanos: int64(g),
		Format:        djinnpb.SerialFormat_SERIAL_FORMAT_DURATION,
	}, nil
}

// Expiration returns when the lease with cookie expires here, and whether
// the landlord holds it.
func (l *Landlord) Expiration(cookie djinn.ID) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	exp, ok := l.leases[cookie]
	if ok && !exp.After(time.Now()) {
		return exp, false
	}
	return exp, ok
}

// Forget drops a lease, as if it had expired or another holder had
// cancelled it.
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

func (l *Landlord) negotiate(d time.Duration) time.Duration {
	switch {
	case d == djinn.Any:
		return l.Default
	case d > l.Max:
		return l.Max
	}
	return d
}

// recordLocked records a call. It runs under l.mu, so a test that reads
// the call and then changes the landlord cannot change the call's answer.
func (l *Landlord) recordLocked(c Call) {
	c.At = time.Now()
	select {
	case l.calls <- c:
	default:
	}
}

// renewLocked renews one lease.
func (l *Landlord) renewLocked(cookie []byte, d time.Duration, now time.Time) (time.Duration, error) {
	c, err := djinn.IDFromBytes("lease cookie", cookie)
	if err != nil {
		return 0, err
	}
	if d < 0 && d != djinn.Any {
		return 0, djinn.Errorf(djinn.InvalidArgument, "lease duration %s: must be zero or more, Forever or Any", d)
	}
	exp, ok := l.leases[c]
	if !ok || !exp.After(now) {
		delete(l.leases, c)
		return 0, djinn.Errorf(djinn.UnknownLease, "lease %s: unknown or expired", c.String()[:8])
	}
	if err := l.fail[c]; err != nil {
		return 0, err
	}
	g := l.negotiate(d)
	l.leases[c] = djinn.AddDuration(now, g)
	return g, nil
}

func (l *Landlord) cancelLocked(cookie []byte, now time.Time) error {
	c, err := djinn.IDFromBytes("lease cookie", cookie)
	if err != nil {
		return err
	}
	exp, ok := l.leases[c]
	delete(l.leases, c)
	if !ok || !exp.After(now) {
		return djinn.Errorf(djinn.UnknownLease, "lease %s: unknown or expired", c.String()[:8])
	}
	return nil
}

func ids(bs [][]byte) []djinn.ID {
	out := make([]djinn.ID, len(bs))
	for i, b := range bs {
		copy(out[i][:], b)
	}
	return out
}

// Renew implements djinnpb.LandlordServer.
func (l *Landlord) Renew(_ context.Context, r *djinnpb.RenewRequest) (*djinnpb.RenewResponse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recordLocked(Call{Method: "Renew", Cookies: ids([][]byte{r.GetCookie()}),
		Durations: []time.Duration{time.Duration(r.GetDurationNanos())}})
	if l.down != nil {
		return nil, grpcerr.Status(l.down)
	}
	g, err := l.renewLocked(r.GetCookie(), time.Duration(r.GetDurationNanos()), time.Now())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.RenewResponse{GrantedNanos: int64(g)}, nil
}

// Cancel implements djinnpb.LandlordServer.
func (l *Landlord) Cancel(_ context.Context, r *djinnpb.CancelRequest) (*djinnpb.CancelResponse, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recordLocked(Call{Method: "Cancel", Cookies: ids([][]byte{r.GetCookie()})})
	if l.down != nil {
		return nil, grpcerr.Status(l.down)
	}
	if err := l.cancelLocked(r.GetCookie(), time.Now()); err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.CancelResponse{}, nil
}

// RenewAll implements djinnpb.LandlordServer: a granted duration per
// lease, in order, and the errors of those that failed.
func (l *Landlord) RenewAll(_ context.Context, r *djinnpb.RenewAllRequest) (*djinnpb.RenewAllResponse, error) {
	cookies, err := batch.Cookies(r.GetCookies())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	if len(cookies) != len(r.GetDurationNanos()) {
		return nil, grpcerr.Status(djinn.Errorf(djinn.InvalidArgument, "renewAll: %d cookies but %d durations", len(cookies), len(r.GetDurationNanos())))
	}
	c := Call{Method: "RenewAll", Cookies: cookies}
	for _, d := range r.GetDurationNanos() {
		c.Durations = append(c.Durations, time.Duration(d))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recordLocked(c)
	if l.down != nil {
		return nil, grpcerr.Status(l.down)
	}
	now := time.Now()
	out := &djinnpb.RenewAllResponse{GrantedNanos: make([]int64, len(cookies))}
	errs := make([]error, len(cookies))
	for i, id := range cookies {
		g, err := l.renewLocked(id[:], c.Durations[i], now)
		out.GrantedNanos[i], errs[i] = int64(g), err
	}
	out.Errors = batch.Errors(errs)
	return out, nil
}

// CancelAll implements djinnpb.LandlordServer: the errors of the leases
// that could not be cancelled.
func (l *Landlord) CancelAll(_ context.Context, r *djinnpb.CancelAllRequest) (*djinnpb.CancelAllResponse, error) {
	cookies, err := batch.Cookies(r.GetCookies())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recordLocked(Call{Method: "CancelAll", Cookies: cookies})
	if l.down != nil {
		return nil, grpcerr.Status(l.down)
	}
	now := time.Now()
	errs := make([]error, len(cookies))
	for i, id := range cookies {
		errs[i] = l.cancelLocked(id[:], now)
	}
	return &djinnpb.CancelAllResponse{Errors: batch.Errors(errs)}, nil
}

// Client returns a Landlord client that calls l in process, with l's
// latency and errors as they would come off the wire. It starts no
// goroutines, so it works inside a testing/synctest bubble.
func (l *Landlord) Client() djinnpb.LandlordClient { return inProcess{l} }

type inProcess struct{ l *Landlord }

var _ djinnpb.LandlordClient = inProcess{}

// travel waits out one way of the latency.
func (c inProcess) travel(ctx context.Context) error {
	c.l.mu.Lock()
	d := c.l.latency
	c.l.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return grpcerr.Status(err)
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return grpcerr.Status(ctx.Err())
	case <-t.C:
		return nil
	}
}

func call[Req, Resp any](ctx context.Context, c inProcess, f func(context.Context, Req) (Resp, error), r Req) (Resp, error) {
	var zero Resp
	if err := c.travel(ctx); err != nil {
		return zero, err
	}
	resp, err := f(ctx, r)
	if terr := c.travel(ctx); terr != nil && err == nil {
		// The landlord acted; the answer was lost.
		return zero, terr
	}
	return resp, err
}

func (c inProcess) Renew(ctx context.Context, r *djinnpb.RenewRequest, _ ...grpc.CallOption) (*djinnpb.RenewResponse, error) {
	return call(ctx, c, c.l.Renew, r)
}

func (c inProcess) Cancel(ctx context.Context, r *djinnpb.CancelRequest, _ ...grpc.CallOption) (*djinnpb.CancelResponse, error) {
	return call(ctx, c, c.l.Cancel, r)
}

func (c inProcess) RenewAll(ctx context.Context, r *djinnpb.RenewAllRequest, _ ...grpc.CallOption) (*djinnpb.RenewAllResponse, error) {
	return call(ctx, c, c.l.RenewAll, r)
}

func (c inProcess) CancelAll(ctx context.Context, r *djinnpb.CancelAllRequest, _ ...grpc.CallOption) (*djinnpb.CancelAllResponse, error) {
	return call(ctx, c, c.l.CancelAll, r)
}

// RenewStream is not served in process: the in-process client is for the
// Renewer, which renews in batches.
func (c inProcess) RenewStream(context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[djinnpb.RenewRequest, djinnpb.RenewStreamResponse], error) {
	return nil, grpcerr.Status(djinn.Errorf(djinn.Unsupported, "renew stream: not served in process"))
}
