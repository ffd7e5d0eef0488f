package server

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rpcMetrics are the conventional gRPC server series
// (grpc_server_started_total, grpc_server_handled_total{grpc_code},
// grpc_server_msg_received_total, grpc_server_msg_sent_total and
// grpc_server_handling_seconds, each labelled grpc_type, grpc_service,
// grpc_method). Each method's series are looked up once and kept: a call
// then counts itself without hashing its labels, which had been a tenth
// of a transaction manager's CPU.
type rpcMetrics struct {
	started, handled, received, sent *prometheus.CounterVec
	seconds                          *prometheus.HistogramVec
	methods                          sync.Map // full method name → *methodMetrics
}

// methodMetrics are one method's series; handled is filled per code on
// first use.
type methodMetrics struct {
	started, received, sent prometheus.Counter
	seconds                 prometheus.Observer
	typ, service, method    string
	handled                 [codes.Unauthenticated + 1]atomic.Pointer[prometheus.Counter]
}

func newRPCMetrics(buckets []float64) *rpcMetrics {
	labels := []string{"grpc_type", "grpc_service", "grpc_method"}
	counter := func(name, help string, l []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, l)
	}
	return &rpcMetrics{
		started:  counter("grpc_server_started_total", "Calls the server started.", labels),
		handled:  counter("grpc_server_handled_total", "Calls the server finished, by status code.", append(labels[:3:3], "grpc_code")),
		received: counter("grpc_server_msg_received_total", "Messages the server received.", labels),
		sent:     counter("grpc_server_msg_sent_total", "Messages the server sent.", labels),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "grpc_server_handling_seconds", Help: "Time the server took to finish a call.", Buckets: buckets,
		}, labels),
	}
}

// Describe and Collect make rpcMetrics a prometheus.Collector.
func (m *rpcMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

func (m *rpcMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

func (m *rpcMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.started, m.handled, m.received, m.sent, m.seconds}
}

// initialize starts every method's series at zero, each code's too.
func (m *rpcMetrics) initialize(s *grpc.Server) {
	for service, info := range s.GetServiceInfo() {
		for _, mi := range info.Methods {
			mm := m.method("/"+service+"/"+mi.Name, rpcType(mi.IsClientStream, mi.IsServerStream))
			for c := codes.OK; c <= codes.Unauthenticated; c++ {
				mm.code(m, c)
			}
		}
	}
}

func rpcType(clientStream, serverStream bool) string {
	switch {
	case clientStream && serverStream:
		return "bidi_stream"
	case clientStream:
		return "client_stream"
	case serverStream:
		return "server_stream"
	}
	return "unary"
}

// method is full's series, made on first use.
func (m *rpcMetrics) method(full, typ string) *methodMetrics {
	if mm, ok := m.methods.Load(full); ok {
		return mm.(*methodMetrics)
	}
	service, method := "unknown", "unknown"
	if i := strings.LastIndexByte(full, '/'); i > 0 {
		service, method = strings.TrimPrefix(full[:i], "/"), full[i+1:]
	}
	mm := &methodMetrics{
		typ: typ, service: service, method: method,
		started:  m.started.WithLabelValues(typ, service, method),
		received: m.received.WithLabelValues(typ, service, method),
		sent:     m.sent.WithLabelValues(typ, service, method),
		seconds:  m.seconds.WithLabelValues(typ, service, method),
	}
	got, _ := m.methods.LoadOrStore(full, mm)
	return got.(*methodMetrics)
}

// code is the method's handled counter for c.
func (mm *methodMetrics) code(m *rpcMetrics, c codes.Code) prometheus.Counter {
	if int(c) >= len(mm.handled) {
		return m.handled.WithLabelValues(mm.typ, mm.service, mm.method, c.String())
	}
	if p := mm.handled[c].Load(); p != nil {
		return *p
	}
	h := m.handled.WithLabelValues(mm.typ, mm.service, mm.method, c.String())
	mm.handled[c].Store(&h)
	return h
}

// done counts a finished call.
func (mm *methodMetrics) done(m *rpcMetrics, err error, start time.Time) {
	mm.code(m, status.Code(err)).Inc()
	mm.seconds.Observe(time.Since(start).Seconds())
}

// unary counts a unary call: started, its request received, its reply
// sent when it succeeded, handled by code, and its time.
func (m *rpcMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	mm := m.method(info.FullMethod, "unary")
	start := time.Now()
	mm.started.Inc()
	mm.received.Inc()
	resp, err := handler(ctx, req)
	if err == nil {
		mm.sent.Inc()
	}
	mm.done(m, err, start)
	return resp, err
}

// stream counts a streaming call and each message it receives and sends.
func (m *rpcMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	mm := m.method(info.FullMethod, rpcType(info.IsClientStream, info.IsServerStream))
	start := time.Now()
	mm.started.Inc()
	err := handler(srv, &countedStream{ServerStream: ss, mm: mm})
	mm.done(m, err, start)
	return err
}

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
