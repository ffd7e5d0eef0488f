package server

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

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

// stepReader is a session stream whose client sends a call each time the
// test hands one over (next) and reads no reply until the test lets it
// (read closed): until then every send blocks.
type stepReader struct {
	grpc.ServerStream
	ctx     context.Context
	next    chan struct{} // unbuffered: a receive is the server reading a call
	read    chan struct{} // closed: the client reads its replies
	n       uint64
	replies chan *djinnpb.SessionReply // what the client read
}

func (r *stepReader) Context() context.Context { return r.ctx }

func (r *stepReader) RecvMsg(m any) error {
	select {
	case <-r.next:
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	r.n++
	m.(*djinnpb.SessionRequest).Calls = []*djinnpb.SessionCall{{Id: r.n, Method: "/djinn.v1.Test/Big"}}
	return nil
}

func (r *stepReader) Recv() (*djinnpb.SessionRequest, error) {
	m := new(djinnpb.SessionRequest)
	return m, r.RecvMsg(m)
}

func (r *stepReader) Send(m *djinnpb.SessionResponse) error { return r.SendMsg(m) }

func (r *stepReader) SendMsg(m any) error {
	select {
	case <-r.read:
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
	for _, rep := range m.(*djinnpb.SessionResponse).GetReplies() {
		r.replies <- rep
	}
	return nil
}

// reading reports whether the server is reading the stream: once every
// goroutine of the bubble waits, whether it takes the next call.
func (r *stepReader) reading() bool {
	synctest.Wait()
	select {
	case r.next <- struct{}{}:
		return true
	default:
		return false
	}
}

// TestSessionSlowReaderHoldsNoMoreThanItsReplyBytes (DESIGN.md 7: one
// principal's load never starves another's; quotas on everything that
// holds memory): a client that sends calls with large replies and reads
// none gets served until its unsent replies pass maxUnsentReplyBytes, and
// then the server stops reading its stream — and reads it again once the
// client reads. Another session is served meanwhile. Before, only the
// count bound (maxSessionCalls) held: 4096 replies of up to 4 MiB each.
func TestSessionSlowReaderHoldsNoMoreThanItsReplyBytes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := &wrapperspb.BytesValue{Value: make([]byte, 256<<10)}
		s := &Server{stop: make(chan struct{}), workers: newWorkers(maxIdleWorkers)}
		defer s.workers.stop()
		s.sessionMethods = map[string]sessionMethod{"/djinn.v1.Test/Big": {handler: func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
			return big, nil
		}}}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		stream, done := openStepped(ctx, s)

		replyBytes, _ := proto.Marshal(big)
		size := proto.Size(&djinnpb.SessionReply{Id: 1, Response: replyBytes})
		// The server looks at the bytes before it reads a call, and the
		// reply of the call it read last may not be queued yet: it reads
		// at most one call past the budget, and one more.
		most := maxUnsentReplyBytes/size + 2
		calls := 0
		for calls <= 4*most && stream.reading() {
			calls++
		}
		if calls > most {
			t.Fatalf("the server read %d calls of %d bytes of reply each from a client that reads no reply (%d MiB); want at most %d (%d MiB unsent at most, and the replies of the calls read when it was crossed)",
				calls, size, calls*size>>20, most, maxUnsentReplyBytes>>20)
		}
		if calls < maxUnsentReplyBytes/size {
			t.Errorf("the server read %d calls of %d bytes of reply each, then stopped: want it to read until %d MiB wait unsent", calls, size, maxUnsentReplyBytes>>20)
		}

		// Another session is served meanwhile.
		other, otherDone := openStepped(ctx, s)
		close(other.read)
		if !other.reading() {
			t.Fatal("another session is not read while one holds its budget of unsent replies")
		}
		synctest.Wait()
		if len(other.replies) != 1 {
			t.Errorf("another session got %d replies to its one call while one holds its budget, want 1", len(other.replies))
		}

		// Once the client reads, the server reads its calls again.
		close(stream.read)
		if !stream.reading() {
			t.Error("the server does not read the session again once its client reads its replies")
		}
		synctest.Wait()
		if got := len(stream.replies); got != calls+1 {
			t.Errorf("the client read %d replies to its %d calls", got, calls+1)
		}
		cancel()
		for _, d := range []chan error{done, otherDone} {
			if err := <-d; err == nil {
				t.Error("the session ended without error when its stream did")
			}
		}
	})
}

// openStepped opens a session of s on a stream the test steps.
func openStepped(ctx context.Context, s *Server) (*stepReader, chan error) {
	stream := &stepReader{ctx: ctx, next: make(chan struct{}), read: make(chan struct{}), replies: make(chan *djinnpb.SessionReply, maxSessionCalls)}
	done := make(chan error, 1)
	go func() { done <- (&sessionRPC{s: s}).Open(stream) }()
	return stream, done
}
