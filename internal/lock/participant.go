package lock

import (
	"context"
	"crypto/subtle"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The lock service as a transaction participant (TX.2.6): it votes
// PREPARED for a transaction that locked here (its locks are held until
// the outcome, strict two-phase locking), ABORTED for one with a lock
// request still waiting (an operation under way, which TX.2.6 lets a
// participant wait for or abort: it may wait without end, and a grant
// after the vote would be a lock taken in the second phase, CC 1.4),
// NOTCHANGED otherwise; commit passes a nested transaction's locks to its
// parent and drops a top-level one's; abort drops them and refuses its
// waiting requests with TransactionRolledBack. An ABORTED vote is kept in
// the replicated state until the manager has decided (votes.go).

func unknownTxn(id uint64) error {
	return djinn.Errorf(djinn.UnknownTransaction, "transaction %d: unknown here (or not with that secret)", id)
}

// votedAborted is the error of a lock request under a transaction the
// service voted ABORTED: for it, the transaction is over (TX.2.6).
func votedAborted(id uint64) error {
	return djinn.Errorf(djinn.TransactionRolledBack, "transaction %d: rolled back here: the lock service voted it ABORTED when its manager asked it to prepare while a lock request of it still waited; start a new transaction", id)
}

// checkSecret refuses, as UnknownTransaction, a call on transaction k
// whose secret is not the one its lock requests (or its manager's
// prepare, for a vote kept) presented. A transaction no request named
// with a secret is not checked.
func (s *Service) checkSecret(k TxnKey, id uint64, secret djinn.ID) error {
	if known, ok := s.state.TxnSecret(k); ok && subtle.ConstantTimeCompare(known[:], secret[:]) != 1 {
		return unknownTxn(id)
	}
	return nil
}

// Prepare votes, for the manager that presents the transaction's secret.
// A transaction voted ABORTED gets that vote again, from any leader.
func (s *Service) Prepare(ctx context.Context, mgr *djinnpb.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	if err := s.leading(); err != nil {
		return 0, err
	}
	k := TxnKeyOf(mgr, id)
	if err := s.checkSecret(k, id, secret); err != nil {
		return 0, err
	}
	// A request after the vote asks the manager to join again, which
	// refuses a transaction no longer ACTIVE (CannotJoin): no lock is
	// taken in the second phase (CC 1.4).
	s.mu.Lock()
	delete(s.joined, k)
	_, unkept := s.unkept.by[k]
	s.mu.Unlock()
	if unkept || s.state.VotedAborted(k) {
		return djinnpb.TransactionState_TRANSACTION_STATE_ABORTED, nil
	}
	if s.state.WaitsAny(k) {
		return s.voteAborted(ctx, mgr, id, secret)
	}
	if s.state.HoldsAny(k) {
		return djinnpb.TransactionState_TRANSACTION_STATE_PREPARED, nil
	}
	return djinnpb.TransactionState_TRANSACTION_STATE_NOTCHANGED, nil
}

// voteAborted votes ABORTED for transaction id, rolling it back here
// first: a participant that votes ABORTED is ABORTED (TX.2.6), and the
// manager tells it nothing more (TX.2.7), so its locks go and its waiting
// requests fail TransactionRolledBack now. The same log entry keeps the
// vote, so that a repeated prepare gets it again on any leader.
func (s *Service) voteAborted(ctx context.Context, mgr *djinnpb.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	end := &statepb.LockTxnEnd{Manager: mgr, Txn: id, VotedAborted: s.state.KeepsVotes()}
	if end.VotedAborted && !secret.IsZero() {
		end.Secret = secret[:]
	}
	if _, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: s.now().UnixNano(), Op: &statepb.Command_LockTxnEnd{LockTxnEnd: end}}); err != nil {
		return 0, err
	}
	if !end.VotedAborted {
		// Not kept in the state: this leader remembers it, as a
		// leader did before rules version 2.
		s.mu.Lock()
		s.unkept.keep(TxnKeyOf(mgr, id), "", djinn.ID{}, 0)
		s.mu.Unlock()
	}
	return djinnpb.TransactionState_TRANSACTION_STATE_ABORTED, nil
}

// End applies the transaction's outcome, told by the manager that
// presents its secret; it forgets an ABORTED vote kept.
func (s *Service) End(ctx context.Context, mgr *djinnpb.Ref, id uint64, secret djinn.ID, commit bool) error {
	if err := s.leading(); err != nil {
		return err
	}
	if err := s.checkSecret(TxnKeyOf(mgr, id), id, secret); err != nil {
		return err
	}
	_, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LockTxnEnd{LockTxnEnd: &statepb.LockTxnEnd{Manager: mgr, Txn: id, Commit: commit}}})
	if err == nil {
		s.mu.Lock()
		delete(s.joined, TxnKeyOf(mgr, id))
		s.unkept.forget(TxnKeyOf(mgr, id))
		s.mu.Unlock()
	}
	return err
}

// PrepareAndCommit is prepare and, when PREPARED, commit.
func (s *Service) PrepareAndCommit(ctx context.Context, mgr *djinnpb.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	v, err := s.Prepare(ctx, mgr, id, secret)
	if err != nil || v != djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
		return v, err
	}
	if err := s.End(ctx, mgr, id, secret, true); err != nil {
		return 0, err
	}
	return djinnpb.TransactionState_TRANSACTION_STATE_COMMITTED, nil
}

// checkVotes asks the manager of each ABORTED vote kept VoteCheck or more
// whether the transaction is decided, and forgets the votes of those that
// are: a manager asks prepare only while its transaction is ACTIVE or
// VOTING (TX.2.7). A decided state, UnknownTransaction (the manager has
// forgotten it) or NoSuchObject (no such manager) is decided; any other
// failure is asked again next time, and the manager's other votes wait
// for it.
func (s *Service) checkVotes(ctx context.Context) {
	down := map[[32]byte]bool{}
	for _, v := range s.state.VotesBefore(s.now().Add(-s.cfg.VoteCheck).UnixNano()) {
		k := TxnKeyOf(v.Manager, v.Txn)
		if down[k.Manager] || ctx.Err() != nil {
			continue
		}
		decided, err := s.decided(ctx, v)
		if err != nil {
			down[k.Manager] = true
			s.cfg.Logger.Info("lock: asking a transaction manager about an ABORTED vote failed; asking again later", "manager", v.Manager.GetEndpoint(), "txn", v.Txn, "err", err)
			continue
		}
		if !decided {
			continue
		}
		if _, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LockTxnEnd{LockTxnEnd: &statepb.LockTxnEnd{Manager: v.Manager, Txn: v.Txn}}}); err != nil {
			s.cfg.Logger.Warn("lock: forgetting an ABORTED vote failed", "txn", v.Txn, "err", err)
			return
		}
	}
}

// decided asks v's manager whether v's transaction is decided.
func (s *Service) decided(ctx context.Context, v Vote) (bool, error) {
	mgr, err := wire.RefStored("transaction manager", v.Manager)
	if err != nil {
		return false, err // kept, within maxAbortedVotes
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := s.cfg.Joiner.GetState(cctx, mgr, v.Txn, v.Secret)
	if err == nil {
		return st != djinnpb.TransactionState_TRANSACTION_STATE_ACTIVE && st != djinnpb.TransactionState_TRANSACTION_STATE_VOTING, nil
	}
	switch djinn.KindOf(err) {
	case djinn.UnknownTransaction, djinn.NoSuchObject:
		return true, nil
	}
	return false, err
}
