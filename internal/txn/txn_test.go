package txn_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// fakeParts are in-memory participants: each answers prepare with its
// scripted vote (or error) and records every call it gets.
type fakeParts struct {
	mu    sync.Mutex
	vote  map[string]djinnpb.TransactionState
	fail  map[string]error // every call fails with it
	opErr map[string]error // "name op" fails with it
	slow  map[string]time.Duration
	// hold, when set, holds every commit call until it is closed.
	hold  chan struct{}
	calls []string // "name op"
	byID  []string // "name op id"
	// onCall, when set, runs as each call arrives, before anything else.
	onCall func(p *djinnpb.Ref, op string, id uint64)
	// inflight and most count the calls under way, and the most at once.
	inflight, most int
	heard          []djinn.ID // the secrets of the calls, in order
}

// secrets returns the secrets the calls carried.
func (f *fakeParts) secrets() []djinn.ID {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]djinn.ID(nil), f.heard...)
}

func (f *fakeParts) hear(s djinn.ID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heard = append(f.heard, s)
}

func name(p *djinnpb.Ref) string { return string(p.GetObjectId()[:1]) }

func (f *fakeParts) call(p *djinnpb.Ref, op string, id uint64) error {
	f.mu.Lock()
	d, on := f.slow[name(p)+" "+op], f.onCall
	f.inflight++
	f.most = max(f.most, f.inflight)
	f.mu.Unlock()
	if on != nil {
		on(p, op, id)
	}
	time.Sleep(d)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inflight--
	f.calls = append(f.calls, name(p)+" "+op)
	f.byID = append(f.byID, fmt.Sprintf("%s %s %d", name(p), op, id))
	if err := f.opErr[name(p)+" "+op]; err != nil {
		return err
	}
	return f.fail[name(p)]
}

func (f *fakeParts) Prepare(_ context.Context, p *djinnpb.Ref, _ djinn.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	f.hear(secret)
	if err := f.call(p, "prepare", id); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.vote[name(p)], nil
}

func (f *fakeParts) PrepareAndCommit(_ context.Context, p *djinnpb.Ref, _ djinn.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	f.hear(secret)
	if err := f.call(p, "prepareAndCommit", id); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if v := f.vote[name(p)]; v != txn.Prepared {
		return v, nil
	}
	return txn.Committed, nil
}

func (f *fakeParts) Commit(ctx context.Context, p *djinnpb.Ref, _ djinn.Ref, id uint64, secret djinn.ID) error {
	f.hear(secret)
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return djinn.Errorf(djinn.Unavailable, "%s: held: %v", name(p), ctx.Err())
		}
	}
	return f.call(p, "commit", id)
}

func (f *fakeParts) Abort(_ context.Context, p *djinnpb.Ref, _ djinn.Ref, id uint64, secret djinn.ID) error {
	f.hear(secret)
	return f.call(p, "abort", id)
}

func (f *fakeParts) gotByID() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.byID...)
}

func (f *fakeParts) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeParts) set(n string, v djinnpb.TransactionState, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vote[n], f.fail[n] = v, err
}

func (f *fakeParts) failOp(call string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opErr[call] = err
}

func part(n string) *djinnpb.Ref {
	obj := make([]byte, 16)
	copy(obj, n)
	return &djinnpb.Ref{Endpoint: "127.0.0.1:9", ServiceId: make([]byte, 16), ObjectId: obj}
}

type fixture struct {
	t *testing.T
	// managers, when set, is the other managers the service calls.
	managers txn.Managers
	log      statetest.Service[*txn.State]
	lessor   *lease.Lessor
	svc      *txn.Service
	parts    *fakeParts
	stop     func()
	// ahead moves the service's clock ahead of the lessor's: a lease it
	// sees ended is not yet expired in the log.
	ahead atomic.Int64
}

func newTxnState(m *state.Machine) *txn.State { return txn.NewState(m.Leases) }

func newFixture(t *testing.T) *fixture { return newFixtureWith(t, nil) }

// newFixtureWith is newFixture with other managers to call.
func newFixtureWith(t *testing.T, managers txn.Managers) *fixture {
	return newFixtureConfig(t, managers, nil)
}

// remote calls the fake participants as participants in other processes
// are called: each call returns at once, and its answer comes from a
// goroutine of its own, so that a participant slow to answer holds none
// of the manager's workers.
type remote struct{ b txn.BlockingParticipants }

func (r remote) Call(ctx context.Context, timeout time.Duration, op txn.Op, p *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID, done func(djinnpb.TransactionState, error)) {
	go func() {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		done(txn.CallBlocking(ctx, r.b, op, p, mgr, id, secret))
	}()
}

// newFixtureConfig is newFixtureWith with the manager's configuration
// changed by configure, if not nil.
func newFixtureConfig(t *testing.T, managers txn.Managers, configure func(*txn.Config, *fakeParts)) *fixture {
	f := &fixture{t: t, managers: managers, log: statetest.For(newTxnState), parts: &fakeParts{vote: map[string]djinnpb.TransactionState{}, fail: map[string]error{}, opErr: map[string]error{}, slow: map[string]time.Duration{}}}
	f.lessor = lease.NewLessor(f.log.M.Leases, f.log, lease.Config{Slack: 10 * time.Second})
	self := djinn.Ref{Endpoint: "127.0.0.1:4161", Service: f.log.M.ServiceID(), Object: djinn.ID{'t'}}
	cfg := txn.Config{
		Participants: remote{f.parts}, VoteTimeout: 5 * time.Second, Abandon: time.Minute, Retention: time.Hour, Managers: f.managers,
	}
	if configure != nil {
		configure(&cfg, f.parts)
	}
	now := func() time.Time { return time.Now().Add(time.Duration(f.ahead.Load())) }
	svc, err := txn.New(f.log.State, f.lessor, f.log, now, func() djinn.Ref { return self }, cfg)
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

func (f *fixture) create(d time.Duration) txn.Created {
	f.t.Helper()
	c, err := f.svc.Create(context.Background(), d)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *fixture) join(id uint64, names ...string) {
	f.t.Helper()
	for _, n := range names {
		if err := f.svc.Join(context.Background(), id, txn.SecretOf(f.svc, id), part(n), 1); err != nil {
			f.t.Fatalf("join %s: %v", n, err)
		}
	}
}

func (f *fixture) state(id uint64) djinnpb.TransactionState {
	f.t.Helper()
	s, err := f.svc.GetState(context.Background(), id, txn.SecretOf(f.svc, id))
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func wantKind(t *testing.T, what string, err error, kind djinn.Kind) {
	t.Helper()
	if djinn.KindOf(err) != kind {
		t.Fatalf("%s: %v, want %s", what, err, kind)
	}
}

func count(calls []string, c string) int {
	n := 0
	for _, x := range calls {
		if x == c {
			n++
		}
	}
	return n
}

func dur(d time.Duration) *time.Duration { return &d }

func TestCreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		for _, d := range []time.Duration{0, -5} {
			_, err := f.svc.Create(context.Background(), d)
			wantKind(t, "TX.2.1 create with a non-positive lease", err, djinn.InvalidArgument)
		}
		a, b := f.create(time.Minute), f.create(djinn.Any)
		if a.ID == b.ID {
			t.Fatalf("two transactions share id %d", a.ID)
		}
		if f.state(a.ID) != txn.Active {
			t.Fatal("TX.2.5: a new transaction is ACTIVE")
		}
		_, err := f.svc.GetState(context.Background(), 999, txn.SecretOf(f.svc, 999))
		wantKind(t, "TX.2.7 getState of an unknown id", err, djinn.UnknownTransaction)
	})
}

func TestJoinRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		c := f.create(time.Minute)
		f.join(c.ID, "a")
		// TX.2.3: the same participant with the same crash count again is
		// accepted and ignored.
		f.join(c.ID, "a")
		in, _ := f.log.State.Get(c.ID)
		if len(in.Parts) != 1 {
			t.Fatalf("TX.2.3 repeated join: %d participants, want 1", len(in.Parts))
		}
		err := f.svc.Join(context.Background(), 999, txn.SecretOf(f.svc, 999), part("a"), 1)
		wantKind(t, "TX.2.3 join of an unknown transaction", err, djinn.UnknownTransaction)
		err = f.svc.Join(context.Background(), c.ID, txn.SecretOf(f.svc, c.ID), nil, 1)
		wantKind(t, "join with no participant", err, djinn.InvalidArgument)
		// TX.2.3: another crash count aborts the transaction.
		err = f.svc.Join(context.Background(), c.ID, txn.SecretOf(f.svc, c.ID), part("a"), 2)
		wantKind(t, "TX.2.3 join with another crash count", err, djinn.CrashCount)
		if f.state(c.ID) != txn.Aborted {
			t.Fatal("TX.2.3: a crash count mismatch must abort the transaction")
		}
		err = f.svc.Join(context.Background(), c.ID, txn.SecretOf(f.svc, c.ID), part("b"), 1)
		wantKind(t, "TX.2.3 join of an aborted transaction", err, djinn.CannotJoin)
	})
}

func TestCommitAllPrepared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil)
		c := f.create(time.Minute)
		f.join(c.ID, "a", "b")
		if err := f.svc.Commit(context.Background(), c.ID, dur(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if f.state(c.ID) != txn.Committed {
			t.Fatal("TX.2.7: all PREPARED commits")
		}
		calls := f.parts.got()
		for _, want := range []string{"a prepare", "b prepare", "a commit", "b commit"} {
			if count(calls, want) != 1 {
				t.Fatalf("calls %v: want one %q", calls, want)
			}
		}
		// TX.2.5: commit again returns; abort is CannotAbort.
		if err := f.svc.Commit(context.Background(), c.ID, nil); err != nil {
			t.Fatalf("TX.2.5 commit of a committed transaction: %v", err)
		}
		wantKind(t, "TX.2.5 abort of a committed transaction", f.svc.Abort(context.Background(), c.ID, nil), djinn.CannotAbort)
	})
}

func TestCommitAbortedVote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Aborted, nil)
		f.parts.set("c", txn.Prepared, nil)
		c := f.create(time.Minute)
		f.join(c.ID, "a", "b", "c")
		wantKind(t, "TX.2.7 commit with an ABORTED vote", f.svc.Commit(context.Background(), c.ID, nil), djinn.CannotCommit)
		synctest.Wait()
		calls := f.parts.got()
		// TX.2.7: abort goes to those that voted PREPARED, and to those
		// not asked, but not to the one that voted ABORTED.
		if count(calls, "a abort") != 1 || count(calls, "c abort") != 1 || count(calls, "b abort") != 0 {
			t.Fatalf("calls %v: want abort to a and c only", calls)
		}
		if count(calls, "a commit")+count(calls, "c commit") != 0 {
			t.Fatalf("calls %v: a commit was sent for an aborted transaction", calls)
		}
		wantKind(t, "TX.2.5 commit of an aborted transaction", f.svc.Commit(context.Background(), c.ID, nil), djinn.CannotCommit)
		if err := f.svc.Abort(context.Background(), c.ID, nil); err != nil {
			t.Fatalf("TX.2.5 abort of an aborted transaction: %v", err)
		}
	})
}

// TX.2.7: every participant is asked to prepare at once — the manager
// never sends prepareAndCommit in a vote of its own (the spec allows it,
// not requires it: it would have to ask the last participant after the
// others) — NOTCHANGED participants are dropped, and the PREPARED ones
// told to commit.
func TestNotChangedAndPreparesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.NotChanged, nil)
		f.parts.set("b", txn.NotChanged, nil)
		f.parts.set("c", txn.Prepared, nil)
		c := f.create(time.Minute)
		f.join(c.ID, "a", "b", "c")
		if err := f.svc.Commit(context.Background(), c.ID, dur(time.Minute)); err != nil {
			t.Fatal(err)
		}
		calls := f.parts.got()
		for _, n := range []string{"a", "b", "c"} {
			if count(calls, n+" prepare") != 1 {
				t.Fatalf("calls %v: want one prepare to %s", calls, n)
			}
		}
		if count(calls, "c prepareAndCommit") != 0 || count(calls, "c commit") != 1 {
			t.Fatalf("calls %v: want c told to commit after its PREPARED vote", calls)
		}
		if count(calls, "a commit")+count(calls, "b commit") != 0 {
			t.Fatalf("calls %v: NOTCHANGED participants must be dropped", calls)
		}
		// A single participant is asked the same way.
		d := f.create(time.Minute)
		f.join(d.ID, "c")
		if err := f.svc.Commit(context.Background(), d.ID, dur(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if count(f.parts.got(), "c prepareAndCommit") != 0 || count(f.parts.got(), "c commit") != 2 {
			t.Fatalf("calls %v: one participant gets prepare, then commit", f.parts.got())
		}
		// All NOTCHANGED: COMMITTED, read-only.
		e := f.create(time.Minute)
		f.join(e.ID, "a", "b")
		if err := f.svc.Commit(context.Background(), e.ID, nil); err != nil || f.state(e.ID) != txn.Committed {
			t.Fatalf("all NOTCHANGED: %v, state %v; want COMMITTED", err, f.state(e.ID))
		}
	})
}

// TX.2.7: a vote taken again for a VOTING record of an older manager —
// one that does not say the vote asks prepare only — asks the last
// participant after the others, prepareAndCommit after only NOTCHANGED
// votes: that manager may have sent it one already.
func TestOlderVotingRecordPrepareAndCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.NotChanged, nil)
		f.parts.set("c", txn.Prepared, nil)
		c := f.create(time.Minute)
		f.join(c.ID, "a", "c")
		if _, err := f.log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_TxnVoting{TxnVoting: &statepb.TxnVoting{Id: c.ID}}}); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.Commit(context.Background(), c.ID, nil); err != nil {
			t.Fatal(err)
		}
		if calls := f.parts.got(); !slices.Equal(calls, []string{"a prepare", "c prepareAndCommit"}) {
			t.Fatalf("calls %v: want a prepare, then c prepareAndCommit", calls)
		}
		if f.state(c.ID) != txn.Committed {
			t.Fatalf("state %v, want COMMITTED", f.state(c.ID))
		}
	})
}

// TX.2.7: a PREPARED participant is told to commit at reasonable
// intervals until it has rolled forward; a waitFor commit that runs out
// first gives TimeoutExpired with committed true.
func TestCommitRetriedUntilRolledForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil)
		f.parts.failOp("b commit", djinn.Errorf(djinn.Unavailable, "b: down"))
		c := f.create(time.Minute)
		f.join(c.ID, "a", "b")
		err := f.svc.Commit(context.Background(), c.ID, dur(2*time.Second))
		var de *djinn.Error
		if djinn.KindOf(err) != djinn.TimeoutExpired || !asError(err, &de) || !de.Committed {
			t.Fatalf("TX.2.5 commit waitFor with a participant down: %v, want TimeoutExpired{committed}", err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := count(f.parts.got(), "b commit"); n < 3 {
			t.Fatalf("b commit tried %d times in a minute: want retries", n)
		}
		f.parts.failOp("b commit", nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		d, err := f.svc.Describe(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range d.Participants {
			if !p.Notified {
				t.Fatalf("TX.2.7: participant %x not rolled forward after it came back", p.Participant.ObjectId)
			}
		}
		// TX.2.7: UnknownTransaction from commit means it rolled forward.
		e := f.create(time.Minute)
		f.join(e.ID, "a", "b")
		f.parts.failOp("b commit", djinn.Errorf(djinn.UnknownTransaction, "b: already done"))
		if err := f.svc.Commit(context.Background(), e.ID, dur(time.Minute)); err != nil {
			t.Fatalf("commit whose participant answers UnknownTransaction: %v", err)
		}
	})
}

// TX.2.5: an abort with waitFor that cannot reach a participant gives
// TimeoutExpired with committed false.
func TestAbortWaitForTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		d := f.create(time.Minute)
		f.join(d.ID, "a", "b")
		if err := f.svc.Abort(context.Background(), d.ID, dur(time.Minute)); err != nil {
			t.Fatalf("abort with waitFor and reachable participants: %v", err)
		}
		e := f.create(time.Minute)
		f.join(e.ID, "a", "b")
		f.parts.failOp("b abort", djinn.Errorf(djinn.Unavailable, "b: down"))
		err := f.svc.Abort(context.Background(), e.ID, dur(time.Second))
		var de *djinn.Error
		if djinn.KindOf(err) != djinn.TimeoutExpired || !asError(err, &de) || de.Committed {
			t.Fatalf("TX.2.5 abort waitFor with a participant down: %v, want TimeoutExpired{committed: false}", err)
		}
	})
}

func asError(err error, target **djinn.Error) bool {
	e, ok := err.(*djinn.Error)
	if ok {
		*target = e
	}
	return ok
}

func TestLeaseEndAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		c := f.create(time.Second)
		f.join(c.ID, "a")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if f.state(c.ID) != txn.Aborted {
			t.Fatal("TX.2.1: a transaction whose lease expired is ABORTED")
		}
		wantKind(t, "commit after the lease expired", f.svc.Commit(context.Background(), c.ID, nil), djinn.CannotCommit)
		// Cancelling the lease aborts too.
		d := f.create(time.Minute)
		f.join(d.ID, "a")
		var cookie djinn.ID
		copy(cookie[:], d.Lease.GetCookie())
		if errs := f.lessor.Cancel(context.Background(), []djinn.ID{cookie}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		if f.state(d.ID) != txn.Aborted {
			t.Fatal("TX.2.5: cancelling the lease aborts")
		}
		synctest.Wait()
		if count(f.parts.got(), "a abort") != 2 {
			t.Fatalf("calls %v: both aborts must be told to the participant", f.parts.got())
		}
	})
}

func TestUnknownFromPrepareAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", 0, djinn.Errorf(djinn.UnknownTransaction, "b: lost it"))
		c := f.create(time.Minute)
		f.join(c.ID, "a", "b")
		wantKind(t, "TX.2.7 prepare answered UnknownTransaction", f.svc.Commit(context.Background(), c.ID, nil), djinn.CannotCommit)
	})
}

// TX.2.1: the lease aborts a transaction only if it ends before the
// manager receives the commit; a lease that ends during the vote does
// not, and getState does not say ABORTED meanwhile.
func TestLeaseEndDuringVote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil)
		f.parts.mu.Lock()
		f.parts.slow["a prepare"] = 3 * time.Second
		f.parts.mu.Unlock()
		c := f.create(2 * time.Second)
		f.join(c.ID, "a", "b")
		done := make(chan error, 1)
		go func() { done <- f.svc.Commit(context.Background(), c.ID, nil) }()
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if s := f.state(c.ID); s != txn.Voting {
			t.Fatalf("state with the lease ended during the vote: %v, want VOTING", s)
		}
		if err := <-done; err != nil {
			t.Fatalf("commit whose lease ended during the vote: %v", err)
		}
		if s := f.state(c.ID); s != txn.Committed {
			t.Fatalf("state: %v, want COMMITTED", s)
		}
	})
}

// TestLeaseEndsWithTheOutcome: a transaction's lease holds it ACTIVE
// (TX.2.1); once the transaction is COMMITTED or ABORTED — by commit,
// abort, a vote, or its parent's abort — the lease is gone.
func TestLeaseEndsWithTheOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Aborted, nil)
		ctx := context.Background()
		cookie := func(c txn.Created) djinn.ID {
			var id djinn.ID
			copy(id[:], c.Lease.GetCookie())
			return id
		}
		live := func(c txn.Created) bool {
			_, ok := f.log.M.Leases.Lookup(cookie(c), time.Now())
			return ok
		}
		committed, aborted, refused := f.create(time.Hour), f.create(time.Hour), f.create(time.Hour)
		f.join(committed.ID, "a")
		f.join(refused.ID, "b")
		parent := f.create(time.Hour)
		child, err := f.svc.CreateNested(ctx, parent.ID, txn.SecretOf(f.svc, parent.ID), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []txn.Created{committed, aborted, refused, parent, child} {
			if !live(c) {
				t.Fatalf("transaction %d: no live lease while ACTIVE", c.ID)
			}
		}
		if err := f.svc.Commit(ctx, committed.ID, nil); err != nil {
			t.Fatal(err)
		}
		if err := f.svc.Abort(ctx, aborted.ID, nil); err != nil {
			t.Fatal(err)
		}
		wantKind(t, "commit with an ABORTED vote", f.svc.Commit(ctx, refused.ID, nil), djinn.CannotCommit)
		if err := f.svc.Abort(ctx, parent.ID, nil); err != nil {
			t.Fatal(err)
		}
		for _, c := range []txn.Created{committed, aborted, refused, parent, child} {
			if live(c) {
				t.Errorf("transaction %d (%v): its lease outlived the outcome", c.ID, f.state(c.ID))
			}
		}
		// Renewing it says so, as for any ended lease.
		_, err = f.lessor.Renew(ctx, cookie(committed), time.Minute)
		wantKind(t, "renewing a committed transaction's lease", err, djinn.UnknownLease)
	})
}

// TestListAndOwnership: List pages through the caller's own transactions
// by id, filtered by state; Describe shows a transaction only to the
// principal that created it (DESIGN.md 7: others get "not found").
func TestListAndOwnership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		alice, bob := principal.With(context.Background(), "alice"), principal.With(context.Background(), "bob")
		var mine []uint64
		for range 25 {
			c, err := f.svc.Create(alice, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			mine = append(mine, c.ID)
		}
		theirs, err := f.svc.Create(bob, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(mine)
		if err := f.svc.Abort(alice, mine[3], nil); err != nil {
			t.Fatal(err)
		}
		var got []uint64
		for after, pages := uint64(0), 0; ; pages++ {
			ds, next, err := f.svc.List(alice, after, 10, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				got = append(got, d.GetId())
			}
			if next == 0 {
				if pages != 2 {
					t.Errorf("%d pages of 10 for 25 transactions, want 3", pages+1)
				}
				break
			}
			after = next
		}
		if !slices.Equal(got, mine) {
			t.Fatalf("listed %v, want alice's %v by id", got, mine)
		}
		ds, _, err := f.svc.List(alice, 0, 0, txn.Aborted)
		if err != nil || len(ds) != 1 || ds[0].GetId() != mine[3] || ds[0].GetLease() != nil {
			t.Fatalf("aborted only: %v %v, want %d without a lease", ds, err, mine[3])
		}
		ds, _, err = f.svc.List(bob, 0, 0, 0)
		if err != nil || len(ds) != 1 || ds[0].GetId() != theirs.ID {
			t.Fatalf("bob lists %v %v, want only his %d", ds, err, theirs.ID)
		}
		for _, limit := range []int{-1, txn.MaxList + 1} {
			_, _, err := f.svc.List(alice, 0, limit, 0)
			wantKind(t, fmt.Sprintf("limit %d", limit), err, djinn.InvalidArgument)
		}
		_, _, err = f.svc.List(alice, 0, 0, 99)
		wantKind(t, "state 99", err, djinn.InvalidArgument)

		_, err = f.svc.Describe(bob, mine[0])
		wantKind(t, "bob describing alice's transaction", err, djinn.UnknownTransaction)
		wantKind(t, "bob committing alice's transaction", f.svc.Commit(bob, mine[0], nil), djinn.UnknownTransaction)
		if _, err := f.svc.Describe(alice, mine[0]); err != nil {
			t.Fatal(err)
		}
	})
}

// TestIDsAreDrawn: ids are positive, distinct and not a sequence, so one
// transaction's id tells nothing of another's.
func TestIDsAreDrawn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		seen := map[uint64]bool{}
		var prev uint64
		consecutive := 0
		for range 200 {
			id := f.create(time.Hour).ID
			if id == 0 || id > math.MaxInt64 || seen[id] {
				t.Fatalf("id %d: want positive as a Java long, and new", id)
			}
			if id == prev+1 {
				consecutive++
			}
			seen[id], prev = true, id
		}
		if consecutive > 2 {
			t.Errorf("%d of 200 ids followed the one before: a sequence", consecutive)
		}
	})
}

// TestMaxParticipantsAtApply: the bound on participants holds however
// many joins race past the leader's check — the log entry carries it.
func TestMaxParticipantsAtApply(t *testing.T) {
	m := state.New()
	statetest.Add(m, newTxnState(m))
	log := statetest.Over(m)
	c := logCreate(t, log)
	for i, want := range []djinn.Kind{"", "", djinn.ResourceExhausted} {
		_, err := log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_TxnJoin{TxnJoin: &statepb.TxnJoin{
			Id: c, Participant: part(string(rune('a' + i))), CrashCount: 1, MaxParticipants: 2,
		}}})
		if djinn.KindOf(err) != want {
			t.Fatalf("join %d of at most 2: %v, want %q", i+1, err, want)
		}
	}
	// A repeated join of a joined participant is still accepted.
	if _, err := log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_TxnJoin{TxnJoin: &statepb.TxnJoin{
		Id: c, Participant: part("a"), CrashCount: 1, MaxParticipants: 2,
	}}}); err != nil {
		t.Fatalf("repeated join at the bound: %v", err)
	}
}

// logCreate logs the creation of a transaction and returns its id.
func logCreate(t *testing.T, log *statetest.Log) uint64 {
	t.Helper()
	res, err := log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_TxnCreate{TxnCreate: &statepb.TxnCreate{
		Cookie: make([]byte, 16), ExpiresUnixNanos: time.Now().Add(time.Hour).UnixNano(), Id: 42,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.(txn.Info).ID
}

// TestRunWaitsForItsVotes: the votes a leader runs end with its term —
// undecided, for the next leader to vote again — and Run returns only
// once they have: no vote goes on calling participants after it.
func TestRunWaitsForItsVotes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", 0, djinn.Errorf(djinn.Unavailable, "b: unreachable")) // retried until the vote timeout
		c := f.create(time.Minute)
		f.join(c.ID, "a", "b")
		ctx, cancel := context.WithCancel(context.Background())
		committed := make(chan error, 1)
		go func() { committed <- f.svc.Commit(ctx, c.ID, nil) }()
		time.Sleep(time.Second) // the vote is retrying b
		synctest.Wait()
		if count(f.parts.got(), "b prepare") == 0 {
			t.Fatal("the vote did not start")
		}
		f.stop() // the term ends: Run returns
		calls := len(f.parts.got())
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := f.parts.got(); len(got) != calls {
			t.Fatalf("after Run returned, the vote went on calling: %v", got[calls:])
		}
		if in, _ := f.log.State.Get(c.ID); in.State != txn.Voting {
			t.Fatalf("a vote cut short by the term's end decided %v; want it left VOTING for the next leader", in.State)
		}
		cancel()
		<-committed
	})
}
