package pstream

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// wait bounds every wait for an event in these tests: it fails a test
// that hangs, it times nothing.
const wait = 20 * time.Second

// participant is a participant's gRPC service whose calls a test scripts:
// handle answers every call, over the stream or unary. unary, when set,
// serves no stream (UNIMPLEMENTED), as an older participant.
type participant struct {
	djinnpb.UnimplementedTransactionParticipantServer
	handle   Handler
	stop     chan struct{} // Serve's
	unary    bool
	streams  atomic.Int32 // Calls streams opened
	unaries  atomic.Int32 // unary calls
	inflight atomic.Int32
	most     atomic.Int32
}

func (p *participant) Calls(stream djinnpb.TransactionParticipant_CallsServer) error {
	if p.unary {
		return p.UnimplementedTransactionParticipantServer.Calls(stream)
	}
	p.streams.Add(1)
	return Serve(stream, p.handle, p.stop)
}

func (p *participant) unaryCall(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
	p.unaries.Add(1)
	n := p.inflight.Add(1)
	defer p.inflight.Add(-1)
	for m := p.most.Load(); n > m && !p.most.CompareAndSwap(m, n); m = p.most.Load() {
	}
	v, err := p.handle(ctx, op, req)
	return v, grpcerr.Status(err)
}

func (p *participant) Prepare(ctx context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.PrepareResponse, error) {
	v, err := p.unaryCall(ctx, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, req)
	if err != nil {
		return nil, err
	}
	return &djinnpb.PrepareResponse{Vote: v}, nil
}

func (p *participant) Commit(ctx context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.ParticipantResponse, error) {
	if _, err := p.unaryCall(ctx, djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT, req); err != nil {
		return nil, err
	}
	return &djinnpb.ParticipantResponse{}, nil
}

// serve runs p on an in-memory listener and returns a Caller that reaches
// it at the endpoint "p:1", and a function that stops the server.
func serve(t *testing.T, p *participant) (*Caller, func()) {
	t.Helper()
	return serveRouted(t, p, func(cc grpc.ClientConnInterface, _ *djinnpb.Ref) Route { return Route{Conn: cc} })
}

// serveRouted is serve with the route to each participant's reference
// that route gives over the connection to p.
func serveRouted(t *testing.T, p *participant, route func(cc grpc.ClientConnInterface, ref *djinnpb.Ref) Route) (*Caller, func()) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer()
	djinnpb.RegisterTransactionParticipantServer(g, p)
	go g.Serve(lis)
	cc, err := grpc.NewClient("passthrough:///p:1", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	c := NewCaller(func(_ context.Context, ref *djinnpb.Ref) (Route, error) { return route(cc, ref), nil })
	t.Cleanup(func() {
		c.Close()
		cc.Close()
		g.Stop()
	})
	return c, g.Stop
}

var (
	mgr  = &djinnpb.Ref{Endpoint: "m:1", ServiceId: make([]byte, 16), ObjectId: []byte("mgr-object-id-16")}
	part = &djinnpb.Ref{Endpoint: "p:1", ServiceId: make([]byte, 16), ObjectId: []byte("participant-id16")}
)

type answer struct {
	vote djinnpb.TransactionState
	err  error
}

// call makes one call and returns a channel of its answer.
func call(ctx context.Context, c *Caller, op djinnpb.ParticipantOp, id uint64) <-chan answer {
	return callFor(ctx, c, wait, op, id)
}

// callFor is call with the call's timeout.
func callFor(ctx context.Context, c *Caller, timeout time.Duration, op djinnpb.ParticipantOp, id uint64) <-chan answer {
	ch := make(chan answer, 1)
	c.Call(ctx, timeout, op, part, mgr, id, djinn.ID{}, func(v djinnpb.TransactionState, err error) { ch <- answer{v, err} })
	return ch
}

func await(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(wait):
		t.Fatal("no answer")
		return answer{}
	}
}

// Calls on one stream are answered as each is done, in any order; every
// call reaches the participant with the manager, which the stream names
// only once; an error keeps its djinn kind.
func TestCallsAnsweredOutOfOrder(t *testing.T) {
	first := make(chan struct{})
	p := &participant{handle: func(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
		if req.GetManager().GetEndpoint() != "m:1" || string(req.GetParticipantId()) != "participant-id16" {
			return 0, djinn.Errorf(djinn.InvalidArgument, "call %d of %v for %x", req.GetId(), req.GetManager(), req.GetParticipantId())
		}
		switch req.GetId() {
		case 1:
			<-first // answered after 2
			return djinnpb.TransactionState_TRANSACTION_STATE_PREPARED, nil
		case 3:
			return 0, djinn.Errorf(djinn.UnknownTransaction, "transaction 3: unknown")
		}
		return djinnpb.TransactionState_TRANSACTION_STATE_NOTCHANGED, nil
	}}
	c, _ := serve(t, p)
	ctx := t.Context()
	a1 := call(ctx, c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 1)
	a2 := await(t, call(ctx, c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 2))
	if a2.err != nil || a2.vote != djinnpb.TransactionState_TRANSACTION_STATE_NOTCHANGED {
		t.Fatalf("call 2: %+v, want NOTCHANGED", a2)
	}
	close(first)
	if a := await(t, a1); a.err != nil || a.vote != djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
		t.Fatalf("call 1: %+v, want PREPARED", a)
	}
	if a := await(t, call(ctx, c, djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT, 3)); djinn.KindOf(a.err) != djinn.UnknownTransaction {
		t.Fatalf("call 3: %+v, want UnknownTransaction", a)
	}
	if n := p.streams.Load(); n != 1 || p.unaries.Load() != 0 {
		t.Fatalf("%d streams and %d unary calls, want every call on one stream", n, p.unaries.Load())
	}
}

// A call whose context ends first is answered Unavailable at once (the
// manager asks again); the stream goes on carrying the other calls.
func TestCallContextEnds(t *testing.T) {
	p := holdingCallOne(t)
	c, _ := serve(t, p)
	ctx, cancel := context.WithCancel(t.Context())
	a1 := call(ctx, c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 1)
	cancel()
	if a := await(t, a1); djinn.KindOf(a.err) != djinn.Unavailable {
		t.Fatalf("call whose context ended: %+v, want Unavailable", a)
	}
	if a := await(t, call(t.Context(), c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 2)); a.err != nil {
		t.Fatalf("next call: %v", a.err)
	}
}

// Calls waiting under one context all end with it, at once; calls under
// another go on (the stream watches a context once, for all its calls).
func TestCallsSharingAContextEnd(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	p := &participant{handle: func(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
		if req.GetId() < 3 {
			<-hold
		}
		return djinnpb.TransactionState_TRANSACTION_STATE_PREPARED, nil
	}}
	c, _ := serve(t, p)
	ctx, cancel := context.WithCancel(t.Context())
	a1 := call(ctx, c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 1)
	a2 := call(ctx, c, djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT, 2)
	other := call(t.Context(), c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 3)
	cancel()
	for i, a := range []<-chan answer{a1, a2} {
		if got := await(t, a); djinn.KindOf(got.err) != djinn.Unavailable {
			t.Fatalf("call %d, its context ended: %+v, want Unavailable", i+1, got)
		}
	}
	if got := await(t, other); got.err != nil || got.vote != djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
		t.Fatalf("call under another context: %+v, want PREPARED", got)
	}
	ep := c.endpoint(part)
	ep.mu.Lock()
	s := ep.stream
	ep.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.watches) != 0 || len(s.pending) != 0 {
		t.Fatalf("after every call was answered: %d contexts watched, %d calls pending; want none", len(s.watches), len(s.pending))
	}
}

// A call the participant does not answer within its timeout is answered
// Unavailable (the manager asks again); its context goes on, and so do
// the calls with time left.
func TestCallTimeout(t *testing.T) {
	p := holdingCallOne(t)
	c, _ := serve(t, p)
	if a := await(t, callFor(t.Context(), c, time.Millisecond, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 1)); djinn.KindOf(a.err) != djinn.Unavailable {
		t.Fatalf("call past its timeout: %+v, want Unavailable", a)
	}
	if a := await(t, call(t.Context(), c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 2)); a.err != nil {
		t.Fatalf("next call: %v", a.err)
	}
}

// A participant that does not serve the stream gets unary calls, the
// waiting ones too, at most MaxUnary at once, and every call is answered.
func TestUnaryForParticipantsWithoutTheStream(t *testing.T) {
	release, full := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var p *participant
	p = &participant{unary: true, handle: func(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
		if p.inflight.Load() == MaxUnary {
			once.Do(func() { close(full) })
		}
		<-release
		return djinnpb.TransactionState_TRANSACTION_STATE_PREPARED, nil
	}}
	c, _ := serve(t, p)
	n := 2*MaxUnary + 5
	answers := make([]<-chan answer, n)
	for i := range answers {
		answers[i] = call(t.Context(), c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, uint64(i+1))
	}
	select {
	case <-full: // MaxUnary under way, the rest queued
	case <-time.After(wait):
		t.Fatalf("%d unary calls under way, never %d", p.inflight.Load(), MaxUnary)
	}
	close(release)
	for i, ch := range answers {
		if a := await(t, ch); a.err != nil || a.vote != djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
			t.Fatalf("call %d: %+v", i+1, a)
		}
	}
	if got := p.unaries.Load(); int(got) != n {
		t.Fatalf("%d unary calls, want %d", got, n)
	}
	if most := p.most.Load(); most > MaxUnary {
		t.Fatalf("%d unary calls at once, want at most %d", most, MaxUnary)
	}
}

// A route that says Unary — a djinn cluster's connection, whose unary
// calls follow its leader where a stream would stay with one member — gets
// unary calls from the first, though the participant serves the stream.
// A participant of another service at the same endpoint has a route of
// its own: its calls go on a stream.
func TestUnaryRoute(t *testing.T) {
	p := &participant{handle: func(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
		return djinnpb.TransactionState_TRANSACTION_STATE_PREPARED, nil
	}}
	cluster := &djinnpb.Ref{Endpoint: part.GetEndpoint(), ServiceId: bytes.Repeat([]byte{1}, 16), ObjectId: []byte("lock-service-id!")}
	c, _ := serveRouted(t, p, func(cc grpc.ClientConnInterface, ref *djinnpb.Ref) Route {
		return Route{Conn: cc, Unary: bytes.Equal(ref.GetServiceId(), cluster.GetServiceId())}
	})
	for i, ref := range []*djinnpb.Ref{cluster, part, cluster} {
		ch := make(chan answer, 1)
		c.Call(t.Context(), wait, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, ref, mgr, uint64(i+1), djinn.ID{}, func(v djinnpb.TransactionState, err error) { ch <- answer{v, err} })
		if a := await(t, ch); a.err != nil || a.vote != djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
			t.Fatalf("call %d to %x: %+v", i+1, ref.GetServiceId(), a)
		}
	}
	if u, n := p.unaries.Load(), p.streams.Load(); u != 2 || n != 1 {
		t.Fatalf("%d unary calls and %d streams, want the cluster's 2 calls unary and the other participant's on 1 stream", u, n)
	}
}

// A stream that breaks fails its waiting calls as Unavailable; the next
// call opens a new one.
func TestStreamBreaks(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	p := &participant{handle: func(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
		if req.GetId() == 1 {
			once.Do(func() { close(started) })
			<-ctx.Done()
			return 0, ctx.Err()
		}
		return djinnpb.TransactionState_TRANSACTION_STATE_PREPARED, nil
	}}
	c, _ := serve(t, p)
	a1 := call(t.Context(), c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 1)
	<-started
	// Break the stream from the manager's side, as a failed connection does.
	ep := c.endpoint(part)
	ep.mu.Lock()
	s := ep.stream
	ep.mu.Unlock()
	s.cancel()
	if a := await(t, a1); djinn.KindOf(a.err) != djinn.Unavailable {
		t.Fatalf("call on a broken stream: %+v, want Unavailable", a)
	}
	if a := await(t, call(t.Context(), c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 2)); a.err != nil {
		t.Fatalf("call after the break: %v", a.err)
	}
	if n := p.streams.Load(); n != 2 {
		t.Fatalf("%d streams opened, want a second after the break", n)
	}
}

// A participant that cannot be reached fails the calls as Unavailable.
func TestUnreachable(t *testing.T) {
	c := NewCaller(func(_ context.Context, ref *djinnpb.Ref) (Route, error) {
		return Route{}, fmt.Errorf("no route to %s", ref.GetEndpoint())
	})
	defer c.Close()
	if a := await(t, call(t.Context(), c, djinnpb.ParticipantOp_PARTICIPANT_OP_ABORT, 1)); djinn.KindOf(a.err) != djinn.Unavailable {
		t.Fatalf("call to an unreachable participant: %+v, want Unavailable", a)
	}
}

// A participant shutting down ends the streams it serves: the calls under
// way fail as Unavailable (the manager calls again later), and Serve
// returns, so a graceful stop of the gRPC server need not wait for it.
func TestServeEndsAtShutdown(t *testing.T) {
	started := make(chan struct{})
	p := &participant{stop: make(chan struct{}), handle: func(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
		close(started)
		<-ctx.Done()
		return 0, ctx.Err()
	}}
	c, _ := serve(t, p)
	a := call(t.Context(), c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 1)
	<-started
	close(p.stop)
	if got := await(t, a); djinn.KindOf(got.err) != djinn.Unavailable {
		t.Fatalf("call under way at the participant's shutdown: %+v, want Unavailable", got)
	}
}

// A stream with no call waiting for the idle time closes, and leaves
// nothing behind for its endpoint; the next call opens another.
func TestIdleStreamCloses(t *testing.T) {
	p := &participant{handle: func(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
		return djinnpb.TransactionState_TRANSACTION_STATE_PREPARED, nil
	}}
	c, _ := serve(t, p)
	closed := make(chan string, 1)
	c.idle, c.closedIdle = time.Millisecond, func(addr string) { closed <- addr }
	if a := await(t, call(t.Context(), c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 1)); a.err != nil {
		t.Fatal(a.err)
	}
	select {
	case addr := <-closed:
		if addr != "p:1" {
			t.Fatalf("closed the stream to %s", addr)
		}
	case <-time.After(wait):
		t.Fatal("the idle stream never closed")
	}
	c.mu.Lock()
	n := len(c.endpoints)
	c.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d endpoints held after the stream closed idle, want 0", n)
	}
	if a := await(t, call(t.Context(), c, djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, 2)); a.err != nil {
		t.Fatal(a.err)
	}
	if got := p.streams.Load(); got != 2 {
		t.Fatalf("%d streams opened, want a second after the first closed idle", got)
	}
}

// holdingCallOne is a participant that answers every call prepared at
// once, but call 1 only when the test ends.
func holdingCallOne(t *testing.T) *participant {
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	return &participant{handle: func(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
		if req.GetId() == 1 {
			<-hold
		}
		return djinnpb.TransactionState_TRANSACTION_STATE_PREPARED, nil
	}}
}
