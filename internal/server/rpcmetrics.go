package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rpcMetrics are the conventional gRPC series of one side, the server's
// (grpc_server_started_total, grpc_server_handled_total,
// grpc_server_msg_received_total, grpc_server_msg_sent_total, labels
// grpc_type, grpc_service, grpc_method, and grpc_code for handled; the
// grpc_server_handling_seconds histogram) or the client's (grpc_client_*,
// the same), as the grpc-ecosystem Prometheus provider exports them, with
// each method's series resolved once instead of on every call: resolving a
// label set hashes its values and takes the vector's lock, and with five
// of them per call (and one per message of a session) that came to a tenth
// of the server's CPU on the write paths.
type rpcMetrics struct {
	started, handled, received, sent *prometheus.CounterVec
	seconds                          *prometheus.HistogramVec
	// known maps a full method name to its series, every code resolved:
	// the server's methods, set once by initialize, read without a lock.
	known atomic.Pointer[map[string]*methodSeries]
	// seen holds the series of the other methods by full name (a method's
	// type never changes), resolved on their first call (the client's;
	// handled series by the first call with each code).
	seen sync.Map
}

// methodSeries are one method's series, resolved.
type methodSeries struct {
	started, received, sent prometheus.Counter
	seconds                 prometheus.Observer
	handled                 [codes.Unauthenticated + 1]atomic.Pointer[prometheus.Counter]
	labels                  [3]string
	vec                     *prometheus.CounterVec
}

func newRPCMetrics(side, doneHelp, secondsHelp string) *rpcMetrics {
	labels := []string{"grpc_type", "grpc_service", "grpc_method"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "grpc_" + side + "_" + name, Help: help}, labels)
	}
	on := map[string]string{"server": "on the server", "client": "by the client"}[side]
	return &rpcMetrics{
		started:  counter("started_total", "Total number of RPCs started on the "+side+".", labels...),
		handled:  counter("handled_total", doneHelp, append(labels, "grpc_code")...),
		received: counter("msg_received_total", "Total number of RPC stream messages received "+on+".", labels...),
		sent:     counter("msg_sent_total", "Total number of gRPC stream messages sent by the "+side+".", labels...),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "grpc_" + side + "_handling_seconds", Help: secondsHelp, Buckets: latencyBuckets,
		}, labels),
	}
}

func newServerRPCMetrics() *rpcMetrics {
	return newRPCMetrics("server", "Total number of RPCs completed on the server, regardless of success or failure.",
		"Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.")
}

func newClientRPCMetrics() *rpcMetrics {
	return newRPCMetrics("client", "Total number of RPCs completed by the client, regardless of success or failure.",
		"Histogram of response latency (seconds) of the gRPC until it is finished by the application.")
}

func (m *rpcMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.started, m.handled, m.received, m.sent, m.seconds}
}

// initialize resolves the series of every method srv serves, each at zero,
// so they exist before the first call.
func (m *rpcMetrics) initialize(srv *grpc.Server) {
	known := make(map[string]*methodSeries)
	for service, info := range srv.GetServiceInfo() {
		for _, mi := range info.Methods {
			ms := m.resolve(streamType(mi.IsClientStream, mi.IsServerStream), service, mi.Name)
			for c := range ms.handled {
				ms.code(codes.Code(c))
			}
			known["/"+service+"/"+mi.Name] = ms
		}
	}
	m.known.Store(&known)
}

// streamType is the grpc_type label of a method.
func streamType(clientStream, serverStream bool) string {
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

func (m *rpcMetrics) resolve(typ, service, method string) *methodSeries {
	return &methodSeries{
		started:  m.started.WithLabelValues(typ, service, method),
		received: m.received.WithLabelValues(typ, service, method),
		sent:     m.sent.WithLabelValues(typ, service, method),
		seconds:  m.seconds.WithLabelValues(typ, service, method),
		labels:   [3]string{typ, service, method},
		vec:      m.handled,
	}
}

// series returns a method's series, resolving them on its first call.
func (m *rpcMetrics) series(fullMethod, typ string) *methodSeries {
	if known := m.known.Load(); known != nil {
		if ms, ok := (*known)[fullMethod]; ok {
			return ms
		}
	}
	if ms, ok := m.seen.Load(fullMethod); ok {
		return ms.(*methodSeries)
	}
	service, method := "unknown", "unknown"
	if s, meth, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/"); ok {
		service, method = s, meth
	}
	ms, _ := m.seen.LoadOrStore(fullMethod, m.resolve(typ, service, method))
	return ms.(*methodSeries)
}

// code returns the method's handled series of code c.
func (ms *methodSeries) code(c codes.Code) prometheus.Counter {
	if int(c) >= len(ms.handled) {
		return ms.vec.WithLabelValues(ms.labels[0], ms.labels[1], ms.labels[2], c.String())
	}
	if p := ms.handled[c].Load(); p != nil {
		return *p
	}
	counter := ms.vec.WithLabelValues(ms.labels[0], ms.labels[1], ms.labels[2], c.String())
	ms.handled[c].Store(&counter)
	return counter
}

// done counts a finished call under its status code and observes its time.
func (ms *methodSeries) done(err error, since time.Time) {
	code := codes.OK
	if err != nil {
		st, ok := status.FromError(err)
		if !ok {
			st = status.FromContextError(err)
		}
		code = st.Code()
	}
	ms.code(code).Inc()
	ms.seconds.Observe(time.Since(since).Seconds())
}

// unary counts a call the server serves: started, its request received,
// its response sent when it succeeded, handled under its code.
func (m *rpcMetrics) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	ms := m.series(info.FullMethod, "unary")
	ms.started.Inc()
	ms.received.Inc()
	resp, err := h(ctx, req)
	if err == nil {
		ms.sent.Inc()
	}
	ms.done(err, start)
	return resp, err
}

// stream counts a stream the server serves: started, each message received
// and sent, handled under its code.
func (m *rpcMetrics) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	ms := m.series(info.FullMethod, streamType(info.IsClientStream, info.IsServerStream))
	ms.started.Inc()
	err := h(srv, &countedStream{ServerStream: ss, ms: ms})
	ms.done(err, start)
	return err
}

// countedStream counts the messages a served stream receives and sends.
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

// unaryClient counts a call the server makes: started, its request sent,
// its response received when it succeeded, handled under its code.
func (m *rpcMetrics) unaryClient(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	ms := m.series(method, "unary")
	ms.started.Inc()
	ms.sent.Inc()
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil {
		ms.received.Inc()
	}
	ms.done(err, start)
	return err
}

// streamClient counts a stream the server opens: started, each message
// sent and received, handled under its code when it ends (a stream that
// fails to open, or the receive that ends it: io.EOF is OK).
func (m *rpcMetrics) streamClient(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	start := time.Now()
	ms := m.series(method, streamType(desc.ClientStreams, desc.ServerStreams))
	ms.started.Inc()
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		ms.done(err, start)
		return nil, err
	}
	return &countedClientStream{ClientStream: cs, ms: ms, start: start, serverStreams: desc.ServerStreams}, nil
}

// countedClientStream counts the messages a stream the server opened sends
// and receives, and its end.
type countedClientStream struct {
	grpc.ClientStream
	ms            *methodSeries
	start         time.Time
	serverStreams bool
}

func (c *countedClientStream) SendMsg(m any) error {
	err := c.ClientStream.SendMsg(m)
	if err == nil {
		c.ms.sent.Inc()
	}
	return err
}

func (c *countedClientStream) RecvMsg(m any) error {
	err := c.ClientStream.RecvMsg(m)
	if err == nil {
		c.ms.received.Inc()
		if c.serverStreams {
			return nil
		}
	}
	end := err
	if c.serverStreams && errors.Is(err, io.EOF) {
		end = nil
	}
	c.ms.done(end, c.start)
	return err
}
