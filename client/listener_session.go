package client

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// listenerSession serves the Session protocol on a listener's server for
// the EventListener calls: a generator whose connection opens a session
// (this package's Pool does) sends each event as a call in it, without an
// HTTP/2 stream and its headers per event. Each call is the unary call it
// names in every other way: the same listener code, the same errors, the
// same StopDelivery. Other methods are answered Unimplemented, which tells
// the caller to make them on their own.
//
// A listener given server options (WithServerOptions) serves no sessions:
// the interceptors given there see every call.
type listenerSession struct {
	djinnpb.UnimplementedSessionServer
	h *listenerHost
}

// Open serves one session until its client ends it or it breaks; the
// calls still running are cancelled, and answered if the stream allows.
func (s *listenerSession) Open(stream djinnpb.Session_OpenServer) error {
	out := &sessionReplies{stream: stream}
	calls := &sessionCalls{running: map[uint64]context.CancelFunc{}}
	defer calls.stop()
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			calls.wg.Wait()
			return nil
		}
		if err != nil {
			return err
		}
		for _, id := range req.GetCancel() {
			calls.cancel(id)
		}
		for _, c := range req.GetCalls() {
			ctx := calls.start(stream.Context(), c)
			go func() {
				defer calls.done(c.GetId())
				out.send(s.serve(ctx, c))
			}()
		}
	}
}

// serve makes one call; a panic in the listener's code is an Internal
// error for the sender, as in a unary call.
func (s *listenerSession) serve(ctx context.Context, c *djinnpb.SessionCall) (r *djinnpb.SessionReply) {
	r = &djinnpb.SessionReply{Id: c.GetId()}
	defer func() {
		if p := recover(); p != nil {
			r.Response, r.Status = nil, sessionStatus(djinn.Errorf(djinn.Internal, "listener panicked: %v", p))
		}
	}()
	resp, err := s.call(ctx, c.GetMethod(), c.GetRequest())
	if err == nil {
		r.Response, err = proto.Marshal(resp)
	}
	if err != nil {
		r.Response, r.Status = nil, sessionStatus(err)
	}
	return r
}

// call decodes a call's request and makes it.
func (s *listenerSession) call(ctx context.Context, method string, b []byte) (proto.Message, error) {
	switch method {
	case djinnpb.EventListener_Notify_FullMethodName:
		req := &djinnpb.NotifyRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			return nil, badSessionRequest(method, err)
		}
		return s.h.Notify(ctx, req)
	case djinnpb.EventListener_NotifyBatch_FullMethodName:
		req := &djinnpb.NotifyBatchRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			return nil, badSessionRequest(method, err)
		}
		return s.h.NotifyBatch(ctx, req)
	case djinnpb.EventListener_StopDelivery_FullMethodName:
		req := &djinnpb.StopDeliveryRequest{}
		if err := proto.Unmarshal(b, req); err != nil {
			return nil, badSessionRequest(method, err)
		}
		return s.h.StopDelivery(ctx, req)
	}
	return nil, status.Errorf(codes.Unimplemented, "method %q: a listener serves only EventListener calls in a session; make it on its own", method)
}

func badSessionRequest(method string, err error) error {
	return grpcerr.Status(djinn.Errorf(djinn.InvalidArgument, "session call %s: the request does not decode (%v); send the method's request message", method, err))
}

// sessionStatus is an error as a session reply carries it: its gRPC status
// with the details (djinn's error kind).
func sessionStatus(err error) *djinnpb.SessionStatus {
	p := status.Convert(grpcerr.Status(err)).Proto()
	return &djinnpb.SessionStatus{Code: p.GetCode(), Message: p.GetMessage(), Details: p.GetDetails()}
}

// sessionCalls are the calls of one session that are running.
type sessionCalls struct {
	wg      sync.WaitGroup
	mu      sync.Mutex
	running map[uint64]context.CancelFunc // guarded by mu, by call id
}

// start counts a call as running and returns its context: the session's,
// bounded by the call's timeout.
func (cs *sessionCalls) start(parent context.Context, c *djinnpb.SessionCall) context.Context {
	var (
		ctx    context.Context
		cancel context.CancelFunc
	)
	if t := c.GetTimeoutNanos(); t > 0 {
		ctx, cancel = context.WithTimeout(parent, time.Duration(t))
	} else {
		ctx, cancel = context.WithCancel(parent)
	}
	cs.wg.Add(1)
	cs.mu.Lock()
	if old := cs.running[c.GetId()]; old != nil {
		old() // a caller reusing an id in flight gives up the first call
	}
	cs.running[c.GetId()] = cancel
	cs.mu.Unlock()
	return &sessionCallContext{Context: ctx, cancel: cancel}
}

// sessionCallContext is a session call's context with its cancel, which
// the call's delivery (deliveries.start) takes as its own instead of
// deriving a context of its own for every event: the context is the
// call's alone, so cancelling it ends that call and nothing else.
type sessionCallContext struct {
	context.Context
	cancel context.CancelFunc
}

// cancel cancels a running call, as its caller going away would.
func (cs *sessionCalls) cancel(id uint64) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.running[id]; c != nil {
		c()
	}
}

func (cs *sessionCalls) done(id uint64) {
	cs.mu.Lock()
	if c := cs.running[id]; c != nil {
		c()
		delete(cs.running, id)
	}
	cs.mu.Unlock()
	cs.wg.Done()
}

// stop cancels every running call and waits for them.
func (cs *sessionCalls) stop() {
	cs.mu.Lock()
	for _, c := range cs.running {
		c()
	}
	cs.mu.Unlock()
	cs.wg.Wait()
}

// sessionReplies sends a session's replies: whoever finds no send under
// way sends, in one message, every reply that waits.
type sessionReplies struct {
	stream djinnpb.Session_OpenServer

	mu      sync.Mutex
	waiting []*djinnpb.SessionReply // guarded by mu
	sending bool                    // guarded by mu
	broken  bool                    // guarded by mu: a send failed
}

func (o *sessionReplies) send(r *djinnpb.SessionReply) {
	o.mu.Lock()
	o.waiting = append(o.waiting, r)
	if o.sending || o.broken {
		o.mu.Unlock()
		return
	}
	o.sending = true
	for len(o.waiting) > 0 {
		batch := o.waiting
		o.waiting = nil
		o.mu.Unlock()
		err := o.stream.Send(&djinnpb.SessionResponse{Replies: batch})
		o.mu.Lock()
		if err != nil {
			o.broken, o.waiting = true, nil
		}
	}
	o.sending = false
	o.mu.Unlock()
}
