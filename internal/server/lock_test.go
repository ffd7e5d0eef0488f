package server_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// lockFixture is a server with its lock service and transaction manager,
// called over gRPC.
type lockFixture struct {
	t   *testing.T
	c   *client.Client
	ls  djinnpb.LockServiceClient
	mgr *client.TransactionManager
}

func newLockFixture(t *testing.T) *lockFixture {
	t.Helper()
	_, f := startLockFixture(t)
	return f
}

// startLockFixture is newLockFixture, with its server.
func startLockFixture(t *testing.T) (*server.Server, *lockFixture) {
	t.Helper()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	conn, err := c.Conn(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := c.TransactionManager(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	return srv, &lockFixture{t: t, c: c, ls: djinnpb.NewLockServiceClient(conn), mgr: mgr}
}

func (f *lockFixture) set(transactional bool, related []byte) []byte {
	f.t.Helper()
	resp, err := f.ls.CreateSet(testContext(f.t), &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(djinn.Any), Transactional: transactional, Related: related})
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.GetSetId()
}

// owner returns a new owner's holder and its lease.
func (f *lockFixture) owner(d time.Duration) (*djinnpb.LockHolder, *djinnpb.Lease) {
	f.t.Helper()
	resp, err := f.ls.CreateOwner(testContext(f.t), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(d)})
	if err != nil {
		f.t.Fatal(err)
	}
	return &djinnpb.LockHolder{Owner: resp.GetLease().GetCookie()}, resp.GetLease()
}

func (f *lockFixture) txn() (*client.Transaction, *djinnpb.LockHolder) {
	f.t.Helper()
	tx, err := f.mgr.Create(testContext(f.t), time.Minute)
	if err != nil {
		f.t.Fatal(err)
	}
	return tx, txnHolder(tx)
}

func txnHolder(tx *client.Transaction) *djinnpb.LockHolder {
	secret := tx.Secret()
	return &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: client.RefToProto(tx.Manager().Ref()), Id: tx.ID(), Secret: secret[:]}}
}

func (f *lockFixture) lock(set []byte, h *djinnpb.LockHolder, m djinnpb.LockMode) uint64 {
	f.t.Helper()
	resp, err := f.ls.Lock(testContext(f.t), &djinnpb.LockRequest{SetId: set, Holder: h, Mode: m})
	if err != nil || !resp.GetGranted() {
		f.t.Fatalf("lock %v: %v %v", m, resp, err)
	}
	return resp.GetFence()
}

func (f *lockFixture) try(set []byte, h *djinnpb.LockHolder, m djinnpb.LockMode) bool {
	f.t.Helper()
	resp, err := f.ls.Lock(testContext(f.t), &djinnpb.LockRequest{SetId: set, Holder: h, Mode: m, Try: true})
	if err != nil {
		f.t.Fatalf("try %v: %v", m, err)
	}
	return resp.GetGranted()
}

// waitLock starts a blocking lock and returns where its answer comes.
func (f *lockFixture) waitLock(ctx context.Context, set []byte, h *djinnpb.LockHolder, m djinnpb.LockMode) <-chan lockAnswer {
	ch := make(chan lockAnswer, 1)
	go func() {
		resp, err := f.ls.Lock(ctx, &djinnpb.LockRequest{SetId: set, Holder: h, Mode: m})
		ch <- lockAnswer{resp.GetFence(), err}
	}()
	servertest.Eventually(f.t, "the request queued", func() bool {
		d, err := f.ls.Describe(testContext(f.t), &djinnpb.LockSetRequest{SetId: set})
		return err == nil && len(d.GetWaiters()) > 0
	})
	return ch
}

type lockAnswer struct {
	fence uint64
	err   error
}

func (f *lockFixture) describe(set []byte) *djinnpb.LockSetDescription {
	f.t.Helper()
	d, err := f.ls.Describe(testContext(f.t), &djinnpb.LockSetRequest{SetId: set})
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

func (f *lockFixture) valid(set []byte, fence uint64) bool {
	f.t.Helper()
	resp, err := f.ls.ValidateFence(testContext(f.t), &djinnpb.ValidateFenceRequest{SetId: set, Fence: fence})
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.GetValid()
}

func answer(t *testing.T, ch <-chan lockAnswer) lockAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(servertest.Timeout):
		t.Fatal("the waiting lock request never returned")
		return lockAnswer{}
	}
}

const (
	lockR = djinnpb.LockMode_LOCK_MODE_READ
	lockW = djinnpb.LockMode_LOCK_MODE_WRITE
)

// TestLockOwners: owners through a real server — try_lock refused while a
// conflicting lock is held, a blocked lock granted when it is released, in
// FIFO order, with increasing fencing tokens of which only the live grant
// validates; an owner's lease ending releases exactly its locks.
func TestLockOwners(t *testing.T) {
	t.Parallel()
	f := newLockFixture(t)
	set := f.set(false, nil)
	a, _ := f.owner(time.Minute)
	b, _ := f.owner(time.Minute)
	c, cLease := f.owner(time.Minute)
	fa := f.lock(set, a, lockW)
	if f.try(set, b, lockR) {
		t.Fatal("spec 1.3.1.3: try_lock of R granted over a held W")
	}
	bWait := f.waitLock(testContext(t), set, b, lockR)
	if _, err := f.ls.Unlock(testContext(t), &djinnpb.UnlockRequest{SetId: set, Holder: a, Mode: lockW}); err != nil {
		t.Fatal(err)
	}
	got := answer(t, bWait)
	if got.err != nil || got.fence <= fa {
		t.Fatalf("b's lock after a released: %+v, want a fence above %d", got, fa)
	}
	if f.valid(set, fa) || !f.valid(set, got.fence) {
		t.Fatal("fencing: a released grant still validates, or the live one does not")
	}
	_, err := f.ls.Unlock(testContext(t), &djinnpb.UnlockRequest{SetId: set, Holder: a, Mode: lockW})
	if !errors.Is(err, djinn.ErrLockNotHeld) {
		t.Fatalf("unlock of a lock not held: %v, want LockNotHeld (spec 2.3)", err)
	}
	// c holds R too; its lease ends: its lock goes, b's stays.
	fc := f.lock(set, c, lockR)
	l, err := client.LeaseFromProto(cLease, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Cancel(testContext(t), f.c); err != nil {
		t.Fatal(err)
	}
	if f.valid(set, fc) || !f.valid(set, got.fence) {
		t.Fatal("an owner's lease ended: its grant must die, the other's live")
	}
	bSum := sha256.Sum256(b.GetOwner())
	if d := f.describe(set); len(d.GetHolders()) != 1 || string(d.GetHolders()[0].GetHolder().GetOwnerFingerprint()) != string(bSum[:16]) ||
		len(d.GetHolders()[0].GetHolder().GetOwner()) != 0 {
		t.Fatalf("holders %v, want b alone, named by a fingerprint of its cookie (never the cookie)", d.GetHolders())
	}
	_, err = f.ls.Lock(testContext(t), &djinnpb.LockRequest{SetId: set, Holder: c, Mode: lockR})
	if !errors.Is(err, djinn.ErrUnknownLease) {
		t.Fatalf("locking for an owner whose lease ended: %v, want UnknownLease", err)
	}
}

// TestLockTransactions: strict two-phase locking (spec 1.4) — a
// transaction's locks are held until it commits or aborts; a request
// blocked when its transaction aborts returns TransactionRolledBack; the
// lock service is a participant of the transaction.
func TestLockTransactions(t *testing.T) {
	t.Parallel()
	f := newLockFixture(t)
	set := f.set(true, nil)
	tx1, h1 := f.txn()
	tx2, h2 := f.txn()
	f.lock(set, h1, lockW)
	d, err := tx1.Describe(testContext(t))
	if err != nil || len(d.Participants) != 1 || d.Participants[0].Participant.Object != [16]byte{'l', 'o', 'c', 'k'} {
		t.Fatalf("tx1's participants %+v %v: want the lock service, joined at its first lock", d, err)
	}
	w2 := f.waitLock(testContext(t), set, h2, lockW)
	if err := tx1.Commit(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got := answer(t, w2); got.err != nil {
		t.Fatalf("tx2's lock after tx1 committed: %v", got.err)
	}
	tx3, h3 := f.txn()
	w3 := f.waitLock(testContext(t), set, h3, lockR)
	if err := tx3.Abort(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if got := answer(t, w3); !errors.Is(got.err, djinn.ErrTransactionRolledBack) {
		t.Fatalf("a request whose transaction aborted: %v, want TransactionRolledBack (spec 2.3)", got.err)
	}
	if err := tx2.Abort(testContext(t)); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the aborted transaction's locks dropped", func() bool {
		return len(f.describe(set).GetHolders()) == 0
	})
	// Owners cannot hold locks in a transactional set.
	o, _ := f.owner(time.Minute)
	if _, err := f.ls.Lock(testContext(t), &djinnpb.LockRequest{SetId: set, Holder: o, Mode: lockR}); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("an owner in a transactional set: %v, want InvalidArgument", err)
	}
}

// TestLockNestedAndImplicit: a nested transaction is granted over its
// parent's conflicting lock (spec 1.5) and its locks pass to the parent
// when it commits; the implicit mode takes the transaction from the call's
// context.
func TestLockNestedAndImplicit(t *testing.T) {
	t.Parallel()
	f := newLockFixture(t)
	set := f.set(false, nil)
	parent, hp := f.txn()
	child, err := parent.CreateNested(testContext(t), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f.lock(set, hp, lockW)
	// Implicit: no holder, the child in the context.
	ctx := client.WithTransaction(testContext(t), child)
	resp, err := f.ls.Lock(ctx, &djinnpb.LockRequest{SetId: set, Mode: lockW, Try: true})
	if err != nil || !resp.GetGranted() {
		t.Fatalf("the child's W over its parent's W: %v %v, want granted (spec 1.5)", resp, err)
	}
	_, ho := f.txn()
	if f.try(set, ho, lockR) {
		t.Fatal("an unrelated transaction granted R over the family's W")
	}
	if err := child.Commit(testContext(t)); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the child's lock passed to the parent", func() bool {
		hs := f.describe(set).GetHolders()
		return len(hs) == 1 && hs[0].GetHolder().GetTransaction().GetId() == parent.ID() && hs[0].GetCounts()[lockW] == 2
	})
	if err := parent.Commit(testContext(t)); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the family's locks dropped at its commit", func() bool {
		return len(f.describe(set).GetHolders()) == 0
	})
	if !f.try(set, ho, lockW) {
		t.Fatal("W not granted once the family committed")
	}
	if _, err := f.ls.Lock(testContext(t), &djinnpb.LockRequest{SetId: set, Mode: lockR}); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("no holder and no transaction in the context: %v, want InvalidArgument", err)
	}
}

// TestLockWaitsEndAndDeadlock: a waiting request honours its deadline and
// leaves the queue; a request that would close a cycle of waiters across
// sets is refused as a deadlock, and nothing changes.
func TestLockWaitsEndAndDeadlock(t *testing.T) {
	t.Parallel()
	f := newLockFixture(t)
	s1, s2 := f.set(false, nil), f.set(false, nil)
	a, _ := f.owner(time.Minute)
	b, _ := f.owner(time.Minute)
	f.lock(s1, a, lockW)
	f.lock(s2, b, lockW)
	ctx, cancel := context.WithTimeout(testContext(t), 200*time.Millisecond)
	defer cancel()
	if _, err := f.ls.Lock(ctx, &djinnpb.LockRequest{SetId: s1, Holder: b, Mode: lockW}); err == nil {
		t.Fatal("a lock past its deadline was granted")
	}
	servertest.Eventually(t, "the timed-out request left the queue", func() bool {
		return len(f.describe(s1).GetWaiters()) == 0
	})
	aWait := f.waitLock(testContext(t), s2, a, lockW)
	_, err := f.ls.Lock(testContext(t), &djinnpb.LockRequest{SetId: s1, Holder: b, Mode: lockW})
	if !errors.Is(err, djinn.ErrDeadlock) {
		t.Fatalf("b waiting for a, who waits for b: %v, want Deadlock", err)
	}
	if len(f.describe(s1).GetWaiters()) != 0 {
		t.Fatal("the deadlock victim was queued")
	}
	if _, err := f.ls.Unlock(testContext(t), &djinnpb.UnlockRequest{SetId: s2, Holder: b, Mode: lockW}); err != nil {
		t.Fatal(err)
	}
	if got := answer(t, aWait); got.err != nil {
		t.Fatal(got.err)
	}
	// Bad input names itself.
	for _, tc := range []struct {
		req  *djinnpb.LockRequest
		kind error
	}{
		{&djinnpb.LockRequest{SetId: s1, Holder: a, Mode: 0}, djinn.ErrInvalidArgument},
		{&djinnpb.LockRequest{SetId: s1, Holder: a, Mode: 9}, djinn.ErrInvalidArgument},
		{&djinnpb.LockRequest{SetId: []byte("short"), Holder: a, Mode: lockR}, djinn.ErrInvalidArgument},
		{&djinnpb.LockRequest{SetId: make([]byte, 16), Holder: a, Mode: lockR}, djinn.ErrNoSuchObject},
	} {
		if _, err := f.ls.Lock(testContext(t), tc.req); !errors.Is(err, tc.kind) {
			t.Errorf("lock %v: %v, want %v", tc.req, err, tc.kind)
		}
	}
}

// TestLockCommitWhileWaiting: a transaction committed while one of its
// lock requests waits cannot commit (TX.2.6: the lock service votes
// ABORTED for an operation under way), its request ends
// TransactionRolledBack, and nothing of it stays held.
func TestLockCommitWhileWaiting(t *testing.T) {
	t.Parallel()
	f := newLockFixture(t)
	set, other := f.set(true, nil), f.set(true, nil)
	tx1, h1 := f.txn()
	tx2, h2 := f.txn()
	f.lock(set, h1, lockW)
	f.lock(other, h2, lockR)
	w2 := f.waitLock(testContext(t), set, h2, lockW)
	if err := tx2.Commit(testContext(t)); !errors.Is(err, djinn.ErrCannotCommit) {
		t.Fatalf("commit with a lock request waiting: %v, want CannotCommit", err)
	}
	if got := answer(t, w2); !errors.Is(got.err, djinn.ErrTransactionRolledBack) {
		t.Fatalf("the waiting request: %v, want TransactionRolledBack", got.err)
	}
	servertest.Eventually(t, "the aborted transaction's locks dropped", func() bool {
		return len(f.describe(other).GetHolders()) == 0
	})
	if err := tx1.Commit(testContext(t)); err != nil {
		t.Fatal(err)
	}
}

// TestLockLooseManagerFromBefore (DESIGN.md 2, tightening what is
// accepted): a transaction whose lock was taken before endpoints were
// checked strictly, its manager named at an endpoint taken then (a name
// in brackets), still locks and unlocks through the server as that
// holder, past the calls' argument check, and its commit drops its locks
// (CC 1.5). A transaction new to the lock service naming its manager so
// is refused InvalidArgument naming the endpoint, whatever the set.
func TestLockLooseManagerFromBefore(t *testing.T) {
	t.Parallel()
	srv, f := startLockFixture(t)
	ctx := testContext(t)
	set, other := f.set(true, nil), f.set(true, nil)
	const endpoint = "[djinn]:4160"
	loose := func(tx *client.Transaction) *djinnpb.LockHolder {
		h := txnHolder(tx)
		h.Transaction.Manager.Endpoint = endpoint
		return h
	}
	old, _ := f.txn()
	h := loose(old)
	// The entry a leader of before wrote as the transaction locked.
	if _, err := server.Propose(ctx, srv, &statepb.Command{Op: &statepb.Command_LockAcquire{LockAcquire: &statepb.LockAcquire{
		SetId: set, Holder: &statepb.LockHolderState{Manager: h.GetTransaction().GetManager(), Txn: old.ID(), Secret: h.GetTransaction().GetSecret()},
		Mode: int32(lockW), RequestId: 1,
	}}}); err != nil {
		t.Fatalf("the entry of before: %v", err)
	}
	f.lock(other, h, lockR)
	if _, err := f.ls.Unlock(ctx, &djinnpb.UnlockRequest{SetId: set, Holder: h, Mode: lockW}); err != nil {
		t.Errorf("unlock of the lock taken before: %v", err)
	}
	if err := old.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the committed transaction's locks dropped", func() bool {
		return len(f.describe(other).GetHolders()) == 0
	})
	fresh, _ := f.txn()
	nowhere := djinn.NewID()
	for _, s := range [][]byte{set, nowhere[:]} {
		_, err := f.ls.Lock(ctx, &djinnpb.LockRequest{SetId: s, Holder: loose(fresh), Mode: lockR})
		if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), strconv.Quote(endpoint)) {
			t.Errorf("a new transaction's lock, its manager at %q: %v, want InvalidArgument naming the endpoint", endpoint, err)
		}
	}
}

// TestLockTransactionNamedWithoutItsSecret: a transaction's secret is
// its capability, so a caller naming one without it — in a lock request
// or a drop_locks of its own set — gets the answer a transaction that
// never existed gets, whether or not the transaction holds or waits for
// locks anywhere in the lock service. Before, the lock service answered
// in its own words for a transaction it held and in the manager's for
// any other, and refused the drop_locks of one it held alone: a caller
// could tell which transaction ids (sequential) held locks.
func TestLockTransactionNamedWithoutItsSecret(t *testing.T) {
	t.Parallel()
	f := newLockFixture(t)
	held, hh := f.txn()
	f.lock(f.set(true, nil), hh, lockR)
	free, _ := f.txn()
	mine := f.set(true, nil)
	ctx := testContext(t)
	// outcome is what naming transaction id with a forged secret gets,
	// the id itself elided.
	outcome := func(id uint64) string {
		s := djinn.NewID()
		ref := &djinnpb.TransactionRef{Manager: client.RefToProto(held.Manager().Ref()), Id: id, Secret: s[:]}
		_, lerr := f.ls.Lock(ctx, &djinnpb.LockRequest{SetId: mine, Holder: &djinnpb.LockHolder{Transaction: ref}, Mode: lockR, Try: true})
		_, derr := f.ls.DropLocks(ctx, &djinnpb.DropLocksRequest{SetId: mine, Transaction: ref})
		text := func(err error) string {
			if err == nil {
				return "ok"
			}
			return string(errKind(err)) + " " + strings.ReplaceAll(err.Error(), strconv.FormatUint(id, 10), "ID")
		}
		return "lock: " + text(lerr) + "; drop_locks: " + text(derr)
	}
	never := outcome(free.ID() + 1000)
	if !strings.HasPrefix(never, "lock: "+string(djinn.UnknownTransaction)) {
		t.Fatalf("a transaction never created: %s, want UnknownTransaction", never)
	}
	for _, tt := range []struct {
		name string
		id   uint64
	}{{"holding a lock in another's set", held.ID()}, {"in no lock request", free.ID()}} {
		if got := outcome(tt.id); got != never {
			t.Errorf("a transaction %s, named without its secret: %s; want what one never created gets: %s", tt.name, got, never)
		}
	}
}
