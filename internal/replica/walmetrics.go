package replica

import (
	wal "github.com/hashicorp/raft-wal"
	"github.com/prometheus/client_golang/prometheus"
)

// walTelemetry is raft-wal's metrics collector: its counters and gauges,
// made once by name as Prometheus metrics (djinn_raft_wal_<name>), so
// that the log's measurement on every append is a map lookup and an
// atomic add — its go-metrics adapter built the metric's name on each call
// and went through go-metrics' filter and sink. Every name raft-wal
// declares is exported from the start, at zero, except the ones left out
// (walTelemetryLeftOut); a name it does not declare is not recorded.
type walTelemetry struct {
	counters map[string]prometheus.Counter
	gauges   map[string]prometheus.Gauge
}

// walTelemetryLeftOut are the log's counters taken on every append that
// the node's own figures already give: djinn_raft_log_write_seconds
// counts appends, djinn_raft_log_bytes and djinn_raft_applied_index give
// bytes and entries written.
var walTelemetryLeftOut = map[string]bool{
	"log_appends":             true,
	"log_entries_written":     true,
	"log_entry_bytes_written": true,
}

func newWALTelemetry() *walTelemetry {
	w := &walTelemetry{counters: map[string]prometheus.Counter{}, gauges: map[string]prometheus.Gauge{}}
	for _, d := range wal.MetricDefinitions.Counters {
		if !walTelemetryLeftOut[d.Name] {
			w.counters[d.Name] = prometheus.NewCounter(prometheus.CounterOpts{Name: "djinn_raft_wal_" + d.Name, Help: d.Desc})
		}
	}
	for _, d := range wal.MetricDefinitions.Gauges {
		if !walTelemetryLeftOut[d.Name] {
			w.gauges[d.Name] = prometheus.NewGauge(prometheus.GaugeOpts{Name: "djinn_raft_wal_" + d.Name, Help: d.Desc})
		}
	}
	return w
}

// IncrementCounter implements raft-wal's metrics.Collector.
func (w *walTelemetry) IncrementCounter(name string, delta uint64) {
	if c, ok := w.counters[name]; ok {
		c.Add(float64(delta))
	}
}

// SetGauge implements raft-wal's metrics.Collector.
func (w *walTelemetry) SetGauge(name string, val uint64) {
	if g, ok := w.gauges[name]; ok {
		g.Set(float64(val))
	}
}

// Describe implements prometheus.Collector.
func (w *walTelemetry) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range w.counters {
		c.Describe(ch)
	}
	for _, g := range w.gauges {
		g.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (w *walTelemetry) Collect(ch chan<- prometheus.Metric) {
	for _, c := range w.counters {
		c.Collect(ch)
	}
	for _, g := range w.gauges {
		g.Collect(ch)
	}
}
