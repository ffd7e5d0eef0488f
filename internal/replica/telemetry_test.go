package replica

import (
	"strings"
	"testing"

	gometrics "github.com/hashicorp/go-metrics/compat"
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
		{"raft", "commitNumLogs"}, {"raft", "leader", "dispatchNumLogs"}, {"raft", "wal", "log_appends"},
		{"raft", "net", "rpcDecode"}, {"raft", "rpc", "appendEntries", "processLogs"},
	} {
		gometrics.SetGauge(k, 1)
	}
	gometrics.IncrCounter([]string{"raft", "apply"}, 1)
	gometrics.IncrCounter([]string{"raft", "wal", "stable_sets"}, 1)
	gometrics.SetGauge([]string{"raft", "wal", "last_segment_age_seconds"}, 1)
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
			if strings.HasPrefix(name, strings.ReplaceAll(blocked, ".", "_")) {
				t.Errorf("%s is exported; want it dropped (blocked prefix %q)", name, blocked)
			}
		}
	}
}
