package server

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/proto/statepb"
)

// AccessOf returns the access kind of every RPC s serves, by full method
// name: what the gRPC server registered, each with the rule it was
// registered under. The authorization matrix test drives every one.
func AccessOf(s *Server) map[string]Access {
	out := make(map[string]Access, len(s.rules))
	for m, r := range s.rules {
		out[m] = r.Access
	}
	return out
}

// LeaderOwned returns the RPCs of s under an Owner rule whose hook decides
// by a resource the serving leader alone answers for (not AnyMember).
func LeaderOwned(s *Server) map[string]bool {
	out := map[string]bool{}
	for m, r := range s.rules {
		if r.Access == Owner && !r.AnyMember {
			out[m] = true
		}
	}
	return out
}

// SessionMethods returns the unary RPCs s serves in a session
// (djinn.v1.Session/Open), by full method name.
func SessionMethods(s *Server) map[string]bool {
	out := make(map[string]bool, len(s.sessionMethods))
	for m := range s.sessionMethods {
		out[m] = true
	}
	return out
}

// SetRulesMax makes a server opened with cfg support rules versions up to
// v, as a binary of another release would: tests of upgrades run members
// of several releases in one process.
func SetRulesMax(cfg *Config, v uint32) { cfg.Cluster.rulesMax = v }

// SetLockTiming makes the lock service of a server opened with cfg wait
// grace, as it starts leading, for the callers of requests left waiting
// by an earlier leader (lock.Config.Grace), and then ask the managers of
// its ABORTED votes whether they have decided every voteCheck
// (lock.Config.VoteCheck), instead of the defaults' ten seconds and a
// minute: tests of the check run in real time.
func SetLockTiming(cfg *Config, grace, voteCheck time.Duration) {
	cfg.Lock.grace, cfg.Lock.voteCheck = grace, voteCheck
}

// TxnVisits returns the transactions s's transaction manager's listings
// looked at so far, and the most one looked at with its state locked
// once (txn.State.ListVisits).
func TxnVisits(s *Server) (visited, heldMost int) { return s.txnSt.ListVisits() }

// RulesFileName is the data directory's record of the rules version the
// log reached.
const RulesFileName = rulesFileName

// UpgradeRules makes s's binary support rules up to v, as if it had been
// upgraded in place, without a restart.
func UpgradeRules(s *Server, v uint32) { s.machine.SetMaxRules(v) }

// ProposeRaise proposes, through s, raising the cluster's rules version
// to v at once, whatever the other members support: what a member meets
// when it was restarted with an older binary as the raise was made.
func ProposeRaise(ctx context.Context, s *Server, v uint32) error {
	_, err := s.node.Propose(ctx, &statepb.Command{Op: &statepb.Command_RulesRaise{RulesRaise: &statepb.RulesRaise{Version: v}}})
	return err
}

// Propose proposes cmd through s as it is, unchecked: an entry a binary
// of before wrote, replayed as written.
func Propose(ctx context.Context, s *Server, cmd *statepb.Command) (any, error) {
	return s.node.Propose(ctx, cmd)
}

// ManagerIsLocal reports whether s's own participants (its key/value
// store) call the transaction manager mgr in process, not over the
// connection pool.
func ManagerIsLocal(s *Server, mgr djinn.Ref) bool {
	return managers{s: s}.local(participant.Tx{Manager: mgr})
}

// JoinsLapsing names the services whose registrations s could not all
// cancel when it closed: they lapse with their leases.
func JoinsLapsing(s *Server) []string {
	s.joins.mu.Lock()
	defer s.joins.mu.Unlock()
	return slices.Clone(s.joins.lapsing)
}

// PoolFollows reports whether s's connection pool follows the djinn
// cluster whose service id is svc: references to its services reach any
// member.
func PoolFollows(s *Server, svc djinn.ID) bool { return s.pool.Follows(svc) }

// OtherManagers returns the calls the lock service and the nest
// participant make to transaction managers of other processes
// (otherManagers), over conns (the server's pool, or a test's), as
// participant.Managers.
func OtherManagers(conns client.Learner) participant.Managers {
	return otherManagersOf{otherManagers{pool: conns, log: slog.New(slog.DiscardHandler)}}
}

type otherManagersOf struct{ o otherManagers }

func (m otherManagersOf) Join(ctx context.Context, tx participant.Tx, self djinn.Ref, crash int64) ([]participant.Tx, error) {
	resp, err := m.o.Join(ctx, tx.Manager, tx.ID, tx.Secret, client.RefToProto(self), crash)
	if err != nil {
		return nil, err
	}
	return participant.AncestorsFromProto(tx, resp)
}

func (m otherManagersOf) GetState(ctx context.Context, tx participant.Tx) (participant.State, error) {
	st, err := m.o.GetState(ctx, tx.Manager, tx.ID, tx.Secret)
	if err != nil {
		return 0, err
	}
	return participant.StateFromProto(st), nil
}
