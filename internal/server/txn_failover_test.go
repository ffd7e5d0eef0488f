package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// TestTxnLocksFollowTheCluster: DESIGN.md 7a — the lock service a
// transaction locked at names the cluster, not the member that led when
// the lock was taken. A transaction holds a write lock granted by the
// leader, another transaction waits for it; the leader dies. Committing
// the first through the other members commits it (the new leader's
// manager reaches the lock service in its own process, not at the dead
// member's address, which would abort it as a participant that never
// answered), and the lock passes to the waiter (CC 1.4: a top-level
// commit drops the transaction's locks).
func TestTxnLocksFollowTheCluster(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	dead := leaderOf(t, ss...)
	c := servertest.Dial(t, dead.Addr())
	ctx := testContext(t)
	ls, err := c.LockService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set, err := ls.CreateSet(ctx, client.LockSetOptions{Lease: time.Minute, Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := c.TransactionManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := mgr.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waiter, err := mgr.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Lock(ctx, client.HeldByTransaction(holder), client.LockW); err != nil {
		t.Fatal(err)
	}
	granted := make(chan error, 1)
	go func() {
		_, err := set.Lock(ctx, client.HeldByTransaction(waiter), client.LockW)
		granted <- err
	}()
	servertest.Eventually(t, "the waiter's request queued", func() bool {
		d, err := set.Describe(ctx)
		return err == nil && len(d.Waiters) == 1
	})

	if err := dead.Close(); err != nil {
		t.Fatalf("close the leader: %v", err)
	}
	retryUnavailable(t, "commit, after the leader died, a transaction holding a lock it granted", func(ctx context.Context) error {
		return holder.Commit(ctx)
	})
	select {
	case err := <-granted:
		if err != nil {
			t.Fatalf("the waiting transaction's lock after the holder committed: %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("the waiting transaction's lock was not granted after the holder committed: %v", ctx.Err())
	}
	retryUnavailable(t, "commit the transaction granted the lock", func(ctx context.Context) error {
		return waiter.Commit(ctx)
	})
}
