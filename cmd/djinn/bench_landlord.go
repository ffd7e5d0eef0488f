package main

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// benchLandlord is a landlord hosted by the renewal bench: it grants the
// client leases the renewal service keeps alive and tells whether it did.
// Its leases live in memory only, cookie to expiration. It is strict: a
// lease whose expiration has come is gone, and the renewal that finds it
// gone, or the sweep that does, counts a lapse. It answers UnknownLease,
// as a real landlord would.
//
// Its methods may be called concurrently; the counters only grow.
type benchLandlord struct {
	djinnpb.UnimplementedLandlordServer
	ref   djinn.Ref
	refpb *djinnpb.Ref
	max   time.Duration // the longest lease it grants

	mu     sync.Mutex
	leases map[djinn.ID]int64 // guarded by mu: cookie → expiration, Unix nanoseconds

	renewCalls     atomic.Int64
	renewAllCalls  atomic.Int64
	streamRenewals atomic.Int64 // requests on RenewStream streams
	renewed        atomic.Int64 // leases renewed, by any call
	lapses         atomic.Int64 // leases found expired, by a renewal or a sweep
	unknown        atomic.Int64 // renewals of cookies not held: after a lapse or cancel, or never granted
	cancelled      atomic.Int64

	srv  *grpc.Server // nil when not serving
	done chan struct{}
}

var _ djinnpb.LandlordServer = (*benchLandlord)(nil)

// newBenchLandlord returns a landlord named ref granting leases of at most
// max, not serving.
func newBenchLandlord(ref djinn.Ref, max time.Duration) *benchLandlord {
	return &benchLandlord{ref: ref, refpb: client.RefToProto(ref), max: max, leases: map[djinn.ID]int64{}}
}

// startBenchLandlord serves a new landlord on a loopback port; close stops
// it.
func startBenchLandlord(max time.Duration) (*benchLandlord, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := newBenchLandlord(djinn.Ref{Endpoint: ln.Addr().String(), Service: djinn.NewID(), Object: djinn.ID{15: 1}}, max)
	l.srv = grpc.NewServer(
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			resp, err := h(ctx, req)
			return resp, grpcerr.Status(err)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return grpcerr.Status(h(srv, ss))
		}))
	djinnpb.RegisterLandlordServer(l.srv, l)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		_ = l.srv.Serve(ln) // returns when close stops the server
	}()
	return l, nil
}

// close stops serving and waits for the server to end.
func (l *benchLandlord) close() {
	l.srv.Stop()
	<-l.done
}

// grant grants a lease of the longest term at now.
func (l *benchLandlord) grant(now time.Time) (cookie djinn.ID, expiration time.Time) {
	cookie = djinn.NewID()
	expiration = now.Add(l.max)
	l.mu.Lock()
	l.leases[cookie] = expiration.UnixNano()
	l.mu.Unlock()
	return cookie, expiration
}

// term is the duration granted for a request of d: d, at most max (Any
// asks for max).
func (l *benchLandlord) term(d time.Duration) (time.Duration, error) {
	if err := djinn.CheckLeaseDuration("lease duration", d); err != nil {
		return 0, err
	}
	if d == djinn.Any || d > l.max {
		return l.max, nil
	}
	return d, nil
}

// renewLocked renews cookie at now (Unix nanoseconds) for a granted term.
func (l *benchLandlord) renewLocked(cookie djinn.ID, term time.Duration, now int64) error {
	exp, ok := l.leases[cookie]
	if !ok {
		l.unknown.Add(1)
		return djinn.Errorf(djinn.UnknownLease, "lease %s: not granted here, or gone", cookie)
	}
	if now >= exp {
		delete(l.leases, cookie)
		l.lapses.Add(1)
		return djinn.Errorf(djinn.UnknownLease, "lease %s: expired %s ago", cookie, time.Duration(now-exp))
	}
	l.leases[cookie] = now + int64(term)
	l.renewed.Add(1)
	return nil
}

func (l *benchLandlord) renew(cookie []byte, d time.Duration) (time.Duration, error) {
	c, err := djinn.IDFromBytes("lease cookie", cookie)
	if err != nil {
		return 0, err
	}
	term, err := l.term(d)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.renewLocked(c, term, time.Now().UnixNano()); err != nil {
		return 0, err
	}
	return term, nil
}

func (l *benchLandlord) Renew(_ context.Context, r *djinnpb.RenewRequest) (*djinnpb.RenewResponse, error) {
	l.renewCalls.Add(1)
	g, err := l.renew(r.GetCookie(), time.Duration(r.GetDurationNanos()))
	if err != nil {
		return nil, err
	}
	return &djinnpb.RenewResponse{GrantedNanos: int64(g)}, nil
}

func (l *benchLandlord) RenewAll(_ context.Context, r *djinnpb.RenewAllRequest) (*djinnpb.RenewAllResponse, error) {
	l.renewAllCalls.Add(1)
	cookies, err := batch.Cookies(r.GetCookies())
	if err != nil {
		return nil, err
	}
	ds := r.GetDurationNanos()
	if len(ds) != len(cookies) {
		return nil, djinn.Errorf(djinn.InvalidArgument, "renewAll: %d cookies but %d durations", len(cookies), len(ds))
	}
	out := &djinnpb.RenewAllResponse{GrantedNanos: make([]int64, len(cookies))}
	fail := func(i int, err error) {
		out.Errors = append(out.Errors, &djinnpb.IndexedError{Index: uint32(i), Error: grpcerr.ToProto(err)})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now().UnixNano()
	for i, c := range cookies {
		term, err := l.term(time.Duration(ds[i]))
		if err == nil {
			err = l.renewLocked(c, term, now)
		}
		if err != nil {
			fail(i, err)
			continue
		}
		out.GrantedNanos[i] = int64(term)
	}
	return out, nil
}

func (l *benchLandlord) RenewStream(stream djinnpb.Landlord_RenewStreamServer) error {
	for {
		r, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		l.streamRenewals.Add(1)
		g, err := l.renew(r.GetCookie(), time.Duration(r.GetDurationNanos()))
		if err := stream.Send(&djinnpb.RenewStreamResponse{GrantedNanos: int64(g), Error: grpcerr.ToProto(err)}); err != nil {
			return err
		}
	}
}

func (l *benchLandlord) cancel(cookie djinn.ID) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.leases[cookie]; !ok {
		return djinn.Errorf(djinn.UnknownLease, "lease %s: not granted here, or gone", cookie)
	}
	delete(l.leases, cookie)
	l.cancelled.Add(1)
	return nil
}

func (l *benchLandlord) Cancel(_ context.Context, r *djinnpb.CancelRequest) (*djinnpb.CancelResponse, error) {
	c, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
	if err != nil {
		return nil, err
	}
	if err := l.cancel(c); err != nil {
		return nil, err
	}
	return &djinnpb.CancelResponse{}, nil
}

func (l *benchLandlord) CancelAll(_ context.Context, r *djinnpb.CancelAllRequest) (*djinnpb.CancelAllResponse, error) {
	cookies, err := batch.Cookies(r.GetCookies())
	if err != nil {
		return nil, err
	}
	errs := make([]error, len(cookies))
	for i, c := range cookies {
		errs[i] = l.cancel(c)
	}
	return &djinnpb.CancelAllResponse{Errors: batch.Errors(errs)}, nil
}

// sweep drops the leases expired at now, counting each as a lapse, and
// returns how many remain.
func (l *benchLandlord) sweep(now time.Time) int {
	t := now.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	for c, exp := range l.leases {
		if t >= exp {
			delete(l.leases, c)
			l.lapses.Add(1)
		}
	}
	return len(l.leases)
}

// landlordCounts are a landlord's counters at one time.
type landlordCounts struct {
	RenewCalls, RenewAllCalls, StreamRenewals int64
	Renewed, Lapses, Unknown, Cancelled       int64
	Live                                      int64 // leases held
}

func (l *benchLandlord) counts() landlordCounts {
	l.mu.Lock()
	live := len(l.leases)
	l.mu.Unlock()
	return landlordCounts{
		RenewCalls: l.renewCalls.Load(), RenewAllCalls: l.renewAllCalls.Load(), StreamRenewals: l.streamRenewals.Load(),
		Renewed: l.renewed.Load(), Lapses: l.lapses.Load(), Unknown: l.unknown.Load(), Cancelled: l.cancelled.Load(),
		Live: int64(live),
	}
}

func (a landlordCounts) add(b landlordCounts) landlordCounts {
	return landlordCounts{a.RenewCalls + b.RenewCalls, a.RenewAllCalls + b.RenewAllCalls, a.StreamRenewals + b.StreamRenewals,
		a.Renewed + b.Renewed, a.Lapses + b.Lapses, a.Unknown + b.Unknown, a.Cancelled + b.Cancelled, a.Live + b.Live}
}

// sub is a − b for the counters; Live stays a's.
func (a landlordCounts) sub(b landlordCounts) landlordCounts {
	return landlordCounts{a.RenewCalls - b.RenewCalls, a.RenewAllCalls - b.RenewAllCalls, a.StreamRenewals - b.StreamRenewals,
		a.Renewed - b.Renewed, a.Lapses - b.Lapses, a.Unknown - b.Unknown, a.Cancelled - b.Cancelled, a.Live}
}
