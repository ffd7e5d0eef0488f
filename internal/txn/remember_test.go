package txn_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// What the manager remembers of a settled transaction (decided, every
// participant told) until it forgets it: enough to answer a repeated
// commit, abort, getState and describe as before it settled, kept compact
// (shared participant references and closed channel), and for at most
// the retention time or [txn] max-remembered of them, the oldest
// forgotten first.

// settledSet is a set of settled transactions of every kind, made by
// settleAll.
type settledSet struct {
	committed, aborted, bare, parent, nested uint64
}

// settleAll settles, as alice: a transaction whose two participants
// voted PREPARED and committed, one a participant's ABORTED vote aborted,
// one without participants, and a parent committed with the transaction
// nested in it that committed into it.
func settleAll(t *testing.T, f *fixture, ctx context.Context) settledSet {
	t.Helper()
	f.parts.set("a", txn.Prepared, nil)
	f.parts.set("b", txn.Prepared, nil)
	f.parts.set("x", txn.Aborted, nil)
	create := func() uint64 {
		c, err := f.svc.Create(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	var s settledSet
	s.committed = create()
	f.join(s.committed, "a", "b")
	if err := f.svc.Commit(ctx, s.committed, dur(time.Minute)); err != nil {
		t.Fatal(err)
	}
	s.aborted = create()
	f.join(s.aborted, "a", "x")
	err := f.svc.Commit(ctx, s.aborted, dur(time.Minute))
	wantKind(t, "commit with an ABORTED vote", err, djinn.CannotCommit)
	s.bare = create()
	if err := f.svc.Commit(ctx, s.bare, dur(time.Minute)); err != nil {
		t.Fatal(err)
	}
	s.parent = create()
	f.join(s.parent, "a")
	n, err := f.svc.CreateNested(ctx, s.parent, txn.SecretOf(f.svc, s.parent), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	s.nested = n.ID
	f.join(s.nested, "b")
	if err := f.svc.Commit(ctx, s.nested, dur(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.Commit(ctx, s.parent, dur(time.Minute)); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	if n := f.log.State.UnsettledLen(); n != 0 {
		t.Fatalf("%d transactions unsettled, want every one settled", n)
	}
	return s
}

// infoLine is a transaction as Get returns it, without its channels.
func infoLine(in txn.Info) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s principal=%q parent=%d children=%v version=%d depth=%d remote=%d", in.ID, in.State, in.Principal, in.Parent, in.Children, in.Version, in.Depth, in.RemoteID)
	for _, p := range in.Parts {
		fmt.Fprintf(&b, " [%s %x %x crash=%d vote=%s told=%v]", p.Ref.GetEndpoint(), p.Ref.GetServiceId(), p.Ref.GetObjectId(), p.Crash, p.Vote, p.Notified)
	}
	return b.String()
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestSettledTransactionAnswersAsBefore: once settled (and compacted), a
// transaction answers a repeated commit, abort, getState and describe as
// its outcome says (TX.2.5, TX.2.7), its nested transactions too.
func TestSettledTransactionAnswersAsBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		alice := principal.With(context.Background(), "alice")
		s := settleAll(t, f, alice)
		state := func(id uint64, want djinnpb.TransactionState) func() error {
			return func() error {
				st, err := f.svc.GetState(alice, id, txn.SecretOf(f.svc, id))
				if err == nil && st != want {
					return djinn.Errorf(djinn.Internal, "state %s, want %s", st, want)
				}
				return err
			}
		}
		rows := []struct {
			name string
			call func() error
			want djinn.Kind // "" for success
		}{
			{"TX.2.5 a repeated commit of a committed transaction returns", func() error { return f.svc.Commit(alice, s.committed, dur(time.Minute)) }, ""},
			{"TX.2.5 an abort of a committed transaction is CannotAbort", func() error { return f.svc.Abort(alice, s.committed, nil) }, djinn.CannotAbort},
			{"TX.2.7 getState of a committed transaction is COMMITTED", state(s.committed, txn.Committed), ""},
			{"TX.2.5 a repeated abort of an aborted transaction returns", func() error { return f.svc.Abort(alice, s.aborted, dur(time.Minute)) }, ""},
			{"TX.2.5 a commit of an aborted transaction is CannotCommit", func() error { return f.svc.Commit(alice, s.aborted, nil) }, djinn.CannotCommit},
			{"TX.2.7 getState of an aborted transaction is ABORTED", state(s.aborted, txn.Aborted), ""},
			{"TX.2.5 a repeated commit of a transaction without participants returns", func() error { return f.svc.Commit(alice, s.bare, nil) }, ""},
			{"TX.2.7 getState of a nested transaction committed into its committed parent", state(s.nested, txn.Committed), ""},
			{"TX.2.5 a repeated commit of a nested transaction returns", func() error { return f.svc.Commit(alice, s.nested, nil) }, ""},
			{"TX.2.3 a join of a committed transaction is CannotJoin", func() error {
				return f.svc.Join(alice, s.committed, txn.SecretOf(f.svc, s.committed), part("c"), 1)
			}, djinn.CannotJoin},
			{"TX.2.3 a known participant's join with another crash count is still CrashCount", func() error {
				return f.svc.Join(alice, s.committed, txn.SecretOf(f.svc, s.committed), part("a"), 2)
			}, djinn.CrashCount},
			{"TX.2.2 a nested transaction under a committed one is CannotJoin", func() error {
				_, err := f.svc.CreateNested(alice, s.parent, txn.SecretOf(f.svc, s.parent), time.Minute)
				return err
			}, djinn.CannotJoin},
		}
		for _, r := range rows {
			err := r.call()
			if r.want == "" && err != nil {
				t.Errorf("%s: %v, want success", r.name, err)
			} else if r.want != "" {
				if k := djinn.KindOf(err); k != r.want {
					t.Errorf("%s: %v, want %s", r.name, err, r.want)
				}
			}
		}
		// A describe still shows the participants' votes, every one told.
		d, err := f.svc.Describe(alice, s.aborted)
		if err != nil {
			t.Fatal(err)
		}
		var votes []string
		for _, p := range d.GetParticipants() {
			votes = append(votes, fmt.Sprintf("%s:%s:%v", name(p.GetParticipant()), p.GetVote(), p.GetNotified()))
		}
		if want := []string{"a:TRANSACTION_STATE_PREPARED:true", "x:TRANSACTION_STATE_ABORTED:true"}; !slices.Equal(votes, want) {
			t.Errorf("describe of the aborted transaction: participants %v, want %v (why it aborted)", votes, want)
		}
		if d, err := f.svc.Describe(alice, s.parent); err != nil || !slices.Equal(d.GetChildren(), []uint64{s.nested}) {
			t.Errorf("describe of the parent: %v, %v; want it nests %d", d, err, s.nested)
		}
		for _, id := range []uint64{s.committed, s.aborted, s.bare, s.parent, s.nested} {
			in, err := f.log.State.Get(id)
			if err != nil || !closed(in.Decided) || !closed(in.Settled) {
				t.Errorf("transaction %d: %v; want it decided and settled", id, err)
			}
		}
	})
}

// TestSettledTransactionStaysItsOwners (DESIGN.md 7): a settled
// transaction is still its creator's: another principal gets
// UnknownTransaction from commit, abort and describe, a getState without
// its secret too, and does not list it.
func TestSettledTransactionStaysItsOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		alice, bob := principal.With(context.Background(), "alice"), principal.With(context.Background(), "bob")
		s := settleAll(t, f, alice)
		for _, id := range []uint64{s.committed, s.aborted, s.nested} {
			wantKind(t, "bob's commit", f.svc.Commit(bob, id, nil), djinn.UnknownTransaction)
			wantKind(t, "bob's abort", f.svc.Abort(bob, id, nil), djinn.UnknownTransaction)
			wantKind(t, "bob's ownership check", f.svc.CheckOwner(bob, id), djinn.UnknownTransaction)
			_, err := f.svc.Describe(bob, id)
			wantKind(t, "bob's describe", err, djinn.UnknownTransaction)
			_, err = f.svc.GetState(bob, id, djinn.ID{})
			wantKind(t, "getState without the secret", err, djinn.UnknownTransaction)
			if err := f.svc.CheckOwner(alice, id); err != nil {
				t.Errorf("alice's ownership check of %d: %v", id, err)
			}
		}
		if ds, _, err := f.svc.List(bob, 0, 0, 0); err != nil || len(ds) != 0 {
			t.Errorf("bob lists %v, %v; want none", ds, err)
		}
		ds, _, err := f.svc.List(alice, 0, 0, txn.Committed)
		if err != nil || len(ds) != 4 {
			t.Errorf("alice lists %d committed (%v), want 4", len(ds), err)
		}
	})
}

// TestMaxRememberedForgetsTheOldestFirst: beyond MaxRemembered settled
// transactions, the oldest settled are forgotten before the retention
// time; a repeated commit of one then gets UnknownTransaction. After a
// restart the oldest by decision time go first, though the snapshot holds
// them in any order.
func TestMaxRememberedForgetsTheOldestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixtureConfig(t, nil, func(c *txn.Config, _ *fakeParts) { c.MaxRemembered = 3 })
		var ids []uint64
		settleOne := func() {
			c := f.create(time.Minute)
			if err := f.svc.Commit(context.Background(), c.ID, nil); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, c.ID)
			time.Sleep(time.Second) // another decision time, and a pass of forgetting
			synctest.Wait()
		}
		for range 5 {
			settleOne()
		}
		remembered := func(f *fixture, want []uint64) {
			t.Helper()
			for _, id := range ids {
				_, err := f.log.State.Get(id)
				if slices.Contains(want, id) != (err == nil) {
					t.Errorf("transaction %d remembered: %v; want remembered %v of %v", id, err == nil, want, ids)
				}
			}
			if n := f.log.State.Remembered(); n != len(want) {
				t.Errorf("Remembered %d, want %d", n, len(want))
			}
		}
		remembered(f, ids[2:])
		wantKind(t, "a repeated commit of a forgotten transaction", f.svc.Commit(context.Background(), ids[0], nil), djinn.UnknownTransaction)
		if err := f.svc.Commit(context.Background(), ids[4], nil); err != nil {
			t.Fatalf("a repeated commit of a remembered transaction: %v", err)
		}

		// Restarted with the default bound, then with a bound of 1: the
		// newest stays.
		g := f.restart()
		remembered(g, ids[2:])
		g = g.restartConfig(func(c *txn.Config) { c.MaxRemembered = 1 })
		defer g.stop()
		time.Sleep(time.Second)
		synctest.Wait()
		remembered(g, ids[4:])
	})
}

// TestSettledSnapshotRoundTrip: a snapshot of settled (compacted)
// transactions restores to the same state, and records written by a
// binary that kept every participant's reference of its own restore
// compacted: equal transactions, references shared.
func TestSettledSnapshotRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		s := settleAll(t, f, principal.With(context.Background(), "alice"))
		active := f.create(time.Hour)
		f.join(active.ID, "a")
		ids := []uint64{s.committed, s.aborted, s.bare, s.parent, s.nested, active.ID}
		lines := func(st *txn.State) []string {
			var out []string
			for _, id := range ids {
				in, err := st.Get(id)
				if err != nil {
					out = append(out, fmt.Sprintf("%d: %v", id, err))
					continue
				}
				out = append(out, fmt.Sprintf("%s decided=%v settled=%v", infoLine(in), closed(in.Decided), closed(in.Settled)))
			}
			return out
		}
		want, wantRecords := lines(f.log.State), sortedRecords(f.log.State)
		g := f.restart()
		defer g.stop()
		if got := lines(g.log.State); !slices.Equal(got, want) {
			t.Errorf("after the snapshot's restore:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if got := sortedRecords(g.log.State); !recordsEqual(got, wantRecords) {
			t.Errorf("the restored state's snapshot differs from the one it restored")
		}
		if n, m := g.log.State.Remembered(), f.log.State.Remembered(); n != m || n != 4 {
			t.Errorf("Remembered %d after the restore, %d before; want 4 (the top-level settled ones)", n, m)
		}

		// Records as an older binary wrote them: each participant with a
		// reference of its own.
		old := statetest.For(newTxnState)
		old.State.Reset()
		for _, r := range wantRecords {
			r = proto.Clone(r).(*statepb.TxnRecord)
			for _, p := range r.GetParticipants() {
				p.Participant = proto.Clone(p.GetParticipant()).(*djinnpb.Ref)
			}
			if err := old.State.Restore(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := old.State.Restored(); err != nil {
			t.Fatal(err)
		}
		if got := lines(old.State); !slices.Equal(got, want) {
			t.Errorf("after restoring full records:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		a1, _ := old.State.Get(s.committed)
		a2, _ := old.State.Get(s.aborted)
		if a1.Parts[0].Ref != a2.Parts[0].Ref {
			t.Errorf("participant a restored as two references, want one shared")
		}
	})
}

func sortedRecords(st *txn.State) []*statepb.TxnRecord {
	_, rs := st.Records()
	slices.SortFunc(rs, func(a, b *statepb.TxnRecord) int {
		switch {
		case a.GetId() < b.GetId():
			return -1
		case a.GetId() > b.GetId():
			return 1
		}
		return 0
	})
	return rs
}

func recordsEqual(a, b []*statepb.TxnRecord) bool {
	return slices.EqualFunc(a, b, func(x, y *statepb.TxnRecord) bool { return proto.Equal(x, y) })
}

// TestReplayDecidesAlike: the log of a run — commits, aborts, a crash
// count's abort, nested transactions, forgets past MaxRemembered —
// replayed from a snapshot taken after any of its entries decides every
// later entry as the whole log replayed does, and ends in the same state:
// settling, and restoring, compact transactions changes nothing Apply
// decides.
func TestReplayDecidesAlike(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixtureConfig(t, nil, func(c *txn.Config, _ *fakeParts) { c.MaxRemembered = 2 })
		settleAll(t, f, principal.With(context.Background(), "alice"))
		c := f.create(time.Minute)
		f.join(c.ID, "a")
		err := f.svc.Join(context.Background(), c.ID, c.Secret, part("a"), 2)
		wantKind(t, "another crash count", err, djinn.CrashCount)
		err = f.svc.Join(context.Background(), c.ID, c.Secret, part("a"), 3)
		wantKind(t, "another crash count once aborted", err, djinn.CrashCount)
		time.Sleep(time.Second) // a pass of forgetting
		synctest.Wait()
		f.stop()
		if f.log.State.Remembered() > 2 {
			t.Fatalf("Remembered %d, want at most 2", f.log.State.Remembered())
		}
		cmds := f.log.Commands()[1:] // the Init is the new machine's own
		forgets := 0
		for _, c := range cmds {
			if c.GetTxnForget() != nil {
				forgets++
			}
		}
		if forgets == 0 {
			t.Fatal("no TxnForget in the log: the bound forgot nothing")
		}
		apply := func(log statetest.Service[*txn.State], cmds []*statepb.Command) []string {
			var out []string
			for _, c := range cmds {
				res, err := log.Propose(context.Background(), proto.Clone(c).(*statepb.Command))
				switch r := res.(type) {
				case nil:
					out = append(out, fmt.Sprintf("error: %v", err))
				case txn.Info:
					out = append(out, infoLine(r))
				default:
					out = append(out, fmt.Sprintf("%T", r))
				}
			}
			return out
		}
		whole := statetest.For(newTxnState)
		want := apply(whole, cmds)
		wantRecords := sortedRecords(whole.State)
		if !recordsEqual(wantRecords, sortedRecords(f.log.State)) {
			t.Fatal("the whole log replayed ends in another state than the run's")
		}
		for cut := 1; cut < len(cmds); cut++ {
			first := statetest.For(newTxnState)
			got := apply(first, cmds[:cut])
			restarted, err := statetest.Restart(first.Log, newTxnState)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, apply(restarted, cmds[cut:])...)
			if !slices.Equal(got, want) {
				t.Fatalf("snapshot after entry %d: entries decided\n%s\nwant\n%s", cut, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if !recordsEqual(sortedRecords(restarted.State), wantRecords) {
				t.Fatalf("snapshot after entry %d: another state at the end", cut)
			}
			if n, m := restarted.State.Remembered(), whole.State.Remembered(); n != m {
				t.Fatalf("snapshot after entry %d: Remembered %d, want %d", cut, n, m)
			}
		}
	})
}
