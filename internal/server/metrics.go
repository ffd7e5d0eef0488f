package server

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc/status"
)

// metrics holds the server's Prometheus registry.
type metrics struct {
	registry *prometheus.Registry
	calls    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// newMetrics registers the server's own collectors and every part's.
func newMetrics(s *Server) *metrics {
	m := &metrics{registry: prometheus.NewRegistry()}
	m.calls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "djinn_rpc_total", Help: "gRPC calls served, by method and status code.",
	}, []string{"method", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "djinn_rpc_seconds", Help: "gRPC call latency, by method.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
	}, []string{"method"})
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.calls, m.latency,
		gauge("djinn_is_leader", "1 on the leader.", func() float64 {
			if s.node.IsLeader() {
				return 1
			}
			return 0
		}),
		gauge("djinn_raft_applied_index", "Last applied log index.", func() float64 { return float64(s.node.AppliedIndex()) }),
	)
	for _, p := range s.parts {
		if p.metrics != nil {
			m.registry.MustRegister(p.metrics()...)
		}
	}
	return m
}

// gauge is a gauge read from f when scraped.
func gauge(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

// counter is a counter read from f when scraped.
func counter(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
}

func (m *metrics) observe(method string, err error, d time.Duration) {
	if m == nil {
		return
	}
	method = method[strings.LastIndexByte(method, '/')+1:]
	m.calls.WithLabelValues(method, status.Code(err).String()).Inc()
	m.latency.WithLabelValues(method).Observe(d.Seconds())
}
