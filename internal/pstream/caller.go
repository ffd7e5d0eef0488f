package pstream

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Idle is how long a stream with no call waiting stays open: then it
// closes, and the next call to its endpoint opens another, so that
// participants that come and go hold nothing here.
const Idle = 30 * time.Second

// sweepEvery is how often a stream fails the calls past their deadline:
// a call's timeout is kept to within this, by one timer per stream
// instead of one per call.
const sweepEvery = 50 * time.Millisecond

// MaxUnary bounds the unary calls in flight to one participant endpoint
// that does not serve the stream; the calls beyond it wait their turn in a
// queue, not in goroutines.
const MaxUnary = 64

// Route is how a Caller reaches a participant: Conn is the connection its
// calls go on, and Unary says to make them unary calls, not a stream's.
// A djinn cluster's connection, whose unary calls go to its leader and
// follow it when it moves, is Unary: a stream would stay with the member
// it opened at.
type Route struct {
	Conn  grpc.ClientConnInterface
	Unary bool
}

// Router returns the route to the participant ref names. ctx bounds what
// it waits for (the first route to a participant may ask where it is
// served); it is called when a stream opens, and before each unary call.
type Router func(ctx context.Context, ref *djinnpb.Ref) (Route, error)

// Caller makes a manager's calls to participants: over one Calls stream
// per participant endpoint and service id, opened at the first call and
// opened again at the next call after it breaks, or, to a participant
// whose route says so or that answered UNIMPLEMENTED, with the unary
// calls. It is safe for concurrent use.
type Caller struct {
	route  Router
	ctx    context.Context // the streams': ends with Close
	cancel context.CancelFunc
	idle   time.Duration
	// closedIdle, when set, hears of each stream closed idle (tests).
	closedIdle func(addr string)

	mu        sync.Mutex
	endpoints map[target]*endpoint // guarded by mu
}

// target is where a participant's calls go: its endpoint and its service
// id. Participants of one service at one endpoint share a stream; those of
// different services there do not, for their routes may differ (one a
// djinn cluster's, followed wherever it leads; one that endpoint's own).
type target struct {
	addr    string
	service string
}

// NewCaller returns a Caller that reaches participants by route.
func NewCaller(route Router) *Caller {
	ctx, cancel := context.WithCancel(context.Background())
	return &Caller{route: route, ctx: ctx, cancel: cancel, idle: Idle, endpoints: map[target]*endpoint{}}
}

// Close ends the streams; their calls under way fail as Unavailable.
func (c *Caller) Close() { c.cancel() }

// endpoint is what the Caller holds for one target.
type endpoint struct {
	c   *Caller
	to  target
	ref *djinnpb.Ref // the target's endpoint and service, as the router reads them

	mu sync.Mutex
	// Guarded by mu.
	stream *callStream // nil until a call opens it, and after it broke
	// unaryOnly: the endpoint does not serve the stream. inflight counts
	// its unary calls under way, queue holds those waiting.
	unaryOnly bool
	inflight  int
	queue     []*pending
}

// pending is a call waiting for its answer.
type pending struct {
	ctx      context.Context
	deadline time.Time
	op       djinnpb.ParticipantOp
	req      *djinnpb.ParticipantRequest
	done     func(djinnpb.TransactionState, error)
	// claimed is set by the one that answers: the answer, the end of ctx
	// or of its time, or the stream's end.
	claimed atomic.Bool
}

// claim reports whether the caller is the one to answer p.
func (p *pending) claim() bool { return p.claimed.CompareAndSwap(false, true) }

// again returns p as a new call, to send on its way again.
func (p *pending) again() *pending {
	return &pending{ctx: p.ctx, deadline: p.deadline, op: p.op, req: p.req, done: p.done}
}

// Call makes call op of the participant at ref for transaction id of the
// manager mgr, presenting the transaction's secret (none when zero), and
// reports its answer to done, once: from the stream's
// receiving goroutine, or a unary call's. When ctx ends first, done gets
// Unavailable at once; when timeout passes first, within sweepEvery of it
// (the participant may still do the call: every call is idempotent). Call
// itself waits for no answer.
//
// Calls sharing a context share its watch: a stream watches each
// context its calls wait under once, not once per call, and bounds their
// times with one timer.
func (c *Caller) Call(ctx context.Context, timeout time.Duration, op djinnpb.ParticipantOp, ref *djinnpb.Ref, mgr *djinnpb.Ref, id uint64, secret djinn.ID, done func(djinnpb.TransactionState, error)) {
	req := &djinnpb.ParticipantRequest{ParticipantId: ref.GetObjectId(), Manager: mgr, Id: id}
	if !secret.IsZero() {
		req.Secret = secret[:]
	}
	p := &pending{ctx: ctx, deadline: time.Now().Add(timeout), op: op, req: req, done: done}
	c.endpoint(ref).call(p)
}

func (c *Caller) endpoint(ref *djinnpb.Ref) *endpoint {
	to := target{addr: ref.GetEndpoint(), service: string(ref.GetServiceId())}
	c.mu.Lock()
	defer c.mu.Unlock()
	ep := c.endpoints[to]
	if ep == nil {
		ep = &endpoint{c: c, to: to, ref: &djinnpb.Ref{Endpoint: to.addr, ServiceId: ref.GetServiceId()}}
		c.endpoints[to] = ep
	}
	return ep
}

func (ep *endpoint) call(p *pending) {
	ep.mu.Lock()
	if ep.unaryOnly {
		ep.enqueueLocked(p)
		ep.mu.Unlock()
		return
	}
	s := ep.stream
	if s == nil {
		s = ep.open()
		ep.stream = s
	}
	ep.mu.Unlock()
	s.call(p)
}

// open starts opening a stream to the endpoint; calls queue on it
// meanwhile.
func (ep *endpoint) open() *callStream {
	ctx, cancel := context.WithCancel(ep.c.ctx)
	s := &callStream{ep: ep, ctx: ctx, cancel: cancel, pending: map[uint64]*pending{}, watches: map[<-chan struct{}]*watch{},
		wake: make(chan struct{}, 1)}
	s.sweeper = time.AfterFunc(time.Hour, s.sweep)
	s.sweeper.Reset(sweepEvery) // after the field is set: sweep reads it
	go s.run()
	return s
}

// callStream is one open Calls stream. Its calls are sent by a goroutine
// of its own, from a queue: a participant slow to read holds back that
// goroutine, not the manager's workers.
type callStream struct {
	ep     *endpoint
	stream grpc.BidiStreamingClient[djinnpb.ParticipantCall, djinnpb.ParticipantAnswer]
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // a call was queued
	// sweeper answers the calls past their deadline, on a timer of its
	// own: a participant that stops reading holds back the sending
	// goroutine, never the calls' time.
	sweeper *time.Timer

	mu sync.Mutex
	// Guarded by mu.
	pending map[uint64]*pending
	watches map[<-chan struct{}]*watch // the contexts the pending calls wait under, by Done
	queue   []*djinnpb.ParticipantCall
	next    uint64
	broken  bool
	sent    *djinnpb.Ref // the last manager the queue named
}

// call queues p on the stream. A stream that broke before p could wait on
// it sends p on its way again: to a new stream or the unary calls.
func (s *callStream) call(p *pending) {
	s.mu.Lock()
	if s.broken {
		s.mu.Unlock()
		s.ep.call(p)
		return
	}
	s.next++
	id := s.next
	s.pending[id] = p
	s.watchLocked(p.ctx)
	req := p.req
	if sameRef(s.sent, req.GetManager()) {
		req = &djinnpb.ParticipantRequest{ParticipantId: req.GetParticipantId(), Id: req.GetId(), Secret: req.GetSecret()}
	} else {
		s.sent = req.GetManager()
	}
	s.queue = append(s.queue, &djinnpb.ParticipantCall{Call: id, Op: p.op, Request: req})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run opens the stream, then sends the queued calls until it ends, while
// another goroutine receives the answers. A route that says Unary sends
// the calls unary instead, from now on.
func (s *callStream) run() {
	r, err := s.ep.c.route(s.ctx, s.ep.ref)
	if err == nil && r.Unary {
		s.end(nil, true)
		return
	}
	if err == nil {
		s.stream, err = djinnpb.NewTransactionParticipantClient(r.Conn).Calls(s.ctx)
	}
	if err != nil {
		s.broke(err)
		return
	}
	go s.receive()
	s.send()
}

// send sends the queued calls until the stream ends, or until it has
// had no call waiting for the idle time.
func (s *callStream) send() {
	idle := time.NewTimer(s.ep.c.idle)
	defer idle.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-idle.C:
			if s.closeIdle() {
				return
			}
			idle.Reset(s.ep.c.idle)
			continue
		case <-s.wake:
			idle.Reset(s.ep.c.idle)
		}
		s.mu.Lock()
		q := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, c := range q {
			if err := s.stream.Send(c); err != nil {
				// The stream ended: receive hears why, and sends its calls
				// on their way.
				s.cancel()
				return
			}
		}
	}
}

// closeIdle closes the stream if no call waits on it; the next call to
// the endpoint opens another.
func (s *callStream) closeIdle() bool {
	s.mu.Lock()
	if len(s.pending) > 0 || len(s.queue) > 0 {
		s.mu.Unlock()
		return false
	}
	s.broken = true
	s.mu.Unlock()
	s.cancel()
	ep := s.ep
	ep.mu.Lock()
	if ep.stream == s {
		ep.stream = nil
	}
	unused := ep.stream == nil && ep.inflight == 0 && len(ep.queue) == 0
	ep.mu.Unlock()
	if unused {
		ep.c.mu.Lock()
		if ep.c.endpoints[ep.to] == ep {
			delete(ep.c.endpoints, ep.to)
		}
		ep.c.mu.Unlock()
	}
	if f := ep.c.closedIdle; f != nil {
		f(ep.to.addr)
	}
	return true
}

// take removes and returns call id's pending, nil when it is gone.
func (s *callStream) take(id uint64) *pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[id]
	if p != nil {
		delete(s.pending, id)
		s.unwatchLocked(p.ctx)
	}
	return p
}

// sweep answers the calls past their deadline, every sweepEvery until
// the stream ends.
func (s *callStream) sweep() {
	if s.ctx.Err() != nil {
		return
	}
	s.expire(nil, time.Now())
	s.sweeper.Reset(sweepEvery)
}

// watch is the stream's watch of one context: the calls waiting under it,
// and the stop of the function that answers them when it ends.
type watch struct {
	calls int
	stop  func() bool
}

// watchLocked counts a call waiting under ctx, watching ctx from its
// first. Contexts are told apart by their Done channel (any context has
// one to compare; those that share it end together).
func (s *callStream) watchLocked(ctx context.Context) {
	done := ctx.Done()
	if done == nil {
		return // never ends
	}
	w := s.watches[done]
	if w == nil {
		w = &watch{}
		w.stop = context.AfterFunc(ctx, func() { s.expire(done, time.Time{}) })
		s.watches[done] = w
	}
	w.calls++
}

// unwatchLocked uncounts a call waiting under ctx, and stops watching it
// after its last.
func (s *callStream) unwatchLocked(ctx context.Context) {
	done := ctx.Done()
	w := s.watches[done]
	if w == nil {
		return
	}
	if w.calls--; w.calls == 0 {
		w.stop()
		delete(s.watches, done)
	}
}

// expire answers Unavailable the calls waiting under the context whose
// Done is done, once it ended (nil: under any that ended), and those past
// their deadline at now (zero: none).
func (s *callStream) expire(done <-chan struct{}, now time.Time) {
	var out []*pending
	s.mu.Lock()
	for id, p := range s.pending {
		if (done == nil || p.ctx.Done() == done) && p.ctx.Err() != nil || !now.IsZero() && !now.Before(p.deadline) {
			delete(s.pending, id)
			s.unwatchLocked(p.ctx)
			out = append(out, p)
		}
	}
	s.mu.Unlock()
	for _, p := range out {
		if !p.claim() {
			continue
		}
		why := "its time ran out"
		if err := p.ctx.Err(); err != nil {
			why = err.Error()
		}
		p.done(0, djinn.Errorf(djinn.Unavailable, "participant %s: no answer to %s of transaction %d: %s", s.ep.to.addr, opName(p.op), p.req.GetId(), why))
	}
}

// receive hands each answer to its call until the stream ends, then
// sends the calls still waiting on their way again.
func (s *callStream) receive() {
	for {
		a, err := s.stream.Recv()
		if err != nil {
			s.broke(err)
			return
		}
		p := s.take(a.GetCall())
		if p == nil || !p.claim() {
			continue // its time ran out: it was answered Unavailable
		}
		if e := a.GetError(); e != nil {
			p.done(0, grpcerr.FromProto(e))
		} else {
			p.done(a.GetVote(), nil)
		}
	}
}

// broke ends the stream: an endpoint that does not serve it is called
// unary from now on, its waiting calls too; otherwise they fail as
// Unavailable (each was made or not: the manager asks again).
func (s *callStream) broke(err error) { s.end(err, status.Code(err) == codes.Unimplemented) }

// end ends the stream, and sends its waiting calls unary if unary (the
// endpoint is called unary from now on), or fails them with err.
func (s *callStream) end(err error, unary bool) {
	s.cancel()
	s.mu.Lock()
	s.broken = true
	waiting := s.pending
	s.pending = nil
	for _, w := range s.watches {
		w.stop()
	}
	s.watches = nil
	s.mu.Unlock()
	ep := s.ep
	ep.mu.Lock()
	if ep.stream == s {
		ep.stream = nil
	}
	ep.unaryOnly = ep.unaryOnly || unary
	ep.mu.Unlock()
	for _, p := range waiting {
		if !p.claim() {
			continue
		}
		if unary {
			ep.call(p.again())
			continue
		}
		if errors.Is(err, context.Canceled) && ep.c.ctx.Err() != nil {
			err = errors.New("the manager is closing")
		}
		p.done(0, djinn.Errorf(djinn.Unavailable, "participant %s: the call stream broke before %s of transaction %d was answered: %v", ep.to.addr, opName(p.op), p.req.GetId(), err))
	}
}

// enqueueLocked starts p as a unary call, or queues it when MaxUnary are
// under way; ep.mu is held.
func (ep *endpoint) enqueueLocked(p *pending) {
	if ep.inflight >= MaxUnary {
		ep.queue = append(ep.queue, p)
		return
	}
	ep.inflight++
	go ep.unary(p)
}

// unary makes p as a unary call, then the queued ones.
func (ep *endpoint) unary(p *pending) {
	for p != nil {
		vote, err := ep.unaryCall(p)
		p.done(vote, err)
		ep.mu.Lock()
		p = nil
		if len(ep.queue) > 0 {
			p = ep.queue[0]
			ep.queue[0] = nil
			ep.queue = ep.queue[1:]
		} else {
			ep.inflight--
		}
		ep.mu.Unlock()
	}
}

func (ep *endpoint) unaryCall(p *pending) (djinnpb.TransactionState, error) {
	ctx, cancel := context.WithDeadline(p.ctx, p.deadline)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return 0, djinn.Errorf(djinn.Unavailable, "participant %s: no time left for %s of transaction %d: %v", ep.to.addr, opName(p.op), p.req.GetId(), err)
	}
	r, err := ep.c.route(ctx, ep.ref)
	if err != nil {
		return 0, djinn.Errorf(djinn.Unavailable, "participant %s: %v", ep.to.addr, err)
	}
	c := djinnpb.NewTransactionParticipantClient(r.Conn)
	switch p.op {
	case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE:
		resp, err := c.Prepare(ctx, p.req)
		return resp.GetVote(), kinded(err)
	case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE_AND_COMMIT:
		resp, err := c.PrepareAndCommit(ctx, p.req)
		return resp.GetVote(), kinded(err)
	case djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT:
		_, err := c.Commit(ctx, p.req)
		return 0, kinded(err)
	case djinnpb.ParticipantOp_PARTICIPANT_OP_ABORT:
		_, err := c.Abort(ctx, p.req)
		return 0, kinded(err)
	}
	return 0, djinn.Errorf(djinn.InvalidArgument, "participant call %v: unknown", p.op)
}

// kinded gives a gRPC error its djinn kind, for connections that do not
// convert errors themselves.
func kinded(err error) error {
	if err == nil {
		return nil
	}
	var de *djinn.Error
	var k djinn.Kind
	if errors.As(err, &de) || errors.As(err, &k) {
		return err
	}
	return grpcerr.FromStatus(err)
}

func opName(op djinnpb.ParticipantOp) string {
	switch op {
	case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE:
		return "prepare"
	case djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE_AND_COMMIT:
		return "prepareAndCommit"
	case djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT:
		return "commit"
	case djinnpb.ParticipantOp_PARTICIPANT_OP_ABORT:
		return "abort"
	}
	return op.String()
}

// sameRef reports whether a and b name the same object at the same
// endpoint (nil: none).
func sameRef(a, b *djinnpb.Ref) bool {
	return a != nil && b != nil && a.GetEndpoint() == b.GetEndpoint() &&
		string(a.GetServiceId()) == string(b.GetServiceId()) && string(a.GetObjectId()) == string(b.GetObjectId())
}
