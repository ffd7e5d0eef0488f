package clienttest

import (
	"context"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

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

func (c inProcess) Remaining(ctx context.Context, r *djinnpb.RemainingRequest, _ ...grpc.CallOption) (*djinnpb.RemainingResponse, error) {
	return call(ctx, c, c.l.Remaining, r)
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
