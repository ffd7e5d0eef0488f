package server

import (
	"context"
	"errors"
	"io"
	"testing"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestServerMetricsAsGRPCProm: the server's gRPC series are those of
// grpcprom's ServerMetrics, whose interceptors they replace — the same
// names, help, labels and buckets, and the same counts for the same calls:
// unary calls answered OK, with a status, with a context's end, with a
// plain error; a call of a method the server does not serve; a stream
// that receives (a failed receive not counted), sends and fails; and the
// methods served and never called, at 0.
func TestServerMetricsAsGRPCProm(t *testing.T) {
	ours := newServerMetrics(latencyBuckets)
	theirs := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets)))
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	ours.initialize(g)
	theirs.InitializeMetrics(g)
	ends := []error{nil, status.Error(codes.NotFound, "no such thing"), context.Canceled, context.DeadlineExceeded, errors.New("plain"), status.Error(codes.Code(40), "no such code")}
	for _, ic := range []struct {
		unary  grpc.UnaryServerInterceptor
		stream grpc.StreamServerInterceptor
	}{{ours.unary(), ours.stream()}, {theirs.UnaryServerInterceptor(), theirs.StreamServerInterceptor()}} {
		for _, end := range ends {
			for _, method := range []string{healthpb.Health_Check_FullMethodName, "/elsewhere.Service/Method"} {
				_, _ = ic.unary(t.Context(), &healthpb.HealthCheckRequest{}, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) {
					return &healthpb.HealthCheckResponse{}, end
				})
			}
		}
		info := &grpc.StreamServerInfo{FullMethod: healthpb.Health_Watch_FullMethodName, IsServerStream: true}
		_ = ic.stream(nil, fakeStream{ctx: t.Context(), n: new(int)}, info, func(_ any, ss grpc.ServerStream) error {
			_ = ss.RecvMsg(&healthpb.HealthCheckRequest{})
			_ = ss.RecvMsg(&healthpb.HealthCheckRequest{}) // io.EOF: not counted
			_ = ss.SendMsg(&healthpb.HealthCheckResponse{})
			_ = ss.SendMsg(&healthpb.HealthCheckResponse{})
			return status.Error(codes.Unavailable, "going away")
		})
	}
	sameExport(t, ours, theirs)
}

// sameExport fails t unless got exports what want does, handling times
// (which differ from run to run) aside: its histograms' bounds and counts
// compared, not their sums and buckets' counts.
func sameExport(t *testing.T, got, want prometheus.Collector) {
	t.Helper()
	var gathered [2][]proto.Message
	for i, c := range []prometheus.Collector{got, want} {
		r := prometheus.NewRegistry()
		r.MustRegister(c)
		mfs, err := r.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if h := m.GetHistogram(); h != nil {
					h.SampleSum, h.CreatedTimestamp = nil, nil
					for _, b := range h.GetBucket() {
						b.CumulativeCount = nil
					}
				}
				if c := m.GetCounter(); c != nil {
					c.CreatedTimestamp = nil
				}
			}
			gathered[i] = append(gathered[i], mf)
		}
	}
	if len(gathered[0]) != len(gathered[1]) {
		t.Fatalf("%d metric families, want %d", len(gathered[0]), len(gathered[1]))
	}
	for i := range gathered[1] {
		if !proto.Equal(gathered[0][i], gathered[1][i]) {
			t.Errorf("metric family %d:\n%v\nwant\n%v", i, gathered[0][i], gathered[1][i])
		}
	}
}

// fakeStream is a server stream whose first receive brings a message and
// the next ones io.EOF, and whose sends succeed.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
	n   *int
}

func (s fakeStream) Context() context.Context { return s.ctx }
func (s fakeStream) SendMsg(any) error        { return nil }
func (s fakeStream) RecvMsg(any) error {
	if *s.n++; *s.n > 1 {
		return io.EOF
	}
	return nil
}

// BenchmarkUnaryMetrics is the metrics interceptor's cost on a unary call
// answered OK: grpcprom's, and the server's.
func BenchmarkUnaryMetrics(b *testing.B) {
	g := grpc.NewServer()
	healthpb.RegisterHealthServer(g, health.NewServer())
	theirs := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets)))
	theirs.InitializeMetrics(g)
	ours := newServerMetrics(latencyBuckets)
	ours.initialize(g)
	info := &grpc.UnaryServerInfo{FullMethod: healthpb.Health_Check_FullMethodName}
	req, resp := &healthpb.HealthCheckRequest{}, &healthpb.HealthCheckResponse{}
	h := func(context.Context, any) (any, error) { return resp, nil }
	for _, ic := range []struct {
		name  string
		unary grpc.UnaryServerInterceptor
	}{{"grpcprom", theirs.UnaryServerInterceptor()}, {"server", ours.unary()}} {
		b.Run(ic.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = ic.unary(b.Context(), req, info, h)
			}
		})
	}
}
