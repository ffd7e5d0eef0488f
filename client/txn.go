package client

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TransactionState is a transaction's state, or a participant's vote
// (TX.2.4's TransactionConstants).
type TransactionState int32

// The states and votes (TX.2.4). The zero value is no state: a
// participant that has not voted yet.
const (
	TxnActive     = TransactionState(djinnpb.TransactionState_TRANSACTION_STATE_ACTIVE)
	TxnVoting     = TransactionState(djinnpb.TransactionState_TRANSACTION_STATE_VOTING)
	TxnPrepared   = TransactionState(djinnpb.TransactionState_TRANSACTION_STATE_PREPARED)
	TxnNotChanged = TransactionState(djinnpb.TransactionState_TRANSACTION_STATE_NOTCHANGED)
	TxnCommitted  = TransactionState(djinnpb.TransactionState_TRANSACTION_STATE_COMMITTED)
	TxnAborted    = TransactionState(djinnpb.TransactionState_TRANSACTION_STATE_ABORTED)
)

var stateNames = [...]string{"", "ACTIVE", "VOTING", "PREPARED", "NOTCHANGED", "COMMITTED", "ABORTED"}

// String returns the state's name as TX.2.4 spells it ("COMMITTED"), or
// "NONE" for the zero value.
func (s TransactionState) String() string {
	switch {
	case s == 0:
		return "NONE"
	case s > 0 && int(s) < len(stateNames):
		return stateNames[s]
	}
	return "TransactionState(" + strconv.Itoa(int(s)) + ")"
}

// valid reports whether s is one of TX.2.4's constants.
func (s TransactionState) valid() bool { return s >= TxnActive && s <= TxnAborted }

// TransactionManager is a client of a two-phase-commit transaction manager
// (TX.2.1's TransactionManager). Its methods take a transaction id; the
// same calls on a *Transaction pass it for you, which rules out sending an
// id to the wrong manager (TX.3.3). It is safe for concurrent use and holds
// no connection of its own: calls go through its Connector.
//
// It is also TX.2.2's NestableTransactionManager: CreateNested starts a
// transaction nested in one of the same manager, CreateNestedIn one nested
// in a transaction of any manager. A server that does not nest answers
// with djinn.ErrUnsupported.
type TransactionManager struct {
	c   Connector
	ref djinn.Ref
}

// NewTransactionManager returns a client for the transaction manager named
// by ref, reached at ref's endpoint. ref must name the manager (service and
// object ids), not only where it is: the transactions it creates are equal
// when their managers' references are (TX.3.3). A ref that names nothing
// makes every call fail with djinn.ErrInvalidArgument.
func NewTransactionManager(c Connector, ref djinn.Ref) *TransactionManager {
	return &TransactionManager{c: c, ref: ref}
}

// TransactionManager returns a client for the transaction manager of the
// server c is dialled to, as its Status names it, reached at the dialled
// address (every member of a cluster names the same manager, and a
// follower points calls at the leader). A server that does not run the
// manager gives djinn.ErrUnsupported; one still starting, that has no
// cluster service id yet, djinn.ErrUnavailable.
func (c *Client) TransactionManager(ctx context.Context) (*TransactionManager, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	return st.TransactionManager()
}

// Ref returns the manager's reference.
func (m *TransactionManager) Ref() djinn.Ref { return m.ref }

// Equal reports whether m and o are the same manager: their references are
// equal, wherever they are reached.
func (m *TransactionManager) Equal(o *TransactionManager) bool {
	if m == nil || o == nil {
		return m == o
	}
	return m.ref.Equal(o.ref)
}

// String names the manager by its reference.
func (m *TransactionManager) String() string { return "transaction manager " + m.ref.String() }

func (m *TransactionManager) client() (djinnpb.TransactionManagerClient, error) {
	if m.c == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "connector: missing")
	}
	if m.ref.Service.IsZero() || m.ref.Object.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "transaction manager %s: names no object (zero service or object id)", m.ref)
	}
	cc, err := ConnFor(m.c, m.ref)
	if err != nil {
		return nil, err
	}
	return djinnpb.NewTransactionManagerClient(cc), nil
}

// Create starts a top-level transaction, ACTIVE, leased for leaseFor
// (TX.2.1's create, TX.3.2's TransactionFactory.create): positive,
// djinn.Forever or djinn.Any; the manager may grant less or refuse with
// djinn.ErrLeaseDenied. The transaction's Lease is a normal lease: renew
// it while the work goes on; cancelling it, or letting it expire, aborts
// the transaction.
func (m *TransactionManager) Create(ctx context.Context, leaseFor time.Duration) (*Transaction, error) {
	return m.create(ctx, nil, leaseFor)
}

// CreateNested starts a transaction nested in transaction parent of this
// manager, whose secret the caller presents (TX.2.2's
// NestableTransactionManager.create with this manager as the parent's),
// ACTIVE, leased for leaseFor as Create's. The nested transaction's work
// becomes its parent's when it commits, and is undone if the parent
// aborts. A parent the manager does not know — or not with that secret —
// gives djinn.ErrUnknownTransaction; one no longer ACTIVE,
// djinn.ErrCannotJoin; one nested as deep as the manager allows,
// djinn.ErrResourceExhausted. The returned transaction IsNested, with
// Parent m.TransactionOf(parent, parentSecret).
func (m *TransactionManager) CreateNested(ctx context.Context, parent uint64, parentSecret djinn.ID, leaseFor time.Duration) (*Transaction, error) {
	if parent == 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "parent transaction id 0: want a transaction id, from 1")
	}
	return m.create(ctx, m.TransactionOf(parent, parentSecret), leaseFor)
}

// CreateNestedIn starts, at this manager, a transaction nested in parent,
// a transaction of this manager or of another (TX.2.2's
// NestableTransactionManager.create(parentMgr, parentID, leaseFor)). With
// another manager, this one joins the parent as a participant first, and
// when the nested transaction commits it promotes its participants into
// the parent (TX.2.7); the parent's manager's answers pass through:
// djinn.ErrUnknownTransaction for a parent it does not know,
// djinn.ErrCannotJoin for one no longer ACTIVE. The returned transaction
// IsNested, with Parent parent.
func (m *TransactionManager) CreateNestedIn(ctx context.Context, parent *Transaction, leaseFor time.Duration) (*Transaction, error) {
	if parent == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "parent transaction: missing (nil)")
	}
	return m.create(ctx, parent, leaseFor)
}

// create starts a transaction, nested in parent (of any manager) when
// parent is not nil.
func (m *TransactionManager) create(ctx context.Context, parent *Transaction, leaseFor time.Duration) (*Transaction, error) {
	if err := djinn.CheckLeaseDuration("lease duration", leaseFor); err != nil {
		return nil, err
	}
	mc, err := m.client()
	if err != nil {
		return nil, err
	}
	req := &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(leaseFor)}
	if parent != nil {
		req.ParentManager, req.ParentId, req.ParentSecret = RefToProto(parent.mgr.ref), parent.id, wire.TxnSecretBytes(parent.secret)
	}
	sent := time.Now()
	pb, err := mc.Create(ctx, req)
	if err != nil {
		return nil, err
	}
	tx, err := m.created(pb, sent)
	if err != nil {
		return nil, err
	}
	tx.parent = parent
	return tx, nil
}

// created converts Create's answer to a request sent at sent.
func (m *TransactionManager) created(pb *djinnpb.CreatedTransaction, sent time.Time) (*Transaction, error) {
	if pb.GetId() == 0 {
		return nil, djinn.Errorf(djinn.Internal, "created transaction id: missing")
	}
	if pb.GetManager() != nil {
		got, err := RefFromProto("created transaction manager", pb.GetManager())
		if err != nil {
			return nil, err
		}
		if !got.Equal(m.ref) {
			return nil, djinn.Errorf(djinn.Internal, "created transaction manager %s: asked %s", got, m.ref)
		}
	}
	l, err := LeaseFromProto(pb.GetLease(), sent)
	if err != nil {
		return nil, err
	}
	secret, err := secretFromProto("created transaction secret", pb.GetSecret())
	if err != nil {
		return nil, err
	}
	return &Transaction{mgr: m, id: pb.GetId(), secret: secret, lease: l}, nil
}

// Transaction returns the transaction id of this manager, by its id alone:
// for its creator to commit, abort or describe it (those are its
// principal's). Joining it, asking its state and nesting in it take its
// secret too (TransactionOf). It makes no remote call, so the transaction
// need not exist; its Lease is nil, and it does not know its parent
// (IsNested is false even if the manager nested it: Describe tells).
func (m *TransactionManager) Transaction(id uint64) *Transaction {
	return &Transaction{mgr: m, id: id}
}

// TransactionOf returns transaction id of this manager with its secret,
// the capability to work under it, as TX.3.3's ServerTransaction
// constructor: for a participant given the transaction (a Token, or the
// metadata WithTransaction sends), or a program that stored it. It makes
// no remote call; see Transaction.
func (m *TransactionManager) TransactionOf(id uint64, secret djinn.ID) *Transaction {
	return &Transaction{mgr: m, id: id, secret: secret}
}

// Join adds participant to transaction id (TX.2.3), presenting its secret,
// under its crash count:
// the version of the participant's storage that holds the transaction's
// state. Participants call it the first time they do work under a
// transaction, and should fail that work if Join fails. A repeated join
// with the same crash count is accepted and ignored; with another one it
// fails with djinn.ErrCrashCount and the transaction aborts. A transaction
// that is no longer ACTIVE gives djinn.ErrCannotJoin; one the manager does
// not know, or not with that secret, djinn.ErrUnknownTransaction.
func (m *TransactionManager) Join(ctx context.Context, id uint64, secret djinn.ID, participant djinn.Ref, crashCount int64) error {
	mc, err := m.client()
	if err != nil {
		return err
	}
	_, err = mc.Join(ctx, &djinnpb.JoinTransactionRequest{Id: id, Participant: RefToProto(participant), CrashCount: crashCount, Secret: wire.TxnSecretBytes(secret)})
	return err
}

// GetState returns transaction id's state (TX.2.7), for a caller that
// presents its secret: ACTIVE, VOTING, COMMITTED, ABORTED (also for an
// ACTIVE transaction whose lease ended), or NOTCHANGED.
// djinn.ErrUnknownTransaction means the manager never knew it, has
// forgotten it, or not with that secret: for a participant recovering a
// PREPARED record, that means ABORTED (TX.2.8.1).
func (m *TransactionManager) GetState(ctx context.Context, id uint64, secret djinn.ID) (TransactionState, error) {
	mc, err := m.client()
	if err != nil {
		return 0, err
	}
	resp, err := mc.GetState(ctx, &djinnpb.TransactionRequest{Id: id, Secret: wire.TxnSecretBytes(secret)})
	if err != nil {
		return 0, err
	}
	st := TransactionState(resp.GetState())
	if !st.valid() {
		return 0, djinn.Errorf(djinn.Internal, "transaction %d: manager answered %s, not a transaction state", id, st)
	}
	return st, nil
}

// Commit commits transaction id (TX.2.5's one-parameter commit): it
// returns once the transaction is COMMITTED, or was already. A transaction
// that aborts, or had aborted, gives djinn.ErrCannotCommit; one the manager
// does not know (a wrong id, or completed and forgotten),
// djinn.ErrUnknownTransaction. The participants may not all have been told
// yet when it returns: CommitWait waits for that.
func (m *TransactionManager) Commit(ctx context.Context, id uint64) error {
	return m.complete(ctx, id, nil, true)
}

// CommitWait commits transaction id as Commit does, then waits up to
// waitFor (not negative) until every participant has been told the outcome
// (TX.2.5's commit with waitFor). If waitFor passes first it fails with
// djinn.ErrTimeoutExpired, and the *djinn.Error's Committed field says
// whether the transaction committed (with this method, true):
//
//	var de *djinn.Error
//	if errors.As(err, &de) && de.Kind == djinn.TimeoutExpired && de.Committed { … }
//
// waitFor is the manager's wait, part of the protocol; ctx still bounds
// the whole call.
func (m *TransactionManager) CommitWait(ctx context.Context, id uint64, waitFor time.Duration) error {
	return m.complete(ctx, id, &waitFor, true)
}

// Abort aborts transaction id (TX.2.5's one-parameter abort): it returns
// once the transaction is ABORTED, or was already. A transaction that had
// committed gives djinn.ErrCannotAbort; one the manager does not know,
// djinn.ErrUnknownTransaction.
func (m *TransactionManager) Abort(ctx context.Context, id uint64) error {
	return m.complete(ctx, id, nil, false)
}

// AbortWait aborts transaction id as Abort does, then waits up to waitFor
// until every participant has been told, as CommitWait does.
func (m *TransactionManager) AbortWait(ctx context.Context, id uint64, waitFor time.Duration) error {
	return m.complete(ctx, id, &waitFor, false)
}

func (m *TransactionManager) complete(ctx context.Context, id uint64, waitFor *time.Duration, commit bool) error {
	req := &djinnpb.CompleteTransactionRequest{Id: id}
	if waitFor != nil {
		if *waitFor < 0 {
			return djinn.Errorf(djinn.InvalidArgument, "waitFor %s: negative", *waitFor)
		}
		n := int64(*waitFor)
		req.WaitForNanos = &n
	}
	mc, err := m.client()
	if err != nil {
		return err
	}
	if commit {
		_, err = mc.Commit(ctx, req)
	} else {
		_, err = mc.Abort(ctx, req)
	}
	return err
}

// TransactionDescription is what a manager knows of a transaction, for
// operators (Describe).
type TransactionDescription struct {
	ID    uint64
	State TransactionState
	// Parent is the id of the transaction this one is nested in (TX.2.2),
	// 0 for a top-level transaction; Children are the ids of the
	// transactions nested in this one.
	Parent   uint64
	Children []uint64
	// ParentManager is the parent's manager when it is another manager
	// (TX.2.2); the zero Ref otherwise.
	ParentManager djinn.Ref
	// Lease is the transaction's lease as the manager holds it, with the
	// time it had left; nil once the lease ended.
	Lease        *Lease
	Participants []ParticipantStatus
}

// ParticipantStatus is a joined participant as the manager sees it.
type ParticipantStatus struct {
	Participant djinn.Ref
	CrashCount  int64
	// Vote is the participant's vote: PREPARED, NOTCHANGED or ABORTED
	// (COMMITTED after prepareAndCommit), zero until it voted.
	Vote TransactionState
	// Notified is whether it was told the outcome, or needs no telling.
	Notified bool
	// LastError is the last failed call to it, nil when none is failing;
	// FailingSince is when its calls started failing.
	LastError    error
	FailingSince time.Time
}

// Describe returns what the manager knows of transaction id: its state,
// its lease and its participants with their votes.
func (m *TransactionManager) Describe(ctx context.Context, id uint64) (*TransactionDescription, error) {
	mc, err := m.client()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	pb, err := mc.Describe(ctx, &djinnpb.TransactionRequest{Id: id})
	if err != nil {
		return nil, err
	}
	return descriptionFrom(pb, sent)
}

func descriptionFrom(pb *djinnpb.TransactionDescription, sent time.Time) (*TransactionDescription, error) {
	d := &TransactionDescription{ID: pb.GetId(), State: TransactionState(pb.GetState()), Parent: pb.GetParentId(), Children: pb.GetChildren()}
	var err error
	if pb.GetParentManager() != nil {
		if d.ParentManager, err = RefFromProto("parent manager", pb.GetParentManager()); err != nil {
			return nil, err
		}
	}
	if pb.GetLease() != nil {
		if d.Lease, err = LeaseFromProto(pb.GetLease(), sent); err != nil {
			return nil, err
		}
	}
	for i, p := range pb.GetParticipants() {
		ref, err := RefFromProto(fmt.Sprintf("participant %d", i), p.GetParticipant())
		if err != nil {
			return nil, err
		}
		ps := ParticipantStatus{Participant: ref, CrashCount: p.GetCrashCount(), Vote: TransactionState(p.GetVote()),
			Notified: p.GetNotified(), LastError: grpcerr.FromProto(p.GetLastError())}
		if n := p.GetFailingSinceUnixNanos(); n != 0 {
			ps.FailingSince = time.Unix(0, n)
		}
		d.Participants = append(d.Participants, ps)
	}
	return d, nil
}

// List returns the caller's transactions that the manager knows — ACTIVE,
// VOTING, and decided ones it still remembers — in state (0: any), by id,
// at most max of them (0: all). Participants come with their votes, not
// their failing calls (Describe has those).
func (m *TransactionManager) List(ctx context.Context, state TransactionState, max int) ([]*TransactionDescription, error) {
	mc, err := m.client()
	if err != nil {
		return nil, err
	}
	if max < 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "max %d: must not be negative", max)
	}
	var out []*TransactionDescription
	for after := uint64(0); ; {
		limit := 1000
		if max > 0 {
			limit = min(limit, max-len(out))
		}
		sent := time.Now()
		resp, err := mc.List(ctx, &djinnpb.ListTransactionsRequest{AfterId: after, Limit: uint32(limit), State: djinnpb.TransactionState(state)})
		if err != nil {
			return nil, err
		}
		for _, pb := range resp.GetTransactions() {
			d, err := descriptionFrom(pb, sent)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		next := resp.GetNextAfterId()
		if next == 0 || (max > 0 && len(out) >= max) {
			return out, nil
		}
		// Pages come by id: a next not past the page's after_id would list
		// transactions again, or loop.
		if next <= after || len(resp.GetTransactions()) == 0 {
			return nil, djinn.Errorf(djinn.Internal, "transaction manager %s: a page of %d transactions after id %d named next_after_id %d: the manager does not move on", m.ref, len(resp.GetTransactions()), after, next)
		}
		after = next
	}
}

// Promote adds participants, with their crash counts, to this ACTIVE
// transaction and drops drop (when not the zero Ref) from it: what the
// manager of a transaction nested in this one does when that transaction
// commits (TX.3.3's NestableServerTransaction.promote, TX.2.7). A crash
// count other than one the manager already knows for a participant aborts
// the transaction (CrashCount); one no longer ACTIVE gives CannotJoin.
func (t *Transaction) Promote(ctx context.Context, parts []djinn.Ref, crashCounts []int64, drop djinn.Ref) error {
	if len(parts) != len(crashCounts) {
		return djinn.Errorf(djinn.InvalidArgument, "promote: %d participants but %d crash counts", len(parts), len(crashCounts))
	}
	mc, err := t.mgr.client()
	if err != nil {
		return err
	}
	req := &djinnpb.PromoteRequest{Id: t.id, CrashCounts: crashCounts, Secret: wire.TxnSecretBytes(t.secret)}
	for _, p := range parts {
		req.Participants = append(req.Participants, RefToProto(p))
	}
	if drop != (djinn.Ref{}) {
		req.Drop = RefToProto(drop)
	}
	_, err = mc.Promote(ctx, req)
	return err
}

// Transaction is a transaction (TX.3.3's ServerTransaction): the manager
// that created it and the id it gave, with its secret and the lease it
// granted when this program created it. Its methods call the manager with
// the id, so they cannot reach the wrong manager. Two Transactions are the
// same transaction when their managers and ids are equal (Equal), and Key
// gives that identity as a map key.
//
// The id names the transaction; the secret — 128 random bits — is the
// capability to work under it: to join it, ask its state, nest a
// transaction in it, lock and write under it. Hand it (Token, or
// WithTransaction) to whoever is to do the transaction's work. Commit,
// Abort and Describe are its creator's, by principal, with the id alone.
//
// A Transaction is a handle, safe for concurrent use: the transaction's
// state lives at the manager. It is also TX.3.3's NestableServerTransaction:
// one created nested (CreateNested) carries its parent, IsNested reports it
// and EnclosedBy walks the parents, and Promote moves participants into it.
type Transaction struct {
	mgr    *TransactionManager
	id     uint64
	secret djinn.ID     // zero when named by id alone
	lease  *Lease       // as granted to this program; nil when not created here
	parent *Transaction // the enclosing transaction; nil when top-level or not known here
}

// ID returns the transaction's id at its manager.
func (t *Transaction) ID() uint64 { return t.id }

// Secret returns the transaction's secret, the capability to work under
// it; zero for a transaction named by id alone.
func (t *Transaction) Secret() djinn.ID { return t.secret }

// Manager returns the manager that created the transaction.
func (t *Transaction) Manager() *TransactionManager { return t.mgr }

// Lease returns the transaction's lease as Create returned it (TX.3.1's
// Created.lease), or nil for a transaction named by id
// (TransactionManager.Transaction). It makes no remote call.
func (t *Transaction) Lease() *Lease { return t.lease }

// IsNested reports whether the transaction is nested in another (TX.3.3):
// whether it has a Parent. That is known for a transaction created here by
// CreateNested; one named by id (TransactionManager.Transaction) reports
// false, as TX.3.3's ServerTransaction does.
func (t *Transaction) IsNested() bool { return t.parent != nil }

// Parent returns the transaction t is nested in (TX.3.3's
// NestableServerTransaction.parent), or nil if t is top-level or was named
// by id. It makes no remote call.
func (t *Transaction) Parent() *Transaction { return t.parent }

// EnclosedBy reports whether t is enclosed by enclosing: t is enclosing,
// or enclosing is one of t's parents, as far as t knows them (TX.3.3's
// enclosedBy). It makes no remote call.
func (t *Transaction) EnclosedBy(enclosing *Transaction) bool {
	if enclosing == nil {
		return false
	}
	for p := t; p != nil; p = p.parent {
		if p.Equal(enclosing) {
			return true
		}
	}
	return false
}

// CreateNested starts a transaction nested in t (TX.3.2's
// NestableTransaction.create with t's manager); see
// TransactionManager.CreateNested. The new transaction's Parent is t.
func (t *Transaction) CreateNested(ctx context.Context, leaseFor time.Duration) (*Transaction, error) {
	return t.mgr.create(ctx, t, leaseFor)
}

// CreateNestedAt starts a transaction nested in t at the manager mgr,
// which may be another than t's (TX.3.2's NestableTransaction.create(mgr,
// leaseFor)); see TransactionManager.CreateNestedIn.
func (t *Transaction) CreateNestedAt(ctx context.Context, mgr *TransactionManager, leaseFor time.Duration) (*Transaction, error) {
	if mgr == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "manager: missing (nil)")
	}
	return mgr.create(ctx, t, leaseFor)
}

// Equal reports whether t and o are the same transaction: the same
// manager (equal references) and the same id (TX.3.3's equals). Leases
// and parents play no part: an id names one transaction at its manager.
func (t *Transaction) Equal(o *Transaction) bool {
	if t == nil || o == nil {
		return t == o
	}
	return t.id == o.id && t.mgr.Equal(o.mgr)
}

// TransactionKey is a transaction's identity, comparable: two transactions
// have equal keys exactly when they are Equal.
type TransactionKey struct {
	Manager [32]byte // the manager's djinn.Ref.Key
	ID      uint64
}

// Key returns the transaction's identity, for maps of transactions (TX.3.3's
// hashCode).
func (t *Transaction) Key() TransactionKey {
	return TransactionKey{Manager: t.mgr.ref.Key(), ID: t.id}
}

// String names the transaction: "transaction 7 of djinn://…".
func (t *Transaction) String() string {
	return "transaction " + strconv.FormatUint(t.id, 10) + " of " + t.mgr.ref.String()
}

// Join adds participant to the transaction (TX.2.3); see
// TransactionManager.Join.
func (t *Transaction) Join(ctx context.Context, participant djinn.Ref, crashCount int64) error {
	return t.mgr.Join(ctx, t.id, t.secret, participant, crashCount)
}

// State returns the transaction's state (TX.3.3's getState); see
// TransactionManager.GetState.
func (t *Transaction) State(ctx context.Context) (TransactionState, error) {
	return t.mgr.GetState(ctx, t.id, t.secret)
}

// Commit commits the transaction (TX.2.5); see TransactionManager.Commit.
func (t *Transaction) Commit(ctx context.Context) error { return t.mgr.Commit(ctx, t.id) }

// CommitWait commits the transaction and waits up to waitFor until every
// participant was told; see TransactionManager.CommitWait.
func (t *Transaction) CommitWait(ctx context.Context, waitFor time.Duration) error {
	return t.mgr.CommitWait(ctx, t.id, waitFor)
}

// Abort aborts the transaction (TX.2.5); see TransactionManager.Abort.
func (t *Transaction) Abort(ctx context.Context) error { return t.mgr.Abort(ctx, t.id) }

// AbortWait aborts the transaction and waits up to waitFor until every
// participant was told; see TransactionManager.AbortWait.
func (t *Transaction) AbortWait(ctx context.Context, waitFor time.Duration) error {
	return t.mgr.AbortWait(ctx, t.id, waitFor)
}

// Describe returns what the manager knows of the transaction; see
// TransactionManager.Describe.
func (t *Transaction) Describe(ctx context.Context) (*TransactionDescription, error) {
	return t.mgr.Describe(ctx, t.id)
}
