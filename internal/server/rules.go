package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The cluster's rules version (internal/state/rules.go) as a server keeps
// it: each member's binary supports versions up to a maximum, which the
// log records in its Member record; the leader raises the cluster's
// version once every member supports more; a member that meets a version
// above its maximum stops applying and steps out of the cluster, and its
// data directory remembers the version, so that the binary is refused at
// its next start too.

// rulesFileName, in the data directory, holds the highest rules version
// the node's log reached. A start whose binary supports less is refused
// before the log is read. (A log that reached it moments before a crash,
// before the file was written, is refused as the replay reaches it.)
const rulesFileName = "rules-version"

// readRulesFile returns the version in dataDir's rules file, 0 if none.
func readRulesFile(dataDir string) (uint32, error) {
	path := filepath.Join(dataDir, rulesFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s: not a rules version (%q): write the version the log reached, or remove the file to have the log's replay find it", path, strings.TrimSpace(string(b)))
	}
	return uint32(v), nil
}

// writeRulesFile records v as the version dataDir's log reached.
func writeRulesFile(dataDir string, v uint32) error {
	path := filepath.Join(dataDir, rulesFileName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatUint(uint64(v), 10)+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// checkRules refuses a data directory whose log reached a rules version
// above the highest this binary supports.
func checkRules(dataDir string, max uint32) error {
	v, err := readRulesFile(dataDir)
	if err != nil {
		return err
	}
	if v > max {
		return &state.RulesError{Version: v, Max: max, Where: "data directory " + dataDir}
	}
	return nil
}

// watchRules records each rules version the machine reaches in the data
// directory, and steps this member out once the machine stops.
func (s *Server) watchRules() {
	written, _ := readRulesFile(s.cfg.DataDir)
	for {
		changed := s.machine.RulesChanged()
		if v := s.machine.Rules(); v > written {
			if err := writeRulesFile(s.cfg.DataDir, v); err != nil {
				s.log.Warn("recording the rules version in the data directory failed", "err", err, "version", v)
			} else {
				written = v
			}
		}
		select {
		case <-changed:
		case <-s.machine.Stopped():
			s.stepOut()
			return
		case <-s.stop:
			return
		}
	}
}

// stepOut takes this member out of the cluster's work once its machine
// stopped applying: it neither votes nor leads nor serves, and says why
// in its status and health until it is stopped and started with a binary
// that supports the cluster's rules.
func (s *Server) stepOut() {
	err := s.machine.Refusal()
	s.log.Error("stopped applying the log; this member steps out of the cluster", "err", err)
	var re *state.RulesError
	if errors.As(err, &re) {
		if werr := writeRulesFile(s.cfg.DataDir, re.Version); werr != nil {
			s.log.Warn("recording the rules version in the data directory failed", "err", werr, "version", re.Version)
		}
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if cerr := s.node.Close(); cerr != nil {
		s.log.Warn("stopping the raft node", "err", cerr)
	}
}

// stoppedReason is why this member stopped applying, "" while it applies.
func (s *Server) stoppedReason() string {
	if err := s.machine.Refusal(); err != nil {
		return err.Error()
	}
	return ""
}

// tendRules is leader work: it keeps the log's record of what each member
// supports current, and raises the cluster's rules version with one entry
// once every member supports a higher one — never above the lowest.
func (s *Server) tendRules(ctx context.Context, ms []replica.Member) {
	own, cur := s.machine.MaxRules(), s.machine.Rules()
	low, probed := own, map[string]bool{}
	for _, m := range ms {
		info, _ := s.machine.Member(m.ID)
		if info.RulesMax < own {
			// Behind this leader, or not yet known: ask it again (a
			// member restarted with a newer binary says so).
			if got, ok := s.probeRules(ctx, m.ID, info); ok {
				info.RulesMax = got
				probed[m.ID] = true
			}
		}
		low = min(low, max(info.RulesMax, 1))
	}
	if low <= cur {
		return
	}
	// Before raising, every member confirms it still supports low: one
	// restarted with an older binary since it was recorded, or one that
	// does not answer, holds it back.
	for _, m := range ms {
		if probed[m.ID] {
			continue
		}
		info, _ := s.machine.Member(m.ID)
		if got, ok := s.probeRules(ctx, m.ID, info); !ok || got < low {
			return
		}
	}
	_, err := s.node.Propose(ctx, &statepb.Command{Op: &statepb.Command_RulesRaise{RulesRaise: &statepb.RulesRaise{Version: low}}})
	if err != nil {
		s.log.Warn("raising the rules version failed; retrying", "err", err, "version", low)
		return
	}
	s.log.Info("rules version raised: every member supports it", "from", cur, "to", low)
}

// probeRules asks a member for the highest rules version its binary
// supports and records it when the log says otherwise. It returns what
// the member said, and false when it did not answer.
func (s *Server) probeRules(ctx context.Context, node string, info state.MemberInfo) (uint32, bool) {
	st, err := s.memberStatus(ctx, &djinnpb.Member{NodeId: node, GrpcAddress: info.Endpoint})
	if err != nil || st.GetRulesMax() == 0 {
		return 0, false
	}
	got := st.GetRulesMax()
	if got != info.RulesMax && info.Endpoint != "" {
		rec := &statepb.Member{NodeId: node, GrpcAddress: info.Endpoint, Voter: info.Voter, RulesMax: got}
		if err := s.recordMember(ctx, rec); err != nil {
			s.log.Warn("recording a member's rules version failed", "node", node, "err", err)
		}
	}
	return got, true
}

// checkJoinRules refuses a joining binary that supports less than the
// cluster's rules version: it would stop at its first entry.
func (s *Server) checkJoinRules(node string, rulesMax uint32) error {
	if cur := s.machine.Rules(); max(rulesMax, 1) < cur {
		return djinn.Errorf(djinn.Unsupported, "node %s: its binary supports rules up to version %d but the cluster's rules version is %d: run a djinn binary that supports rules version %d on it",
			node, max(rulesMax, 1), cur, cur)
	}
	return nil
}
