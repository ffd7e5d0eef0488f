package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// blockMethod is the method of callsFixture's calls; waitMethod's calls
// give back their place (quota.Release) and then block, as a queued lock
// request does.
const (
	blockMethod = "/djinn.v1.Test/Block"
	waitMethod  = "/djinn.v1.Test/Wait"
)

// callsFixture is a server whose every principal may have callsLimit
// calls in flight ([quota] calls-in-flight) under mutual TLS, serving
// blockMethod, on its own and in sessions.
type callsFixture struct {
	s       *Server
	release chan struct{} // each value sent ends one blocked call
	started atomic.Int64  // blocked calls whose handler started
}

const callsLimit = 2

func callsConfig() Config {
	cfg := Default()
	cfg.TLS.ClientAuth = true
	cfg.Quota.CallsInFlight = callsLimit
	cfg.Quota.Principals = map[string]map[string]int64{"cn:big": {"calls-in-flight": callsLimit + 1}, "cn:free": {"calls-in-flight": 0}}
	cfg.Security.Operators = []string{"cn:ops"}
	return cfg
}

// newCallsFixture makes the fixture of cfg; the caller stops its workers.
func newCallsFixture(cfg Config) *callsFixture {
	f := &callsFixture{release: make(chan struct{})}
	s := &Server{log: slog.New(slog.DiscardHandler), stop: make(chan struct{}), workers: newWorkers(maxIdleWorkers), rules: map[string]Rule{blockMethod: authenticated, waitMethod: authenticated}}
	s.calls.configure(cfg)
	s.unary = s.unaryChain(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(ctx, req)
	})
	s.sessionMethods = map[string]sessionMethod{blockMethod: {handler: func(_ any, ctx context.Context, _ func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
		return in(ctx, &emptypb.Empty{}, &grpc.UnaryServerInfo{FullMethod: blockMethod}, f.block)
	}}, waitMethod: {handler: func(_ any, ctx context.Context, _ func(any) error, in grpc.UnaryServerInterceptor) (any, error) {
		return in(ctx, &emptypb.Empty{}, &grpc.UnaryServerInfo{FullMethod: waitMethod}, f.wait)
	}}}
	f.s = s
	return f
}

// block is a handler that returns when the test releases it, or fails
// when its call ends first (the test failed).
func (f *callsFixture) block(ctx context.Context, _ any) (any, error) {
	f.started.Add(1)
	select {
	case <-f.release:
		return &emptypb.Empty{}, nil
	case <-ctx.Done():
		return nil, errors.New("the call ended before the test released it")
	}
}

// wait is block for a call that waits by design: it gives back its place
// first, twice (the second does nothing).
func (f *callsFixture) wait(ctx context.Context, req any) (any, error) {
	quota.Release(ctx)
	quota.Release(ctx)
	return f.block(ctx, req)
}

// echo is a handler that answers at once.
func echo(context.Context, any) (any, error) { return &emptypb.Empty{}, nil }

// unary makes a unary call in ctx (which names its principal) to h, and
// returns where its error comes.
func (f *callsFixture) unary(ctx context.Context, h grpc.UnaryHandler) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := f.s.unary(ctx, &emptypb.Empty{}, &grpc.UnaryServerInfo{FullMethod: blockMethod}, h)
		done <- err
	}()
	return done
}

// blocked makes n unary calls of ctx's principal that block, and waits
// until they all do.
func (f *callsFixture) blocked(t *testing.T, ctx context.Context, n int) []<-chan error {
	t.Helper()
	return f.blockedIn(t, ctx, n, f.block)
}

// blockedIn is blocked with handler h.
func (f *callsFixture) blockedIn(t *testing.T, ctx context.Context, n int, h grpc.UnaryHandler) []<-chan error {
	t.Helper()
	var out []<-chan error
	before := f.started.Load()
	for range n {
		out = append(out, f.unary(ctx, h))
	}
	synctest.Wait()
	if got := f.started.Load() - before; got != int64(n) {
		t.Fatalf("%d of %d calls of %q started, want all", got, n, principal.From(ctx))
	}
	return out
}

// held returns p's calls in flight, and whether p has an entry.
func (f *callsFixture) held(p string) (int64, bool) {
	c, ok := f.s.calls.held.Load(p)
	if !ok {
		return 0, false
	}
	return c.(*callCount).n.Load(), true
}

// endAll releases every blocked call and waits for their errors.
func (f *callsFixture) endAll(t *testing.T, calls []<-chan error) {
	t.Helper()
	for range calls {
		f.release <- struct{}{}
	}
	for i, done := range calls {
		if err := <-done; err != nil {
			t.Errorf("call %d: %v", i+1, err)
		}
	}
}

// as returns a context naming principal p.
func as(t *testing.T, p string) context.Context { return principal.With(t.Context(), p) }

// wantRefused fails unless err is the calls-in-flight refusal of p.
func wantRefused(t *testing.T, what string, err error, p string) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "quota calls-in-flight") || !strings.Contains(err.Error(), p) {
		t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED naming quota calls-in-flight and %s", what, err, p)
	}
}

// scriptedSession is a session stream whose client sends the calls the
// test hands it, one a message, and closes its side when calls closes.
type scriptedSession struct {
	grpc.ServerStream
	ctx   context.Context
	calls chan *djinnpb.SessionCall
	asked atomic.Int64 // messages the server asked for

	mu      sync.Mutex
	replies []*djinnpb.SessionReply // guarded by mu
}

func (s *scriptedSession) Context() context.Context { return s.ctx }

func (s *scriptedSession) RecvMsg(m any) error {
	s.asked.Add(1)
	select {
	case c, ok := <-s.calls:
		if !ok {
			return io.EOF
		}
		m.(*djinnpb.SessionRequest).Calls = []*djinnpb.SessionCall{c}
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

func (s *scriptedSession) Recv() (*djinnpb.SessionRequest, error) {
	m := new(djinnpb.SessionRequest)
	return m, s.RecvMsg(m)
}

func (s *scriptedSession) Send(m *djinnpb.SessionResponse) error { return s.SendMsg(m) }

func (s *scriptedSession) SendMsg(m any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, m.(*djinnpb.SessionResponse).GetReplies()...)
	return nil
}

// session opens a session in ctx (which names its principal) and returns
// its stream and where Open's error comes.
func (f *callsFixture) session(ctx context.Context) (*scriptedSession, <-chan error) {
	st := &scriptedSession{ctx: ctx, calls: make(chan *djinnpb.SessionCall)}
	done := make(chan error, 1)
	go func() { done <- (&sessionRPC{s: f.s}).Open(st) }()
	return st, done
}

// TestCallsInFlight (DESIGN.md 7: one principal's load never starves
// another's): the calls each principal has in flight on a server, unary
// and in all its sessions together, are bounded by [quota]
// calls-in-flight. Before, only each session's calls were (4096), so one
// principal opening sessions and making unary calls kept any number of
// handlers runnable ahead of every other principal's.
func TestCallsInFlight(t *testing.T) {
	for _, row := range []struct {
		name string
		cfg  func(*Config)
		run  func(t *testing.T, f *callsFixture)
	}{
		{name: "a unary call past its principal's bound is refused RESOURCE_EXHAUSTED naming the quota, and takes nothing", run: func(t *testing.T, f *callsFixture) {
			calls := f.blocked(t, as(t, "cn:a"), callsLimit)
			wantRefused(t, "cn:a's call past its bound", <-f.unary(as(t, "cn:a"), echo), "cn:a")
			if n, _ := f.held("cn:a"); n != callsLimit {
				t.Errorf("cn:a has %d calls in flight after a refusal, want %d", n, callsLimit)
			}
			if got := f.s.calls.refused.Load(); got != 1 {
				t.Errorf("refusals counted: %d, want 1", got)
			}
			f.endAll(t, calls)
		}},
		{name: "another principal's call is served at once beside a principal at its bound", run: func(t *testing.T, f *callsFixture) {
			calls := f.blocked(t, as(t, "cn:a"), callsLimit)
			done := f.unary(as(t, "cn:b"), echo)
			synctest.Wait()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("cn:b's call beside cn:a's full bound: %v", err)
				}
			default:
				t.Fatal("cn:b's call waits behind cn:a's")
			}
			for i, c := range calls {
				if len(c) != 0 {
					t.Fatalf("cn:a's call %d ended before it was released", i+1)
				}
			}
			f.endAll(t, calls)
		}},
		{name: "a session's call past its principal's bound waits, the session not read meanwhile, until one of the principal's calls ends", run: func(t *testing.T, f *callsFixture) {
			calls := f.blocked(t, as(t, "cn:a"), callsLimit) // unary calls: the bound is over both
			st, open := f.session(as(t, "cn:a"))
			st.calls <- &djinnpb.SessionCall{Id: 1, Method: blockMethod}
			synctest.Wait()
			if got, asked := f.started.Load(), st.asked.Load(); got != callsLimit || asked != 1 {
				t.Fatalf("cn:a's session call past its bound: %d calls started, %d messages read; want %d started, the session not read past the waiting call", got, asked, callsLimit)
			}
			if got := f.s.calls.waited.Load(); got != 1 {
				t.Errorf("waits counted: %d, want 1", got)
			}
			f.release <- struct{}{} // one of cn:a's unary calls ends
			synctest.Wait()
			if got, asked := f.started.Load(), st.asked.Load(); got != callsLimit+1 || asked != 2 {
				t.Fatalf("once a call of cn:a's ended: %d calls started, %d messages read; want its session call started and the session read again", got, asked)
			}
			if n, _ := f.held("cn:a"); n != callsLimit {
				t.Errorf("cn:a has %d calls in flight, want %d (one ended, the waiting one started)", n, callsLimit)
			}
			for range callsLimit { // the other unary call and the session's
				f.release <- struct{}{}
			}
			close(st.calls)
			if err := <-open; err != nil || len(st.replies) != 1 || st.replies[0].GetStatus() != nil {
				t.Fatalf("the session: %v, replies %v; want its call answered OK", err, st.replies)
			}
			for i, done := range calls {
				if err := <-done; err != nil {
					t.Errorf("cn:a's unary call %d: %v", i+1, err)
				}
			}
		}},
		{name: "a session's calls count once, though they run the unary chain", run: func(t *testing.T, f *callsFixture) {
			st, open := f.session(as(t, "cn:a"))
			for id := range uint64(callsLimit) {
				st.calls <- &djinnpb.SessionCall{Id: id + 1, Method: blockMethod}
			}
			synctest.Wait()
			if n, _ := f.held("cn:a"); f.started.Load() != callsLimit || n != callsLimit {
				t.Fatalf("%d of %d session calls started, %d counted; want all, each once", f.started.Load(), callsLimit, n)
			}
			for range callsLimit {
				f.release <- struct{}{}
			}
			close(st.calls)
			if err := <-open; err != nil {
				t.Fatal(err)
			}
			for _, r := range st.replies {
				if r.GetStatus() != nil {
					t.Errorf("session call %d: %v", r.GetId(), r.GetStatus())
				}
			}
		}},
		{name: "a unary call that waits by design gives back its place: its principal's other calls are served meanwhile, and its end frees nothing more", run: func(t *testing.T, f *callsFixture) {
			waiting := f.blockedIn(t, as(t, "cn:a"), callsLimit+1, f.wait)
			if n, ok := f.held("cn:a"); ok {
				t.Fatalf("cn:a's %d calls wait by design, yet %d are counted; want none", callsLimit+1, n)
			}
			busy := f.blocked(t, as(t, "cn:a"), callsLimit) // its bound's worth of other calls, served
			wantRefused(t, "cn:a's call past its bound beside its waiting ones", <-f.unary(as(t, "cn:a"), echo), "cn:a")
			f.endAll(t, append(waiting, busy...))
			if n, ok := f.held("cn:a"); ok {
				t.Fatalf("every call of cn:a ended, yet an entry counting %d", n)
			}
		}},
		{name: "a session call that waits by design gives back its place: its session's next calls are read and served", run: func(t *testing.T, f *callsFixture) {
			st, open := f.session(as(t, "cn:a"))
			for id := range uint64(callsLimit + 1) {
				st.calls <- &djinnpb.SessionCall{Id: id + 1, Method: waitMethod}
			}
			st.calls <- &djinnpb.SessionCall{Id: callsLimit + 2, Method: blockMethod} // the unlock that would end the waits
			synctest.Wait()
			if got := f.started.Load(); got != callsLimit+2 {
				t.Fatalf("%d of cn:a's session calls started behind %d waiting by design, want all %d", got, callsLimit+1, callsLimit+2)
			}
			if n, _ := f.held("cn:a"); n != 1 {
				t.Errorf("cn:a has %d calls counted, want 1 (the one not waiting by design)", n)
			}
			for range callsLimit + 2 {
				f.release <- struct{}{}
			}
			close(st.calls)
			if err := <-open; err != nil || len(st.replies) != callsLimit+2 {
				t.Fatalf("the session: %v, %d replies; want all %d answered", err, len(st.replies), callsLimit+2)
			}
			if n, ok := f.held("cn:a"); ok {
				t.Fatalf("every call of cn:a ended, yet an entry counting %d", n)
			}
		}},
		{name: "the count returns to zero as the calls end, and the principal's entry is dropped", run: func(t *testing.T, f *callsFixture) {
			calls := f.blocked(t, as(t, "cn:a"), callsLimit)
			if n, ok := f.held("cn:a"); !ok || n != callsLimit {
				t.Fatalf("cn:a holds %d (entry %v), want %d", n, ok, callsLimit)
			}
			f.endAll(t, calls)
			if n, ok := f.held("cn:a"); ok {
				t.Fatalf("cn:a has no call in flight, yet an entry counting %d", n)
			}
			if got := f.s.calls.inFlight(); got != 0 {
				t.Errorf("calls in flight: %d, want 0", got)
			}
		}},
		{name: "a session call that stops waiting (its stream ends) frees nothing it did not take", run: func(t *testing.T, f *callsFixture) {
			calls := f.blocked(t, as(t, "cn:a"), callsLimit)
			ctx, cancel := context.WithCancel(as(t, "cn:a"))
			st, open := f.session(ctx)
			st.calls <- &djinnpb.SessionCall{Id: 1, Method: blockMethod}
			synctest.Wait() // it waits
			cancel()
			if err := <-open; err == nil {
				t.Error("the session ended without error when its stream did")
			}
			c, _ := f.s.calls.held.Load("cn:a")
			if n, w := c.(*callCount).n.Load(), c.(*callCount).waiting.Load(); n != callsLimit || w != 0 {
				t.Fatalf("after the waiting call gave up: cn:a holds %d, %d waiting; want %d (its unary calls) and none", n, w, callsLimit)
			}
			if got := f.started.Load(); got != callsLimit {
				t.Errorf("%d calls started, want %d: the one that gave up ran", got, callsLimit)
			}
			f.endAll(t, calls)
			if _, ok := f.held("cn:a"); ok {
				t.Error("cn:a's entry stays after its last call")
			}
		}},
		{name: "a principal's own bound ([quota.principals]) replaces the default; 0 is none", run: func(t *testing.T, f *callsFixture) {
			big := f.blocked(t, as(t, "cn:big"), callsLimit+1)
			wantRefused(t, "cn:big's call past its own bound", <-f.unary(as(t, "cn:big"), echo), "cn:big")
			free := f.blocked(t, as(t, "cn:free"), 2*callsLimit)
			if _, ok := f.held("cn:free"); ok {
				t.Error("cn:free, without a bound, is counted")
			}
			f.endAll(t, append(big, free...))
		}},
		{name: "the operator role is bounded as any principal", run: func(t *testing.T, f *callsFixture) {
			calls := f.blocked(t, as(t, "cn:ops"), callsLimit)
			wantRefused(t, "an operator's call past its bound", <-f.unary(as(t, "cn:ops"), echo), "cn:ops")
			f.endAll(t, calls)
		}},
		{name: "the peers (the cluster's servers) have no bound", run: func(t *testing.T, f *callsFixture) {
			calls := f.blocked(t, principal.WithPeer(t.Context(), "n2"), 2*callsLimit)
			if _, ok := f.held(principal.Peer); ok {
				t.Error("the peers are counted")
			}
			f.endAll(t, calls)
		}},
		{name: "without mutual TLS, where every caller is the one local principal, there is no bound", cfg: func(c *Config) { c.TLS.ClientAuth = false }, run: func(t *testing.T, f *callsFixture) {
			f.endAll(t, f.blocked(t, as(t, ""), 2*callsLimit))
		}},
	} {
		t.Run(row.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := callsConfig()
				if row.cfg != nil {
					row.cfg(&cfg)
				}
				f := newCallsFixture(cfg)
				defer f.s.workers.stop()
				row.run(t, f)
			})
		})
	}
}

// TestCallSlotsUnderConcurrency: callers racing to start and end calls of
// one principal, unary and waiting, never have more than its bound in
// flight, none waits forever, and the principal's entry is gone at the
// end. (Run with -race.)
func TestCallSlotsUnderConcurrency(t *testing.T) {
	var cs callSlots
	cs.configure(callsConfig())
	const callers, each = 8, 500
	var inFlight, most atomic.Int64
	call := func(slot *callCount) {
		n := inFlight.Add(1)
		for m := most.Load(); n > m; m = most.Load() {
			if most.CompareAndSwap(m, n) {
				break
			}
		}
		inFlight.Add(-1)
		cs.done(slot)
	}
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for range each {
				if i%2 == 0 {
					slot, err := cs.take("cn:a")
					if err == nil {
						call(slot)
					}
					continue
				}
				slot, err := cs.wait(t.Context(), "cn:a")
				if err != nil {
					t.Error(err)
					return
				}
				call(slot)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > callsLimit {
		t.Errorf("%d calls in flight at once, over the bound of %d", m, callsLimit)
	}
	if c, ok := cs.held.Load("cn:a"); ok {
		t.Errorf("cn:a's entry stays, counting %d", c.(*callCount).n.Load())
	}
}
