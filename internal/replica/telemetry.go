package replica

import (
	"sync"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// Raft reports its own measurements — commit and apply times, log stores,
// leader changes, replication to each follower — through go-metrics'
// process-wide instance, by way of its compat package (which, without
// build tags, is armon/go-metrics). telemetry routes that instance into a
// Prometheus collector, once per process, next to the log's (raft-wal's)
// collector (walTelemetry); every node's registry collects both. Names
// start with djinn_raft_; timings are summaries in milliseconds, as
// go-metrics records them.
//
// A process runs one node, so the figures are that node's. (Tests that run
// several nodes in one process see their sum.)

var telemetry struct {
	once sync.Once
	sink prometheus.Collector // Raft's go-metrics and the log's collector
	wal  *walTelemetry
	err  error
}

// collectors collects each of its collectors.
type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}

// raftTelemetry are the measurements declared up front, so that they are
// exported (at zero) before the first one is taken: a dashboard and its
// alerts can name them on a node that never led. They are also the ones
// taken on every write (on the leader, and on a follower for each append
// it is sent), which raftSink records without building a name.
var raftTelemetry = struct{ summaries, counters [][]string }{
	summaries: [][]string{
		{"raft", "commitTime"},
		{"raft", "fsm", "applyBatch"}, // the state machine applies in batches: raft never measures fsm.apply
		{"raft", "leader", "dispatchLog"},
		{"raft", "leader", "lastContact"},
		{"raft", "rpc", "appendEntries"}, // a follower's handling of an append
		{"raft", "rpc", "appendEntries", "storeLogs"},
		{"raft", "snapshot", "persist"},
	},
	counters: [][]string{
		{"raft", "state", "leader"},
		{"raft", "state", "candidate"},
		{"raft", "state", "follower"},
		{"raft", "transition", "heartbeat_timeout"},
	},
}

// raftTelemetryBlocked are the measurements raftSink drops (key prefixes,
// as go-metrics' filter took them): ones taken on every log write or
// replication round that no dashboard, alert or test names and that the
// node's own figures already give (batch sizes: djinn_raft_log_write_seconds counts appends,
// djinn_raft_applied_index entries), and the transport's per-RPC timings.
var raftTelemetryBlocked = []string{
	"raft.apply", // one a call: djinn_raft_applied_index gives the rate
	"raft.fsm.enqueue",
	"raft.fsm.applyBatchNum",
	"raft.commitNumLogs",
	"raft.leader.dispatchNumLogs",
	"raft.net.",
	"raft.rpc.appendEntries.processLogs",
	"raft.rpc.processHeartbeat",
	"raft.replication.appendEntries.logs",
	"raft.replication.heartbeat",
}

// RaftMetrics returns the collector of Raft's and its log's own metrics,
// routing go-metrics' process-wide instance into it on first use.
func RaftMetrics() (prometheus.Collector, error) {
	telemetry.once.Do(func() {
		other, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{
			Expiration: gmprom.DefaultPrometheusOpts.Expiration,
			// The sink registers itself; each node's registry collects it.
			Registerer: prometheus.NewRegistry(),
			Name:       "djinn_raft_telemetry",
		})
		if err != nil {
			telemetry.err = err
			return
		}
		sink := newRaftSink(other)
		cfg := gometrics.DefaultConfig("") // raftSink names the series djinn_raft_…
		cfg.EnableHostname = false
		cfg.EnableRuntimeMetrics = false // the Go collector has them
		if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
			telemetry.err = err
			return
		}
		telemetry.wal = newWALTelemetry()
		telemetry.sink = collectors{sink, telemetry.wal}
	})
	return telemetry.sink, telemetry.err
}
