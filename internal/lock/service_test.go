package lock_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

var manager = djinn.Ref{Endpoint: "127.0.0.1:4161", Service: djinn.ID{1}, Object: djinn.ID{'t', 'x', 'n'}}

// joiner is a transaction manager that answers joins with the ancestors a
// test sets.
type joiner struct {
	mu    sync.Mutex
	anc   map[uint64][]uint64
	joins int
	// voting lists the transactions the manager has begun to commit: it
	// refuses joins to them (TX.2.7).
	voting map[uint64]bool
	// states are what getState answers, ACTIVE when not set; asked
	// counts the calls, by transaction.
	states map[uint64]djinnpb.TransactionState
	asked  map[uint64]int
}

func (j *joiner) GetState(_ context.Context, mgr djinn.Ref, id uint64, _ djinn.ID) (djinnpb.TransactionState, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.asked == nil {
		j.asked = map[uint64]int{}
	}
	j.asked[id]++
	if st, ok := j.states[id]; ok {
		return st, nil
	}
	return djinnpb.TransactionState_TRANSACTION_STATE_ACTIVE, nil
}

func (j *joiner) setState(id uint64, st djinnpb.TransactionState) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.states == nil {
		j.states = map[uint64]djinnpb.TransactionState{}
	}
	j.states[id] = st
}

func (j *joiner) Join(_ context.Context, mgr djinn.Ref, id uint64, _ djinn.ID, self *djinnpb.Ref, crash int64) (*djinnpb.JoinTransactionResponse, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.joins++
	if crash != lock.CrashCount {
		return nil, djinn.Errorf(djinn.CrashCount, "crash count %d", crash)
	}
	if j.voting[id] {
		return nil, djinn.Errorf(djinn.CannotJoin, "transaction %d: VOTING", id)
	}
	return &djinnpb.JoinTransactionResponse{Ancestors: j.anc[id]}, nil
}

type fixture struct {
	t      *testing.T
	log    statetest.Service[*lock.State]
	lessor *lease.Lessor
	svc    *lock.Service
	j      *joiner
	stop   func()
}

func newLockState(m *state.Machine) *lock.State { return lock.NewState(m.Leases, m.Rules) }

func start(t *testing.T, log statetest.Service[*lock.State], j *joiner) *fixture {
	return startWith(t, log, j, log)
}

// startWith is start, the service proposing its commands through p.
func startWith(t *testing.T, log statetest.Service[*lock.State], j *joiner, p lock.Proposer) *fixture {
	f := &fixture{t: t, log: log, j: j}
	f.lessor = lease.NewLessor(log.M.Leases, log, lease.Config{Slack: 10 * time.Second})
	self := djinn.Ref{Endpoint: "127.0.0.1:4161", Service: log.M.ServiceID(), Object: djinn.ID{'l', 'o', 'c', 'k'}}
	svc, err := lock.NewService(log.State, f.lessor, p, time.Now, func() djinn.Ref { return self }, lock.Config{Joiner: j, Grace: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); f.lessor.Run(ctx) }()
	go func() { defer wg.Done(); svc.Run(ctx) }()
	f.stop = func() { cancel(); wg.Wait() }
	synctest.Wait()
	return f
}

// restart snapshots the machine, restores it into a fresh one and starts
// a service over it: a restarted node, or a new leader.
func (f *fixture) restart() *fixture {
	f.t.Helper()
	f.stop()
	log, err := statetest.Restart(f.log.Log, newLockState)
	if err != nil {
		f.t.Fatal(err)
	}
	return start(f.t, log, f.j)
}

func (f *fixture) set(transactional bool) []byte {
	f.t.Helper()
	c, err := f.svc.CreateSet(context.Background(), nil, transactional, djinn.Any)
	if err != nil {
		f.t.Fatal(err)
	}
	return c.ID[:]
}

func (f *fixture) owner() *djinnpb.LockHolder {
	f.t.Helper()
	c, err := f.svc.CreateOwner(context.Background(), time.Hour)
	if err != nil {
		f.t.Fatal(err)
	}
	return &djinnpb.LockHolder{Owner: c.ID[:]}
}

func txn(id uint64) *djinnpb.LockHolder {
	return &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: &djinnpb.Ref{Endpoint: manager.Endpoint, ServiceId: manager.Service[:], ObjectId: manager.Object[:]}, Id: id}}
}

func mgrProto() *djinnpb.Ref {
	return &djinnpb.Ref{Endpoint: manager.Endpoint, ServiceId: manager.Service[:], ObjectId: manager.Object[:]}
}

func (f *fixture) lock(set []byte, h *djinnpb.LockHolder, m lock.Mode, request uint64) uint64 {
	f.t.Helper()
	ok, fence, err := f.svc.Lock(context.Background(), set, h, m, 0, false, request)
	if err != nil || !ok {
		f.t.Fatalf("lock %v: %v %v", m, ok, err)
	}
	return fence
}

// TestRetriedRequestGetsItsGrant: a request retried with its id after a
// lost answer gets the same grant, not a second lock.
func TestRetriedRequestGetsItsGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		defer f.stop()
		set, o := f.set(false), f.owner()
		a := f.lock(set, o, lock.R, 77)
		if b := f.lock(set, o, lock.R, 77); b != a {
			t.Fatalf("retried request: fence %d, want the first grant's %d", b, a)
		}
		v, _, err := f.svc.Describe(context.Background(), set)
		if err != nil || len(v.Holders) != 1 || len(v.Holders[0].Locks) != 1 {
			t.Fatalf("after a retry: %+v %v, want one lock", v, err)
		}
	})
}

// TestOrphanedWaitersCancelled: requests queued under an earlier leader
// whose callers do not come back within the grace period leave the
// queue; one whose caller comes back stays.
func TestOrphanedWaitersCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		set, a, b, c := f.set(false), f.owner(), f.owner(), f.owner()
		f.lock(set, a, lock.W, 1)
		for _, w := range []struct {
			h  *djinnpb.LockHolder
			id uint64
		}{{b, 2}, {c, 3}} {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { _, _, _ = f.svc.Lock(ctx, set, w.h, lock.R, 0, false, w.id) }()
			synctest.Wait()
			// The caller's node dies before it can leave the queue.
			f.stop()
			cancel()
			f = start(t, f.log, f.j)
		}
		g := f.restart()
		defer func() { g.stop() }()
		back := make(chan error, 1)
		go func() {
			_, _, err := g.svc.Lock(context.Background(), set, c, lock.R, 0, false, 3)
			back <- err
		}()
		time.Sleep(11 * time.Second)
		synctest.Wait()
		v, _, err := g.svc.Describe(context.Background(), set)
		if err != nil || len(v.Waiters) != 1 || v.Waiters[0].Request != 3 {
			t.Fatalf("waiters after the grace period: %+v %v, want only the one whose caller came back", v.Waiters, err)
		}
		if err := g.svc.Unlock(context.Background(), set, a, lock.W); err != nil {
			t.Fatal(err)
		}
		if err := <-back; err != nil {
			t.Fatalf("the returning caller: %v", err)
		}
	})
}

// TestParticipantVotes: the lock service votes NOTCHANGED for a
// transaction that never locked here and PREPARED for one that did; commit
// passes a nested transaction's locks to its parent and drops a top-level
// one's; an abort refuses the transaction's waiting request.
func TestParticipantVotes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &joiner{anc: map[uint64][]uint64{11: {10}}}
		f := start(t, statetest.For(newLockState), j)
		defer f.stop()
		ctx := context.Background()
		set := f.set(true)
		if v, err := f.svc.Prepare(ctx, mgrProto(), 99, djinn.ID{}); err != nil || v != djinnpb.TransactionState_TRANSACTION_STATE_NOTCHANGED {
			t.Fatalf("prepare of a stranger: %v %v, want NOTCHANGED", v, err)
		}
		f.lock(set, txn(10), lock.IW, 1)
		f.lock(set, txn(11), lock.W, 2) // nested in 10: granted over its IW
		f.lock(set, txn(11), lock.W, 3)
		if j.joins != 2 {
			t.Fatalf("%d joins, want one per transaction", j.joins)
		}
		if v, err := f.svc.Prepare(ctx, mgrProto(), 11, djinn.ID{}); err != nil || v != djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
			t.Fatalf("prepare of a holder: %v %v, want PREPARED", v, err)
		}
		if err := f.svc.End(ctx, mgrProto(), 11, djinn.ID{}, true); err != nil {
			t.Fatal(err)
		}
		v, _, _ := f.svc.Describe(context.Background(), set)
		if len(v.Holders) != 1 || v.Holders[0].Txn.ID != 10 || len(v.Holders[0].Locks) != 3 {
			t.Fatalf("after the child committed: %+v, want the parent holding all three locks", v.Holders)
		}
		waited := make(chan error, 1)
		go func() { _, _, err := f.svc.Lock(ctx, set, txn(12), lock.R, 0, false, 4); waited <- err }()
		synctest.Wait()
		if err := f.svc.End(ctx, mgrProto(), 12, djinn.ID{}, false); err != nil {
			t.Fatal(err)
		}
		if err := <-waited; !errors.Is(err, djinn.ErrTransactionRolledBack) {
			t.Fatalf("the aborted transaction's request: %v, want TransactionRolledBack", err)
		}
		if v, err := f.svc.PrepareAndCommit(ctx, mgrProto(), 10, djinn.ID{}); err != nil || v != djinnpb.TransactionState_TRANSACTION_STATE_COMMITTED {
			t.Fatalf("prepareAndCommit of the parent: %v %v", v, err)
		}
		if v, _, _ := f.svc.Describe(context.Background(), set); len(v.Holders) != 0 {
			t.Fatalf("after the family committed: %+v, want no holders", v.Holders)
		}
	})
}

// TestSnapshotKeepsEverything: a restore from a snapshot keeps sets,
// related groups, holders, waiters, fences and remembered grants.
func TestSnapshotKeepsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		s1 := f.set(false)
		c, err := f.svc.CreateSet(context.Background(), s1, false, djinn.Any)
		if err != nil {
			t.Fatal(err)
		}
		s2 := c.ID[:]
		a, b := f.owner(), f.owner()
		fa := f.lock(s1, a, lock.U, 5)
		f.lock(s2, b, lock.R, 6)
		go func() { _, _, _ = f.svc.Lock(context.Background(), s1, b, lock.W, 0, false, 7) }()
		synctest.Wait()
		before1, _, _ := f.svc.Describe(context.Background(), s1)
		before2, _, _ := f.svc.Describe(context.Background(), s2)
		g := f.restart()
		defer g.stop()
		after1, _, err := g.svc.Describe(context.Background(), s1)
		if err != nil {
			t.Fatal(err)
		}
		after2, _, _ := g.svc.Describe(context.Background(), s2)
		if len(after1.Holders) != len(before1.Holders) || len(after1.Waiters) != 1 || after1.Waiters[0].Request != 7 ||
			len(after1.Related) != 1 || !bytes.Equal(after1.Related[0][:], s2) || after1.Fence != before1.Fence ||
			len(after2.Holders) != len(before2.Holders) {
			t.Fatalf("restored %+v / %+v, want %+v / %+v", after1, after2, before1, before2)
		}
		if again := g.lock(s1, a, lock.U, 5); again != fa {
			t.Fatalf("a retried request after the restore: fence %d, want %d", again, fa)
		}
		if ok, err := g.svc.Validate(s1, fa); err != nil || !ok {
			t.Fatalf("the held grant's fence after the restore: %v %v", ok, err)
		}
		// A fence the set never gave names the set as its caller knows it.
		var id djinn.ID
		copy(id[:], s1)
		if _, err := g.svc.Validate(s1, 999); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "fence 999: never granted by lock set "+id.String()) {
			t.Fatalf("a fence never granted: %v, want an invalid argument naming the fence and the set %s", err, id)
		}
		// Unknown commands' bad input is refused without a change.
		if _, err := g.log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_LockAcquire{LockAcquire: &statepb.LockAcquire{SetId: s1, Mode: 2, RequestId: 9}}}); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Fatalf("an acquire without a holder: %v, want InvalidArgument", err)
		}
	})
}

// TestOwnerLeaseExpiry: an owner whose lease expires (a paused or crashed
// client) loses exactly its locks — its fences stop validating, so it
// cannot pass a stale token check — and the next waiter is granted.
func TestOwnerLeaseExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		defer f.stop()
		ctx := context.Background()
		set := f.set(false)
		short, err := f.svc.CreateOwner(ctx, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		paused := &djinnpb.LockHolder{Owner: short.ID[:]}
		other, next := f.owner(), f.owner()
		stale := f.lock(set, paused, lock.W, 1)
		kept := f.lock(set, paused, lock.IW, 2)
		granted := make(chan uint64, 1)
		go func() {
			_, fence, err := f.svc.Lock(ctx, set, next, lock.R, 0, false, 3)
			if err != nil {
				t.Error(err)
			}
			granted <- fence
		}()
		synctest.Wait()
		if ok, _ := f.svc.Validate(set, stale); !ok {
			t.Fatal("a live grant does not validate")
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		for _, fence := range []uint64{stale, kept} {
			if ok, err := f.svc.Validate(set, fence); err != nil || ok {
				t.Fatalf("fence %d of an owner whose lease expired: %v %v, want invalid", fence, ok, err)
			}
		}
		if fence := <-granted; fence <= kept {
			t.Fatalf("the waiter's fence %d, want above %d", fence, kept)
		}
		// The other owner was never touched; the expired one is gone.
		f.lock(set, other, lock.R, 4)
		if _, _, err := f.svc.Lock(ctx, set, paused, lock.R, 0, true, 5); !errors.Is(err, djinn.ErrUnknownLease) {
			t.Fatalf("locking for the expired owner: %v, want UnknownLease", err)
		}
	})
}

// TestDropLocks: the lock coordinator's drop_locks (spec 2.2) releases a
// transaction's locks in the set and the sets related to it, and nothing
// in an unrelated set.
func TestDropLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		defer f.stop()
		ctx := context.Background()
		s1 := f.set(true)
		c, err := f.svc.CreateSet(ctx, s1, true, djinn.Any)
		if err != nil {
			t.Fatal(err)
		}
		s2, s3 := c.ID[:], f.set(true)
		for i, s := range [][]byte{s1, s2, s3} {
			f.lock(s, txn(20), lock.W, uint64(i+1))
		}
		if err := f.svc.DropLocks(ctx, s2, mgrProto(), 20, nil); err != nil {
			t.Fatal(err)
		}
		for i, s := range [][]byte{s1, s2, s3} {
			v, _, err := f.svc.Describe(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if want := i == 2; (len(v.Holders) == 1) != want {
				t.Errorf("set %d after drop_locks on its group: holders %+v, want held %v", i+1, v.Holders, want)
			}
		}
		// Refused naming the related set by its id, not the table's number.
		if _, err := f.svc.CreateSet(ctx, s3, false, djinn.Any); err == nil {
			t.Fatal("a non-transactional set related to a transactional one was created")
		} else if id, _ := djinn.IDFromBytes("set", s3); djinn.KindOf(err) != djinn.InvalidArgument || !strings.Contains(err.Error(), "related lock set "+id.String()+": transactional") {
			t.Errorf("a non-transactional set related to transactional set %s: %v, want InvalidArgument naming the set", id, err)
		}
	})
}

// TestRemovedSetsMakeRoom: a set whose lease ended is gone (its waiters
// refused with NoSuchObject); sets created after it reuse its room, also
// after a restore, and are unaffected by what the old one held.
func TestRemovedSetsMakeRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		ctx := context.Background()
		var cookies []djinn.ID
		var sets [][]byte
		for range 3 {
			c, err := f.svc.CreateSet(ctx, nil, false, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			var cookie djinn.ID
			copy(cookie[:], c.Lease.GetCookie())
			cookies, sets = append(cookies, cookie), append(sets, c.ID[:])
		}
		a, b := f.owner(), f.owner()
		f.lock(sets[1], a, lock.W, 1)
		refused := make(chan error, 1)
		go func() { _, _, err := f.svc.Lock(ctx, sets[1], b, lock.W, 0, false, 2); refused <- err }()
		synctest.Wait()
		if errs := f.lessor.Cancel(ctx, []djinn.ID{cookies[1], cookies[2]}); errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		if err := <-refused; !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("a request waiting in a set that went: %v, want NoSuchObject", err)
		}
		if _, _, err := f.svc.Describe(context.Background(), sets[1]); !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("a removed set: %v, want NoSuchObject", err)
		}
		g := f.restart()
		defer func() { g.stop() }()
		for i := range 3 {
			s := g.set(false)
			if fence := g.lock(s, a, lock.W, uint64(10+i)); fence != 1 {
				t.Fatalf("new set %d: first fence %d, want 1", i, fence)
			}
		}
		if v, _, err := g.svc.Describe(context.Background(), sets[0]); err != nil || len(v.Holders) != 0 {
			t.Fatalf("the set that stayed: %+v %v", v, err)
		}
	})
}

// TestTransactionSecret (DESIGN.md 7): a lock request under a transaction
// carries the transaction's secret, its capability. Once a request named
// it with its secret, a request without it, or its manager's call without
// it, finds no transaction here (UnknownTransaction) and changes nothing —
// on this leader and, from the replicated state, on the next.
func TestTransactionSecret(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		ctx := context.Background()
		set := f.set(true)
		secret := djinn.NewID()
		with := func(id uint64, s djinn.ID) *djinnpb.LockHolder {
			h := txn(id)
			if !s.IsZero() {
				h.Transaction.Secret = s[:]
			}
			return h
		}
		f.lock(set, with(20, secret), lock.W, 1)
		for _, wrong := range []djinn.ID{{}, djinn.NewID()} {
			_, _, err := f.svc.Lock(ctx, set, with(20, wrong), lock.R, lock.W, false, 2)
			if !errors.Is(err, djinn.ErrUnknownTransaction) {
				t.Fatalf("a request without the transaction's secret: %v, want unknown transaction", err)
			}
			if err := f.svc.End(ctx, mgrProto(), 20, wrong, false); !errors.Is(err, djinn.ErrUnknownTransaction) {
				t.Fatalf("an end without the transaction's secret: %v, want unknown transaction", err)
			}
		}
		g := f.restart()
		defer g.stop()
		if err := g.svc.End(ctx, mgrProto(), 20, djinn.ID{}, false); !errors.Is(err, djinn.ErrUnknownTransaction) {
			t.Fatalf("on the next leader, an end without the secret: %v, want unknown transaction", err)
		}
		if v, _, _ := g.svc.Describe(ctx, set); len(v.Holders) != 1 {
			t.Fatalf("holders %+v, want the transaction holding its lock", v.Holders)
		}
		if err := g.svc.End(ctx, mgrProto(), 20, secret, false); err != nil {
			t.Fatalf("its manager's end, with the secret: %v", err)
		}
		if v, _, _ := g.svc.Describe(ctx, set); len(v.Holders) != 0 {
			t.Fatalf("after the abort: %+v, want no holders", v.Holders)
		}
	})
}

// TestDeposedLeaderVouchesForNoFence: a fence's validity is confirmed
// with the leader lease, or a quorum, after the lookup: a deposed leader
// that has not heard of its successor (which may have ended the grant)
// answers Unavailable, neither valid nor invalid.
func TestDeposedLeaderVouchesForNoFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		defer f.stop()
		set := f.set(false)
		fence := f.lock(set, f.owner(), lock.W, 1)
		if ok, err := f.svc.Validate(set, fence); err != nil || !ok {
			t.Fatalf("a held grant's fence at the leader: %v %v", ok, err)
		}
		f.log.Deposed.Store(true)
		if ok, err := f.svc.Validate(set, fence); !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("a held grant's fence at a deposed leader: %v %v, want Unavailable", ok, err)
		}
	})
}

// TestDeposedLeaderDescribesNoLocks: a set's description (its holders,
// their fences, its waiters) is confirmed with the leader lease, or a
// quorum, after it is read: a deposed leader that has not heard of its
// successor (which may have released or granted locks since) answers
// Unavailable, not a stale list of holders.
func TestDeposedLeaderDescribesNoLocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		defer f.stop()
		set := f.set(false)
		f.lock(set, f.owner(), lock.W, 1)
		ctx := context.Background()
		if v, _, err := f.svc.Describe(ctx, set); err != nil || len(v.Holders) != 1 {
			t.Fatalf("a set with one holder described at the leader: %+v %v", v.Holders, err)
		}
		f.log.Deposed.Store(true)
		if v, _, err := f.svc.Describe(ctx, set); !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("a set described at a deposed leader: holders %+v, %v; want Unavailable", v.Holders, err)
		}
	})
}

// TestDeposedLeaderDeniesNoSet: "no such set" and "fence never granted"
// are answers from this node's state too: a deposed leader that has not
// heard of its successor (which may have created the set, or granted the
// fence) answers Unavailable, not NotFound or a bad fence; a malformed set
// id is still InvalidArgument.
func TestDeposedLeaderDeniesNoSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		defer f.stop()
		set := f.set(false)
		fence := f.lock(set, f.owner(), lock.W, 1)
		other := djinn.NewID()
		ctx := context.Background()
		if _, _, err := f.svc.Describe(ctx, other[:]); !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("an unknown set described at the leader: %v; want NoSuchObject", err)
		}
		if _, err := f.svc.Validate(other[:], 1); !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("a fence of an unknown set at the leader: %v; want NoSuchObject", err)
		}
		if _, err := f.svc.Validate(set, fence+1); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Fatalf("a fence never granted at the leader: %v; want InvalidArgument", err)
		}
		f.log.Deposed.Store(true)
		if _, _, err := f.svc.Describe(ctx, other[:]); !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("an unknown set described at a deposed leader: %v; want Unavailable", err)
		}
		if ok, err := f.svc.Validate(other[:], 1); ok || !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("a fence of an unknown set at a deposed leader: %v %v; want Unavailable", ok, err)
		}
		if ok, err := f.svc.Validate(set, fence+1); ok || !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("a fence never granted at a deposed leader: %v %v; want Unavailable", ok, err)
		}
		if _, err := f.svc.Validate([]byte{1, 2}, 1); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("a malformed set id at a deposed leader: %v; want InvalidArgument", err)
		}
		if _, _, err := f.svc.Describe(ctx, []byte{1, 2}); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("a malformed set id described at a deposed leader: %v; want InvalidArgument", err)
		}
	})
}

// TestPrepareWithARequestWaiting: TX.2.6 — a participant asked to prepare
// while an operation under the transaction is under way must wait for it,
// know it read-only, or abort. A waiting lock request is such an
// operation, and may wait without end, so the lock service votes ABORTED:
// the transaction does not commit with a lock it may be granted only in
// its second phase (CC 1.4), and the request ends TransactionRolledBack. The spec leaves the choice open; aborting is what
// keeps strict two-phase locking.
func TestPrepareWithARequestWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(newLockState), &joiner{})
		defer f.stop()
		ctx := context.Background()
		set, other := f.set(true), f.set(true)
		f.lock(set, txn(21), lock.W, 1)
		f.lock(other, txn(20), lock.R, 2)
		waited := make(chan error, 1)
		go func() { _, _, err := f.svc.Lock(ctx, set, txn(20), lock.W, 0, false, 3); waited <- err }()
		synctest.Wait()
		if v, err := f.svc.Prepare(ctx, mgrProto(), 20, djinn.ID{}); err != nil || v != djinnpb.TransactionState_TRANSACTION_STATE_ABORTED {
			t.Fatalf("prepare with a lock request waiting: %v %v, want ABORTED", v, err)
		}
		// TX.2.6: voting ABORTED, the participant is ABORTED: the manager
		// tells it nothing more (TX.2.7), so it rolls back at once.
		synctest.Wait()
		select {
		case err := <-waited:
			if !errors.Is(err, djinn.ErrTransactionRolledBack) {
				t.Fatalf("the waiting request: %v, want TransactionRolledBack", err)
			}
		default:
			t.Fatal("the waiting request still waits after the ABORTED vote")
		}
		if v, _, _ := f.svc.Describe(ctx, other); len(v.Holders) != 0 {
			t.Fatalf("after the vote: %+v, want no holders", v.Holders)
		}
		// A repeated prepare gets the same vote (TX.2.6), in either form.
		for _, prepare := range []func(context.Context, *djinnpb.Ref, uint64, djinn.ID) (djinnpb.TransactionState, error){f.svc.Prepare, f.svc.PrepareAndCommit} {
			if v, err := prepare(ctx, mgrProto(), 20, djinn.ID{}); err != nil || v != djinnpb.TransactionState_TRANSACTION_STATE_ABORTED {
				t.Fatalf("a repeated prepare: %v %v, want ABORTED", v, err)
			}
		}
		if err := f.svc.End(ctx, mgrProto(), 20, djinn.ID{}, false); err != nil {
			t.Fatalf("an abort told anyway: %v", err)
		}
		// A holder with nothing waiting still votes PREPARED.
		if v, err := f.svc.Prepare(ctx, mgrProto(), 21, djinn.ID{}); err != nil || v != djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
			t.Fatalf("prepare of a holder: %v %v, want PREPARED", v, err)
		}
	})
}

// TestNoLockAfterTheVote: CC 1.4 — a transaction obtains no new lock in
// its second phase — and TX.2.6: once asked to prepare, a participant
// takes no operation under the transaction. A lock request after the vote
// asks the manager again, which refuses it (CannotJoin), and nothing is
// granted.
func TestNoLockAfterTheVote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &joiner{voting: map[uint64]bool{}}
		f := start(t, statetest.For(newLockState), j)
		defer f.stop()
		ctx := context.Background()
		set := f.set(true)
		f.lock(set, txn(30), lock.R, 1)
		if v, err := f.svc.Prepare(ctx, mgrProto(), 30, djinn.ID{}); err != nil || v != djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
			t.Fatalf("prepare of a holder: %v %v, want PREPARED", v, err)
		}
		j.mu.Lock()
		j.voting[30] = true
		j.mu.Unlock()
		if _, _, err := f.svc.Lock(ctx, set, txn(30), lock.W, 0, false, 2); !errors.Is(err, djinn.ErrCannotJoin) {
			t.Fatalf("a lock after the vote: %v, want CannotJoin", err)
		}
		v, _, _ := f.svc.Describe(ctx, set)
		if len(v.Holders) != 1 || len(v.Holders[0].Locks) != 1 {
			t.Fatalf("after the refused lock: %+v, want the one R lock", v.Holders)
		}
		if err := f.svc.End(ctx, mgrProto(), 30, djinn.ID{}, true); err != nil {
			t.Fatal(err)
		}
		if v, _, _ := f.svc.Describe(ctx, set); len(v.Holders) != 0 {
			t.Fatalf("after the commit: %+v, want no holders", v.Holders)
		}
	})
}
