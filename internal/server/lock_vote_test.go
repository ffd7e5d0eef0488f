package server_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestLockAbortedVoteSurvivesFailover: TX.2.6 — a participant that voted
// ABORTED is ABORTED, and answers a prepare repeated in a post-VOTING
// state with that state; TX.2.7 — an ABORTED vote aborts the transaction.
// The lock service votes ABORTED for a transaction with a lock request
// waiting and rolls it back at once; leadership moves; a prepare repeated
// at the new leader (a manager retrying after a lost reply) is answered
// ABORTED, not NOTCHANGED — the locks were released, so the transaction
// must not commit — and the manager's commit ends ABORTED.
func TestLockAbortedVoteSurvivesFailover(t *testing.T) {
	t.Parallel()
	ss := servertest.StartCluster(t, 3, servertest.Steady)
	l := servertest.ServingLeader(t, ss...)
	c := servertest.Dial(t, l.Addr())
	ls := djinnpb.NewLockServiceClient(c.ClientConn())
	var mgr *client.TransactionManager
	retryUnavailable(t, "the transaction manager", func(ctx context.Context) (err error) {
		mgr, err = c.TransactionManager(ctx)
		return err
	})
	set := lockSet(t, ls)
	other := lockSet(t, ls)
	_, voter := holderAndVoter(t, mgr, ls, set, other)
	waitCtx, stopWaiting := context.WithCancel(testContext(t))
	defer stopWaiting()
	go func() {
		_, _ = ls.Lock(waitCtx, &djinnpb.LockRequest{SetId: set, Holder: txnHolder(voter), Mode: lockW})
	}()
	servertest.Eventually(t, "the voter's request queued", func() bool {
		d, err := ls.Describe(testContext(t), &djinnpb.LockSetRequest{SetId: set})
		return err == nil && len(d.GetWaiters()) > 0
	})
	secret := voter.Secret()
	req := &djinnpb.ParticipantRequest{ParticipantId: server.LockID[:], Manager: client.RefToProto(mgr.Ref()), Id: voter.ID(), Secret: secret[:]}
	prepare := func(c *client.Client) djinnpb.TransactionState {
		t.Helper()
		var resp *djinnpb.PrepareResponse
		retryUnavailable(t, "prepare", func(ctx context.Context) (err error) {
			resp, err = djinnpb.NewTransactionParticipantClient(c.ClientConn()).Prepare(ctx, req)
			return err
		})
		return resp.GetVote()
	}
	if v := prepare(c); v != djinnpb.TransactionState_TRANSACTION_STATE_ABORTED {
		t.Fatalf("prepare with a lock request waiting: %v, want ABORTED", v)
	}
	// The vote rolled the transaction back: its lock is gone.
	servertest.Eventually(t, "the voter's locks released", func() bool {
		d, err := ls.Describe(testContext(t), &djinnpb.LockSetRequest{SetId: other})
		return err == nil && len(d.GetHolders()) == 0
	})

	// Leadership moves; the manager asks again at the new leader.
	next := servertest.Others(ss, l)[0]
	op := servertest.Dial(t, l.Addr(), servertest.Operator(t, l))
	retryUnavailable(t, "transfer leadership", func(ctx context.Context) error {
		_, err := op.TransferLeadership(ctx, next.NodeID())
		return err
	})
	servertest.Eventually(t, "the named member to lead", func() bool { return next.Node().IsLeader() })
	servertest.ServingLeader(t, next)
	c2 := servertest.Dial(t, next.Addr())
	if v := prepare(c2); v != djinnpb.TransactionState_TRANSACTION_STATE_ABORTED {
		t.Fatalf("a repeated prepare at the new leader: %v, want ABORTED (the locks were released)", v)
	}
	// A lock request under it is refused: it is over here.
	var lockErr error
	retryUnavailable(t, "a lock under the voted transaction", func(ctx context.Context) error {
		_, lockErr = djinnpb.NewLockServiceClient(c2.ClientConn()).Lock(ctx, &djinnpb.LockRequest{SetId: other, Holder: txnHolder(voter), Mode: lockR, Try: true})
		if errors.Is(lockErr, djinn.ErrUnavailable) {
			return lockErr
		}
		return nil
	})
	if !errors.Is(lockErr, djinn.ErrTransactionRolledBack) {
		t.Fatalf("a lock under the voted transaction: %v, want TransactionRolledBack", lockErr)
	}
	// The manager's commit asks the lock service, gets ABORTED, aborts.
	var mgr2 *client.TransactionManager
	retryUnavailable(t, "the transaction manager at the new leader", func(ctx context.Context) (err error) {
		mgr2, err = c2.TransactionManager(ctx)
		return err
	})
	var commitErr error
	retryUnavailable(t, "commit", func(ctx context.Context) error {
		commitErr = mgr2.TransactionOf(voter.ID(), secret).Commit(ctx)
		if errors.Is(commitErr, djinn.ErrUnavailable) {
			return commitErr
		}
		return nil
	})
	if !errors.Is(commitErr, djinn.ErrCannotCommit) {
		t.Fatalf("commit of the voted transaction: %v, want CannotCommit", commitErr)
	}
	d, err := mgr2.Describe(testContext(t), voter.ID())
	if err != nil {
		t.Fatal(err)
	}
	if d.State != client.TxnAborted || len(d.Participants) != 1 || d.Participants[0].Vote != client.TxnAborted {
		t.Fatalf("the transaction at the manager: %+v, want ABORTED by the lock service's ABORTED vote", d)
	}
}

func lockSet(t *testing.T, ls djinnpb.LockServiceClient) []byte {
	t.Helper()
	var resp *djinnpb.LockSetCreated
	retryUnavailable(t, "create a lock set", func(ctx context.Context) (err error) {
		resp, err = ls.CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(djinn.Any), Transactional: true})
		return err
	})
	return resp.GetSetId()
}

// TestLockAbortedVoteForgottenOnceDecided: TX.2.7 — a manager asks a
// participant to prepare only while its transaction is ACTIVE or VOTING,
// and tells a participant that voted ABORTED nothing more. The lock
// service keeps its ABORTED vote while the transaction's real manager
// answers getState ACTIVE, and forgets it once the manager decided:
// djinn_lock_aborted_votes returns to zero, and a lock request under the
// transaction is then the manager's to refuse, no longer the vote's.
// The manager serves in another cluster, so the lock service asks it
// over the wire, where its getState calls are counted.
func TestLockAbortedVoteForgottenOnceDecided(t *testing.T) {
	t.Parallel()
	mgrSrv := servertest.Start(t, servertest.Config(t))
	cfg := servertest.Config(t)
	server.SetLockTiming(&cfg, 50*time.Millisecond, 50*time.Millisecond)
	lockSrv := servertest.Start(t, cfg)
	mgr, err := servertest.Dial(t, mgrSrv.Addr()).TransactionManager(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	lc := servertest.Dial(t, lockSrv.Addr())
	ls := djinnpb.NewLockServiceClient(lc.ClientConn())
	set, other := lockSet(t, ls), lockSet(t, ls)
	_, voter := holderAndVoter(t, mgr, ls, set, other)
	waited := make(chan error, 1)
	go func() {
		_, err := ls.Lock(testContext(t), &djinnpb.LockRequest{SetId: set, Holder: txnHolder(voter), Mode: lockW})
		waited <- err
	}()
	servertest.Eventually(t, "the voter's request queued", func() bool {
		d, err := ls.Describe(testContext(t), &djinnpb.LockSetRequest{SetId: set})
		return err == nil && len(d.GetWaiters()) > 0
	})

	// The manager's prepare (as one whose reply was lost would send it)
	// finds a request waiting: ABORTED, the transaction rolled back here.
	secret := voter.Secret()
	resp, err := djinnpb.NewTransactionParticipantClient(lc.ClientConn()).Prepare(testContext(t), &djinnpb.ParticipantRequest{
		ParticipantId: server.LockID[:], Manager: client.RefToProto(mgr.Ref()), Id: voter.ID(), Secret: secret[:]})
	if err != nil || resp.GetVote() != djinnpb.TransactionState_TRANSACTION_STATE_ABORTED {
		t.Fatalf("prepare with a lock request waiting: %v %v, want ABORTED", resp, err)
	}
	if err := <-waited; !errors.Is(err, djinn.ErrTransactionRolledBack) {
		t.Fatalf("the waiting request: %v, want TransactionRolledBack", err)
	}
	votes := func() float64 { return scrape(t, lockSrv)["djinn_lock_aborted_votes"] }
	lockUnder := func() error {
		_, err := ls.Lock(testContext(t), &djinnpb.LockRequest{SetId: other, Holder: txnHolder(voter), Mode: lockR, Try: true})
		return err
	}

	// Kept while the manager answers ACTIVE: asked, it keeps the vote.
	const getState = `grpc_server_handled_total{grpc_code="OK",grpc_method="GetState",grpc_service="djinn.v1.TransactionManager",grpc_type="unary"}`
	servertest.Eventually(t, "the lock service to ask the manager about its vote", func() bool {
		return scrape(t, mgrSrv)[getState] > 0
	})
	if n := votes(); n != 1 {
		t.Fatalf("djinn_lock_aborted_votes = %v while the manager answers ACTIVE, want 1", n)
	}
	wantErr(t, "a lock under the voted transaction", lockUnder(), djinn.ErrTransactionRolledBack, "voted it ABORTED")

	// The manager decides: its commit's prepare gets the vote again, and
	// the transaction aborts without a word to the lock service.
	if err := voter.Commit(testContext(t)); !errors.Is(err, djinn.ErrCannotCommit) {
		t.Fatalf("commit of the voted transaction: %v, want CannotCommit", err)
	}
	servertest.Eventually(t, "the vote forgotten once its manager decided", func() bool { return votes() == 0 })
	// Forgotten: the lock request asks the manager to join, which refuses
	// a decided transaction.
	err = lockUnder()
	if !errors.Is(err, djinn.ErrCannotJoin) && !errors.Is(err, djinn.ErrUnknownTransaction) {
		t.Fatalf("a lock under the decided transaction, its vote forgotten: %v, want the manager's CannotJoin or UnknownTransaction", err)
	}
}

// holderAndVoter makes two transactions at mgr: the holder, granted a
// write lock in set, and the voter, granted a read lock in other (so that
// it is a participant of the lock service and will be asked to vote).
func holderAndVoter(t *testing.T, mgr *client.TransactionManager, ls djinnpb.LockServiceClient, set, other []byte) (holder, voter *client.Transaction) {
	t.Helper()
	holder, err := mgr.Create(testContext(t), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	voter, err = mgr.Create(testContext(t), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := ls.Lock(testContext(t), &djinnpb.LockRequest{SetId: set, Holder: txnHolder(holder), Mode: lockW}); err != nil || !resp.GetGranted() {
		t.Fatalf("the holder's lock: %v %v", resp, err)
	}
	if resp, err := ls.Lock(testContext(t), &djinnpb.LockRequest{SetId: other, Holder: txnHolder(voter), Mode: lockR}); err != nil || !resp.GetGranted() {
		t.Fatalf("the voter's lock: %v %v", resp, err)
	}
	return holder, voter
}
