package replica

import (
	"sync"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// Raft and its log (raft-wal) report their own measurements — commit and
// apply times, log stores, leader changes, replication to each follower —
// through go-metrics' process-wide instance, by way of its compat package
// (which, without build tags, is armon/go-metrics). telemetry routes that
// instance into a Prometheus collector, once per process; every node's
// registry collects it. Names start with djinn_raft_; timings are
// summaries in milliseconds, as go-metrics records them.
//
// A process runs one node, so the figures are that node's. (Tests that run
// several nodes in one process see their sum.)

var telemetry struct {
	once sync.Once
	sink prometheus.Collector
	err  error
}

// raftTelemetry are the measurements declared up front, so that they are
// exported (at zero) before the first one is taken: a dashboard and its
// alerts can name them on a node that never led.
var raftTelemetry = struct{ summaries, counters [][]string }{
	summaries: [][]string{
		{"djinn", "raft", "commitTime"},
		{"djinn", "raft", "fsm", "applyBatch"}, // the state machine applies in batches: raft never measures fsm.apply
		{"djinn", "raft", "leader", "dispatchLog"},
		{"djinn", "raft", "leader", "lastContact"},
		{"djinn", "raft", "rpc", "appendEntries", "storeLogs"},
		{"djinn", "raft", "snapshot", "persist"},
	},
	counters: [][]string{
		{"djinn", "raft", "state", "leader"},
		{"djinn", "raft", "state", "candidate"},
		{"djinn", "raft", "state", "follower"},
		{"djinn", "raft", "transition", "heartbeat_timeout"},
	},
}

// raftTelemetryBlocked are the measurements go-metrics drops before they
// reach the collector: ones taken on every log write or replication round
// that no dashboard, alert or test names and that the node's own figures
// already give (batch sizes: djinn_raft_log_write_seconds counts appends;
// bytes and entries written: djinn_raft_log_bytes, djinn_raft_applied_index),
// and the transport's per-RPC timings.
var raftTelemetryBlocked = []string{
	"djinn.raft.apply", // one a call: djinn_raft_applied_index gives the rate
	"djinn.raft.fsm.enqueue",
	"djinn.raft.fsm.applyBatchNum",
	"djinn.raft.commitNumLogs",
	"djinn.raft.leader.dispatchNumLogs",
	"djinn.raft.wal.log_entries_written",
	"djinn.raft.wal.log_entry_bytes_written",
	"djinn.raft.wal.log_appends",
	"djinn.raft.net.",
	"djinn.raft.rpc.appendEntries.processLogs",
	"djinn.raft.rpc.processHeartbeat",
	"djinn.raft.replication.appendEntries.logs",
	"djinn.raft.replication.heartbeat",
}

// RaftMetrics returns the collector of Raft's and its log's own metrics,
// routing go-metrics' process-wide instance into it on first use.
func RaftMetrics() (prometheus.Collector, error) {
	telemetry.once.Do(func() {
		opts := gmprom.PrometheusOpts{
			Expiration: gmprom.DefaultPrometheusOpts.Expiration,
			// The sink registers itself; each node's registry collects it.
			Registerer: prometheus.NewRegistry(),
			Name:       "djinn_raft_telemetry",
		}
		for _, n := range raftTelemetry.summaries {
			opts.SummaryDefinitions = append(opts.SummaryDefinitions, gmprom.SummaryDefinition{Name: n, Help: "Raft timing in milliseconds (go-metrics)."})
		}
		for _, n := range raftTelemetry.counters {
			opts.CounterDefinitions = append(opts.CounterDefinitions, gmprom.CounterDefinition{Name: n, Help: "Raft event count (go-metrics)."})
		}
		sink, err := gmprom.NewPrometheusSinkFrom(opts)
		if err != nil {
			telemetry.err = err
			return
		}
		cfg := gometrics.DefaultConfig("djinn")
		cfg.EnableHostname = false
		cfg.EnableRuntimeMetrics = false // the Go collector has them
		cfg.BlockedPrefixes = raftTelemetryBlocked
		if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
			telemetry.err = err
			return
		}
		telemetry.sink = sink
	})
	return telemetry.sink, telemetry.err
}
