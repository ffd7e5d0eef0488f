package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
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

// TestTxnManagerFollowsTheCluster: DESIGN.md 7a — a transaction's manager
// reference names the cluster, not the member that led when the
// transaction was made. After that member dies, the new leader's own
// key/value participant reaches the manager in its own process (joins and
// state questions are function calls, as before the failover), not over
// the connection pool to the cluster (which would be itself, through
// gRPC); another cluster's manager is still reached over the pool.
func TestTxnManagerFollowsTheCluster(t *testing.T) {
	t.Parallel()
	ss := followCluster(t)
	dead := leaderOf(t, ss...)
	c := servertest.Dial(t, dead.Addr())
	ctx := testContext(t)
	mgr, err := c.TransactionManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := mgr.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ref := tx.Manager().Ref()
	if !server.ManagerIsLocal(dead, ref) {
		t.Fatalf("the leader's participant reaches its manager %v over the pool; want in process", ref)
	}
	if err := dead.Close(); err != nil {
		t.Fatalf("close the leader: %v", err)
	}
	rest := servertest.Others(ss, dead)
	servertest.Eventually(t, "the new leader's participant reaches the manager made at the dead leader in process", func() bool {
		l := servertest.Leader(rest...)
		return l != nil && l.Advertise() != ref.Endpoint && server.ManagerIsLocal(l, ref)
	})
	other := ref
	other.Service = djinn.NewID()
	if l := servertest.ServingLeader(t, rest...); server.ManagerIsLocal(l, other) {
		t.Errorf("another cluster's manager %v reached in process; want over the pool", other)
	}
}

// TestTxnManagerFollowsAParticipantsCluster: DESIGN.md 7a, TX.2.6 — a
// participant of another djinn cluster (its lock service) is that
// cluster's, not the member that led when it joined. A transaction of one
// cluster's manager holds a lock at a second cluster's lock service,
// whose reference names the second cluster's leader; that leader dies.
// The manager learnt the participant's cluster when it joined (while the
// leader answered), so the commit's prepare and commit reach the lock
// service at the new leader: the transaction commits — at the dead
// member's address the prepare would go unanswered and abort it — and
// the lock service, told COMMITTED, drops the lock (CC 1.4).
func TestTxnManagerFollowsAParticipantsCluster(t *testing.T) {
	t.Parallel()
	home := servertest.Start(t, servertest.Config(t))
	other := followCluster(t)
	dead := servertest.ServingLeader(t, other...)
	ctx := testContext(t)
	mgr, err := servertest.Dial(t, home.Addr()).TransactionManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := mgr.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ls, set := transactionalSet(t, ctx, dead)
	if _, err := set.Lock(ctx, client.HeldByTransaction(tx), client.LockW); err != nil {
		t.Fatal(err)
	}
	if svc := ls.Ref().Service; !server.PoolFollows(home, svc) {
		t.Fatalf("the lock service joined the transaction, and the manager does not follow its cluster %s", svc)
	}
	commitAfterItsLeaderDied(t, ctx, dead, tx, set)
}

// transactionalSet makes a transactional lock set at the lock service of
// member m.
func transactionalSet(t *testing.T, ctx context.Context, m *server.Server) (*client.LockService, *client.LockSet) {
	t.Helper()
	ls, err := servertest.Dial(t, m.Addr()).LockService(ctx)
	if err != nil {
		t.Fatal(err)
	}
	set, err := ls.CreateSet(ctx, client.LockSetOptions{Lease: time.Minute, Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	return ls, set
}

// commitAfterItsLeaderDied closes dead, the leader of the cluster whose
// lock service holds tx's lock in set, commits tx, and waits for the lock
// service, at the other members, to drop the lock: told COMMITTED (CC 1.4).
func commitAfterItsLeaderDied(t *testing.T, ctx context.Context, dead *server.Server, tx *client.Transaction, set *client.LockSet) {
	t.Helper()
	if err := dead.Close(); err != nil {
		t.Fatalf("close the participant's leader: %v", err)
	}
	retryUnavailable(t, "commit, after the member the participant's reference names died", func(ctx context.Context) error {
		return tx.Commit(ctx)
	})
	servertest.EventuallyWithin(t, servertest.Failover, "the lock service, at the other members, told the transaction committed: its lock dropped", func() bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		d, err := set.Describe(cctx)
		return err == nil && len(d.Holders) == 0
	})
}
