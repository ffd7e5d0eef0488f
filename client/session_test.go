package client

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// fakeSessions is a gRPC server with the health and landlord services
// and a session whose answers a test scripts: serve decides each call's
// fate as the session reads it.
type fakeSessions struct {
	djinnpb.UnimplementedSessionServer
	djinnpb.UnimplementedLandlordServer
	serve   func(c *djinnpb.SessionCall) act
	opened  atomic.Int32  // sessions opened
	read    atomic.Int32  // calls read in sessions
	unary   atomic.Int32  // unary calls served
	cancels chan uint64   // ids the client cancelled
	closed  chan struct{} // a value each time a client closes its side
}

// act is what the fake does with a call: reply (nil: nothing, yet),
// then say goaway, or end the session with breakWith.
type act struct {
	reply     *djinnpb.SessionReply
	goaway    bool
	breakWith error
}

func (f *fakeSessions) Open(s djinnpb.Session_OpenServer) error {
	f.opened.Add(1)
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			f.closed <- struct{}{}
			return nil
		}
		if err != nil {
			return err
		}
		for _, id := range req.GetCancel() {
			f.cancels <- id
		}
		for _, c := range req.GetCalls() {
			f.read.Add(1)
			a := f.serve(c)
			if a.breakWith != nil {
				return a.breakWith
			}
			if a.reply != nil || a.goaway {
				resp := &djinnpb.SessionResponse{Goaway: a.goaway}
				if a.reply != nil {
					resp.Replies = []*djinnpb.SessionReply{a.reply}
				}
				if err := s.Send(resp); err != nil {
					return err
				}
			}
		}
	}
}

func (f *fakeSessions) Renew(context.Context, *djinnpb.RenewRequest) (*djinnpb.RenewResponse, error) {
	return &djinnpb.RenewResponse{GrantedNanos: int64(time.Minute)}, nil
}

// startFake serves f (nil: no session service at all) and returns its
// address; unary counts f's unary calls.
func startFake(t *testing.T, f *fakeSessions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	count := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		f.unary.Add(1)
		return h(ctx, req)
	}
	g := grpc.NewServer(grpc.UnaryInterceptor(count))
	hs := health.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	djinnpb.RegisterLandlordServer(g, f)
	if f.serve != nil {
		djinnpb.RegisterSessionServer(g, f)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

func newFake(serve func(c *djinnpb.SessionCall) act) *fakeSessions {
	return &fakeSessions{serve: serve, cancels: make(chan uint64, 16), closed: make(chan struct{}, 16)}
}

// answer replies to c with msg.
func answer(c *djinnpb.SessionCall, msg proto.Message) act {
	b, err := proto.Marshal(msg)
	if err != nil {
		panic(err)
	}
	return act{reply: &djinnpb.SessionReply{Id: c.GetId(), Response: b}}
}

var serving = &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}

func fakeConn(t *testing.T, addr string, opts ...Option) *grpc.ClientConn {
	t.Helper()
	p := NewPool(opts...)
	t.Cleanup(func() { p.Close() })
	cc, err := p.Conn(addr)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSessionCarriesUnaryCalls: a connection's unary calls go in one
// session, with their deadline, metadata and trailers; WithoutSession
// makes them unary.
func TestSessionCarriesUnaryCalls(t *testing.T) {
	var sawDeadline, sawMetadata atomic.Bool
	f := newFake(func(c *djinnpb.SessionCall) act {
		sawDeadline.Store(sawDeadline.Load() || c.GetTimeoutNanos() > 0)
		for _, e := range c.GetMetadata() {
			if e.GetKey() == TxnIDMetadataKey && string(e.GetValue()) == "42" {
				sawMetadata.Store(true)
			}
		}
		a := answer(c, serving)
		a.reply.Trailer = []*djinnpb.MetadataEntry{{Key: "x-test", Value: []byte("v")}}
		return a
	})
	addr := startFake(t, f)
	cc := fakeConn(t, addr)
	hc := healthpb.NewHealthClient(cc)
	for range 5 {
		resp, err := hc.Check(ctxT(t), &healthpb.HealthCheckRequest{})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("check in a session: %v, %v", resp, err)
		}
	}
	var trailer metadata.MD
	ctx := metadata.AppendToOutgoingContext(ctxT(t), TxnIDMetadataKey, "42")
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&trailer)); err != nil {
		t.Fatal(err)
	}
	if got := trailer.Get("x-test"); len(got) != 1 || got[0] != "v" {
		t.Errorf("trailer %v, want x-test: v from the reply", trailer)
	}
	var header metadata.MD
	if _, err := hc.Check(ctxT(t), &healthpb.HealthCheckRequest{}, grpc.Header(&header)); err != nil {
		t.Fatal(err)
	}
	if header == nil {
		t.Fatal("a reply without a header gave a nil header; want empty metadata one may add to, as a unary call's")
	}
	header.Set("added-by-caller", "ok")
	if f.opened.Load() != 1 || f.read.Load() != 7 || f.unary.Load() != 0 {
		t.Errorf("%d sessions, %d calls in them, %d unary; want 1, 7, 0", f.opened.Load(), f.read.Load(), f.unary.Load())
	}
	if !sawDeadline.Load() || !sawMetadata.Load() {
		t.Errorf("the calls' deadline seen %v, metadata seen %v; want both", sawDeadline.Load(), sawMetadata.Load())
	}

	off := healthpb.NewHealthClient(fakeConn(t, addr, WithoutSession()))
	if _, err := off.Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if f.opened.Load() != 1 || f.unary.Load() != 1 {
		t.Errorf("WithoutSession: %d sessions, %d unary calls; want no new session and 1 unary call", f.opened.Load(), f.unary.Load())
	}
}

// TestSessionFallsBack: a server without sessions, or without a method in
// them, is called unary, and asked once.
func TestSessionFallsBack(t *testing.T) {
	t.Run("a server without sessions", func(t *testing.T) {
		f := newFake(nil)
		hc := healthpb.NewHealthClient(fakeConn(t, startFake(t, f)))
		for range 3 {
			if _, err := hc.Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		if f.unary.Load() != 3 {
			t.Errorf("%d unary calls, want 3", f.unary.Load())
		}
	})
	t.Run("a method not served in a session", func(t *testing.T) {
		f := newFake(func(c *djinnpb.SessionCall) act {
			return act{reply: &djinnpb.SessionReply{Id: c.GetId(), Status: &djinnpb.SessionStatus{Code: int32(codes.Unimplemented), Message: "not served in a session"}}}
		})
		hc := healthpb.NewHealthClient(fakeConn(t, startFake(t, f)))
		for range 3 {
			if _, err := hc.Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
		}
		if f.read.Load() != 1 || f.unary.Load() != 3 {
			t.Errorf("%d calls in the session, %d unary; want the first tried there, then all 3 unary", f.read.Load(), f.unary.Load())
		}
	})
}

// TestSessionBreak: a call a broken session had sent fails as maybe made
// (Unavailable), unless its method is idempotent, which is sent again; the
// next call opens a new session.
func TestSessionBreak(t *testing.T) {
	var broken atomic.Bool
	f := newFake(func(c *djinnpb.SessionCall) act {
		if broken.CompareAndSwap(false, true) {
			return act{breakWith: status.Error(codes.Unavailable, "connection reset")}
		}
		if strings.HasSuffix(c.GetMethod(), "/Renew") {
			return answer(c, &djinnpb.RenewResponse{GrantedNanos: int64(time.Minute)})
		}
		return answer(c, serving)
	})
	cc := fakeConn(t, startFake(t, f))
	_, err := healthpb.NewHealthClient(cc).Check(ctxT(t), &healthpb.HealthCheckRequest{})
	if !errors.Is(err, djinn.ErrUnavailable) || !strings.Contains(err.Error(), "may or may not have been made") {
		t.Fatalf("a call the session broke under: %v, want Unavailable saying it may or may not have been made", err)
	}
	if _, err := healthpb.NewHealthClient(cc).Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	if f.opened.Load() != 2 {
		t.Errorf("%d sessions opened, want 2", f.opened.Load())
	}

	broken.Store(false)
	resp, err := djinnpb.NewLandlordClient(cc).Renew(ctxT(t), &djinnpb.RenewRequest{Cookie: make([]byte, 16), DurationNanos: int64(time.Minute)})
	if err != nil || resp.GetGrantedNanos() != int64(time.Minute) {
		t.Fatalf("an idempotent renewal the session broke under: %v, %v; want it sent again and answered", resp, err)
	}
	if f.opened.Load() != 3 || f.unary.Load() != 0 {
		t.Errorf("%d sessions opened, %d unary calls; want 3 and none", f.opened.Load(), f.unary.Load())
	}
}

// TestSessionGoaway: after a server's goaway the client closes its side
// of that session and opens another for its next call.
func TestSessionGoaway(t *testing.T) {
	var first atomic.Bool
	f := newFake(func(c *djinnpb.SessionCall) act {
		a := answer(c, serving)
		a.goaway = first.CompareAndSwap(false, true)
		return a
	})
	hc := healthpb.NewHealthClient(fakeConn(t, startFake(t, f)))
	for range 2 {
		if _, err := hc.Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-f.closed:
	case <-ctxT(t).Done():
		t.Fatal("the client did not close its side of the session the server said goaway on")
	}
	if f.opened.Load() != 2 {
		t.Errorf("%d sessions opened, want 2", f.opened.Load())
	}
}

// TestSessionCallGivenUp: a call whose context ends returns its
// context's status and is cancelled at the server.
func TestSessionCallGivenUp(t *testing.T) {
	f := newFake(func(c *djinnpb.SessionCall) act { return act{} }) // never answers
	hc := healthpb.NewHealthClient(fakeConn(t, startFake(t, f)))
	ctx, cancel := context.WithTimeout(ctxT(t), 50*time.Millisecond)
	defer cancel()
	_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a call past its deadline: %v, want DeadlineExceeded", err)
	}
	select {
	case id := <-f.cancels:
		if id != 1 {
			t.Errorf("cancelled call %d, want 1", id)
		}
	case <-ctxT(t).Done():
		t.Fatal("the server was not told the call was given up")
	}
}

// A cluster's session goes to its leader; while none is known (the member
// list was read during an election, say), calls go on their own, and
// each asks for the member list at once rather than at the next periodic
// refresh, which would leave a client started beside its cluster without
// a session for its first seconds.
func TestSessionLeaderUnknownAsksForTheMembers(t *testing.T) {
	p := NewPool()
	t.Cleanup(func() { p.Close() })
	cl, err := p.newCluster([]string{"127.0.0.1:1"}, true) // not connected, no refresh loop
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.cc.Close() })
	if ep, ready := cl.sessionLeader(); ep != "" || ready {
		t.Fatalf("no leader known: session leader %q ready %v, want none", ep, ready)
	}
	if len(cl.kick) != 1 {
		t.Fatal("no leader known: no member-list refresh asked for")
	}
	<-cl.kick
	cl.setLeader("127.0.0.1:1")
	if ep, ready := cl.sessionLeader(); ep != "127.0.0.1:1" || ready {
		t.Fatalf("leader known, not connected: session leader %q ready %v, want 127.0.0.1:1 not ready", ep, ready)
	}
	if len(cl.kick) != 0 {
		t.Fatal("leader known: a member-list refresh asked for all the same")
	}
}
