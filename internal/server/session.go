package server

import (
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// A session (djinn.v1.Session, DESIGN.md 7a) carries a client's calls to
// any unary RPC the server serves over one stream, answered by id as they
// finish. Every unary method a part registers (registrar.serve) is a
// session call: registering it is declaring it, so no list of calls
// exists apart from the services' own registrations.
//
// A call in a session is its unary call in all but transport: it runs the
// server's unary interceptor chain (s.unary) — the edge names the caller
// by the stream's certificate and authorizes the call by its method's own
// rule, then the gRPC metrics count it under its method, then the one
// error table turns its error into a status with the leader hint — and
// the method's handler, with a context that carries the call's deadline
// and metadata, and captures what the handler sets as headers and
// trailers for its reply. The Open stream's own rule is Authenticated:
// opening a session lets a caller do nothing its calls' rules do not.
//
// Limits: a session has at most maxSessionCalls calls in flight (a
// connection's streams are bounded alike), a call counting until its reply
// is sent; beyond that the server stops reading it until one is. Its
// replies not yet sent (queued, or in a message flow control holds back)
// are bounded by bytes too: past maxUnsentReplyBytes the server stops
// reading it until some are sent. So a client that does not read its
// replies holds no more than that many, nor more than that many bytes
// and the replies of the calls already read when it crossed them. Only
// that session waits: its principal's other sessions and calls, and
// everyone else's, go on.
// Its principal's calls in flight over all its sessions and unary calls
// are bounded too ([quota] calls-in-flight, calls.go), a call counting
// until its handler returns: past that bound the server stops reading the
// session until one of them ends. A reply larger than maxSessionReply
// answers ResourceExhausted instead (a unary call's response is bounded
// alike, by the client's receive limit). Calls run on the server's
// workers, goroutines kept from one call to the next.
//
// Shutdown: a server that closes sends goaway, answers every call it has
// read, and ends the session once the client has closed its side (or the
// server stops waiting).

// Session bounds.
const (
	maxSessionCalls = 4096
	// maxSessionReply bounds one reply's response: the bound of every
	// reply (wire.MaxReply), whose room the session's reply around it
	// takes. A batch of replies is sent once it holds sessionBatchBytes.
	maxSessionReply   = wire.MaxReply
	sessionBatchBytes = 1 << 20
	// maxUnsentReplyBytes bounds the bytes of a session's replies not yet
	// sent: four of the largest replies, or 16 batches.
	maxUnsentReplyBytes = 16 << 20
)

// sessionMethod is a unary method as a session calls it: the registered
// implementation and the generated handler, which decodes the request and
// runs the interceptor chain it is given.
type sessionMethod struct {
	srv     any
	handler grpc.MethodHandler
}

// sessionPart is the session service: any unary RPC of the other parts,
// over one stream per connection.
func sessionPart(s *Server) *part {
	return &part{
		name:    "session",
		enabled: true,
		serve: func(r *registrar) error {
			return r.serve(&djinnpb.Session_ServiceDesc, &sessionRPC{s: s}, Rules{"Open": {Access: Authenticated, Carrier: true}})
		},
		metrics: func() []prometheus.Collector {
			return []prometheus.Collector{
				gauge("djinn_sessions", "Session streams open.", func() float64 { return float64(s.sessionStats.open.Load()) }),
				counter("djinn_session_calls_total", "Calls received over sessions (each also counted under its method in grpc_server_handled_total).", func() float64 { return float64(s.sessionStats.calls.Load()) }),
			}
		},
	}
}

// sessionStats are the server's session counts.
type sessionStats struct {
	open  atomic.Int64
	calls atomic.Uint64
}

// sessionRPC serves djinn.v1.Session.
type sessionRPC struct {
	djinnpb.UnimplementedSessionServer
	s *Server
}

// Open serves one session until the client closes its side and every call
// is answered, or the stream ends.
func (r *sessionRPC) Open(stream djinnpb.Session_OpenServer) error {
	s := r.s
	s.sessions.Add(1)
	defer s.sessions.Done()
	s.sessionStats.open.Add(1)
	defer s.sessionStats.open.Add(-1)
	md, _ := metadata.FromIncomingContext(stream.Context())
	ss := &session{s: s, stream: stream, ctx: stream.Context(), values: context.WithoutCancel(stream.Context()), md: md, principal: principal.From(stream.Context()),
		slots: make(chan struct{}, maxSessionCalls), calls: map[uint64]*callCtx{},
		wake: make(chan struct{}, 1), room: make(chan struct{}, 1), quit: make(chan struct{}), sent: make(chan struct{})}
	stopEnding := context.AfterFunc(ss.ctx, ss.cancelAll) // the stream ends: its calls with it
	go ss.send()
	err := ss.receive()
	if err != nil {
		ss.cancelAll() // the stream is ending: its calls with it
	}
	ss.wg.Wait() // every call answered (or its reply dropped with the stream)
	stopEnding()
	ss.deadlines.stop()
	close(ss.quit)
	<-ss.sent
	if err != nil {
		return err
	}
	return ss.sendErr
}

// session is one open session.
type session struct {
	s      *Server
	stream djinnpb.Session_OpenServer
	ctx    context.Context // the stream's: its caller's principal, its end
	values context.Context // ctx without its end: its calls' values
	md     metadata.MD     // the stream's metadata, every call's too
	// principal is the stream's caller, whose calls in flight its calls
	// count in.
	principal string
	slots     chan struct{}  // one held per call from its start until its reply is sent (or dropped)
	wg        sync.WaitGroup // calls in flight

	deadlines callDeadlines // its calls' deadlines

	mu      sync.Mutex
	calls   map[uint64]*callCtx     // guarded by mu: calls in flight
	replies []*djinnpb.SessionReply // guarded by mu: to send
	sizes   []int                   // guarded by mu: each queued reply's bytes, measured once
	// unsent is the bytes of the replies queued and of those in a
	// message being sent (guarded by mu); past maxUnsentReplyBytes,
	// receive waits for room.
	unsent int
	// spare and spareSizes are the slices the last flush sent from,
	// emptied: the next flush's queue, so queueing replies grows no
	// slice once warm. Only send's goroutine touches them.
	spare      []*djinnpb.SessionReply
	spareSizes []int

	wake    chan struct{} // 1-buffered: replies to send
	room    chan struct{} // 1-buffered: replies sent, unsent went down
	quit    chan struct{} // closed when no call is left: send the rest and return
	sent    chan struct{} // closed when send has returned
	sendErr error         // set by send before sent closes
}

// receive reads calls and cancellations until the client closes its side
// (nil) or the stream ends (its error).
func (ss *session) receive() error {
	for {
		if err := ss.waitRoom(); err != nil {
			return err
		}
		req := new(djinnpb.SessionRequest)
		if err := ss.stream.RecvMsg(req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		for _, id := range req.GetCancel() {
			ss.cancel(id)
		}
		for _, c := range req.GetCalls() {
			if err := ss.start(c); err != nil {
				return err
			}
		}
	}
}

// waitRoom waits until the replies not yet sent hold at most
// maxUnsentReplyBytes, or the stream ends (its error).
func (ss *session) waitRoom() error {
	for {
		ss.mu.Lock()
		over := ss.unsent > maxUnsentReplyBytes
		ss.mu.Unlock()
		if !over {
			return nil
		}
		select {
		case <-ss.room:
		case <-ss.ctx.Done():
			return ss.ctx.Err()
		}
	}
}

func (ss *session) cancel(id uint64) {
	ss.mu.Lock()
	cc := ss.calls[id]
	ss.mu.Unlock()
	if cc != nil {
		ss.endCall(cc, context.Canceled)
	}
}

// cancelAll ends every call in flight, as the stream's end ends the
// contexts made from it: with the stream context's error (Canceled, or
// DeadlineExceeded at the stream's deadline).
func (ss *session) cancelAll() {
	err := ss.ctx.Err()
	if err == nil {
		err = context.Canceled
	}
	ss.mu.Lock()
	calls := make([]*callCtx, 0, len(ss.calls))
	for _, cc := range ss.calls {
		calls = append(calls, cc)
	}
	ss.mu.Unlock()
	for _, cc := range calls {
		ss.endCall(cc, err)
	}
}

// endCall ends a call's context with err.
func (ss *session) endCall(cc *callCtx, err error) {
	if !cc.deadline.IsZero() {
		ss.deadlines.remove(cc)
	}
	cc.end(err)
}

// start starts a call, once a slot is free; an error ends the session.
func (ss *session) start(c *djinnpb.SessionCall) error {
	ss.s.sessionStats.calls.Add(1)
	select {
	case ss.slots <- struct{}{}:
	case <-ss.ctx.Done():
		return ss.ctx.Err()
	}
	m, ok := ss.s.sessionMethods[c.GetMethod()]
	if !ok {
		ss.reply(&djinnpb.SessionReply{Id: c.GetId(), Status: sessionStatus(status.New(codes.Unimplemented,
			"method "+c.GetMethod()+" is not served in a session: call it on its own (unary)"))})
		return nil
	}
	err := checkMetadata(c.GetMetadata())
	if d := c.GetTimeoutNanos(); err == nil && d < 0 {
		// A unary call's timeout is never negative: taken as none, the
		// call would run unbounded where its caller meant it over.
		err = djinn.Errorf(djinn.InvalidArgument, "session call %d: timeout_nanos %d: want a positive timeout, or 0 for none", c.GetId(), d)
	}
	if err != nil {
		ss.reply(&djinnpb.SessionReply{Id: c.GetId(), Status: sessionStatus(status.Convert(ss.s.edgeError(ss.ctx, err)))})
		return nil
	}
	// Its principal's slot, waited for before its deadline starts, as a
	// call the server has not read yet.
	slot, err := ss.s.calls.wait(ss.ctx, ss.principal)
	if err != nil {
		return err
	}
	parts := ss.callContext(c)
	cc := &parts.ctx
	ss.mu.Lock()
	if _, dup := ss.calls[c.GetId()]; dup {
		ss.mu.Unlock()
		cc.end(context.Canceled)
		ss.s.calls.done(slot)
		<-ss.slots
		return status.Errorf(codes.InvalidArgument, "session call id %d: already in flight on this session; give each call in flight its own id", c.GetId())
	}
	ss.calls[c.GetId()] = cc
	ss.mu.Unlock()
	if c.GetTimeoutNanos() > 0 && cc.Err() == nil {
		ss.deadlines.add(cc)
	}
	ss.wg.Add(1)
	sc := newSessionCall()
	cc.held = ss.s.calls.hold(slot)
	sc.ss, sc.call, sc.method, sc.parts = ss, c, m, parts
	ss.s.workers.run(sc.serveFn)
	return nil
}

// callParts are what a session call makes for itself, in one allocation:
// its context, the transport stream in the context, and its reply.
type callParts struct {
	ctx    callCtx
	stream callStream
	reply  djinnpb.SessionReply
}

// callContext makes the parts of call c: its context, the stream's with
// c's deadline and metadata, and a transport stream that keeps what the
// handler sets as headers and trailers; and the call's end. A deadline
// already past ends the call's context at once, as context.WithDeadline's
// does.
func (ss *session) callContext(c *djinnpb.SessionCall) *callParts {
	p := &callParts{ctx: callCtx{at: -1}}
	cc := &p.ctx
	cc.deadline, _ = ss.ctx.Deadline()
	if d := c.GetTimeoutNanos(); d > 0 {
		now := time.Now()
		if dl := now.Add(time.Duration(d)); cc.deadline.IsZero() || dl.Before(cc.deadline) {
			cc.deadline = dl
		}
		if !now.Before(cc.deadline) {
			cc.end(context.DeadlineExceeded)
		}
	}
	// The values go under cc, not over it: cc is the context the handler
	// gets, so contexts made from it find its AfterFunc.
	values := ss.values
	if len(c.GetMetadata()) > 0 {
		values = metadata.NewIncomingContext(values, withCallMetadata(ss.md, c.GetMetadata()))
	}
	p.stream.method = c.GetMethod()
	cc.values = grpc.NewContextWithServerTransportStream(values, &p.stream)
	return p
}

// withCallMetadata returns the stream's metadata with a call's own: a key
// the call sets replaces the stream's values of it.
func withCallMetadata(stream metadata.MD, call []*djinnpb.MetadataEntry) metadata.MD {
	md := stream.Copy()
	seen := map[string]bool{}
	for _, e := range call {
		k := e.GetKey()
		if !seen[k] {
			delete(md, k)
			seen[k] = true
		}
		md[k] = append(md[k], string(e.GetValue()))
	}
	return md
}

// sessionCall is a session's call on its way to its worker: what serve
// needs. They are pooled, with their serve and decode functions bound
// once, so a call makes neither a task nor a decoder. A pooled one is
// reachable only from its worker and from the decoder, which the generated
// handler calls before it returns; what the call's context reaches (its
// callParts: the context itself, its callStream) is made for each call,
// since a context may be kept beyond its call.
type sessionCall struct {
	ss     *session
	call   *djinnpb.SessionCall
	method sessionMethod
	parts  *callParts // its context, transport stream and reply

	serveFn  func()          // serve, bound once
	decodeFn func(any) error // decode, bound once
}

// sessionCalls are the sessionCalls of every session, not in use.
var sessionCalls sync.Pool

// newSessionCall returns a sessionCall from the pool, or a new one.
func newSessionCall() *sessionCall {
	if sc, ok := sessionCalls.Get().(*sessionCall); ok {
		return sc
	}
	sc := new(sessionCall)
	sc.serveFn, sc.decodeFn = sc.serve, sc.decode
	return sc
}

// serve runs the call on a worker, returns sc to the pool and queues the
// call's reply.
func (sc *sessionCall) serve() {
	ss, c, p := sc.ss, sc.call, sc.parts
	cc := &p.ctx
	defer ss.wg.Done()
	resp, err := ss.handle(cc, c.GetMethod(), sc.method, sc.decodeFn)
	cc.held.Release()
	*sc = sessionCall{serveFn: sc.serveFn, decodeFn: sc.decodeFn}
	sessionCalls.Put(sc)
	r := &p.reply
	r.Id = c.GetId()
	if err == nil {
		r.Response, err = marshalReply(resp)
	}
	if err != nil {
		r.Status = sessionStatus(status.Convert(err))
	}
	r.Header, r.Trailer = p.stream.entries()
	ss.endCall(cc, context.Canceled)
	ss.mu.Lock()
	delete(ss.calls, c.GetId())
	ss.mu.Unlock()
	ss.reply(r)
}

// decode decodes the call's request into v, the method's request message.
func (sc *sessionCall) decode(v any) error {
	c := sc.call
	msg, ok := v.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "method %s: request %T is no protobuf message", c.GetMethod(), v)
	}
	if err := proto.Unmarshal(c.GetRequest(), msg); err != nil {
		return status.Errorf(codes.InvalidArgument, "request %s does not decode: %v: send a valid protobuf message, its strings in UTF-8",
			msg.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

// handle runs the method's handler under the server's unary interceptor
// chain, a panic of the handler's (not caught by the chain: a decoding)
// answered Internal.
func (ss *session) handle(ctx context.Context, method string, m sessionMethod, dec func(any) error) (resp any, err error) {
	defer ss.s.recoverPanic(method, &err)
	return m.handler(m.srv, ctx, dec, ss.s.unary)
}

// marshalReply encodes a handler's response, refusing one too large for a
// session's reply.
func marshalReply(resp any) ([]byte, error) {
	msg, ok := resp.(proto.Message)
	if !ok {
		return nil, status.Errorf(codes.Internal, "response %T is no protobuf message", resp)
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode response: %v", err)
	}
	if len(b) > maxSessionReply {
		return nil, status.Errorf(codes.ResourceExhausted, "response of %d bytes: a session's reply holds at most %d; make the call on its own (unary) with a larger receive limit", len(b), maxSessionReply)
	}
	return b, nil
}

func (ss *session) reply(r *djinnpb.SessionReply) {
	n := proto.Size(r)
	ss.mu.Lock()
	ss.replies = append(ss.replies, r)
	ss.sizes = append(ss.sizes, n)
	ss.unsent += n
	ss.mu.Unlock()
	select {
	case ss.wake <- struct{}{}:
	default:
	}
}

// send sends the replies as they come, batched, and goaway when the
// server starts shutting down; after quit it sends what is left and
// returns. A send that fails ends the stream: its error is kept, later
// replies dropped.
func (ss *session) send() {
	defer close(ss.sent)
	stopping := ss.s.stop
	for {
		goaway := false
		select {
		case <-ss.wake:
			// Let the calls that finished with this one queue their
			// replies first (an entry's calls are answered together):
			// one message then carries them all, not one message each.
			runtime.Gosched()
		case <-stopping:
			stopping, goaway = nil, true
		case <-ss.quit:
			ss.flush(false)
			return
		}
		ss.flush(goaway)
	}
}

// flush sends the replies queued, in messages of about sessionBatchBytes,
// the first with goaway when asked.
func (ss *session) flush(goaway bool) {
	ss.mu.Lock()
	rs, sizes := ss.replies, ss.sizes
	ss.replies, ss.sizes = ss.spare, ss.spareSizes
	ss.mu.Unlock()
	defer func(rs []*djinnpb.SessionReply, sizes []int) {
		clear(rs)
		ss.spare, ss.spareSizes = rs[:0], sizes[:0] // SendMsg has encoded every message
	}(rs, sizes)
	for len(rs) > 0 || goaway {
		n, size := 0, 0
		for n < len(rs) && (n == 0 || size+len(rs[n].Response) <= sessionBatchBytes) {
			size += len(rs[n].Response)
			n++
		}
		msg := &djinnpb.SessionResponse{Replies: rs[:n], Goaway: goaway}
		sent := 0
		for _, b := range sizes[:n] {
			sent += b
		}
		rs, sizes, goaway = rs[n:], sizes[n:], false
		if ss.sendErr == nil {
			if err := ss.stream.SendMsg(msg); err != nil {
				ss.sendErr = err
			}
		}
		for range msg.Replies { // sent, or dropped with the stream: their calls are over
			<-ss.slots
		}
		ss.mu.Lock()
		ss.unsent -= sent
		ss.mu.Unlock()
		select {
		case ss.room <- struct{}{}:
		default: // receive is already told
		}
	}
}

// sessionStatus is a status as a reply carries it; nil for OK.
func sessionStatus(st *status.Status) *djinnpb.SessionStatus {
	if st.Code() == codes.OK {
		return nil
	}
	p := st.Proto()
	return &djinnpb.SessionStatus{Code: p.GetCode(), Message: p.GetMessage(), Details: p.GetDetails()}
}

// callStream is a session call's grpc.ServerTransportStream: it keeps the
// headers and trailers the call's handler and interceptors set, for its
// reply.
type callStream struct {
	method string

	mu      sync.Mutex
	header  metadata.MD // guarded by mu
	trailer metadata.MD // guarded by mu
}

var _ grpc.ServerTransportStream = (*callStream)(nil)

func (c *callStream) Method() string { return c.method }

func (c *callStream) SetHeader(md metadata.MD) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.header = metadata.Join(c.header, md)
	return nil
}

func (c *callStream) SendHeader(md metadata.MD) error { return c.SetHeader(md) }

func (c *callStream) SetTrailer(md metadata.MD) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trailer = metadata.Join(c.trailer, md)
	return nil
}

// entries returns the header and trailer as a reply carries them.
func (c *callStream) entries() (header, trailer []*djinnpb.MetadataEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return metadataEntries(c.header), metadataEntries(c.trailer)
}

func metadataEntries(md metadata.MD) []*djinnpb.MetadataEntry {
	var out []*djinnpb.MetadataEntry
	for k, vs := range md {
		for _, v := range vs {
			out = append(out, &djinnpb.MetadataEntry{Key: k, Value: []byte(v)})
		}
	}
	return out
}

// checkMetadata refuses a call's metadata key that a unary call could not
// carry: not lower case letters, digits and "-_.", or reserved to HTTP/2
// and gRPC themselves.
func checkMetadata(call []*djinnpb.MetadataEntry) error {
	for _, e := range call {
		k := e.GetKey()
		if k == "" || strings.HasPrefix(k, "grpc-") || strings.Trim(k, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != "" {
			return djinn.Errorf(djinn.InvalidArgument, "call metadata key %q: want lower case letters, digits, '-', '_' and '.', not starting with grpc-", k)
		}
	}
	return nil
}
