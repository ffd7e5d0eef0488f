package server

import (
	"context"
	"strings"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// serverMetrics are the conventional gRPC server series, as grpcprom's
// ServerMetrics keeps them — grpc_server_started_total,
// grpc_server_handled_total (by code), grpc_server_msg_received_total,
// grpc_server_msg_sent_total and the handling-time histogram
// grpc_server_handling_seconds, by grpc_type, grpc_service and
// grpc_method — counted as its interceptors count them, but with each
// method's series looked up once: its interceptors hash the labels of four
// or five series on every call (7 % of the server's CPU in a lock +
// unlock cycle).
type serverMetrics struct {
	started, handled, received, sent *prometheus.CounterVec
	handling                         *prometheus.HistogramVec
	methods                          sync.Map // full method name → *methodMetrics
}

// methodMetrics are one method's series.
type methodMetrics struct {
	started, received, sent prometheus.Counter
	handling                prometheus.Observer
	handled                 [codes.Unauthenticated + 1]prometheus.Counter // by code; nil: looked up on each call
}

// The grpc_type label's values.
const (
	grpcUnary        = "unary"
	grpcClientStream = "client_stream"
	grpcServerStream = "server_stream"
	grpcBidiStream   = "bidi_stream"
)

func newServerMetrics(buckets []float64) *serverMetrics {
	labels := []string{"grpc_type", "grpc_service", "grpc_method"}
	return &serverMetrics{
		started:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "grpc_server_started_total", Help: "Total number of RPCs started on the server."}, labels),
		handled:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "grpc_server_handled_total", Help: "Total number of RPCs completed on the server, regardless of success or failure."}, append(labels[:3:3], "grpc_code")),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "grpc_server_msg_received_total", Help: "Total number of RPC stream messages received on the server."}, labels),
		sent:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "grpc_server_msg_sent_total", Help: "Total number of gRPC stream messages sent by the server."}, labels),
		handling: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "grpc_server_handling_seconds",
			Help: "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.", Buckets: buckets}, labels),
	}
}

// Describe implements prometheus.Collector.
func (m *serverMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.started.Describe(ch)
	m.handled.Describe(ch)
	m.received.Describe(ch)
	m.sent.Describe(ch)
	m.handling.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *serverMetrics) Collect(ch chan<- prometheus.Metric) {
	m.started.Collect(ch)
	m.handled.Collect(ch)
	m.received.Collect(ch)
	m.sent.Collect(ch)
	m.handling.Collect(ch)
}

// initialize makes the series of every method the server serves, at 0.
func (m *serverMetrics) initialize(s *grpc.Server) {
	for service, info := range s.GetServiceInfo() {
		for _, mi := range info.Methods {
			m.of("/"+service+"/"+mi.Name, grpcType(mi.IsClientStream, mi.IsServerStream), true)
		}
	}
}

func grpcType(clientStream, serverStream bool) string {
	switch {
	case clientStream && serverStream:
		return grpcBidiStream
	case clientStream:
		return grpcClientStream
	case serverStream:
		return grpcServerStream
	}
	return grpcUnary
}

// of returns the series of method (a full method name) of type typ,
// making them the first time; a served method's (served) with a
// grpc_server_handled_total series for every code at once, another's with
// those of the codes it ends with, as they come.
func (m *serverMetrics) of(method, typ string, served bool) *methodMetrics {
	if mm, ok := m.methods.Load(method); ok {
		return mm.(*methodMetrics)
	}
	service, name := splitMethod(method)
	mm := &methodMetrics{started: m.started.WithLabelValues(typ, service, name), received: m.received.WithLabelValues(typ, service, name),
		sent: m.sent.WithLabelValues(typ, service, name), handling: m.handling.WithLabelValues(typ, service, name)}
	if served {
		for c := range mm.handled {
			mm.handled[c] = m.handled.WithLabelValues(typ, service, name, codes.Code(c).String())
		}
	}
	got, _ := m.methods.LoadOrStore(method, mm)
	return got.(*methodMetrics)
}

// splitMethod splits a full method name into its service and method, as
// grpcprom does ("unknown" both when it is no "/service/method").
func splitMethod(method string) (service, name string) {
	if s, n, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/"); ok {
		return s, n
	}
	return "unknown", "unknown"
}

// done counts a call's end, err its outcome, took its handling time.
func (mm *methodMetrics) done(m *serverMetrics, typ, method string, err error, took time.Duration) {
	code := grpcprom.FromError(err).Code()
	if int(code) < len(mm.handled) && mm.handled[code] != nil {
		mm.handled[code].Inc()
	} else {
		service, name := splitMethod(method)
		m.handled.WithLabelValues(typ, service, name, code.String()).Inc()
	}
	mm.handling.Observe(took.Seconds())
}

// unary is the unary interceptor: a call starts, receives its request,
// sends its response unless it fails, and ends.
func (m *serverMetrics) unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		start := time.Now()
		mm := m.of(info.FullMethod, grpcUnary, false)
		mm.started.Inc()
		mm.received.Inc()
		resp, err := h(ctx, req)
		if err == nil {
			mm.sent.Inc()
		}
		mm.done(m, grpcUnary, info.FullMethod, err, time.Since(start))
		return resp, err
	}
}

// stream is the stream interceptor: a stream starts, counts each message
// received and sent, and ends.
func (m *serverMetrics) stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		start := time.Now()
		typ := grpcType(info.IsClientStream, info.IsServerStream)
		mm := m.of(info.FullMethod, typ, false)
		mm.started.Inc()
		err := h(srv, &countedStream{ServerStream: ss, mm: mm})
		mm.done(m, typ, info.FullMethod, err, time.Since(start))
		return err
	}
}

// countedStream counts the messages a stream receives and sends.
type countedStream struct {
	grpc.ServerStream
	mm *methodMetrics
}

func (s *countedStream) SendMsg(msg any) error {
	err := s.ServerStream.SendMsg(msg)
	if err == nil {
		s.mm.sent.Inc()
	}
	return err
}

func (s *countedStream) RecvMsg(msg any) error {
	err := s.ServerStream.RecvMsg(msg)
	if err == nil {
		s.mm.received.Inc()
	}
	return err
}
