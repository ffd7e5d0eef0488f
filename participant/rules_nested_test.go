package participant_test

import (
	"slices"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/participant"
)

// nestedRules are the rows of TestRules about nested transactions (TX.2.6,
// TX.2.7).
var nestedRules = []rule{
	{"TX.2.6 nested: PREPARED needs no record; commit rolls the changes into the parent, which is then ACTIVE here", func(t *testing.T, f *fixture) {
		top := f.mgr.Create()
		c := f.mgr.CreateNested(top)
		f.op(c, "c")
		if got := f.p.Ancestors(c); len(got) != 1 || !got[0].Same(top) {
			t.Fatalf("ancestors %v, want the parent", got)
		}
		if v := f.prepare(c); v != participant.Prepared {
			t.Fatalf("vote %v", v)
		}
		if n := records(t, f.mem); n != 0 {
			t.Fatalf("%d prepared records for a nested transaction", n)
		}
		f.mgr.Promote(c)
		f.mgr.SetState(c, participant.Committed)
		for range 2 {
			if err := f.p.Commit(bg, c); err != nil {
				t.Fatal(err)
			}
		}
		f.wantState(c, participant.Committed)
		f.wantState(top, participant.Active)
		wantCalls(t, f.res.got(), "prepare 2", "merge 2 1")
		if n := len(keys(t, f.mem, "app/")); n != 0 {
			t.Fatalf("%d application keys written by a nested commit", n)
		}
		f.op(top, "") // no join: promoted
		if calls := f.mgr.Calls(); !slices.Equal(calls, []string{"join 2"}) {
			t.Fatalf("manager calls %v", calls)
		}
		if v := f.prepare(top); v != participant.Prepared {
			t.Fatalf("parent vote %v", v)
		}
		if err := f.p.Commit(bg, top); err != nil {
			t.Fatal(err)
		}
		if got := keys(t, f.mem, "app/"); !slices.Equal(got, []string{"app/1"}) {
			t.Fatalf("application keys %v", got)
		}
	}},
	{"TX.2.6 nested: aborting the parent rolls back its merged changes and the nested transactions still open", func(t *testing.T, f *fixture) {
		top := f.mgr.Create()
		c1, c2 := f.mgr.CreateNested(top), f.mgr.CreateNested(top)
		f.op(c1, "1")
		f.op(c2, "2")
		f.prepare(c1)
		if err := f.p.Commit(bg, c1); err != nil {
			t.Fatal(err)
		}
		if err := f.p.Abort(bg, top); err != nil {
			t.Fatal(err)
		}
		f.wantState(top, participant.Aborted)
		f.wantState(c2, participant.Aborted)
		wantCalls(t, f.res.got(), "prepare 2", "merge 2 1", "abort 1", "abort 3")
		wantKind(t, f.try(c2, "x"), djinn.CannotJoin)
	}},
	{"TX.2.7 nested: aborting a parent unknown here aborts its nested transactions, and a late nested commit drops its changes", func(t *testing.T, f *fixture) {
		top := f.mgr.Create()
		c1, c2 := f.mgr.CreateNested(top), f.mgr.CreateNested(top)
		f.op(c1, "1")
		f.op(c2, "2")
		f.prepare(c1)
		if err := f.p.Abort(bg, top); err != nil {
			t.Fatal(err)
		}
		f.wantState(c1, participant.Aborted)
		f.wantState(c2, participant.Aborted)
		if err := f.p.Commit(bg, c1); err != nil {
			t.Fatalf("a late commit of a nested transaction aborted with its parent: %v", err)
		}
		f.wantState(top, participant.Aborted)
		got := f.res.got()
		slices.Sort(got)
		wantCalls(t, got, "abort 2", "abort 3", "prepare 2")
	}},
	{"TX.2.6 nested: preparing the parent completes nested transactions with getState", func(t *testing.T, f *fixture) {
		top := f.mgr.Create()
		won, lost, open := f.mgr.CreateNested(top), f.mgr.CreateNested(top), f.mgr.CreateNested(top)
		f.op(top, "t")
		f.op(won, "w")
		f.op(lost, "l")
		f.op(open, "o")
		f.prepare(won) // commit(won) has not arrived
		f.prepare(lost)
		f.mgr.SetState(won, participant.Committed)
		f.mgr.SetState(lost, participant.Aborted)
		f.mgr.FailGetState(djinn.Errorf(djinn.Unavailable, "manager unreachable"))
		_, err := f.p.Prepare(bg, top)
		wantKind(t, err, djinn.Unavailable)
		f.wantState(top, participant.Voting)
		wantKind(t, f.try(open, "x"), djinn.CannotJoin) // the parent is voting
		f.mgr.FailGetState(nil)
		if v := f.prepare(top); v != participant.Prepared {
			t.Fatalf("parent vote %v", v)
		}
		f.wantState(won, participant.Committed)
		f.wantState(lost, participant.Aborted)
		f.wantState(open, participant.Aborted)
		if err := f.p.Commit(bg, won); err != nil {
			t.Fatalf("late commit of the nested transaction: %v", err)
		}
		if err := f.p.Commit(bg, top); err != nil {
			t.Fatal(err)
		}
		var got string
		_ = f.mem.Range("app/", func(_ string, v []byte) error { got = string(v); return nil })
		if got != "tw" {
			t.Fatalf("committed %q, want the parent's and the committed nested one's changes", got)
		}
	}},
	{"TX.2.6 nested: depth two rolls forward one level at a time", func(t *testing.T, f *fixture) {
		top := f.mgr.Create()
		mid := f.mgr.CreateNested(top)
		leaf := f.mgr.CreateNested(mid)
		f.op(leaf, "l")
		f.prepare(leaf)
		if err := f.p.Commit(bg, leaf); err != nil {
			t.Fatal(err)
		}
		f.wantState(mid, participant.Active)
		if got := f.p.Ancestors(mid); len(got) != 1 || !got[0].Same(top) {
			t.Fatalf("the parent's ancestors %v", got)
		}
		f.wantUnknown(top)
		if v := f.prepare(mid); v != participant.Prepared {
			t.Fatalf("vote %v", v)
		}
		if err := f.p.Commit(bg, mid); err != nil {
			t.Fatal(err)
		}
		f.wantState(top, participant.Active)
		if v, err := f.p.PrepareAndCommit(bg, top); err != nil || v != participant.Committed {
			t.Fatalf("prepareAndCommit of the top level: %v, %v", v, err)
		}
		wantCalls(t, f.res.got(), "prepare 3", "merge 3 2", "prepare 2", "merge 2 1", "prepare 1", "commit 1")
	}},
}
