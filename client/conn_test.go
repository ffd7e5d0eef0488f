package client

import (
	"context"
	"errors"
	"google.golang.org/grpc/connectivity"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// listen opens a loopback port.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// serveOn runs a gRPC server with the services register adds on ln until
// the test ends, and returns its address.
func serveOn(t *testing.T, ln net.Listener, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	t.Helper()
	srv := grpc.NewServer(opts...)
	register(srv)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return ln.Addr().String()
}

// serve is serveOn on a new loopback port.
func serve(t *testing.T, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	t.Helper()
	return serveOn(t, listen(t), register, opts...)
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestDial(t *testing.T) {
	ll, _ := startLandlord(t, time.Minute, time.Hour)
	ctx := context.Background()

	c, err := Dial(ctx, ll.Ref().Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Addr() != ll.Ref().Endpoint || c.Pool() == nil {
		t.Error("client accessors")
	}
	// Raw gRPC calls on the client's connections get djinn errors that
	// still carry their status.
	unknown := djinn.NewID()
	_, err = djinnpb.NewLandlordClient(c.ClientConn()).Renew(ctx, &djinnpb.RenewRequest{Cookie: unknown[:], DurationNanos: -1})
	if !errors.Is(err, djinn.ErrUnknownLease) || status.Code(err) != codes.NotFound {
		t.Errorf("err = %v (code %v), want unknown lease with code NotFound", err, status.Code(err))
	}
	// A Client is a Connector.
	l := grant(t, ll, time.Minute)
	if err := l.Renew(ctx, c, time.Minute); err != nil {
		t.Error(err)
	}

	for _, tt := range []struct {
		name, addr string
		kind       error
	}{
		{"nothing listening", closedPort(t), djinn.ErrUnavailable},
		{"not host:port", "localhost", djinn.ErrInvalidArgument},
		{"port not a number", "localhost:http", djinn.ErrInvalidArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := Dial(ctx, tt.addr)
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.addr) {
				t.Errorf("err = %v, want %v naming %q", err, tt.kind, tt.addr)
			}
		})
	}
	t.Run("context ended", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := Dial(ctx, ll.Ref().Endpoint); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})
}

func TestPool(t *testing.T) {
	p := NewPool()
	a, err := p.Conn("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := p.Conn("127.0.0.1:1"); b != a {
		t.Error("one connection per endpoint")
	}
	if b, _ := p.Conn("127.0.0.1:2"); b == a {
		t.Error("another endpoint, another connection")
	}
	if _, err := p.Conn(""); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("empty endpoint: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Conn("127.0.0.1:1"); !errors.Is(err, djinn.ErrUnavailable) || !strings.Contains(err.Error(), "closed") {
		t.Errorf("conn after close: %v", err)
	}
}

// follower answers every Renew as a djinn follower does: not the leader,
// here is the leader's endpoint.
type follower struct {
	djinnpb.UnimplementedLandlordServer
	leader string
}

func (f *follower) Renew(ctx context.Context, _ *djinnpb.RenewRequest) (*djinnpb.RenewResponse, error) {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(leaderTrailer, f.leader))
	return nil, grpcerr.Status(djinn.Errorf(djinn.Unavailable, "not the leader: the leader serves at %s", f.leader))
}

func TestPoolFollowsLeader(t *testing.T) {
	ll, p := startLandlord(t, time.Minute, time.Hour)
	ctx := context.Background()
	addr := serve(t, func(s *grpc.Server) { djinnpb.RegisterLandlordServer(s, &follower{leader: ll.Ref().Endpoint}) })
	l := grant(t, ll, time.Minute)
	atFollower := NewLease(djinn.Ref{Endpoint: addr, Service: l.Landlord().Service, Object: l.Landlord().Object},
		l.Cookie(), l.Expiration())
	if err := atFollower.Renew(ctx, p, 10*time.Minute); err != nil {
		t.Fatalf("renew through a follower: %v", err)
	}
	if exp, _ := ll.Expiration(l.Cookie()); exp.Before(time.Now().Add(9 * time.Minute)) {
		t.Error("the leader did not renew")
	}

	// Two confused followers naming each other: one redirect, then the error.
	lna, lnb := listen(t), listen(t)
	a, b := lna.Addr().String(), lnb.Addr().String()
	serveOn(t, lna, func(s *grpc.Server) { djinnpb.RegisterLandlordServer(s, &follower{leader: b}) })
	serveOn(t, lnb, func(s *grpc.Server) { djinnpb.RegisterLandlordServer(s, &follower{leader: a}) })
	loop := NewLease(djinn.Ref{Endpoint: a}, l.Cookie(), l.Expiration())
	if err := loop.Renew(ctx, p, time.Minute); !errors.Is(err, djinn.ErrUnavailable) ||
		!strings.Contains(err.Error(), "not the leader") {
		t.Errorf("err = %v, want unavailable", err)
	}
}

// pullServer is a mailbox whose Pull ends at once, with an error when the
// registration id is missing.
type pullServer struct {
	djinnpb.UnimplementedEventMailboxServer
}

func (pullServer) Pull(r *djinnpb.PullRequest, _ grpc.ServerStreamingServer[djinnpb.PullResponse]) error {
	if len(r.GetRegistrationId()) == 0 {
		return grpcerr.Status(djinn.Errorf(djinn.NoSuchObject, "registration: missing"))
	}
	return nil
}

func TestPoolStreamErrors(t *testing.T) {
	addr := serve(t, func(s *grpc.Server) { djinnpb.RegisterEventMailboxServer(s, pullServer{}) })
	p := NewPool()
	defer p.Close()
	cc, err := p.Conn(addr)
	if err != nil {
		t.Fatal(err)
	}
	mb := djinnpb.NewEventMailboxClient(cc)
	ctx := context.Background()
	s, err := mb.Pull(ctx, &djinnpb.PullRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, djinn.ErrNoSuchObject) {
		t.Errorf("stream error %v, want no such object", err)
	}
	s, err = mb.Pull(ctx, &djinnpb.PullRequest{RegistrationId: []byte{1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Errorf("end of stream %v, want io.EOF untouched", err)
	}
	if _, err := mb.Ack(ctx, &djinnpb.AckRequest{}); !errors.Is(err, djinn.ErrUnsupported) {
		t.Errorf("unimplemented method: %v, want unsupported", err)
	}
}

// TestPoolEvictsLeastRecentlyUsed: a pool at its bound closes the
// connection used longest ago, not the busy ones.
func TestPoolEvictsLeastRecentlyUsed(t *testing.T) {
	p := NewPool(WithMaxConns(2))
	defer p.Close()
	a, err := p.Conn("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Conn("127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	if again, _ := p.Conn("127.0.0.1:1"); again != a {
		t.Fatal("a pooled connection was not reused")
	}
	if _, err := p.Conn("127.0.0.1:3"); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	_, kept1 := p.conns["127.0.0.1:1"]
	_, kept2 := p.conns["127.0.0.1:2"]
	n := len(p.conns)
	p.mu.Unlock()
	if n != 2 || !kept1 || kept2 {
		t.Fatalf("after a third endpoint: %d conns, recently used kept %v, least recently used kept %v", n, kept1, kept2)
	}
}

// TestPoolNeverEvictsAClusterConnection: the connection of a cluster a
// Client was dialled to stays however many other endpoints its pool meets.
func TestPoolNeverEvictsAClusterConnection(t *testing.T) {
	p := NewPool(WithMaxConns(2))
	defer p.Close()
	cl, err := p.follow([]string{"127.0.0.1:1"}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"} {
		if _, err := p.Conn(ep); err != nil {
			t.Fatal(err)
		}
	}
	if s := cl.cc.GetState(); s == connectivity.Shutdown {
		t.Fatal("the cluster's connection was closed")
	}
}
