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

// TestRPCMetricsMatchTheLibrary: the server's gRPC server series are those of the
// grpc-ecosystem Prometheus provider — names, help, labels, the series
// present at zero and every count — for the same calls.
func TestRPCMetricsMatchTheLibrary(t *testing.T) {
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())

	lib := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets)))
	lib.InitializeMetrics(srv)
	rpcMetricsCalls(lib.UnaryServerInterceptor(), lib.StreamServerInterceptor())

	ours := newServerRPCMetrics()
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
		if !strings.Contains(l, "_handling_seconds_bucket") && !strings.Contains(l, "_handling_seconds_sum") {
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
	ours := newServerRPCMetrics()
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

// rpcClientCalls are calls both forms of the gRPC client metrics count:
// unary calls that succeed and fail, a server stream read to its end, a
// client stream's one reply, a stream that ends in an error and one that
// does not open.
func rpcClientCalls(unary grpc.UnaryClientInterceptor, stream grpc.StreamClientInterceptor) {
	ctx := context.Background()
	answer := func(err error) grpc.UnaryInvoker {
		return func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return err }
	}
	_ = unary(ctx, "/djinn.v1.EventListener/Notify", "req", "reply", nil, answer(nil))
	_ = unary(ctx, "/djinn.v1.EventListener/Notify", "req", "reply", nil, answer(nil))
	_ = unary(ctx, "/djinn.v1.EventListener/Notify", "req", "reply", nil, answer(status.Error(codes.Unavailable, "down")))
	_ = unary(ctx, "/djinn.v1.TransactionParticipant/Prepare", "req", "reply", nil, answer(context.Canceled))
	open := func(msgs int, end error) grpc.Streamer {
		return func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
			return &fakeClientStream{msgs: msgs, end: end}, nil
		}
	}
	read := func(cs grpc.ClientStream, err error) {
		if err != nil {
			return
		}
		_ = cs.SendMsg("m")
		for cs.RecvMsg(nil) == nil {
		}
	}
	read(stream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, nil, "/djinn.v1.Participant/Calls", open(3, io.EOF)))
	read(stream(ctx, &grpc.StreamDesc{ServerStreams: true}, nil, "/djinn.v1.EventMailbox/Pull", open(1, status.Error(codes.Aborted, "x"))))
	cs, err := stream(ctx, &grpc.StreamDesc{ClientStreams: true}, nil, "/djinn.v1.Up/Load", open(1, io.EOF))
	if err == nil {
		_ = cs.SendMsg("m")
		_ = cs.RecvMsg(nil)
	}
	read(stream(ctx, &grpc.StreamDesc{ServerStreams: true}, nil, "/djinn.v1.EventMailbox/Pull",
		func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
			return nil, status.Error(codes.PermissionDenied, "no")
		}))
}

type fakeClientStream struct {
	grpc.ClientStream
	msgs int
	end  error
}

func (f *fakeClientStream) SendMsg(any) error { return nil }
func (f *fakeClientStream) RecvMsg(any) error {
	if f.msgs == 0 {
		return f.end
	}
	f.msgs--
	return nil
}

// TestRPCClientMetricsMatchTheLibrary: the server's gRPC client series (its
// own calls: deliveries, participants, peers) are the provider's.
func TestRPCClientMetricsMatchTheLibrary(t *testing.T) {
	lib := grpcprom.NewClientMetrics(grpcprom.WithClientHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets)))
	rpcClientCalls(lib.UnaryClientInterceptor(), lib.StreamClientInterceptor())
	ours := newClientRPCMetrics()
	rpcClientCalls(ours.unaryClient, ours.streamClient)
	want, got := exposition(t, lib), exposition(t, ours.collectors()...)
	// The one difference: a method's message series exist (at zero) from
	// its first call, where the library makes them at their first count.
	var zeros []string
	for l := range strings.Lines(got) {
		if !strings.Contains(want, l) && strings.HasSuffix(l, "} 0\n") && strings.Contains(l, "_msg_") {
			zeros = append(zeros, l)
			continue
		}
		if !strings.Contains(want, l) {
			t.Errorf("ours has %q, the library not", l)
		}
	}
	for l := range strings.Lines(want) {
		if !strings.Contains(got, l) {
			t.Errorf("the library has %q, ours not", l)
		}
	}
	if len(zeros) != 1 || !strings.Contains(zeros[0], `grpc_client_msg_received_total{grpc_method="Prepare"`) {
		t.Errorf("series at zero beyond the library's: %q, want only Prepare's received", zeros)
	}
	for _, series := range []string{
		`grpc_client_handled_total{grpc_code="OK",grpc_method="Calls",grpc_service="djinn.v1.Participant",grpc_type="bidi_stream"} 1`,
		`grpc_client_handled_total{grpc_code="PermissionDenied",grpc_method="Pull",grpc_service="djinn.v1.EventMailbox",grpc_type="server_stream"} 1`,
		`grpc_client_msg_received_total{grpc_method="Calls",grpc_service="djinn.v1.Participant",grpc_type="bidi_stream"} 3`,
	} {
		if !strings.Contains(got, series) {
			t.Errorf("no %s in\n%s", series, got)
		}
	}
}

// BenchmarkRPCClientMetrics: one unary call the server makes (a delivery,
// a participant's prepare) through the gRPC client metrics interceptor,
// the library's provider against the resolved series.
//
//	go test -run XXX -bench RPCClientMetrics -benchmem ./internal/server
func BenchmarkRPCClientMetrics(b *testing.B) {
	lib := grpcprom.NewClientMetrics(grpcprom.WithClientHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets)))
	ours := newClientRPCMetrics()
	invoke := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	for _, c := range []struct {
		name string
		ic   grpc.UnaryClientInterceptor
	}{{"library", lib.UnaryClientInterceptor()}, {"resolved", ours.unaryClient}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := context.Background()
			for b.Loop() {
				_ = c.ic(ctx, "/djinn.v1.EventListener/Notify", "req", "reply", nil, invoke)
			}
		})
	}
}
