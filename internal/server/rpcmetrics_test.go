package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// rpcMetricsCases are calls both forms of the gRPC server metrics count:
// unary calls that succeed and fail (a status, a context error, a plain
// error), an unknown method, and a bidirectional stream that receives and
// sends a message each, then ends with an error.
func rpcMetricsCalls(unary grpc.UnaryServerInterceptor, stream grpc.StreamServerInterceptor) {
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	failing := func(err error) grpc.UnaryHandler {
		return func(context.Context, any) (any, error) { return nil, err }
	}
	check := &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}
	ctx := context.Background()
	_, _ = unary(ctx, "req", check, ok)
	_, _ = unary(ctx, "req", check, ok)
	_, _ = unary(ctx, "req", check, failing(status.Error(codes.NotFound, "gone")))
	_, _ = unary(ctx, "req", check, failing(context.DeadlineExceeded))
	_, _ = unary(ctx, "req", check, failing(errors.New("plain")))
	_, _ = unary(ctx, "req", &grpc.UnaryServerInfo{FullMethod: "/no.Such/Method"}, ok)
	_, _ = unary(ctx, "req", &grpc.UnaryServerInfo{FullMethod: "nonsense"}, ok)
	watch := &grpc.StreamServerInfo{FullMethod: "/grpc.health.v1.Health/Watch", IsServerStream: true}
	_ = stream(nil, &fakeStream{msgs: 2}, watch, func(_ any, ss grpc.ServerStream) error {
		for ss.RecvMsg(nil) == nil {
			_ = ss.SendMsg("m")
		}
		return status.Error(codes.Aborted, "ended")
	})
}

type fakeStream struct {
	grpc.ServerStream
	msgs int
}

func (f *fakeStream) Context() context.Context    { return context.Background() }
func (f *fakeStream) SendMsg(any) error           { return nil }
func (f *fakeStream) SetHeader(metadata.MD) error { return nil }
func (f *fakeStream) RecvMsg(any) error {
	if f.msgs == 0 {
		return io.EOF
	}
	f.msgs--
	return nil
}

// TestRPCMetricsMatchTheLibrary: the server's gRPC series are those of the
// grpc-ecosystem Prometheus provider — names, help, labels, the series
// present at zero and every count — for the same calls.
func TestRPCMetricsMatchTheLibrary(t *testing.T) {
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())

	lib := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets)))
	lib.InitializeMetrics(srv)
	rpcMetricsCalls(lib.UnaryServerInterceptor(), lib.StreamServerInterceptor())

	ours := newRPCMetrics()
	ours.initialize(srv)
	rpcMetricsCalls(ours.unary, ours.stream)

	want, got := exposition(t, lib), exposition(t, ours.collectors()...)
	if got != want {
		t.Fatalf("series differ from the library's:\n--- ours\n%s\n--- library\n%s", got, want)
	}
	if !strings.Contains(got, `grpc_server_handled_total{grpc_code="DeadlineExceeded",grpc_method="Check",grpc_service="grpc.health.v1.Health",grpc_type="unary"} 1`) {
		t.Fatalf("no DeadlineExceeded count:\n%s", got)
	}
}

// exposition is the collectors' series in the text format, with the
// handling times (which differ run to run) left out.
func exposition(t *testing.T, cs ...prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(cs...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	var kept []string
	for l := range strings.Lines(b.String()) {
		if !strings.HasPrefix(l, "grpc_server_handling_seconds_bucket") && !strings.HasPrefix(l, "grpc_server_handling_seconds_sum") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

// BenchmarkRPCMetrics: one unary call through the gRPC server metrics
// interceptor, the library's provider against the resolved series.
//
//	go test -run XXX -bench RPCMetrics -benchmem ./internal/server
func BenchmarkRPCMetrics(b *testing.B) {
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lib := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets)))
	lib.InitializeMetrics(srv)
	ours := newRPCMetrics()
	ours.initialize(srv)
	info := &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}
	h := func(context.Context, any) (any, error) { return "ok", nil }
	for _, c := range []struct {
		name string
		ic   grpc.UnaryServerInterceptor
	}{{"library", lib.UnaryServerInterceptor()}, {"resolved", ours.unary}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				_, _ = c.ic(ctx, "req", info, h)
			}
		})
	}
}
