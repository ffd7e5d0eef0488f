package participant_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/participant"
)

// joinRules are the rows of TestRules about joining transactions and the
// operations under one (TX.2.3, TX.2.6).
var joinRules = []rule{
	{"TX.2.3 the first operation joins with the participant's reference and crash count, once", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "")
		f.op(tx, "a")
		got := f.mgr.Joins(tx)
		if len(got) != 1 || !got[0].Ref.Equal(f.p.Ref()) || got[0].Ref != f.p.Ref() || got[0].Crash != f.p.CrashCount() {
			t.Fatalf("joins %+v, want one with %v and crash count %d", got, f.p.Ref(), f.p.CrashCount())
		}
		if calls := f.mgr.Calls(); !slices.Equal(calls, []string{"join 1"}) {
			t.Fatalf("manager calls %v, want one join", calls)
		}
	}},
	{"TX.2.3 concurrent first operations share one join", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { f.op(tx, "") })
		}
		wg.Wait()
		if n := len(f.mgr.Calls()); n != 1 {
			t.Fatalf("%d joins, want 1", n)
		}
	}},
	{"TX.2.3 a failed join fails the operation with the manager's error, and a later operation joins again", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.mgr.FailJoins(djinn.Errorf(djinn.Unavailable, "manager unreachable"))
		wantKind(t, f.try(tx, "a"), djinn.Unavailable)
		f.wantUnknown(tx)
		f.mgr.FailJoins(nil)
		f.op(tx, "a")
		f.wantState(tx, participant.Active)

		gone := f.mgr.Create()
		f.mgr.Forget(gone)
		wantKind(t, f.try(gone, "a"), djinn.UnknownTransaction)
		ended := f.mgr.Create()
		f.mgr.SetState(ended, participant.Aborted)
		wantKind(t, f.try(ended, "a"), djinn.CannotJoin)
		f.mgr.FailJoins(djinn.Errorf(djinn.NoSuchObject, "no manager there"))
		wantKind(t, f.try(f.mgr.Create(), "a"), djinn.NoSuchObject)
		if got := f.res.got(); len(got) != 0 {
			t.Fatalf("the resource was called: %v", got)
		}
	}},
	{"TX.2.3 a restart changes the crash count, so rejoining what was ACTIVE aborts it", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		before, ref := f.p.CrashCount(), f.p.Ref()
		f.restart()
		if f.p.CrashCount() == before || f.p.Ref() != ref {
			t.Fatalf("after a restart: crash count %d (was %d), ref %v (was %v); want a new count, the same ref", f.p.CrashCount(), before, f.p.Ref(), ref)
		}
		wantKind(t, f.try(tx, "b"), djinn.CrashCount)
		if st, _ := f.mgr.GetState(bg, tx); st != participant.Aborted {
			t.Fatalf("manager state %v, want ABORTED", st)
		}
	}},
	{"TX.2.6 operations are refused once the transaction is not ACTIVE here", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.prepare(tx)
		wantKind(t, f.try(tx, "b"), djinn.CannotJoin)
		ro := f.mgr.Create()
		f.op(ro, "")
		f.prepare(ro)
		wantKind(t, f.try(ro, ""), djinn.CannotJoin)
	}},
}
