package client

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Sessions (DESIGN.md 7a). Every connection a Pool makes carries its
// unary calls over one long-lived stream to the server, djinn.v1.Session:
// a call is sent with an id and answered by id, in whatever order calls
// finish, so one connection keeps many calls in flight without a stream
// and its headers per call. Nothing changes for the caller: a method call
// of this package, or of a generated client on a Pool's connection, is
// still one call that returns its answer or its error, with the same
// errors and the same leader hint. WithoutSession makes every call on its
// own (unary).
//
// The session is an interceptor, the innermost of the connection's, so the
// error conversion and leader following of the others see a session call
// as they see a unary one. Calls that go on their own regardless: calls
// any member of a cluster may serve (they are spread over the members,
// while a cluster's session goes to the leader), calls of a cluster whose
// leader is unknown or down (they are spread too, until it is known), calls with call options
// a session cannot honour (WaitForReady, per-call credentials, ...),
// requests over sessionCallBytes, calls to a server without sessions (it
// answers Open with Unimplemented: the connection stops trying), and calls
// of a method the server does not serve in a session.
//
// When a session breaks (the connection fails, the server stops, the
// leader moves): a call not yet sent is sent again on a new session, it
// never reached the server; a call sent and not answered fails with an
// Unavailable error saying it may or may not have been made — as a unary
// call in flight on a broken connection does — unless its method is
// declared free of side effects or idempotent in its proto
// (idempotency_level), in which case it is sent again. A server that shuts
// down says so (goaway) and answers what it has read; calls after that go
// on a new session. A cluster's session follows the leader: when the
// leader moves, the next call opens a session to the new one, and the old
// one ends once its calls are answered.

// sessionCallBytes bounds a request sent in a session, and the requests
// of one message; larger ones go on their own.
const sessionCallBytes = 1 << 20

// maxSessionRetries bounds how often a call is sent again on a new
// session after the one it waited on broke.
const maxSessionRetries = 3

// WithoutSession makes every call of a Pool's or Client's connections a
// unary call of its own, instead of a call in the connection's session.
func WithoutSession() Option {
	return func(o *options) { o.noSession = true }
}

// sessionConn is the session side of one connection: its current stream,
// and what its server does not serve in a session.
type sessionConn struct {
	pool *Pool
	// leader, on a cluster's connection, gives the leader's endpoint and
	// whether the connection to it is up: the session goes there.
	leader func() (endpoint string, ready bool)

	mu    sync.Mutex
	cur   *sessionStream  // guarded by mu: the stream new calls go on
	off   bool            // guarded by mu: the server serves no session
	unary map[string]bool // guarded by mu: methods served on their own only
}

func newSessionConn(p *Pool, leader func() (string, bool)) *sessionConn {
	return &sessionConn{pool: p, leader: leader, unary: map[string]bool{}}
}

// intercept is the connection's innermost unary interceptor: it makes the
// call in the session when it may.
func (sc *sessionConn) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	in, ok1 := req.(proto.Message)
	out, ok2 := reply.(proto.Message)
	if !ok1 || !ok2 || ctx.Value(anyMemberKey{}) != nil || !sessionOptions(opts) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c, err := newSessionCall(ctx, method, in)
	if err != nil || c == nil {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	for attempt := 0; ; attempt++ {
		st := sc.stream(cc, method)
		if st == nil {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		switch o := st.do(ctx, c); o.kind {
		case replied:
			err := o.result(out, opts)
			c.release()
			return err
		case useUnary:
			return invoker(ctx, method, req, reply, cc, opts...)
		case failed:
			return o.err
		case resend:
			if attempt == maxSessionRetries {
				return o.err
			}
		}
	}
}

// sessionOptions reports whether a session can honour a call's options.
func sessionOptions(opts []grpc.CallOption) bool {
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption, grpc.TrailerCallOption, hintTrailer, grpc.PeerCallOption, grpc.StaticMethodCallOption,
			grpc.MaxRecvMsgSizeCallOption, grpc.MaxSendMsgSizeCallOption, grpc.EmptyCallOption:
		case grpc.FailFastCallOption:
			if !o.FailFast {
				return false // WaitForReady: a unary call waits for a connection
			}
		default:
			return false
		}
	}
	return true
}

// stream returns the stream a call of method goes on, opening one if
// needed; nil when the call goes on its own.
func (sc *sessionConn) stream(cc *grpc.ClientConn, method string) *sessionStream {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.off || sc.unary[method] {
		return nil
	}
	leader := ""
	if sc.leader != nil {
		ep, ready := sc.leader()
		if !ready {
			// No leader to pin a session to: the call goes on its own,
			// and the picker spreads such calls over the members up, as
			// it would without sessions.
			return nil
		}
		leader = ep
	}
	if st := sc.cur; st != nil {
		if !st.usable() {
			sc.cur = nil
		} else if leader != st.leader {
			st.drain() // the leader moved: new calls go to it
			sc.cur = nil
		}
	}
	if sc.cur == nil {
		st := newSessionStream(sc, cc, leader)
		if !sc.pool.goOwned(st.run) {
			return nil // the pool is closing: the call fails on its own
		}
		sc.cur = st
	}
	return sc.cur
}

// retire stops sending new calls on st.
func (sc *sessionConn) retire(st *sessionStream) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.cur == st {
		sc.cur = nil
	}
}

// unsupported records that the server serves no session at all, or not
// method.
func (sc *sessionConn) unsupported(method string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if method == "" {
		sc.off = true
	} else {
		sc.unary[method] = true
	}
}

// A call's outcome in a session.
type outcomeKind int

const (
	replied  outcomeKind = iota + 1
	resend               // never reached the server, or safe to send again
	useUnary             // the server cannot take it in a session
	failed               // err says why
)

type outcome struct {
	kind  outcomeKind
	reply *djinnpb.SessionReply
	peer  *peer.Peer
	err   error
}

// result fills the call's reply and its header, trailer and peer options
// from a reply, and returns its status.
func (o outcome) result(out proto.Message, opts []grpc.CallOption) error {
	r := o.reply
	for _, opt := range opts {
		switch opt := opt.(type) {
		case hintTrailer:
			if len(r.GetTrailer()) > 0 {
				*opt.TrailerAddr = metadataOf(r.GetTrailer())
			}
		case grpc.HeaderCallOption:
			*opt.HeaderAddr = metadataOf(r.GetHeader())
		case grpc.TrailerCallOption:
			*opt.TrailerAddr = metadataOf(r.GetTrailer())
		case grpc.PeerCallOption:
			if o.peer != nil {
				*opt.PeerAddr = *o.peer
			}
		}
	}
	if s := r.GetStatus(); s != nil && codes.Code(s.GetCode()) != codes.OK {
		return status.FromProto(statusProto(s)).Err()
	}
	if err := proto.Unmarshal(r.GetResponse(), out); err != nil {
		return status.Errorf(codes.Internal, "session reply %d: response does not decode: %v", r.GetId(), err)
	}
	return nil
}

// metadataOf is a reply's header or trailer as metadata: never nil, even
// when the reply carries none, as grpc-go hands a unary call's, so code
// that adds to the received metadata works the same in a session.
func metadataOf(es []*djinnpb.MetadataEntry) metadata.MD {
	md := make(metadata.MD, len(es))
	for _, e := range es {
		md[e.GetKey()] = append(md[e.GetKey()], string(e.GetValue()))
	}
	return md
}

// sessionCall is one call as a session sends it.
type sessionCall struct {
	method     string
	req        []byte // encoded
	md         []*djinnpb.MetadataEntry
	deadline   time.Time // zero: none
	idempotent bool

	// Set by its stream, under the stream's lock, for one attempt.
	id        uint64
	sent      bool
	abandoned bool
	done      chan outcome // 1-buffered, made once: one outcome an attempt

	// first is the call as its first attempt sends it, made with the call
	// rather than apart from it; an attempt after that sends a message of
	// its own (a message sent is not changed).
	first     djinnpb.SessionCall
	firstUsed bool
}

// answeredCalls are calls answered, for the next: a call, its done
// channel and its request's buffer are made once for many calls.
var answeredCalls sync.Pool

// pooledRequestBytes bounds the request buffer a call kept for the pool.
const pooledRequestBytes = 64 << 10

// newSessionCall encodes a call; nil when it is too large for a session.
func newSessionCall(ctx context.Context, method string, req proto.Message) (*sessionCall, error) {
	c, _ := answeredCalls.Get().(*sessionCall)
	if c == nil {
		c = &sessionCall{done: make(chan outcome, 1)}
	}
	b, err := proto.MarshalOptions{}.MarshalAppend(c.req[:0], req)
	if err != nil || len(b) > sessionCallBytes {
		c.release()
		return nil, err
	}
	c.method, c.req, c.idempotent = method, b, idempotent(method)
	c.deadline, _ = ctx.Deadline()
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		for k, vs := range md {
			for _, v := range vs {
				c.md = append(c.md, &djinnpb.MetadataEntry{Key: k, Value: []byte(v)})
			}
		}
	}
	return c, nil
}

// release returns a call to the pool once it is answered: its stream has
// let go of it (the reply took it out of those in flight, and the message
// that carried it was encoded before the server could answer), and its
// done channel is empty. A call that ended any other way is not released:
// its stream may still hold it.
func (c *sessionCall) release() {
	req := c.req[:0]
	if cap(req) > pooledRequestBytes {
		req = nil
	}
	*c = sessionCall{req: req, done: c.done}
	answeredCalls.Put(c)
}

// wire is the call as sent, with its deadline as a timeout from now.
func (c *sessionCall) wire() *djinnpb.SessionCall {
	w := &c.first
	if c.firstUsed {
		w = new(djinnpb.SessionCall)
	}
	c.firstUsed = true
	w.Id, w.Method, w.Request, w.Metadata = c.id, c.method, c.req, c.md
	if !c.deadline.IsZero() {
		w.TimeoutNanos = max(int64(time.Until(c.deadline)), 1)
	}
	return w
}

// errSessionEnded is the error of a call a broken session had sent: the
// server may or may not have made it.
func errSessionEnded(cause error) error {
	msg := "the session carrying the call ended before its answer came: the call may or may not have been made"
	if cause != nil {
		msg += " (" + status.Convert(cause).Message() + ")"
	}
	return status.Error(codes.Unavailable, msg)
}

// errorOfContext is the status a unary call answers when its context ends.
func errorOfContext(ctx context.Context) error {
	return status.FromContextError(context.Cause(ctx)).Err()
}
