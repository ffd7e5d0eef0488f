package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestLockSurvivesKill: the lock service's state is in the log (issue 4,
// section 1). With locks held — by an owner and by an undecided
// transaction — and a request queued, the server is killed with SIGKILL
// and started again on its data: the granted locks are still held (their
// fences validate, conflicting try_locks are refused), the queued request's
// caller, retrying with the same request id, finds its request and is
// granted when the holder releases, and the transaction's commit then
// releases its locks. A fence keeps rising across the restart.
func TestLockSurvivesKill(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer func() { p.kill() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ls := djinnpb.NewLockServiceClient(dial(t, p.addr))
	st, err := djinnpb.NewAdminClient(dial(t, p.addr)).Status(ctx, &djinnpb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tm := djinnpb.NewTransactionManagerClient(dial(t, p.addr))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	set, err := ls.CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(djinn.Forever)})
	must(err)
	mk := func() *djinnpb.LockHolder {
		o, err := ls.CreateOwner(ctx, &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(time.Hour)})
		must(err)
		return &djinnpb.LockHolder{Owner: o.GetLease().GetCookie()}
	}
	a, b := mk(), mk()
	held, err := ls.Lock(ctx, &djinnpb.LockRequest{SetId: set.GetSetId(), Holder: a, Mode: djinnpb.LockMode_LOCK_MODE_WRITE})
	must(err)
	tx, err := tm.Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Hour)})
	must(err)
	txHolder := &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: st.GetTxn(), Id: tx.GetId(), Secret: tx.GetSecret()}}
	txSet, err := ls.CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(djinn.Forever), Transactional: true})
	must(err)
	txLock, err := ls.Lock(ctx, &djinnpb.LockRequest{SetId: txSet.GetSetId(), Holder: txHolder, Mode: djinnpb.LockMode_LOCK_MODE_UPGRADE})
	must(err)
	// b queues behind a; its call dies with the server.
	const request = 0x5eed
	waitCtx, stopWaiting := context.WithCancel(ctx)
	go func() {
		_, _ = ls.Lock(waitCtx, &djinnpb.LockRequest{SetId: set.GetSetId(), Holder: b, Mode: djinnpb.LockMode_LOCK_MODE_READ, RequestId: request})
	}()
	for {
		d, err := ls.Describe(ctx, &djinnpb.LockSetRequest{SetId: set.GetSetId()})
		must(err)
		if len(d.GetWaiters()) == 1 {
			break
		}
		<-time.After(10 * time.Millisecond)
	}
	p.kill()
	stopWaiting()
	p = n.start(t)
	ls = djinnpb.NewLockServiceClient(dial(t, p.addr))
	tm = djinnpb.NewTransactionManagerClient(dial(t, p.addr))

	retry := func(f func() error) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := f()
			if err == nil {
				return
			}
			if !errors.Is(grpcerr.FromStatus(err), djinn.ErrUnavailable) || time.Now().After(deadline) {
				t.Fatal(err)
			}
			<-time.After(50 * time.Millisecond)
		}
	}
	var d *djinnpb.LockSetDescription
	retry(func() (err error) {
		d, err = ls.Describe(ctx, &djinnpb.LockSetRequest{SetId: set.GetSetId()})
		return err
	})
	aSum := sha256.Sum256(a.GetOwner())
	if len(d.GetHolders()) != 1 || string(d.GetHolders()[0].GetHolder().GetOwnerFingerprint()) != string(aSum[:16]) ||
		len(d.GetWaiters()) != 1 || d.GetWaiters()[0].GetRequestId() != request {
		t.Fatalf("after the restart: holders %v, waiters %v; want a holding and b's request queued", d.GetHolders(), d.GetWaiters())
	}
	for _, c := range []struct {
		set   []byte
		fence uint64
	}{{set.GetSetId(), held.GetFence()}, {txSet.GetSetId(), txLock.GetFence()}} {
		v, err := ls.ValidateFence(ctx, &djinnpb.ValidateFenceRequest{SetId: c.set, Fence: c.fence})
		if err != nil || !v.GetValid() {
			t.Fatalf("a granted lock's fence after the restart: %v %v, want valid", v, err)
		}
	}
	other, err := tm.Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Hour)})
	must(err)
	tryTx, err := ls.Lock(ctx, &djinnpb.LockRequest{SetId: txSet.GetSetId(), Mode: djinnpb.LockMode_LOCK_MODE_UPGRADE, Try: true,
		Holder: &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: st.GetTxn(), Id: other.GetId(), Secret: other.GetSecret()}}})
	if err != nil || tryTx.GetGranted() {
		t.Fatalf("U over the undecided transaction's U after the restart: %v %v, want refused", tryTx, err)
	}
	// b's caller comes back with its request id, and is granted once a
	// releases.
	got := make(chan *djinnpb.LockResponse, 1)
	go func() {
		resp, err := ls.Lock(ctx, &djinnpb.LockRequest{SetId: set.GetSetId(), Holder: b, Mode: djinnpb.LockMode_LOCK_MODE_READ, RequestId: request})
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	// Whether it attaches before or after the release, it gets the grant:
	// a request granted while nobody waited is remembered for its retry.
	_, err = ls.Unlock(ctx, &djinnpb.UnlockRequest{SetId: set.GetSetId(), Holder: a, Mode: djinnpb.LockMode_LOCK_MODE_WRITE})
	must(err)
	resp := <-got
	if resp == nil || !resp.GetGranted() || resp.GetFence() <= held.GetFence() {
		t.Fatalf("b's request after a released: %v, want granted with a fence above %d", resp, held.GetFence())
	}
	_, err = tm.Commit(ctx, &djinnpb.CompleteTransactionRequest{Id: tx.GetId()})
	must(err)
	for {
		d, err := ls.Describe(ctx, &djinnpb.LockSetRequest{SetId: txSet.GetSetId()})
		must(err)
		if len(d.GetHolders()) == 0 {
			break
		}
		<-time.After(10 * time.Millisecond)
	}
}
