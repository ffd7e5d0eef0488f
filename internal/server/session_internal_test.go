package server

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// slowReader is a session stream whose client sends calls without end and
// never reads a reply: every send blocks until the stream ends.
type slowReader struct {
	grpc.ServerStream
	ctx   context.Context
	calls atomic.Int64 // calls handed to the server
	limit int64        // then it waits for the stream's end
}

func (r *slowReader) Context() context.Context { return r.ctx }

func (r *slowReader) RecvMsg(m any) error {
	n := r.calls.Add(1)
	if n > r.limit {
		<-r.ctx.Done()
		return r.ctx.Err()
	}
	method := "/djinn.v1.Test/Echo"
	if n%2 == 0 {
		method = "/djinn.v1.Test/NotServed" // answered at once, without a worker
	}
	m.(*djinnpb.SessionRequest).Calls = []*djinnpb.SessionCall{{Id: uint64(n), Method: method}}
	return nil
}

func (r *slowReader) Recv() (*djinnpb.SessionRequest, error) {
	m := new(djinnpb.SessionRequest)
	return m, r.RecvMsg(m)
}

func (r *slowReader) Send(m *djinnpb.SessionResponse) error { return r.SendMsg(m) }

func (r *slowReader) SendMsg(any) error {
	<-r.ctx.Done()
	return r.ctx.Err()
}

// TestSessionSlowReaderHoldsNoMoreThanItsCalls (DESIGN.md 7: one
// principal's load never starves another's; quotas on everything that
// holds memory): a client that sends calls and never reads their replies
// gets at most maxSessionCalls of them served — answered or not, a call
// holds its slot until its reply is sent — and then the server stops
// reading its stream. Before, a call's slot was freed once its reply was
// queued, so such a client made the server queue replies without bound.
func TestSessionSlowReaderHoldsNoMoreThanItsCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &Server{stop: make(chan struct{}), workers: newWorkers(maxIdleWorkers)}
		defer s.workers.stop()
		s.sessionMethods = map[string]sessionMethod{"/djinn.v1.Test/Echo": {handler: func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
			return &emptypb.Empty{}, nil
		}}}
		ctx, cancel := context.WithCancel(t.Context())
		stream := &slowReader{ctx: ctx, limit: 4 * maxSessionCalls}
		done := make(chan error, 1)
		go func() { done <- (&sessionRPC{s: s}).Open(stream) }()
		synctest.Wait()
		if n := stream.calls.Load(); n > maxSessionCalls+1 {
			t.Errorf("the server read %d calls of a client that reads no reply; want at most %d (its calls in flight, and the one waiting for a slot)", n, maxSessionCalls+1)
		}
		cancel()
		if err := <-done; err == nil {
			t.Error("the session ended without error when its stream did")
		}
	})
}
