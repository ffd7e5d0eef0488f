package server

import (
	"context"
	"regexp"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/procfs"

	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// metrics holds the server's Prometheus registry: the conventional gRPC
// server and client series (grpc_server_handled_total{grpc_service,
// grpc_method,grpc_code} and the handling-time histograms), Raft's own
// telemetry (djinn_raft_*, replica.RaftMetrics), the node's figures and
// every part's.
type metrics struct {
	registry  *prometheus.Registry
	server    *grpcprom.ServerMetrics
	client    *grpcprom.ClientMetrics
	logWrites prometheus.Histogram
	logFailed prometheus.Counter
}

// latencyBuckets span 50µs to about 1.6s.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 16)

// newMetrics makes the registry with the collectors that exist before the
// node: the gRPC server's and client's, the log's writes, Go and process.
func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		server:   grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets))),
		client:   grpcprom.NewClientMetrics(grpcprom.WithClientHandlingTimeHistogram(grpcprom.WithHistogramBuckets(latencyBuckets))),
		logWrites: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "djinn_raft_log_write_seconds", Help: "Writes to the Raft log, each an append and its fsync.",
			Buckets: latencyBuckets,
		}),
		logFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "djinn_raft_log_write_failures_total", Help: "Writes to the Raft log that failed (the node stops).",
		}),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(memoryRuntimeMetrics)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		gauge("djinn_process_resident_memory_peak_bytes", "The most resident memory the process has held since it started (VmHWM).", peakRSS),
		m.server, m.client, m.logWrites, m.logFailed,
	)
	return m
}

// memoryRuntimeMetrics are the runtime's figures exported beside the
// memory statistics: the live heap as the last collection marked it
// (go_gc_heap_live_bytes), what was allocated (go_gc_heap_allocs_*), and
// the CPU time the collector took of all the process's
// (go_cpu_classes_gc_total_cpu_seconds_total,
// go_cpu_classes_total_cpu_seconds_total).
var memoryRuntimeMetrics = collectors.GoRuntimeMetricsRule{
	Matcher: regexp.MustCompile(`^/gc/heap/(live|allocs):(bytes|objects)$|^/cpu/classes/(gc/)?total:cpu-seconds$`),
}

// peakRSS is the process's peak resident memory in bytes, 0 where
// /proc does not tell it.
func peakRSS() float64 {
	p, err := procfs.Self()
	if err != nil {
		return 0
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0
	}
	return float64(st.VmHWM)
}

// logWrite is the node's replica.Config.OnLogWrite.
func (m *metrics) logWrite(d time.Duration, err error) {
	m.logWrites.Observe(d.Seconds())
	if err != nil {
		m.logFailed.Inc()
	}
}

// addServer registers what needs the open node and parts: Raft's
// telemetry, the node's figures, the members as the leader sees them and
// every part's collectors; and starts the gRPC series of every method at
// zero.
func (m *metrics) addServer(s *Server) error {
	raft, err := replica.RaftMetrics()
	if err != nil {
		return err
	}
	if err := m.registry.Register(raft); err != nil {
		return err
	}
	if err := m.registry.Register(nodeMetrics{s}); err != nil {
		return err
	}
	for _, c := range s.calls.metrics() {
		if err := m.registry.Register(c); err != nil {
			return err
		}
	}
	for _, p := range s.parts {
		if p.metrics == nil {
			continue
		}
		for _, c := range p.metrics() {
			if err := m.registry.Register(c); err != nil {
				return err
			}
		}
	}
	m.server.InitializeMetrics(s.grpc)
	return nil
}

// nodeMetrics are the node's figures, read when scraped; on the leader
// also each member's health and replication lag, probed then.
type nodeMetrics struct{ s *Server }

var (
	descLeader      = prometheus.NewDesc("djinn_is_leader", "1 on the leader.", nil, nil)
	descLeaderKnown = prometheus.NewDesc("djinn_raft_leader_known", "1 when this node knows a leader.", nil, nil)
	descTerm        = prometheus.NewDesc("djinn_raft_term", "The node's current Raft term.", nil, nil)
	descApplied     = prometheus.NewDesc("djinn_raft_applied_index", "Last applied log index.", nil, nil)
	descCommit      = prometheus.NewDesc("djinn_raft_commit_index", "Highest log index known committed.", nil, nil)
	descLast        = prometheus.NewDesc("djinn_raft_last_index", "Index of the last entry in the log.", nil, nil)
	descContact     = prometheus.NewDesc("djinn_raft_last_contact_seconds", "Time since a follower last heard from its leader (0 on the leader, -1 never).", nil, nil)
	descLogBytes    = prometheus.NewDesc("djinn_raft_log_bytes", "Size on disk of the Raft log.", nil, nil)
	descSnapBytes   = prometheus.NewDesc("djinn_raft_snapshot_bytes", "Size on disk of the Raft snapshots.", nil, nil)
	descMembers     = prometheus.NewDesc("djinn_raft_members", "Members of the cluster configuration, by suffrage.", []string{"suffrage"}, nil)
	descMemberUp    = prometheus.NewDesc("djinn_member_up", "On the leader: 1 when a member answered its health probe, 0 when it did not.", []string{"node"}, nil)
	descLag         = prometheus.NewDesc("djinn_raft_follower_lag_entries", "On the leader: log entries a member has yet to apply.", []string{"node"}, nil)
)

func (n nodeMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descLeaderKnown, descTerm, descApplied, descCommit, descLast, descContact, descLogBytes, descSnapBytes, descMembers, descMemberUp, descLag} {
		ch <- d
	}
}

func (n nodeMetrics) Collect(ch chan<- prometheus.Metric) {
	node := n.s.node
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	leader, _ := node.Leader()
	g(descLeader, b2f(node.IsLeader()))
	g(descLeaderKnown, b2f(leader != ""))
	g(descTerm, float64(node.Term()))
	g(descApplied, float64(node.AppliedIndex()))
	g(descCommit, float64(node.CommitIndex()))
	g(descLast, float64(node.LastIndex()))
	contact := node.LastContact()
	if contact < 0 {
		g(descContact, -1)
	} else {
		g(descContact, contact.Seconds())
	}
	g(descLogBytes, float64(node.LogBytes()))
	g(descSnapBytes, float64(node.SnapshotBytes()))
	ms, err := node.Members()
	if err != nil {
		return
	}
	voters, nonvoters := 0, 0
	members := make([]*djinnpb.Member, 0, len(ms))
	for _, m := range ms {
		if m.Voter {
			voters++
		} else {
			nonvoters++
		}
		info, _ := n.s.machine.Member(m.ID)
		members = append(members, &djinnpb.Member{NodeId: m.ID, GrpcAddress: info.Endpoint, Voter: m.Voter})
	}
	g(descMembers, float64(voters), "voter")
	g(descMembers, float64(nonvoters), "nonvoter")
	if !node.IsLeader() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*probeTimeout)
	defer cancel()
	n.s.probe(ctx, members)
	applied := node.AppliedIndex()
	for _, m := range members {
		g(descMemberUp, b2f(m.GetHealth() != "unreachable"), m.GetNodeId())
		if m.GetHealth() != "unreachable" {
			g(descLag, float64(applied-min(applied, m.GetAppliedIndex())), m.GetNodeId())
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// gauge is a gauge read from f when scraped.
func gauge(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

// counter is a counter read from f when scraped.
func counter(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
}

// labelled is a counter of one label's value, read from f when scraped:
// the series of one name share a help text and differ by label.
func labelled(name, help, label, value string, f func() float64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: prometheus.Labels{label: value}}, f)
}
