package client

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The leader hint's trailer costs a call nothing when the call succeeds:
// the interceptors' options are pooled, and a session reply without a
// trailer makes no metadata for them.
func TestLeaderHintTrailerAllocations(t *testing.T) {
	ctx := context.Background()
	ok := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	p := &Pool{}
	intercept := p.unaryInterceptor("127.0.0.1:1")
	if n := testing.AllocsPerRun(200, func() {
		_ = intercept(ctx, "/m", nil, nil, nil, ok)
	}); n != 0 {
		t.Errorf("Pool's interceptor, a call that succeeds: %v allocations, want 0", n)
	}
	reply := outcome{kind: replied, reply: &djinnpb.SessionReply{Id: 1}}
	out := &djinnpb.RenewResponse{}
	if n := testing.AllocsPerRun(200, func() {
		to := newTrailerOpts(nil)
		if err := reply.result(out, to.opts); err != nil {
			t.Fatal(err)
		}
		to.release()
	}); n != 0 {
		t.Errorf("session reply without a trailer: %v allocations, want 0", n)
	}
}

// A session reply's trailer reaches both the interceptors' leader hint and
// a caller's own grpc.Trailer; a caller's trailer is never nil, even for a
// reply without one, as a unary call's is not.
func TestSessionReplyTrailers(t *testing.T) {
	out := &djinnpb.RenewResponse{}
	hinted := outcome{kind: replied, reply: &djinnpb.SessionReply{Id: 1,
		Trailer: []*djinnpb.MetadataEntry{{Key: leaderTrailer, Value: []byte("10.0.0.2:4161")}}}}
	to := newTrailerOpts(nil)
	var own metadata.MD
	if err := hinted.result(out, append(to.opts, grpc.Trailer(&own))); err != nil {
		t.Fatal(err)
	}
	if got := leaderOf(to.trailer); got != "10.0.0.2:4161" {
		t.Errorf("leader hint %q, want 10.0.0.2:4161", got)
	}
	if got := leaderOf(own); got != "10.0.0.2:4161" {
		t.Errorf("caller's trailer hint %q, want 10.0.0.2:4161", got)
	}
	to.release()

	plain := outcome{kind: replied, reply: &djinnpb.SessionReply{Id: 2}}
	to = newTrailerOpts(nil)
	own = nil
	if err := plain.result(out, append(to.opts, grpc.Trailer(&own))); err != nil {
		t.Fatal(err)
	}
	if own == nil {
		t.Error("caller's trailer is nil for a reply without one; want empty metadata, as a unary call gives")
	}
	if to.trailer != nil {
		t.Errorf("leader hint trailer %v for a reply without one, want none", to.trailer)
	}
	to.release()
}

// callsAnswered is a Connector whose connection answers every call at
// once, without a network: what a call costs its sender alone.
type callsAnswered struct{ cc *grpc.ClientConn }

func (c callsAnswered) Conn(string) (*grpc.ClientConn, error) { return c.cc, nil }

// A server delivers each event with one call to its listener: the call's
// request, response, ids and options are one allocation.
func TestNotifyAllocations(t *testing.T) {
	answer := func(_ context.Context, _ string, _, reply any, _ *grpc.ClientConn, _ grpc.UnaryInvoker, _ ...grpc.CallOption) error {
		if r, ok := reply.(*djinnpb.NotifyBatchResponse); ok {
			r.Accepted = 2 // every event of the batch
		}
		return nil
	}
	cc, err := grpc.NewClient("passthrough:///listener", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(answer))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := callsAnswered{cc}
	target := djinn.Ref{Endpoint: "listener:1", Object: djinn.NewID()}
	ev := &djinnpb.RemoteEvent{}
	events := []*djinnpb.RemoteEvent{ev, ev}
	ctx := context.Background()
	if n := testing.AllocsPerRun(200, func() {
		if err := notifyOne(ctx, c, target, ev); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("Notify: %v allocations, want at most 1", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		if _, err := notifyBatch(ctx, c, target, events); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("NotifyBatch: %v allocations, want at most 1", n)
	}
}
