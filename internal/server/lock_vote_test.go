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
	holder, err := mgr.Create(testContext(t), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	voter, err := mgr.Create(testContext(t), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := ls.Lock(testContext(t), &djinnpb.LockRequest{SetId: set, Holder: txnHolder(holder), Mode: lockW}); err != nil || !resp.GetGranted() {
		t.Fatalf("the holder's lock: %v %v", resp, err)
	}
	if resp, err := ls.Lock(testContext(t), &djinnpb.LockRequest{SetId: other, Holder: txnHolder(voter), Mode: lockR}); err != nil || !resp.GetGranted() {
		t.Fatalf("the voter's lock: %v %v", resp, err)
	}
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
