package client

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// sessionStream is one session stream of a connection. Its goroutine
// (run, owned by the pool) opens it, sends the calls queued on it, and
// with a second goroutine of its own hands each reply to its call.
type sessionStream struct {
	sc *sessionConn
	cc *grpc.ClientConn
	// leader, on a cluster's connection, is the leader's endpoint when st
	// was opened (with a connection to it up): where it went.
	leader string
	wake   chan struct{} // 1-buffered: calls or cancellations to send

	mu       sync.Mutex
	peer     *peer.Peer              // guarded by mu: the server it reached, once open
	next     uint64                  // guarded by mu: the last call id given
	waiting  []*sessionCall          // guarded by mu: calls to send
	inFlight map[uint64]*sessionCall // guarded by mu: calls sent, not answered
	cancels  []uint64                // guarded by mu: cancellations to send
	draining bool                    // guarded by mu: takes no call; ends once its calls are answered
	broken   bool                    // guarded by mu: ended; every call answered
	replied  bool                    // guarded by mu: a reply came: the server serves sessions

	// spare is the calls slice of the last message sent, emptied, for
	// the next (SendMsg has encoded it). Only the sender touches it.
	spare []*djinnpb.SessionCall
}

func newSessionStream(sc *sessionConn, cc *grpc.ClientConn, leader string) *sessionStream {
	return &sessionStream{sc: sc, cc: cc, leader: leader, wake: make(chan struct{}, 1), inFlight: map[uint64]*sessionCall{}}
}

func (st *sessionStream) kick() {
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// usable reports whether new calls may go on st.
func (st *sessionStream) usable() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return !st.draining && !st.broken
}

// do sends c on st and waits for its outcome, or for ctx to end.
func (st *sessionStream) do(ctx context.Context, c *sessionCall) outcome {
	st.mu.Lock()
	if st.draining || st.broken {
		st.mu.Unlock()
		return outcome{kind: resend, err: errNotSent}
	}
	st.next++
	c.id, c.sent, c.abandoned = st.next, false, false
	st.waiting = append(st.waiting, c)
	st.mu.Unlock()
	st.kick()
	select {
	case o := <-c.done:
		return o
	case <-ctx.Done():
	}
	st.mu.Lock()
	if !c.sent {
		c.abandoned = true // never sent: dropped from the queue
	} else if _, ok := st.inFlight[c.id]; ok {
		delete(st.inFlight, c.id)
		st.cancels = append(st.cancels, c.id)
		st.kick()
	}
	st.mu.Unlock()
	return outcome{kind: failed, err: errorOfContext(ctx)}
}

// errNotSent is the error of a call whose sessions kept breaking before
// it could be sent: it was not made.
var errNotSent = status.Error(codes.Unavailable, "the connection's session ended before the call was sent: the call was not made")

// drain takes no more calls on st: those not yet sent go on another
// session, st ends once the server has answered those it sent.
func (st *sessionStream) drain() {
	st.mu.Lock()
	if st.draining || st.broken {
		st.mu.Unlock()
		return
	}
	st.draining = true
	waiting := unabandoned(st.waiting)
	st.waiting = nil
	st.mu.Unlock()
	for _, c := range waiting {
		c.done <- outcome{kind: resend, err: errNotSent}
	}
	st.kick() // the sender closes its side
}

// run opens the stream and serves it until it ends.
func (st *sessionStream) run() {
	ctx, cancel := context.WithCancel(st.sc.pool.ctx)
	defer cancel()
	cs, err := st.cc.NewStream(ctx, &djinnpb.Session_ServiceDesc.Streams[0], djinnpb.Session_Open_FullMethodName)
	if err != nil {
		st.end(err, true)
		return
	}
	p, _ := peer.FromContext(cs.Context())
	st.mu.Lock()
	st.peer = p
	st.mu.Unlock()
	received := make(chan struct{})
	go func() {
		defer close(received)
		st.receive(cs)
	}()
	st.send(ctx, cs)
	<-received
}

// send sends the calls and cancellations queued, batched, until the
// stream breaks, or it drains and has sent what it took.
func (st *sessionStream) send(ctx context.Context, cs grpc.ClientStream) {
	for {
		select {
		case <-st.wake:
		case <-ctx.Done():
			return
		}
		// Let the callers ready to run queue their calls first: one
		// message then carries them all, not one message each.
		runtime.Gosched()
		for {
			req, closeSend, stop := st.take()
			if stop {
				return
			}
			if req == nil {
				if closeSend {
					_ = cs.CloseSend()
					return
				}
				break
			}
			if err := cs.SendMsg(req); err != nil {
				return // receive learns why
			}
			clear(req.Calls)
			st.spare = req.Calls[:0]
		}
	}
}

// take takes what there is to send, up to sessionCallBytes of requests:
// nil when nothing; closeSend when st drains and has sent everything;
// stop when st is broken.
func (st *sessionStream) take() (req *djinnpb.SessionRequest, closeSend, stop bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.broken {
		return nil, false, true
	}
	calls := st.spare
	st.spare = nil
	size, n := 0, 0
	for _, c := range st.waiting {
		if len(calls) > 0 && size+len(c.req) > sessionCallBytes {
			break
		}
		n++
		if c.abandoned {
			continue
		}
		c.sent = true
		st.inFlight[c.id] = c
		calls = append(calls, c.wire())
		size += len(c.req)
	}
	rest := copy(st.waiting, st.waiting[n:])
	clear(st.waiting[rest:])
	st.waiting = st.waiting[:rest]
	if len(calls) == 0 && len(st.cancels) == 0 {
		st.spare = calls
		return nil, st.draining, false
	}
	if rest > 0 {
		st.kick()
	}
	req = &djinnpb.SessionRequest{Calls: calls, Cancel: st.cancels}
	st.cancels = nil
	return req, false, false
}

// receive hands each reply to its call until the stream ends.
func (st *sessionStream) receive(cs grpc.ClientStream) {
	var calls []*sessionCall // each message's, reused
	for {
		resp := new(djinnpb.SessionResponse)
		if err := cs.RecvMsg(resp); err != nil {
			st.end(err, false)
			return
		}
		st.mu.Lock()
		st.replied = true
		p := st.peer
		clear(calls)
		calls = slices.Grow(calls[:0], len(resp.GetReplies()))[:len(resp.GetReplies())]
		for i, r := range resp.GetReplies() {
			calls[i] = st.inFlight[r.GetId()]
			delete(st.inFlight, r.GetId())
		}
		st.mu.Unlock()
		// A goaway retires the session before its replies are handed
		// out: a caller's next call must not find it still open.
		if resp.GetGoaway() {
			st.sc.retire(st)
		}
		for i, r := range resp.GetReplies() {
			if c := calls[i]; c != nil {
				c.done <- st.outcome(c, r, p)
			}
		}
		if resp.GetGoaway() {
			st.drain()
		}
	}
}

// outcome is a reply's outcome: a method the server does not serve in a
// session goes on its own from then on (a method it does not serve at all
// answers Unimplemented that way too, having done nothing either way).
func (st *sessionStream) outcome(c *sessionCall, r *djinnpb.SessionReply, p *peer.Peer) outcome {
	if codes.Code(r.GetStatus().GetCode()) == codes.Unimplemented {
		st.sc.unsupported(c.method)
		return outcome{kind: useUnary}
	}
	return outcome{kind: replied, reply: r, peer: p}
}

// end ends st with the error it broke with and answers every call on it:
// those not sent go on again (on their own when opening failed), those
// sent fail as maybe made unless their method is idempotent. A server
// that answered Open with Unimplemented before any reply has no sessions:
// every call goes on its own.
func (st *sessionStream) end(err error, opening bool) {
	st.sc.retire(st)
	st.mu.Lock()
	if st.broken {
		st.mu.Unlock()
		return
	}
	st.broken = true
	waiting, sent, replied := unabandoned(st.waiting), st.inFlight, st.replied
	st.waiting, st.inFlight = nil, map[uint64]*sessionCall{}
	st.mu.Unlock()
	st.kick()
	unsupported := status.Code(err) == codes.Unimplemented && !replied
	if unsupported {
		st.sc.unsupported("")
	}
	for _, c := range waiting {
		switch {
		case opening || unsupported:
			c.done <- outcome{kind: useUnary}
		default:
			c.done <- outcome{kind: resend, err: errNotSent}
		}
	}
	for _, c := range sent {
		switch {
		case unsupported:
			c.done <- outcome{kind: useUnary}
		case c.idempotent:
			c.done <- outcome{kind: resend, err: errSessionEnded(err)}
		default:
			c.done <- outcome{kind: failed, err: errSessionEnded(err)}
		}
	}
}

// unabandoned returns the calls whose callers still wait; st.mu held.
func unabandoned(calls []*sessionCall) []*sessionCall {
	out := calls[:0:0]
	for _, c := range calls {
		if !c.abandoned {
			out = append(out, c)
		}
	}
	return out
}

// statusProto is a reply's status as google.rpc.Status.
func statusProto(s *djinnpb.SessionStatus) *spb.Status {
	return &spb.Status{Code: s.GetCode(), Message: s.GetMessage(), Details: s.GetDetails()}
}

// idempotency caches idempotent's answers, by method.
var idempotency sync.Map

// idempotent reports whether a method's proto declares it free of side
// effects or idempotent (idempotency_level): a call of it that a broken
// session had sent is sent again.
func idempotent(method string) bool {
	if v, ok := idempotency.Load(method); ok {
		return v.(bool)
	}
	ok := false
	if svc, m, found := strings.Cut(strings.TrimPrefix(method, "/"), "/"); found {
		if d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc + "." + m)); err == nil {
			if md, is := d.(protoreflect.MethodDescriptor); is {
				if o, is := md.Options().(*descriptorpb.MethodOptions); is {
					l := o.GetIdempotencyLevel()
					ok = l == descriptorpb.MethodOptions_NO_SIDE_EFFECTS || l == descriptorpb.MethodOptions_IDEMPOTENT
				}
			}
		}
	}
	idempotency.Store(method, ok)
	return ok
}
