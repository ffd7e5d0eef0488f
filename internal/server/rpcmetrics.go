package server

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rpcMetrics are the conventional gRPC server series — grpc_server_started_total,
// grpc_server_handled_total, grpc_server_msg_received_total,
// grpc_server_msg_sent_total (labels grpc_type, grpc_service, grpc_method,
// and grpc_code for handled) and the grpc_server_handling_seconds
// histogram — with each method's series resolved once, when the server's
// services are known, instead of on every call: resolving a label set
// hashes its values and takes the vector's lock, and with five of them a
// call (one per message on a session) that came to a tenth of the server's
// CPU on the write paths.
type rpcMetrics struct {
	started, handled, received, sent *prometheus.CounterVec
	seconds                          *prometheus.HistogramVec
	// methods maps a full method name to its series; set once by
	// initialize, read without a lock after.
	methods atomic.Pointer[map[string]*methodSeries]
}

// methodSeries are one method's series, resolved.
type methodSeries struct {
	started, received, sent prometheus.Counter
	handled                 [codes.Unauthenticated + 1]prometheus.Counter
	seconds                 prometheus.Observer
	// labels and vec count a code without a resolved series.
	labels [3]string
	vec    *prometheus.CounterVec
}

func newRPCMetrics() *rpcMetrics {
	labels := []string{"grpc_type", "grpc_service", "grpc_method"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	return &rpcMetrics{
		started:  counter("grpc_server_started_total", "Total number of RPCs started on the server.", labels...),
		handled:  counter("grpc_server_handled_total", "Total number of RPCs completed on the server, regardless of success or failure.", append(labels, "grpc_code")...),
		received: counter("grpc_server_msg_received_total", "Total number of RPC stream messages received on the server.", labels...),
		sent:     counter("grpc_server_msg_sent_total", "Total number of gRPC stream messages sent by the server.", labels...),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "grpc_server_handling_seconds",
			Help:    "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
			Buckets: latencyBuckets,
		}, labels),
	}
}

func (m *rpcMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.started, m.handled, m.received, m.sent, m.seconds}
}

// initialize resolves the series of every method the server serves, each
// at zero, so they exist before the first call.
func (m *rpcMetrics) initialize(srv *grpc.Server) {
	methods := make(map[string]*methodSeries)
	for service, info := range srv.GetServiceInfo() {
		for _, mi := range info.Methods {
			typ := "unary"
			switch {
			case mi.IsClientStream && mi.IsServerStream:
				typ = "bidi_stream"
			case mi.IsClientStream:
				typ = "client_stream"
			case mi.IsServerStream:
				typ = "server_stream"
			}
			ms := m.resolve(typ, service, mi.Name)
			for c := range ms.handled {
				ms.handled[c] = m.handled.WithLabelValues(typ, service, mi.Name, codes.Code(c).String())
			}
			methods["/"+service+"/"+mi.Name] = ms
		}
	}
	m.methods.Store(&methods)
}

func (m *rpcMetrics) resolve(typ, service, method string) *methodSeries {
	ms := &methodSeries{
		started:  m.started.WithLabelValues(typ, service, method),
		received: m.received.WithLabelValues(typ, service, method),
		sent:     m.sent.WithLabelValues(typ, service, method),
		seconds:  m.seconds.WithLabelValues(typ, service, method),
		labels:   [3]string{typ, service, method},
		vec:      m.handled,
	}
	return ms
}

// series returns a method's series: resolved at initialize, or now for a
// method the server did not list then (its handled series made by the
// first call with each code, as the library does).
func (m *rpcMetrics) series(fullMethod, typ string) *methodSeries {
	if methods := m.methods.Load(); methods != nil {
		if ms, ok := (*methods)[fullMethod]; ok {
			return ms
		}
	}
	service, method := "unknown", "unknown"
	if s, meth, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/"); ok {
		service, method = s, meth
	}
	return m.resolve(typ, service, method)
}

// done counts a finished call under its status code and observes its time.
func (ms *methodSeries) done(err error, d time.Duration) {
	code := codes.OK
	if err != nil {
		st, ok := status.FromError(err)
		if !ok {
			st = status.FromContextError(err)
		}
		code = st.Code()
	}
	if int(code) < len(ms.handled) && ms.handled[code] != nil {
		ms.handled[code].Inc()
	} else {
		ms.vec.WithLabelValues(ms.labels[0], ms.labels[1], ms.labels[2], code.String()).Inc()
	}
	ms.seconds.Observe(d.Seconds())
}

// unary counts a unary call: started, its request received, its response
// sent when it succeeded, handled under its code.
func (m *rpcMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	ms := m.series(info.FullMethod, "unary")
	ms.started.Inc()
	ms.received.Inc()
	resp, err := h(ctx, req)
	if err == nil {
		ms.sent.Inc()
	}
	ms.done(err, time.Since(start))
	return resp, err
}

// stream counts a stream: started, each message received and sent,
// handled under its code.
func (m *rpcMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	typ := "bidi_stream"
	switch {
	case info.IsClientStream && !info.IsServerStream:
		typ = "client_stream"
	case !info.IsClientStream && info.IsServerStream:
		typ = "server_stream"
	}
	ms := m.series(info.FullMethod, typ)
	ms.started.Inc()
	err := h(srv, &countedStream{ServerStream: ss, ms: ms})
	ms.done(err, time.Since(start))
	return err
}

// countedStream counts the messages a stream receives and sends.
type countedStream struct {
	grpc.ServerStream
	ms *methodSeries
}

func (c *countedStream) SendMsg(m any) error {
	err := c.ServerStream.SendMsg(m)
	if err == nil {
		c.ms.sent.Inc()
	}
	return err
}

func (c *countedStream) RecvMsg(m any) error {
	err := c.ServerStream.RecvMsg(m)
	if err == nil {
		c.ms.received.Inc()
	}
	return err
}
