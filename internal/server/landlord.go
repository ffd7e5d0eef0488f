package server

import (
	"context"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// MaxBatch bounds the leases in one RenewAll or CancelAll.
const MaxBatch = 65536

// landlordRPC serves the Landlord service for every lease this server
// grants.
type landlordRPC struct {
	djinnpb.UnimplementedLandlordServer
	s *Server
}

func (l *landlordRPC) Renew(ctx context.Context, r *djinnpb.RenewRequest) (*djinnpb.RenewResponse, error) {
	c, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
	if err != nil {
		return nil, err
	}
	g, err := l.s.lessor.Renew(ctx, c, time.Duration(r.GetDurationNanos()))
	if err != nil {
		return nil, err
	}
	return &djinnpb.RenewResponse{GrantedNanos: int64(g)}, nil
}

func (l *landlordRPC) Cancel(ctx context.Context, r *djinnpb.CancelRequest) (*djinnpb.CancelResponse, error) {
	c, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
	if err != nil {
		return nil, err
	}
	if err := l.s.lessor.Cancel(ctx, []djinn.ID{c})[0]; err != nil {
		return nil, err
	}
	return &djinnpb.CancelResponse{}, nil
}

func (l *landlordRPC) RenewAll(ctx context.Context, r *djinnpb.RenewAllRequest) (*djinnpb.RenewAllResponse, error) {
	n := len(r.GetLeases())
	if n > MaxBatch {
		return nil, djinn.Errorf(djinn.InvalidArgument, "renewAll of %d leases: at most %d", n, MaxBatch)
	}
	out := &djinnpb.RenewAllResponse{Results: make([]*djinnpb.RenewResult, n)}
	// One allocation for all results: RenewAll is the bulk path.
	results := make([]djinnpb.RenewResult, n)
	for i := range out.Results {
		out.Results[i] = &results[i]
	}
	cookies := make([]djinn.ID, 0, n)
	durations := make([]time.Duration, 0, n)
	idx := make([]int, 0, n)
	for i, req := range r.GetLeases() {
		c, err := djinn.IDFromBytes("lease cookie", req.GetCookie())
		if err != nil {
			out.Results[i].Error = grpcerr.ToProto(err)
			continue
		}
		cookies = append(cookies, c)
		durations = append(durations, time.Duration(req.GetDurationNanos()))
		idx = append(idx, i)
	}
	for j, res := range l.s.lessor.RenewAll(ctx, cookies, durations) {
		r := out.Results[idx[j]]
		r.GrantedNanos = int64(res.Granted)
		if res.Err != nil {
			r.Error = grpcerr.ToProto(res.Err)
		}
	}
	return out, nil
}

func (l *landlordRPC) CancelAll(ctx context.Context, r *djinnpb.CancelAllRequest) (*djinnpb.CancelAllResponse, error) {
	n := len(r.GetCookies())
	if n > MaxBatch {
		return nil, djinn.Errorf(djinn.InvalidArgument, "cancelAll of %d leases: at most %d", n, MaxBatch)
	}
	out := &djinnpb.CancelAllResponse{Errors: make([]*djinnpb.Error, n)}
	cookies := make([]djinn.ID, 0, n)
	idx := make([]int, 0, n)
	for i, b := range r.GetCookies() {
		c, err := djinn.IDFromBytes("lease cookie", b)
		if err != nil {
			out.Errors[i] = grpcerr.ToProto(err)
			continue
		}
		cookies = append(cookies, c)
		idx = append(idx, i)
	}
	for j, err := range l.s.lessor.Cancel(ctx, cookies) {
		out.Errors[idx[j]] = grpcerr.ToProto(err)
	}
	for i, e := range out.Errors {
		if e == nil {
			out.Errors[i] = &djinnpb.Error{}
		}
	}
	return out, nil
}
