package client

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn/internal/secret"
)

// TestLocalJoinSecretStaysOnThisMachine: WithLocalJoinSecret presents the
// secret on calls to loopback endpoints and on no other call of the pool
// (README Security, "The operator role"); WithJoinSecret on every call.
func TestLocalJoinSecretStaysOnThisMachine(t *testing.T) {
	t.Parallel()
	// A server that records the join secret each call carried.
	got := make(chan []string, 16)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		got <- md.Get(secret.Header)
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	addr := ln.Addr().String()

	tests := []struct {
		name      string
		opts      []Option
		presented bool
	}{
		{"local secret, loopback endpoint", []Option{WithLocalJoinSecret("s3cret")}, true},
		// The endpoint dialled is on loopback, but the connection names
		// another host (as one to another machine does): not presented.
		{"local secret, another host", []Option{WithLocalJoinSecret("s3cret"), WithDialOptions(grpc.WithAuthority("djinn.example:4161"))}, false},
		{"secret, another host", []Option{WithJoinSecret("s3cret"), WithDialOptions(grpc.WithAuthority("djinn.example:4161"))}, true},
	}
	for _, tt := range tests {
		p := NewPool(append(tt.opts, WithoutSession())...)
		cc, err := p.Conn(addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := healthpb.NewHealthClient(cc).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		p.Close()
		secrets := <-got
		if presented := len(secrets) == 1 && secrets[0] == "s3cret"; presented != tt.presented {
			t.Errorf("%s: the call carried %q, want the secret presented %v", tt.name, secrets, tt.presented)
		}
	}
}

// TestLoopbackAudience: one row per form of a call's audience.
func TestLoopbackAudience(t *testing.T) {
	tests := []struct {
		uri  string
		want bool
	}{
		{"https://127.0.0.1:4161/djinn.v1.Admin", true},
		{"https://127.9.9.9:4161/djinn.v1.Admin", true},
		{"https://localhost:4161/djinn.v1.Admin", true},
		{"https://[::1]:4161/djinn.v1.Admin", true},
		{"https://localhost/djinn.v1.Admin", true}, // the default port left out
		{"https://127.0.0.1:4161,127.0.0.1:4171/djinn.v1.Admin", true},
		{"https://127.0.0.1:4161,10.0.0.7:4161/djinn.v1.Admin", false},
		{"https://10.0.0.7:4161/djinn.v1.EventListener", false},
		{"https://djinn.example:4161/djinn.v1.Landlord", false},
		{"https://localhost.example:4161/djinn.v1.Landlord", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := loopbackAudience([]string{tt.uri}); got != tt.want {
			t.Errorf("loopbackAudience(%q) = %v, want %v", tt.uri, got, tt.want)
		}
	}
	if loopbackAudience(nil) {
		t.Error("no audience taken for loopback")
	}
}
