package txn

import (
	"context"
	"crypto/subtle"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Transactions nested in another manager's (TX.2.2, TX.2.7). This manager
// joins the parent as a participant — its nest participant, NestID — when
// it creates the nested transaction; when that transaction commits, it
// promotes the participants that voted PREPARED into the parent, at the
// parent's manager, before recording COMMITTED, and then tells them to
// roll forward into the parent. The nest participant itself holds no
// changes: asked to prepare the parent, it completes the transactions
// nested in it here (an ACTIVE one aborts, a VOTING one is waited for)
// and votes NOTCHANGED; told the parent aborted, it aborts them.

// NestID is the object id of the manager's nest participant.
var NestID = djinn.ID{'t', 'x', 'n', '/', 'n', 'e', 's', 't'}

// NestCrashCount is the nest participant's crash count: the manager's
// state is in the replicated log, so it never loses what it joined.
const NestCrashCount = 1

// Managers calls other transaction managers.
type Managers interface {
	// Join joins p to transaction id of mgr (TX.2.3), presenting its
	// secret, returning mgr's answer: the transaction's ancestors there.
	Join(ctx context.Context, mgr djinn.Ref, id uint64, secret djinn.ID, p *djinnpb.Ref, crash int64) (*djinnpb.JoinTransactionResponse, error)
	// Promote is mgr's promote of transaction id (TX.2.7).
	Promote(ctx context.Context, mgr djinn.Ref, id uint64, secret djinn.ID, parts []*djinnpb.Ref, crashes []int64, drop *djinnpb.Ref) error
}

// nestRef is the reference of the nest participant.
func (s *Service) nestRef() *djinnpb.Ref {
	r := s.self()
	r.Object = NestID
	return wire.Ref(r)
}

// CreateUnder starts a transaction nested in transaction parent of the
// manager mgr (TX.2.2's create(parentMgr, parentID, leaseFor)), whose
// secret the caller presents: this manager's (CreateNested), or another's,
// which it first joins with the secret. The parent's manager's errors pass
// through: UnknownTransaction for a parent it does not know (or not with
// that secret), CannotJoin for one no longer ACTIVE.
func (s *Service) CreateUnder(ctx context.Context, mgr djinn.Ref, parent uint64, parentSecret djinn.ID, d time.Duration) (Created, error) {
	self := s.self()
	if mgr.Service == self.Service && mgr.Object == self.Object {
		return s.CreateNested(ctx, parent, parentSecret, d)
	}
	switch {
	case parent == 0:
		return Created{}, djinn.Errorf(djinn.InvalidArgument, "parent id: missing")
	case d <= 0 && d != djinn.Any:
		return Created{}, djinn.Errorf(djinn.InvalidArgument, "lease duration %s: must be positive, Forever or Any", djinn.FormatDuration(d))
	case s.cfg.Managers == nil:
		return Created{}, djinn.Errorf(djinn.Unsupported, "parent manager %s: nesting under another manager's transaction is not enabled here", mgr)
	}
	if err := djinn.CheckEndpoint(mgr.Endpoint); err != nil {
		return Created{}, djinn.Errorf(djinn.InvalidArgument, "parent manager: %v", err)
	}
	if err := s.leading(); err != nil {
		return Created{}, err
	}
	if _, n := s.state.Len(); n >= s.cfg.MaxActive {
		return Created{}, djinn.Errorf(djinn.LeaseDenied, "transaction manager holds %d active transactions, the most its server allows ([txn] max-active); try again once some complete, or ask the operator to raise it", n)
	}
	resp, err := s.cfg.Managers.Join(ctx, mgr, parent, parentSecret, s.nestRef(), NestCrashCount)
	if err != nil {
		return Created{}, err
	}
	remote := &statepb.TxnRemoteParent{Manager: wire.Ref(mgr), AncestorIds: resp.GetAncestors(), AncestorManagers: resp.GetAncestorManagers()}
	if !parentSecret.IsZero() {
		remote.Secret = parentSecret[:]
	}
	if len(remote.AncestorManagers) == 0 {
		for range remote.AncestorIds {
			remote.AncestorManagers = append(remote.AncestorManagers, remote.Manager)
		}
	}
	if len(remote.AncestorManagers) != len(remote.AncestorIds) {
		return Created{}, djinn.Errorf(djinn.Internal, "parent manager %s answered %d ancestors with %d managers", mgr, len(remote.AncestorIds), len(remote.AncestorManagers))
	}
	if depth := len(remote.AncestorIds) + 1; depth >= s.cfg.MaxDepth {
		return Created{}, djinn.Errorf(djinn.ResourceExhausted, "transaction %d of %s is nested %d deep: at most %d levels", parent, mgr, depth, s.cfg.MaxDepth)
	}
	granted := s.cfg.Lease.Grant(d)
	now := s.now()
	exp := djinn.AddDuration(now, granted)
	cookie, secret := djinn.NewID(), djinn.NewID()
	res, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: now.UnixNano(), Op: &statepb.Command_TxnCreate{TxnCreate: &statepb.TxnCreate{
		Cookie: cookie[:], ExpiresUnixNanos: wire.Nanos(exp), HorizonUnixNanos: s.lessor.Horizon(exp), Principal: principal.From(ctx),
		ParentId: parent, Id: s.newID(), Remote: remote, Secret: secret[:],
	}}})
	if err != nil {
		return Created{}, err
	}
	s.Created.Add(1)
	return Created{ID: res.(Info).ID, Lease: lease.Proto(s.self(), cookie, granted), Secret: secret}, nil
}

// promoteRemote promotes in's PREPARED participants (indexes into
// in.Parts) into its parent at the parent's manager, retrying failures
// that may pass until deadline. ok reports the promotion; stop, that this
// node stopped leading (the next leader votes again).
func (s *Service) promoteRemote(ctx context.Context, in Info, prepared []uint32, deadline time.Time, term <-chan struct{}) (ok, stop bool) {
	mgr, err := wire.RefFrom("parent manager", in.Remote.GetManager())
	if err != nil {
		s.cfg.Logger.Error("transaction: the parent manager's reference is unreadable; aborting", "id", in.ID, "err", err)
		return false, false
	}
	parts := make([]*djinnpb.Ref, len(prepared))
	crashes := make([]int64, len(prepared))
	for i, j := range prepared {
		parts[i], crashes[i] = in.Parts[j].Ref, in.Parts[j].Crash
	}
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		secret, _ := wire.TxnSecret(in.Remote.GetSecret())
		err := s.cfg.Managers.Promote(cctx, mgr, in.RemoteID, secret, parts, crashes, nil)
		cancel()
		switch {
		case err == nil:
			return true, false
		case djinn.IsDefinite(err):
			// CrashCount, CannotJoin, UnknownTransaction: the parent will
			// not take them, so this transaction cannot commit into it.
			s.cfg.Logger.Warn("transaction: the parent manager refused the promotion; aborting", "id", in.ID, "parent", in.RemoteID, "err", err)
			return false, false
		case !s.now().Before(deadline) || ctx.Err() != nil:
			s.cfg.Logger.Warn("transaction: the parent manager stayed unreachable; aborting", "id", in.ID, "parent", in.RemoteID, "err", err)
			return false, false
		}
		t := time.NewTimer(s.backoff(attempt))
		select {
		case <-t.C:
		case <-term:
			t.Stop()
			return false, true
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// NestPrepare is the nest participant's prepare of transaction id of mgr
// (TX.2.6): the transactions nested in it here complete — an ACTIVE one
// aborts, a VOTING one's vote is waited for (until ctx ends: the parent's
// manager asks again) — and the vote is NOTCHANGED, for the participants
// of those that committed were promoted into the parent.
//
// The parent's manager presents the parent's secret: a call without it
// finds no transaction nested here, and changes nothing.
func (s *Service) NestPrepare(ctx context.Context, mgr *djinnpb.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	if err := s.leading(); err != nil {
		return 0, err
	}
	for _, kid := range s.nestedIn(mgr, id, secret) {
		in, err := s.state.Get(kid)
		if err != nil {
			continue // forgotten: long decided
		}
		if in.State == Active {
			if _, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: s.now().UnixNano(), Op: &statepb.Command_TxnDecide{TxnDecide: &statepb.TxnDecide{Id: kid}}}); err != nil &&
				djinn.KindOf(err) != djinn.CannotAbort {
				return 0, err
			}
			continue
		}
		if in.State == Voting {
			s.startVote(kid, true)
		}
		select {
		case <-in.Decided:
		case <-ctx.Done():
			return 0, djinn.Errorf(djinn.Unavailable, "transaction %d nested in %d: still voting", kid, id)
		}
	}
	return NotChanged, nil
}

// NestAbort is the nest participant's abort of transaction id of mgr: the
// transactions nested in it here that are still ACTIVE abort (a VOTING
// one's vote fails to promote into the aborted parent, and aborts too).
func (s *Service) NestAbort(ctx context.Context, mgr *djinnpb.Ref, id uint64, secret djinn.ID) error {
	if err := s.leading(); err != nil {
		return err
	}
	for _, kid := range s.nestedIn(mgr, id, secret) {
		if in, err := s.state.Get(kid); err != nil || in.State != Active {
			continue
		}
		if _, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: s.now().UnixNano(), Op: &statepb.Command_TxnDecide{TxnDecide: &statepb.TxnDecide{Id: kid}}}); err != nil &&
			djinn.KindOf(err) != djinn.CannotAbort {
			return err
		}
	}
	return nil
}

// nestedIn returns the transactions nested here in transaction id of mgr
// whose parent's secret — presented when this manager joined it — is
// secret.
func (s *Service) nestedIn(mgr *djinnpb.Ref, id uint64, secret djinn.ID) []uint64 {
	var out []uint64
	for _, kid := range s.state.NestedIn(mgr, id) {
		in, err := s.state.Get(kid)
		if err != nil {
			continue
		}
		if got, _ := wire.TxnSecret(in.Remote.GetSecret()); subtle.ConstantTimeCompare(got[:], secret[:]) == 1 {
			out = append(out, kid)
		}
	}
	return out
}
