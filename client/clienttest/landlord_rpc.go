package clienttest

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The Landlord gRPC service: each call waits out a Hold, is recorded and
// counted, and fails whole while the landlord is down. Errors go out with
// their djinn kinds, as from a djinn server.

// enter waits out a Hold, then locks l and records c; it returns with l.mu
// held unless it fails.
func (l *Landlord) enter(ctx context.Context, c Call) error {
	l.mu.Lock()
	for l.held != nil {
		ch := l.held
		l.waiting++
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		l.mu.Lock()
		l.waiting--
		if err := ctx.Err(); err != nil {
			l.mu.Unlock()
			return djinn.Errorf(djinn.Unavailable, "landlord call held: %v", err)
		}
	}
	c.At = time.Now()
	if l.recording {
		select {
		case l.calls <- c:
		default:
		}
	}
	switch c.Method {
	case "Renew":
		l.counts.RenewCalls++
	case "RenewAll":
		l.counts.RenewAllCalls++
	case "RenewStream":
		l.counts.StreamRenewals++
	}
	if l.down != nil {
		err := l.down
		l.mu.Unlock()
		return err
	}
	return nil
}

// renewLocked renews one lease at now. A lease found expired counts as a
// lapse the first time, after that as unknown.
func (l *Landlord) renewLocked(c djinn.ID, d time.Duration, now time.Time) (time.Duration, error) {
	if d <= 0 && d != djinn.Any {
		return 0, djinn.Errorf(djinn.InvalidArgument, "lease duration %s: must be positive, Forever or Any (to end a lease, cancel it)", djinn.FormatDuration(d))
	}
	r, ok := l.leases[c]
	switch {
	case !ok || r.lapsed:
		l.counts.Unknown++
		return 0, djinn.Errorf(djinn.UnknownLease, "lease %s: unknown or expired", c.String()[:8])
	case !r.expires.After(now):
		r.lapsed = true
		l.counts.Lapses++
		return 0, djinn.Errorf(djinn.UnknownLease, "lease %s: expired %s ago", c.String()[:8], now.Sub(r.expires))
	}
	if err := l.fail[c]; err != nil {
		return 0, err
	}
	if l.failWith != nil {
		if err := l.failWith(c); err != nil {
			return 0, err
		}
	}
	g := l.negotiate(d)
	r.expires = djinn.AddDuration(now, g)
	l.counts.Renewed++
	return g, nil
}

func (l *Landlord) cancelLocked(c djinn.ID, now time.Time) error {
	r, ok := l.leases[c]
	delete(l.leases, c)
	if !ok || !r.expires.After(now) {
		return djinn.Errorf(djinn.UnknownLease, "lease %s: unknown or expired", c.String()[:8])
	}
	l.counts.Cancelled++
	return nil
}

// Renew implements djinnpb.LandlordServer.
func (l *Landlord) Renew(ctx context.Context, r *djinnpb.RenewRequest) (*djinnpb.RenewResponse, error) {
	c, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	d := time.Duration(r.GetDurationNanos())
	if err := l.enter(ctx, Call{Method: "Renew", Cookies: []djinn.ID{c}, Durations: []time.Duration{d}}); err != nil {
		return nil, grpcerr.Status(err)
	}
	defer l.mu.Unlock()
	g, err := l.renewLocked(c, d, time.Now())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.RenewResponse{GrantedNanos: int64(g)}, nil
}

// Remaining implements djinnpb.LandlordServer: the time a held lease has
// left; it covers "test lease".
func (l *Landlord) Remaining(ctx context.Context, r *djinnpb.RemainingRequest) (*djinnpb.RemainingResponse, error) {
	c, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	if err := l.enter(ctx, Call{Method: "Remaining", Cookies: []djinn.ID{c}}); err != nil {
		return nil, grpcerr.Status(err)
	}
	defer l.mu.Unlock()
	now := time.Now()
	rec, ok := l.leases[c]
	if !ok || !rec.expires.After(now) {
		return nil, grpcerr.Status(djinn.Errorf(djinn.UnknownLease, "lease %s: unknown or expired", c.String()[:8]))
	}
	left := djinn.Forever
	if rec.expires.Before(djinn.EndOfTime) {
		left = rec.expires.Sub(now)
	}
	return &djinnpb.RemainingResponse{RemainingNanos: int64(left), Covers: "test lease"}, nil
}

// Cancel implements djinnpb.LandlordServer.
func (l *Landlord) Cancel(ctx context.Context, r *djinnpb.CancelRequest) (*djinnpb.CancelResponse, error) {
	c, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	if err := l.enter(ctx, Call{Method: "Cancel", Cookies: []djinn.ID{c}}); err != nil {
		return nil, grpcerr.Status(err)
	}
	defer l.mu.Unlock()
	if err := l.cancelLocked(c, time.Now()); err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.CancelResponse{}, nil
}

// RenewAll implements djinnpb.LandlordServer: a granted duration per
// lease, in order, and the errors of those that failed.
func (l *Landlord) RenewAll(ctx context.Context, r *djinnpb.RenewAllRequest) (*djinnpb.RenewAllResponse, error) {
	cookies, err := batch.Cookies(r.GetCookies())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	if len(cookies) != len(r.GetDurationNanos()) {
		return nil, grpcerr.Status(djinn.Errorf(djinn.InvalidArgument, "renewAll: %d cookies but %d durations", len(cookies), len(r.GetDurationNanos())))
	}
	c := Call{Method: "RenewAll", Cookies: cookies, Durations: make([]time.Duration, len(cookies))}
	for i, d := range r.GetDurationNanos() {
		c.Durations[i] = time.Duration(d)
	}
	if err := l.enter(ctx, c); err != nil {
		return nil, grpcerr.Status(err)
	}
	defer l.mu.Unlock()
	now := time.Now()
	out := &djinnpb.RenewAllResponse{GrantedNanos: make([]int64, len(cookies))}
	errs := make([]error, len(cookies))
	for i, id := range cookies {
		g, err := l.renewLocked(id, c.Durations[i], now)
		out.GrantedNanos[i], errs[i] = int64(g), err
	}
	out.Errors = batch.Errors(errs)
	return out, nil
}

// CancelAll implements djinnpb.LandlordServer: the errors of the leases
// that could not be cancelled.
func (l *Landlord) CancelAll(ctx context.Context, r *djinnpb.CancelAllRequest) (*djinnpb.CancelAllResponse, error) {
	cookies, err := batch.Cookies(r.GetCookies())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	if err := l.enter(ctx, Call{Method: "CancelAll", Cookies: cookies}); err != nil {
		return nil, grpcerr.Status(err)
	}
	defer l.mu.Unlock()
	now := time.Now()
	errs := make([]error, len(cookies))
	for i, id := range cookies {
		errs[i] = l.cancelLocked(id, now)
	}
	return &djinnpb.CancelAllResponse{Errors: batch.Errors(errs)}, nil
}

// RenewStream implements djinnpb.LandlordServer: one answer per request,
// in order, each with its own error.
func (l *Landlord) RenewStream(stream djinnpb.Landlord_RenewStreamServer) error {
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		g, err := l.renewOnStream(stream.Context(), r)
		if err := stream.Send(&djinnpb.RenewStreamResponse{GrantedNanos: int64(g), Error: grpcerr.ToProto(err)}); err != nil {
			return err
		}
	}
}

func (l *Landlord) renewOnStream(ctx context.Context, r *djinnpb.RenewRequest) (time.Duration, error) {
	c, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
	if err != nil {
		return 0, err
	}
	d := time.Duration(r.GetDurationNanos())
	if err := l.enter(ctx, Call{Method: "RenewStream", Cookies: []djinn.ID{c}, Durations: []time.Duration{d}}); err != nil {
		return 0, err
	}
	defer l.mu.Unlock()
	return l.renewLocked(c, d, time.Now())
}
