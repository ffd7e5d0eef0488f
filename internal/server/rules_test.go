package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The cluster's rules version (internal/state/rules.go, docs: Upgrading):
// our own rule, no spec's. One row per rule.

// rulesOf returns the cluster's rules version and each member's supported
// maximum as the server at addr reports them (0s when it cannot say).
func rulesOf(t *testing.T, admin djinnpb.AdminClient) (version uint32, max map[string]uint32) {
	t.Helper()
	ms, err := admin.Members(context.Background(), &djinnpb.MembersRequest{})
	if err != nil {
		return 0, nil
	}
	max = map[string]uint32{}
	for _, m := range ms.GetMembers() {
		max[m.GetNodeId()] = m.GetRulesMax()
	}
	return ms.GetRulesVersion(), max
}

// openRefused opens a server that must refuse to start, and returns why.
func openRefused(t *testing.T, cfg server.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), servertest.Timeout)
	defer cancel()
	s, err := server.Open(ctx, cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		s.Close()
		t.Fatal("the server started")
	}
	return err
}

func checkNames(t *testing.T, err error, words ...string) {
	t.Helper()
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
}

func TestRules_ANewClusterStartsAtTheHighestVersionItsBinarySupports(t *testing.T) {
	t.Parallel()
	for _, max := range []uint32{state.MaxRules(), 2} {
		cfg := servertest.Config(t)
		server.SetRulesMax(&cfg, max)
		s := servertest.Start(t, cfg)
		admin := djinnpb.NewAdminClient(servertest.Conn(t, s.Addr()))
		servertest.Eventually(t, "the leader's own supported maximum recorded", func() bool {
			v, ms := rulesOf(t, admin)
			return v == max && ms[s.NodeID()] == max
		})
		st, err := servertest.Status(admin)
		if err != nil || st.GetRulesVersion() != max || st.GetRulesMax() != max || st.GetStopped() != "" {
			t.Fatalf("status: rules %d, max %d, stopped %q, %v; want %d, %d", st.GetRulesVersion(), st.GetRulesMax(), st.GetStopped(), err, max, max)
		}
	}
}

func TestRules_AMemberSupportingLessHoldsTheClusterUntilItRunsANewerBinary(t *testing.T) {
	t.Parallel()
	acfg := servertest.Config(t)
	acfg.Listen, acfg.Raft = freeAddr(t), freeAddr(t)
	server.SetRulesMax(&acfg, 1)
	a := servertest.Start(t, acfg)
	bcfg := servertest.JoinConfig(t, a)
	server.SetRulesMax(&bcfg, 2)
	b := servertest.Start(t, bcfg)
	adminB := djinnpb.NewAdminClient(servertest.Conn(t, b.Addr()))
	servertest.Eventually(t, "both members' supported maximums recorded", func() bool {
		_, ms := rulesOf(t, adminB)
		return ms[a.NodeID()] == 1 && ms[b.NodeID()] == 2
	})
	if v, _ := rulesOf(t, adminB); v != 1 {
		t.Fatalf("rules version %d with a member supporting 1, want 1", v)
	}

	// a restarts with a binary supporting 2: the leader raises the version.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	server.SetRulesMax(&acfg, 2)
	a = servertest.Open(t, acfg)
	adminA := djinnpb.NewAdminClient(servertest.Conn(t, a.Addr()))
	servertest.EventuallyWithin(t, servertest.Failover, "rules version 2 applied on both members", func() bool {
		sa, errA := servertest.Status(adminA)
		sb, errB := servertest.Status(adminB)
		return errA == nil && errB == nil && sa.GetRulesVersion() == 2 && sb.GetRulesVersion() == 2
	})
	if _, ms := rulesOf(t, adminB); ms[a.NodeID()] != 2 {
		t.Fatalf("a's recorded maximum %d after its restart, want 2", ms[a.NodeID()])
	}
}

func TestRules_AJoiningBinarySupportingLessIsRefused(t *testing.T) {
	t.Parallel()
	acfg := servertest.Config(t)
	server.SetRulesMax(&acfg, 2)
	a := servertest.Start(t, acfg)
	bcfg := servertest.JoinConfig(t, a)
	server.SetRulesMax(&bcfg, 1)
	err := openRefused(t, bcfg)
	checkNames(t, err, "supports rules up to version 1", "rules version is 2", "run a djinn binary")
}

// A follower whose binary supports less meets the raising entry: it stops
// applying, steps out (no vote, no leading), says why in its status and
// health, and its data directory refuses that binary at the next start.
// The newer binary takes it up again.
func TestRules_AFollowerSupportingLessStopsAtTheRaise(t *testing.T) {
	t.Parallel()
	acfg := servertest.Config(t)
	acfg.Listen, acfg.Raft = freeAddr(t), freeAddr(t)
	server.SetRulesMax(&acfg, 1)
	a := servertest.Start(t, acfg)
	bcfg := servertest.JoinConfig(t, a)
	bcfg.Listen, bcfg.Raft = freeAddr(t), freeAddr(t)
	server.SetRulesMax(&bcfg, 1)
	b := servertest.Start(t, bcfg)
	cfgs := map[*server.Server]server.Config{a: acfg, b: bcfg}
	servertest.Eventually(t, "both members voters", func() bool {
		ms, err := b.Node().Members()
		return err == nil && len(ms) == 2 && ms[0].Voter && ms[1].Voter
	})

	// The leader's binary is upgraded in place; the raise commits on a
	// quorum (both); the follower meets it as it applies. Should
	// leadership move while the raise is proposed (an election on a busy
	// machine), the proposal fails and may or may not have committed: it
	// is proposed again through whoever leads until the follower met it.
	l := servertest.ServingLeader(t, a, b)
	f := servertest.Others([]*server.Server{a, b}, l)[0]
	fcfg := cfgs[f]
	server.UpgradeRules(l, 2)
	adminF := djinnpb.NewAdminClient(servertest.Conn(t, f.Addr()))
	servertest.Eventually(t, "the raise to rules version 2 committed", func() bool {
		if st, err := servertest.Status(adminF); err == nil && st.GetStopped() != "" {
			return true
		}
		leader := servertest.Leader(a, b)
		if leader == nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), servertest.Timeout)
		defer cancel()
		if err := server.ProposeRaise(ctx, leader, 2); err != nil {
			t.Logf("raise through %s: %v", leader.NodeID(), err)
			return false
		}
		return true
	})
	// The machine stops as it applies the raise, and its status says why
	// from then on; the member steps out (records the version, closes its
	// Raft node) after that, in a goroutine of its own: wait for both.
	servertest.Eventually(t, "the follower stopped, saying why, and stepped out", func() bool {
		st, err := servertest.Status(adminF)
		return err == nil && st.GetStopped() != "" && st.GetState() == "Shutdown"
	})
	st, _ := servertest.Status(adminF)
	checkNames(t, errors.New(st.GetStopped()), "rules version is 2", "up to version 1", "run a djinn binary")
	if st.GetRulesVersion() != 1 {
		t.Errorf("stopped follower: rules %d; want 1", st.GetRulesVersion())
	}
	resp, err := http.Get(f.AdminURL() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "rules version is 2") {
		t.Errorf("/healthz of the stopped follower: %d %q", resp.StatusCode, body)
	}
	code, v := consoleGet(t, f, "/api/view/cluster")
	if stopped, _ := v["stopped"].(string); code != http.StatusOK || !strings.Contains(stopped, "rules version is 2") ||
		v["rulesVersion"] != float64(1) || v["rulesMax"] != float64(1) {
		t.Errorf("console's cluster view of the stopped follower: %d stopped %q, rules %v up to %v; want why, 1 up to 1", code, v["stopped"], v["rulesVersion"], v["rulesMax"])
	}

	// Restarted with the same binary, it is refused at the start.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	err = openRefused(t, fcfg)
	checkNames(t, err, "data directory "+fcfg.DataDir, "rules version is 2", "up to version 1", "run a djinn binary")
	if !replica.IsRefusal(err) || strings.Contains(err.Error(), "repair") {
		t.Errorf("the refusal %q is not a refusal or advises a repair", err)
	}

	// With a binary supporting 2 it applies the raise and goes on.
	server.SetRulesMax(&fcfg, 2)
	f = servertest.Open(t, fcfg)
	adminF = djinnpb.NewAdminClient(servertest.Conn(t, f.Addr()))
	servertest.EventuallyWithin(t, servertest.Failover, "the follower applying at rules version 2", func() bool {
		st, err := servertest.Status(adminF)
		return err == nil && st.GetRulesVersion() == 2 && st.GetStopped() == "" && st.GetLeaderId() != ""
	})
}

func TestRules_ADataDirectoryAtAHigherVersionIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	server.SetRulesMax(&cfg, 2)
	s := servertest.Start(t, cfg)
	if err := s.Node().Snapshot(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	older := cfg
	server.SetRulesMax(&older, 1)
	for _, tc := range []struct {
		name, where string
		prepare     func(t *testing.T)
	}{
		{"by the version its log reached", "data directory " + cfg.DataDir, func(*testing.T) {}},
		{"by its snapshot's version", "snapshot", func(t *testing.T) {
			if err := os.Remove(filepath.Join(cfg.DataDir, server.RulesFileName)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.prepare(t)
			err := openRefused(t, older)
			checkNames(t, err, tc.where, "rules version is 2", "up to version 1", "run a djinn binary that supports rules version 2")
			if !replica.IsRefusal(err) || strings.Contains(err.Error(), "repair") {
				t.Errorf("the refusal %q is not a refusal or advises a repair", err)
			}
		})
	}
	// The binary that supports it starts on it.
	s = servertest.Start(t, cfg)
	if st, err := servertest.Status(djinnpb.NewAdminClient(servertest.Conn(t, s.Addr()))); err != nil || st.GetRulesVersion() != 2 {
		t.Fatalf("restarted at rules %d, %v; want 2", st.GetRulesVersion(), err)
	}
}

// A snapshot file saved from a cluster at a rules version above this
// binary's is refused by djinn snapshot restore, before it seeds anything.
func TestRules_ASnapshotFileAtAHigherVersionIsRefusedByRestore(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	server.SetRulesMax(&cfg, state.MaxRules()+1)
	s := servertest.Start(t, cfg)
	path, _ := saveFile(t, servertest.Dial(t, s.Addr(), servertest.Operator(t, s)))
	dir := filepath.Join(t.TempDir(), "restored")
	_, err := server.RestoreSnapshot(path, dir)
	if err == nil {
		t.Fatal("restored")
	}
	newer := state.MaxRules() + 1
	checkNames(t, err, path, fmt.Sprintf("rules version is %d", newer), fmt.Sprintf("up to version %d", state.MaxRules()),
		fmt.Sprintf("run a djinn binary that supports rules version %d", newer))
	if _, serr := os.Stat(filepath.Join(dir, "restore.snap")); serr == nil {
		t.Error("the refused snapshot was left to restore")
	}
}
