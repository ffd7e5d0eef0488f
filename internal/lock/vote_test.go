package lock_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

const (
	aborted    = djinnpb.TransactionState_TRANSACTION_STATE_ABORTED
	notChanged = djinnpb.TransactionState_TRANSACTION_STATE_NOTCHANGED
	voting     = djinnpb.TransactionState_TRANSACTION_STATE_VOTING
)

// voteAborted has transaction id vote ABORTED: it holds a lock in one
// set and waits for one in another, held by transaction id+1.
func (f *fixture) voteAborted(id uint64, secret djinn.ID) {
	f.t.Helper()
	ctx := context.Background()
	set, other := f.set(true), f.set(true)
	f.lock(set, txn(id+1), lock.W, 0)
	f.lock(other, txn(id), lock.R, 0)
	waited := make(chan error, 1)
	go func() { _, _, err := f.svc.Lock(ctx, set, txn(id), lock.W, 0, false, 0); waited <- err }()
	synctest.Wait()
	if v, err := f.svc.Prepare(ctx, mgrProto(), id, secret); err != nil || v != aborted {
		f.t.Fatalf("prepare with a lock request waiting: %v %v, want ABORTED", v, err)
	}
	if err := <-waited; !errors.Is(err, djinn.ErrTransactionRolledBack) {
		f.t.Fatalf("the waiting request: %v, want TransactionRolledBack", err)
	}
}

func (f *fixture) prepare(id uint64, secret djinn.ID) djinnpb.TransactionState {
	f.t.Helper()
	v, err := f.svc.Prepare(context.Background(), mgrProto(), id, secret)
	if err != nil {
		f.t.Fatalf("prepare %d: %v", id, err)
	}
	return v
}

// TestAbortedVoteSurvivesRestart: TX.2.6 — a participant that voted
// ABORTED is ABORTED, and a prepare repeated in a post-VOTING state gets
// that state; the vote is in the replicated state, so a node restarted
// from a snapshot (or a new leader) answers a repeated prepare ABORTED,
// not NOTCHANGED (the locks were released: the transaction must not
// commit), refuses a lock under the transaction without asking the
// manager, and refuses a prepare under another secret.
func TestAbortedVoteSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &joiner{}
		f := start(t, statetest.For(newLockState), j)
		secret := djinn.ID{7}
		f.voteAborted(20, secret)
		f = f.restart()
		defer f.stop()
		if v := f.prepare(20, secret); v != aborted {
			t.Fatalf("a repeated prepare after a restart from a snapshot: %v, want ABORTED", v)
		}
		if v, err := f.svc.PrepareAndCommit(context.Background(), mgrProto(), 20, secret); err != nil || v != aborted {
			t.Fatalf("a repeated prepareAndCommit: %v %v, want ABORTED", v, err)
		}
		if _, err := f.svc.Prepare(context.Background(), mgrProto(), 20, djinn.ID{8}); !errors.Is(err, djinn.ErrUnknownTransaction) {
			t.Fatalf("a prepare under another secret: %v, want UnknownTransaction", err)
		}
		j.mu.Lock()
		joins := j.joins
		j.mu.Unlock()
		h := txn(20)
		h.Transaction.Secret = secret[:]
		if _, _, err := f.svc.Lock(context.Background(), f.set(true), h, lock.R, 0, true, 0); !errors.Is(err, djinn.ErrTransactionRolledBack) {
			t.Fatalf("a lock under the voted transaction: %v, want TransactionRolledBack", err)
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		if j.joins != joins {
			t.Fatalf("the refused lock joined the manager again (%d joins, want %d)", j.joins, joins)
		}
	})
}

// TestAbortedVoteForgotten: the vote is kept while the manager may still
// ask (TX.2.7: only an ACTIVE or VOTING transaction is voted on), and
// forgotten once it cannot: when the manager tells the outcome, or
// answers getState with a decided state.
func TestAbortedVoteForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := &joiner{}
		f := start(t, statetest.For(newLockState), j)
		defer f.stop()
		f.voteAborted(20, djinn.ID{})
		f.voteAborted(30, djinn.ID{})
		j.setState(20, voting)

		// VoteCheck (a minute) passes: the manager is asked; VOTING keeps
		// the vote.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		j.mu.Lock()
		asked := j.asked[20]
		j.mu.Unlock()
		if asked == 0 {
			t.Fatal("the manager was never asked about the ABORTED vote")
		}
		if v := f.prepare(20, djinn.ID{}); v != aborted {
			t.Fatalf("a prepare while the manager is VOTING: %v, want ABORTED", v)
		}
		// The manager decides: the vote is forgotten at the next check.
		j.setState(20, aborted)
		time.Sleep(time.Minute)
		synctest.Wait()
		if f.log.State.VotedAborted(lock.TxnKeyOf(mgrProto(), 20)) {
			t.Fatal("the vote is kept after the manager answered ABORTED")
		}
		if v := f.prepare(30, djinn.ID{}); v != aborted {
			t.Fatalf("a prepare of the other transaction, still ACTIVE at its manager: %v, want ABORTED", v)
		}
		// An abort told by the manager forgets the vote at once.
		if err := f.svc.End(context.Background(), mgrProto(), 30, djinn.ID{}, false); err != nil {
			t.Fatal(err)
		}
		if f.log.State.VotedAborted(lock.TxnKeyOf(mgrProto(), 30)) || f.log.State.Votes() != 0 {
			t.Fatalf("%d votes kept after the manager's abort, want none", f.log.State.Votes())
		}
		if v := f.prepare(30, djinn.ID{}); v != notChanged {
			t.Fatalf("a prepare after the vote was forgotten: %v, want NOTCHANGED (nothing held)", v)
		}
	})
}

// TestAbortedVotesReplayByRulesVersion: rules versions — a log replayed
// after a restart, from a snapshot taken at any entry, decides each entry
// by the rules version in force at it: a vote cast under version 1 is not
// kept and its transaction's later lock request is granted; one cast
// after the raise to 2 is kept and refuses it.
func TestAbortedVotesReplayByRulesVersion(t *testing.T) {
	set := djinn.NewID()
	holder := func(id uint64) *statepb.LockHolderState {
		return &statepb.LockHolderState{Manager: mgrProto(), Txn: id}
	}
	op := func(c any) *statepb.Command {
		switch c := c.(type) {
		case *statepb.LockTxnEnd:
			return &statepb.Command{NowUnixNanos: 1, Op: &statepb.Command_LockTxnEnd{LockTxnEnd: c}}
		case *statepb.LockAcquire:
			return &statepb.Command{NowUnixNanos: 1, Op: &statepb.Command_LockAcquire{LockAcquire: c}}
		case *statepb.RulesRaise:
			return &statepb.Command{NowUnixNanos: 1, Op: &statepb.Command_RulesRaise{RulesRaise: c}}
		}
		return &statepb.Command{NowUnixNanos: 1, Op: &statepb.Command_LockCreateSet{LockCreateSet: c.(*statepb.LockCreateSet)}}
	}
	id := djinn.NewID()
	log := []*statepb.Command{
		{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: id[:], RulesVersion: 1}}},
		op(&statepb.LockCreateSet{SetId: set[:], Cookie: set[:], ExpiresUnixNanos: 1 << 62, Transactional: true, Principal: "p"}),
		op(&statepb.LockTxnEnd{Manager: mgrProto(), Txn: 7, VotedAborted: true}),
		op(&statepb.RulesRaise{Version: 2}),
		op(&statepb.LockTxnEnd{Manager: mgrProto(), Txn: 8, VotedAborted: true}),
		op(&statepb.LockAcquire{SetId: set[:], Holder: holder(7), Mode: int32(lock.R), RequestId: 1, Principal: "p"}),
		op(&statepb.LockAcquire{SetId: set[:], Holder: holder(8), Mode: int32(lock.R), RequestId: 2, Principal: "p"}),
	}
	for cut := 1; cut <= len(log); cut++ {
		got, st := replayCutAt(t, log, cut)
		if err, _ := got[5].(error); err != nil {
			t.Errorf("snapshot after entry %d: the lock request of the transaction voted under rules 1: %v, want granted", cut, err)
		}
		if err, _ := got[6].(error); !errors.Is(err, djinn.ErrTransactionRolledBack) {
			t.Errorf("snapshot after entry %d: the lock request of the transaction voted under rules 2: %v, want TransactionRolledBack", cut, got[6])
		}
		if st.VotedAborted(lock.TxnKeyOf(mgrProto(), 7)) || !st.VotedAborted(lock.TxnKeyOf(mgrProto(), 8)) {
			t.Errorf("snapshot after entry %d: votes kept for 7 %v, 8 %v; want 8's alone", cut, st.VotedAborted(lock.TxnKeyOf(mgrProto(), 7)), st.VotedAborted(lock.TxnKeyOf(mgrProto(), 8)))
		}
	}
}

// TestAbortedVoteUnderRulesOne: TX.2.6 under rules version 1 (a rolling
// upgrade, a member of an older binary in the cluster): the vote is not
// kept in the state, but the leader that voted remembers it, so a prepare
// repeated there still gets ABORTED; the manager's abort forgets it.
func TestAbortedVoteUnderRulesOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := start(t, statetest.For(func(m *state.Machine) *lock.State {
			return lock.NewState(m.Leases, func() uint32 { return 1 })
		}), &joiner{})
		defer f.stop()
		f.voteAborted(20, djinn.ID{})
		if f.log.State.VotedAborted(lock.TxnKeyOf(mgrProto(), 20)) {
			t.Fatal("the vote is kept in the state under rules version 1")
		}
		if v := f.prepare(20, djinn.ID{}); v != aborted {
			t.Fatalf("a prepare repeated at the leader that voted: %v, want ABORTED", v)
		}
		if err := f.svc.End(context.Background(), mgrProto(), 20, djinn.ID{}, false); err != nil {
			t.Fatal(err)
		}
		if v := f.prepare(20, djinn.ID{}); v != notChanged {
			t.Fatalf("a prepare after the manager's abort: %v, want NOTCHANGED (forgotten)", v)
		}
	})
}

// replayCutAt applies log to a fresh lock state up to entry cut, takes a
// snapshot there, restores it into another fresh state and applies the
// rest: the results of every entry, in order, and the restored state.
func replayCutAt(t *testing.T, log []*statepb.Command, cut int) ([]any, *lock.State) {
	t.Helper()
	apply := func(m *state.Machine, first int, cmds []*statepb.Command) []any {
		var out []any
		for i, c := range cmds {
			out = append(out, m.Apply(uint64(first+i), c))
		}
		return out
	}
	fresh := func() (*state.Machine, *lock.State) {
		m := state.New()
		return m, statetest.Add(m, lock.NewState(m.Leases, m.Rules))
	}
	m, _ := fresh()
	got := apply(m, 1, log[:cut])
	write, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var snap bytes.Buffer
	if err := write(&snap); err != nil {
		t.Fatal(err)
	}
	again, st := fresh()
	if err := again.Restore(&snap); err != nil {
		t.Fatal(err)
	}
	return append(got, apply(again, cut+1, log[cut:])...), st
}
