package txn_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

func (f *fixture) nest(parent uint64) txn.Created {
	f.t.Helper()
	c, err := f.svc.CreateNested(context.Background(), parent, txn.SecretOf(f.svc, parent), time.Minute)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func has(calls []string, want ...string) bool {
	for _, w := range want {
		if !slices.Contains(calls, w) {
			return false
		}
	}
	return true
}

func TestNestedCreateRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		_, err := f.svc.CreateNested(context.Background(), 999, txn.SecretOf(f.svc, 999), time.Minute)
		wantKind(t, "TX.2.2 create under an unknown parent", err, djinn.UnknownTransaction)
		p := f.create(time.Minute)
		if err := f.svc.Abort(context.Background(), p.ID, nil); err != nil {
			t.Fatal(err)
		}
		_, err = f.svc.CreateNested(context.Background(), p.ID, txn.SecretOf(f.svc, p.ID), time.Minute)
		wantKind(t, "TX.2.2 create under a parent no longer active", err, djinn.CannotJoin)
		// Nesting depth is bounded (16 by default).
		id := f.create(time.Minute).ID
		for range 15 {
			id = f.nest(id).ID
		}
		_, err = f.svc.CreateNested(context.Background(), id, txn.SecretOf(f.svc, id), time.Minute)
		wantKind(t, "nesting past the most levels", err, djinn.ResourceExhausted)
	})
}

// TestNoJoinPastTheLease: TX.2.1 — a transaction whose lease has ended
// before a commit or abort is aborted, and TX.2.3, TX.2.2: a join, or a
// nested create, under a transaction known but no longer active is
// CannotJoin. So too in the moment between the lease's end and its expiry
// reaching the log, when getState already says ABORTED: a participant
// that joined then would do work for a transaction already lost.
func TestNoJoinPastTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		c := f.create(time.Minute)
		f.join(c.ID, "a")
		f.ahead.Store(int64(2 * time.Minute))
		if s := f.state(c.ID); s != txn.Aborted {
			t.Fatalf("getState past the lease: %v, want ABORTED", s)
		}
		err := f.svc.Join(context.Background(), c.ID, txn.SecretOf(f.svc, c.ID), part("b"), 1)
		wantKind(t, "TX.2.3 join past the lease", err, djinn.CannotJoin)
		err = f.svc.Join(context.Background(), c.ID, txn.SecretOf(f.svc, c.ID), part("a"), 1)
		wantKind(t, "TX.2.3 a joined participant's join again past the lease", err, djinn.CannotJoin)
		_, err = f.svc.CreateNested(context.Background(), c.ID, txn.SecretOf(f.svc, c.ID), time.Minute)
		wantKind(t, "TX.2.2 create under a parent past its lease", err, djinn.CannotJoin)
		err = f.svc.Promote(context.Background(), c.ID, txn.SecretOf(f.svc, c.ID), []*djinnpb.Ref{part("c")}, []int64{1}, nil)
		wantKind(t, "TX.2.7 promote into a transaction past its lease", err, djinn.CannotJoin)
	})
}

// TX.2.7: a nested transaction's commit promotes its PREPARED participants
// into the parent, atomically; they roll forward into the parent (commit
// of the nested id), and then vote in the parent's commit.
func TestNestedCommitPromotes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil)
		f.parts.set("n", txn.NotChanged, nil)
		p := f.create(time.Minute)
		f.join(p.ID, "a")
		c := f.nest(p.ID)
		f.join(c.ID, "b", "n")
		if err := f.svc.Commit(context.Background(), c.ID, dur(time.Minute)); err != nil {
			t.Fatal(err)
		}
		d, err := f.svc.Describe(context.Background(), p.ID)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, q := range d.Participants {
			names = append(names, string(q.Participant.ObjectId[:1]))
		}
		if !slices.Equal(names, []string{"a", "b"}) {
			t.Fatalf("parent participants %v after the nested commit: want a and the promoted b (not the NOTCHANGED n)", names)
		}
		calls := f.parts.gotByID()
		if !has(calls, fmt.Sprintf("b prepare %d", c.ID), fmt.Sprintf("b commit %d", c.ID)) {
			t.Fatalf("calls %v: b must prepare and roll forward the nested transaction", calls)
		}
		if err := f.svc.Commit(context.Background(), p.ID, dur(time.Minute)); err != nil {
			t.Fatal(err)
		}
		calls = f.parts.gotByID()
		if !has(calls, fmt.Sprintf("a prepare %d", p.ID), fmt.Sprintf("b prepare %d", p.ID), fmt.Sprintf("a commit %d", p.ID), fmt.Sprintf("b commit %d", p.ID)) {
			t.Fatalf("calls %v: the parent's commit must reach a and the promoted b", calls)
		}
	})
}

// TX.2.7: aborting a transaction aborts its nested transactions; the
// participants of a committed nested one, now the parent's, are told to
// abort the parent.
func TestParentAbortAbortsNested(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("b", txn.Prepared, nil)
		f.parts.set("c", txn.Prepared, nil)
		p := f.create(time.Minute)
		done := f.nest(p.ID)
		f.join(done.ID, "b")
		if err := f.svc.Commit(context.Background(), done.ID, nil); err != nil {
			t.Fatal(err)
		}
		open := f.nest(p.ID)
		f.join(open.ID, "c")
		deeper := f.nest(open.ID)
		if err := f.svc.Abort(context.Background(), p.ID, dur(time.Minute)); err != nil {
			t.Fatal(err)
		}
		for _, id := range []uint64{open.ID, deeper.ID} {
			if f.state(id) != txn.Aborted {
				t.Fatalf("nested transaction %d: %v after its ancestor aborted, want ABORTED", id, f.state(id))
			}
		}
		synctest.Wait()
		calls := f.parts.gotByID()
		if !has(calls, fmt.Sprintf("c abort %d", open.ID), fmt.Sprintf("b abort %d", p.ID)) {
			t.Fatalf("calls %v: c must abort the nested transaction, b (promoted) the parent", calls)
		}
	})
}

// A parent's commit settles nested transactions still open: they abort,
// and a later commit of one is CannotCommit.
func TestParentCommitAbortsOpenNested(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		p := f.create(time.Minute)
		f.join(p.ID, "a")
		c := f.nest(p.ID)
		if err := f.svc.Commit(context.Background(), p.ID, nil); err != nil {
			t.Fatal(err)
		}
		if f.state(c.ID) != txn.Aborted {
			t.Fatalf("open nested transaction after its parent committed: %v, want ABORTED", f.state(c.ID))
		}
		wantKind(t, "commit of a nested transaction whose parent committed", f.svc.Commit(context.Background(), c.ID, nil), djinn.CannotCommit)
	})
}

// TX.2.7 promote: participants join an ACTIVE transaction; a crash count
// other than the known one aborts it (CrashCount); drop leaves.
func TestPromote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		p := f.create(time.Minute)
		f.join(p.ID, "m") // a nested transaction's manager, joined as a participant
		if err := f.svc.Promote(context.Background(), p.ID, txn.SecretOf(f.svc, p.ID), []*djinnpb.Ref{part("x"), part("y")}, []int64{1, 1}, part("m")); err != nil {
			t.Fatal(err)
		}
		d, _ := f.svc.Describe(context.Background(), p.ID)
		var names []string
		for _, q := range d.Participants {
			names = append(names, string(q.Participant.ObjectId[:1]))
		}
		if !slices.Equal(names, []string{"x", "y"}) {
			t.Fatalf("participants %v: want x and y, and m dropped", names)
		}
		err := f.svc.Promote(context.Background(), p.ID, txn.SecretOf(f.svc, p.ID), []*djinnpb.Ref{part("x")}, []int64{1, 2}, nil)
		wantKind(t, "promote with mismatched lengths", err, djinn.InvalidArgument)
		err = f.svc.Promote(context.Background(), 999, txn.SecretOf(f.svc, 999), nil, nil, nil)
		wantKind(t, "promote into an unknown transaction", err, djinn.UnknownTransaction)
		err = f.svc.Promote(context.Background(), p.ID, txn.SecretOf(f.svc, p.ID), []*djinnpb.Ref{part("x")}, []int64{7}, nil)
		wantKind(t, "TX.2.7 promote with another crash count", err, djinn.CrashCount)
		if f.state(p.ID) != txn.Aborted {
			t.Fatal("TX.2.7: a crash count mismatch in promote aborts the transaction")
		}
		err = f.svc.Promote(context.Background(), p.ID, txn.SecretOf(f.svc, p.ID), []*djinnpb.Ref{part("z")}, []int64{1}, nil)
		wantKind(t, "promote into an aborted transaction", err, djinn.CannotJoin)
	})
}
