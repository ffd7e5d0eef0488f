package replica

import (
	"bytes"
	"strings"
	"time"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// raftSink is the go-metrics sink Raft reports to. The measurements Raft
// takes on every write (raftTelemetry) are Prometheus metrics made once
// and found by their key, joined in a buffer on the stack, without
// building a name; the blocked ones (raftTelemetryBlocked) are dropped
// there; any other measurement goes to go-metrics' own Prometheus sink
// (other), named djinn_raft_… as before. go-metrics itself runs without a
// service name and without a filter, so that it passes a measurement on
// without copying its key or joining it to look it up in its filter.
type raftSink struct {
	hot   map[string]raftMetric // by the key joined with dots: "raft.commitTime"
	other *gmprom.PrometheusSink
}

// raftMetric is one measurement taken in hot: a summary (timings and
// samples), a counter, or neither (dropped).
type raftMetric struct {
	summary prometheus.Summary
	counter prometheus.Counter
}

// raftKeyMax is the longest joined key raftSink looks up on the stack;
// a longer one goes to other.
const raftKeyMax = 96

func newRaftSink(other *gmprom.PrometheusSink) *raftSink {
	s := &raftSink{hot: map[string]raftMetric{}, other: other}
	for _, key := range raftTelemetry.summaries {
		s.hot[dotted(key)] = raftMetric{summary: prometheus.NewSummary(prometheus.SummaryOpts{
			Name: "djinn_" + underscored(key), Help: "Raft timing in milliseconds (go-metrics).",
			// As go-metrics' Prometheus sink makes them.
			MaxAge: 10 * time.Second, Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001},
		})}
	}
	for _, key := range raftTelemetry.counters {
		s.hot[dotted(key)] = raftMetric{counter: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "djinn_" + underscored(key), Help: "Raft event count (go-metrics).",
		})}
	}
	for _, key := range raftTelemetryBlocked {
		s.hot[key] = raftMetric{}
	}
	return s
}

// find returns the metric of key in hot, whether it is there, and whether
// the key is blocked.
func (s *raftSink) find(key []string) (m raftMetric, ok, blocked bool) {
	var buf [raftKeyMax]byte
	b := buf[:0]
	for i, k := range key {
		if i > 0 {
			b = append(b, '.')
		}
		if len(b)+len(k) > raftKeyMax {
			return raftMetric{}, false, false
		}
		b = append(b, k...)
	}
	if m, ok := s.hot[string(b)]; ok {
		return m, true, m.summary == nil && m.counter == nil
	}
	for _, p := range raftTelemetryBlocked { // prefixes, as go-metrics' filter took them
		if bytes.HasPrefix(b, []byte(p)) {
			return raftMetric{}, false, true
		}
	}
	return raftMetric{}, false, false
}

func dotted(key []string) string      { return strings.Join(key, ".") }
func underscored(key []string) string { return strings.Join(key, "_") }

// named is key as go-metrics named it with the service name djinn.
func named(key []string) []string {
	return append([]string{"djinn"}, key...)
}

// SetGauge implements go-metrics' MetricSink.
func (s *raftSink) SetGauge(key []string, val float32) { s.SetGaugeWithLabels(key, val, nil) }

// SetGaugeWithLabels implements go-metrics' MetricSink.
func (s *raftSink) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	if _, ok, blocked := s.find(key); !ok && !blocked {
		s.other.SetGaugeWithLabels(named(key), val, labels)
	}
}

// EmitKey implements go-metrics' MetricSink (Prometheus has no such
// measurement).
func (s *raftSink) EmitKey([]string, float32) {}

// IncrCounter implements go-metrics' MetricSink.
func (s *raftSink) IncrCounter(key []string, val float32) { s.IncrCounterWithLabels(key, val, nil) }

// IncrCounterWithLabels implements go-metrics' MetricSink.
func (s *raftSink) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	m, ok, blocked := s.find(key)
	switch {
	case m.counter != nil:
		m.counter.Add(float64(val))
	case !ok && !blocked:
		s.other.IncrCounterWithLabels(named(key), val, labels)
	}
}

// AddSample implements go-metrics' MetricSink.
func (s *raftSink) AddSample(key []string, val float32) { s.AddSampleWithLabels(key, val, nil) }

// AddSampleWithLabels implements go-metrics' MetricSink.
func (s *raftSink) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	m, ok, blocked := s.find(key)
	switch {
	case m.summary != nil:
		m.summary.Observe(float64(val))
	case !ok && !blocked:
		s.other.AddSampleWithLabels(named(key), val, labels)
	}
}

// Describe implements prometheus.Collector.
func (s *raftSink) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range s.hot {
		m.collector().Describe(ch)
	}
	s.other.Describe(ch)
}

// Collect implements prometheus.Collector.
func (s *raftSink) Collect(ch chan<- prometheus.Metric) {
	for _, m := range s.hot {
		m.collector().Collect(ch)
	}
	s.other.Collect(ch)
}

func (m raftMetric) collector() prometheus.Collector {
	switch {
	case m.summary != nil:
		return m.summary
	case m.counter != nil:
		return m.counter
	}
	return collectors(nil)
}
