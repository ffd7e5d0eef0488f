package server

import (
	"context"
	"log/slog"
	"testing"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"google.golang.org/grpc"

	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// BenchmarkUnaryChain measures the server's unary chain around a handler
// that does nothing: the edge (an authenticated rule), the gRPC metrics
// provider and errors, for a caller its context names (a session's call).
//
//	go test -run XXX -bench UnaryChain -benchmem ./internal/server
func BenchmarkUnaryChain(b *testing.B) {
	const method = "/djinn.v1.EventMailbox/GetRegistration"
	s := &Server{log: slog.New(slog.DiscardHandler), rules: map[string]Rule{method: authenticated}}
	m := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets)))
	chain := s.unaryChain(m.UnaryServerInterceptor())
	ctx := principal.With(context.Background(), "cn:alice")
	req := &djinnpb.MailboxRegistrationRequest{}
	info := &grpc.UnaryServerInfo{FullMethod: method}
	h := func(context.Context, any) (any, error) { return req, nil }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := chain(ctx, req, info, h); err != nil {
			b.Fatal(err)
		}
	}
}
