package replica

import (
	"strings"
	"testing"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprom "github.com/hashicorp/go-metrics/compat/prometheus"
	wal "github.com/hashicorp/raft-wal"
	walmetrics "github.com/hashicorp/raft-wal/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// TestRaftTelemetryFilter: go-metrics drops the measurements blocked
// before they reach the collector, and passes the ones the dashboard,
// the alerts and the README name, and any other.
func TestRaftTelemetryFilter(t *testing.T) {
	sink, err := RaftMetrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]string{
		{"raft", "commitNumLogs"}, {"raft", "leader", "dispatchNumLogs"},
		{"raft", "net", "rpcDecode"}, {"raft", "rpc", "appendEntries", "processLogs"},
	} {
		gometrics.SetGauge(k, 1)
	}
	gometrics.IncrCounter([]string{"raft", "apply"}, 1)
	gometrics.AddSample([]string{"raft", "rpc", "appendEntries", "storeLogs"}, 1)
	gometrics.AddSample([]string{"raft", "replication", "appendEntries", "rpc"}, 1)

	reg := prometheus.NewRegistry()
	reg.MustRegister(sink)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, name := range []string{
		"djinn_raft_commitTime", "djinn_raft_fsm_applyBatch", "djinn_raft_state_leader", "djinn_raft_rpc_appendEntries_storeLogs",
		"djinn_raft_replication_appendEntries_rpc", "djinn_raft_wal_stable_sets", "djinn_raft_wal_last_segment_age_seconds",
	} {
		if !have[name] {
			t.Errorf("%s is not exported; want it kept", name)
		}
	}
	for name := range have {
		for _, blocked := range raftTelemetryBlocked {
			if strings.HasPrefix(name, "djinn_"+strings.ReplaceAll(blocked, ".", "_")) {
				t.Errorf("%s is exported; want it dropped (blocked prefix %q)", name, blocked)
			}
		}
	}
}

// TestWALTelemetry: the log's collector exports every counter and gauge
// raft-wal declares, at zero from the start, except the ones left out,
// records what the log reports, and ignores a name raft-wal does not
// declare.
func TestWALTelemetry(t *testing.T) {
	w := newWALTelemetry()
	w.IncrementCounter("stable_sets", 2)
	w.IncrementCounter("log_appends", 1)
	w.IncrementCounter("no_such_counter", 1)
	w.SetGauge("last_segment_age_seconds", 7)

	reg := prometheus.NewRegistry()
	reg.MustRegister(w)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		have[mf.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	defs := append(append([]walmetrics.Descriptor{}, wal.MetricDefinitions.Counters...), wal.MetricDefinitions.Gauges...)
	for _, d := range defs {
		_, ok := have["djinn_raft_wal_"+d.Name]
		if ok == walTelemetryLeftOut[d.Name] {
			t.Errorf("djinn_raft_wal_%s exported: %v; want %v", d.Name, ok, !ok)
		}
	}
	if len(have) != len(defs)-len(walTelemetryLeftOut) {
		t.Errorf("exported %d series; want %d: %v", len(have), len(defs)-len(walTelemetryLeftOut), have)
	}
	for name, want := range map[string]float64{"djinn_raft_wal_stable_sets": 2, "djinn_raft_wal_last_segment_age_seconds": 7, "djinn_raft_wal_stable_gets": 0} {
		if have[name] != want {
			t.Errorf("%s = %v; want %v", name, have[name], want)
		}
	}
}

// TestRaftSink: a measurement Raft takes on every write is recorded
// without an allocation, a blocked one is dropped, and any other one goes
// to go-metrics' Prometheus sink, named djinn_raft_… with its labels.
func TestRaftSink(t *testing.T) {
	other, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{Registerer: prometheus.NewRegistry(), Name: "test_sink"})
	if err != nil {
		t.Fatal(err)
	}
	s := newRaftSink(other)
	commit, apply, net := []string{"raft", "commitTime"}, []string{"raft", "apply"}, []string{"raft", "net", "rpcDecode"}
	if n := testing.AllocsPerRun(100, func() {
		s.AddSample(commit, 1)
		s.IncrCounter(apply, 1)
		s.AddSampleWithLabels(net, 1, []gometrics.Label{{Name: "rpcType", Value: "AppendEntries"}})
	}); n != 0 {
		t.Errorf("a hot or blocked measurement allocates %v times; want 0", n)
	}
	s.IncrCounter([]string{"raft", "verify_leader"}, 1)
	s.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 3, []gometrics.Label{{Name: "peer_id", Value: "n2"}})
	s.SetGauge([]string{"raft", "commitNumLogs"}, 1)
	s.AddSample([]string{"raft", strings.Repeat("x", raftKeyMax)}, 1)

	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		samples uint64
		value   float64 // a counter's value, a summary's sum
		labels  string
	}
	have := map[string]seen{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		v := seen{m.GetSummary().GetSampleCount(), m.GetCounter().GetValue() + m.GetSummary().GetSampleSum(), ""}
		for _, l := range m.GetLabel() {
			v.labels += l.GetName() + "=" + l.GetValue()
		}
		have[mf.GetName()] = v
	}
	for name, want := range map[string]seen{
		"djinn_raft_commitTime":                         {101, 101, ""},
		"djinn_raft_verify_leader":                      {0, 1, ""},
		"djinn_raft_replication_appendEntries_rpc":      {1, 3, "peer_id=n2"},
		"djinn_raft_" + strings.Repeat("x", raftKeyMax): {1, 1, ""}, // longer than the lookup buffer
	} {
		if have[name] != want {
			t.Errorf("%s = %+v; want %+v", name, have[name], want)
		}
	}
	for _, name := range []string{"djinn_raft_apply", "djinn_raft_commitNumLogs", "djinn_raft_net_rpcDecode"} {
		if _, ok := have[name]; ok {
			t.Errorf("%s is exported; want it dropped", name)
		}
	}
}
