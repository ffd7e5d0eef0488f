package txn_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The vote's forms (vote.go): a top-level transaction is voted without a
// VOTING record unless the vote turns slow or its lease ends too soon;
// its participants are asked at once, on a bounded set of workers.

// logged returns the kinds of the commands in the log about transaction
// id, in order.
func (f *fixture) logged(id uint64) []string {
	var out []string
	for _, c := range f.log.Commands() {
		switch op := c.Op.(type) {
		case *statepb.Command_TxnCreate:
			if op.TxnCreate.GetId() == id {
				out = append(out, "create")
			}
		case *statepb.Command_TxnJoin:
			if op.TxnJoin.GetId() == id {
				out = append(out, "join")
			}
		case *statepb.Command_TxnVoting:
			if op.TxnVoting.GetId() == id {
				out = append(out, "voting")
			}
		case *statepb.Command_TxnDecide:
			if op.TxnDecide.GetId() == id {
				out = append(out, "decide")
			}
		}
	}
	return out
}

// TX.2.8: the manager's one commit point is its decision. A top-level
// commit whose participants answer at once logs the transaction, its
// joins and the decision — no VOTING record — and the decision names the
// participant list it asked.
func TestCommitLogsNoVotingRecord(t *testing.T) {
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
		if got := fmt.Sprint(f.logged(c.ID)); got != "[create join join decide]" {
			t.Fatalf("logged %s, want [create join join decide]", got)
		}
		for _, cmd := range f.log.Commands() {
			if d := cmd.GetTxnDecide(); d != nil && d.GetVersion() != 3 {
				t.Errorf("decision of version %d, want 3: the list after two joins (2), plus one", d.GetVersion())
			}
		}
	})
}

// TX.2.7, TX.2.3: while a vote without a VOTING record runs, the
// transaction is VOTING to getState, a new participant's join is refused
// (CannotJoin) as after the record, and a known participant joining with
// another crash count aborts it (CrashCount).
func TestVoteWithoutRecordRefusesJoins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil)
		f.parts.mu.Lock()
		f.parts.slow["b prepare"] = time.Second
		f.parts.mu.Unlock()
		c := f.create(time.Minute)
		f.join(c.ID, "a", "b")
		done := make(chan error, 1)
		go func() { done <- f.svc.Commit(context.Background(), c.ID, nil) }()
		synctest.Wait() // b is preparing
		if s := f.state(c.ID); s != txn.Voting {
			t.Fatalf("TX.2.7 getState during the vote: %v, want VOTING", s)
		}
		wantKind(t, "TX.2.3 join of a new participant during the vote", f.svc.Join(context.Background(), c.ID, txn.SecretOf(f.svc, c.ID), part("c"), 1), djinn.CannotJoin)
		wantKind(t, "TX.2.3 join again with the same crash count during the vote", f.svc.Join(context.Background(), c.ID, txn.SecretOf(f.svc, c.ID), part("a"), 1), djinn.CannotJoin)
		wantKind(t, "TX.2.3 join with another crash count during the vote", f.svc.Join(context.Background(), c.ID, txn.SecretOf(f.svc, c.ID), part("a"), 2), djinn.CrashCount)
		wantKind(t, "commit of a transaction a participant lost", <-done, djinn.CannotCommit)
		if in, _ := f.log.State.Get(c.ID); in.State != txn.Aborted || len(in.Parts) != 2 {
			t.Fatalf("state %v with %d participants, want ABORTED with a and b", in.State, len(in.Parts))
		}
	})
}

// TX.2.3: a decision names the participant list its vote asked; a commit
// of a transaction whose list changed since — a join the leader let
// through just before the vote began, applied after — aborts it instead.
func TestDecisionForAnotherListAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		c := f.create(time.Minute)
		f.join(c.ID, "a")
		in, _ := f.log.State.Get(c.ID)
		f.join(c.ID, "b") // after the vote read the list
		_, err := f.log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_TxnDecide{TxnDecide: &statepb.TxnDecide{
			Id: c.ID, Commit: true, Prepared: []uint32{0}, Votes: []int32{int32(txn.Prepared)}, Version: in.Version + 1}}})
		wantKind(t, "TX.2.3 commit of a list that changed", err, djinn.CannotCommit)
		if s := f.state(c.ID); s != txn.Aborted {
			t.Fatalf("state %v, want ABORTED", s)
		}
		// The list asked: the ACTIVE transaction commits.
		d := f.create(time.Minute)
		f.join(d.ID, "a", "b")
		in, _ = f.log.State.Get(d.ID)
		if _, err := f.log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_TxnDecide{TxnDecide: &statepb.TxnDecide{
			Id: d.ID, Commit: true, Prepared: []uint32{0, 1}, Votes: []int32{int32(txn.Prepared), int32(txn.Prepared)}, Version: in.Version + 1}}}); err != nil {
			t.Fatal(err)
		}
		if s := f.state(d.ID); s != txn.Committed {
			t.Fatalf("state %v, want COMMITTED", s)
		}
	})
}

// TX.2.1: once the manager received a commit, the lease's end changes
// nothing. A vote still undecided one call's time after it began records
// VOTING and goes on; the lease may then end, and the vote decides.
func TestSlowVoteRecordsVoting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil)
		f.parts.mu.Lock()
		f.parts.slow["b prepare"] = 40 * time.Second // past the call timeout (10s) and the lease
		f.parts.mu.Unlock()
		c := f.create(30 * time.Second)
		f.join(c.ID, "a", "b")
		if err := f.svc.Commit(context.Background(), c.ID, nil); err != nil {
			t.Fatalf("commit of a slow vote whose lease ended meanwhile: %v", err)
		}
		if got := fmt.Sprint(f.logged(c.ID)); got != "[create join join voting decide]" {
			t.Fatalf("logged %s, want [create join join voting decide]", got)
		}
		if in, _ := f.log.State.Get(c.ID); in.State != txn.Committed {
			t.Fatalf("state %v, want COMMITTED", in.State)
		}
	})
}

// TX.2.1: a vote that begins with less than two calls' time left on the
// lease records VOTING before it asks anyone, so that the lease cannot end
// the transaction under it; so does a vote that must ask a participant
// again.
func TestVotingFirstForShortLeaseOrRetry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lease time.Duration
		fail  bool // b's first prepare fails
	}{
		{"lease under two calls' time", 15 * time.Second, false},
		{"a participant asked again", time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture(t)
				defer f.stop()
				f.parts.set("a", txn.Prepared, nil)
				f.parts.set("b", txn.Prepared, nil)
				c := f.create(tc.lease)
				f.join(c.ID, "a", "b")
				var mu sync.Mutex
				var states []djinnpb.TransactionState
				failed := false
				f.parts.onCall = func(p *djinnpb.Ref, op string, id uint64) {
					in, _ := f.log.State.Get(id)
					mu.Lock()
					defer mu.Unlock()
					if op == "prepare" {
						states = append(states, in.State)
					}
					if tc.fail && name(p) == "b" && !failed {
						failed = true
						f.parts.failOp("b prepare", djinn.Errorf(djinn.Unavailable, "b: down a moment"))
					} else if name(p) == "b" {
						f.parts.failOp("b prepare", nil)
					}
				}
				if err := f.svc.Commit(context.Background(), c.ID, nil); err != nil {
					t.Fatal(err)
				}
				if got := fmt.Sprint(f.logged(c.ID)); got != "[create join join voting decide]" {
					t.Fatalf("logged %s, want [create join join voting decide]", got)
				}
				mu.Lock()
				defer mu.Unlock()
				if !tc.fail && (len(states) != 2 || states[0] != txn.Voting || states[1] != txn.Voting) {
					t.Fatalf("states at the prepares %v: want VOTING recorded before the first", states)
				}
			})
		})
	}
}

// The votes share Workers goroutines: with 2, no more than 2 calls to
// participants that block on the worker (participants in the manager's
// process) run at once, however many transactions commit together, and
// every one commits.
func TestVotesShareBoundedWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixtureConfig(t, nil, func(c *txn.Config, parts *fakeParts) { c.Workers, c.Participants = 2, txn.Blocking(parts) })
		defer f.stop()
		f.parts.mu.Lock()
		for _, n := range []string{"a", "b", "c"} {
			f.parts.vote[n] = txn.Prepared
			f.parts.slow[n+" prepare"] = 100 * time.Millisecond
		}
		f.parts.mu.Unlock()
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			c := f.create(time.Minute)
			f.join(c.ID, "a", "b", "c")
			wg.Go(func() { errs <- f.svc.Commit(context.Background(), c.ID, nil) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		f.parts.mu.Lock()
		defer f.parts.mu.Unlock()
		if f.parts.most > 2 {
			t.Fatalf("%d calls ran at once on 2 workers", f.parts.most)
		}
		if got := count(f.parts.calls, "a prepare") + count(f.parts.calls, "b prepare") + count(f.parts.calls, "c prepare"); got != 60 {
			t.Fatalf("%d prepares, want 60", got)
		}
	})
}

// A vote without a VOTING record that the term's end cuts short leaves
// the transaction ACTIVE, and its commit fails as Unavailable (commit
// again at the next leader): nothing in the log says a vote began.
func TestVoteWithoutRecordStopsWithTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil)
		f.parts.mu.Lock()
		f.parts.slow["b prepare"] = time.Second
		f.parts.mu.Unlock()
		c := f.create(time.Minute)
		f.join(c.ID, "a", "b")
		done := make(chan error, 1)
		go func() { done <- f.svc.Commit(context.Background(), c.ID, nil) }()
		synctest.Wait() // b is preparing
		f.stop()
		wantKind(t, "commit whose vote the term's end stopped", <-done, djinn.Unavailable)
		if in, _ := f.log.State.Get(c.ID); in.State != txn.Active {
			t.Fatalf("state %v, want ACTIVE: no record of the vote", in.State)
		}
	})
}

// Forgetting takes every transaction settled past the retention time, in
// as many records as it needs, not one batch per pass.
func TestForgetTakesEverySettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		const n = 5000 // more than one TxnForget's batch
		for range n {
			c := f.create(time.Minute)
			if err := f.svc.Commit(context.Background(), c.ID, nil); err != nil {
				t.Fatal(err)
			}
		}
		if all, _ := f.log.State.Len(); all != n {
			t.Fatalf("%d transactions remembered, want %d", all, n)
		}
		time.Sleep(time.Hour + 7*time.Minute) // the retention, and a pass of forgetting
		synctest.Wait()
		if all, _ := f.log.State.Len(); all != 0 {
			t.Fatalf("%d transactions remembered past the retention time, want 0", all)
		}
	})
}
