package participant_test

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/participant"
)

// outcomeRules are the rows of TestRules about the outcome: commit, abort
// and prepareAndCommit (TX.2.6, TX.2.7).
var outcomeRules = []rule{
	{"TX.2.6 abort rolls back an ACTIVE transaction, after the operation under way", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		done, err := f.p.Join(bg, tx)
		if err != nil {
			t.Fatal(err)
		}
		aborted := make(chan error, 1)
		go func() { aborted <- f.p.Abort(bg, tx) }()
		synctest.Wait()
		wantCalls(t, f.res.got())
		done()
		if err := <-aborted; err != nil {
			t.Fatal(err)
		}
		wantCalls(t, f.res.got(), "abort 1")
		f.wantState(tx, participant.Aborted)
	}},
	{"TX.2.6 abort rolls back a PREPARED transaction and drops its record; a repeated abort returns nil", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.prepare(tx)
		for range 2 {
			if err := f.p.Abort(bg, tx); err != nil {
				t.Fatal(err)
			}
		}
		wantCalls(t, f.res.got(), "prepare 1", "abort 1")
		if n := records(t, f.st); n != 0 {
			t.Fatalf("%d prepared records after abort", n)
		}
	}},
	{"TX.2.6 abort of a PREPARED transaction whose record cannot be dropped keeps it PREPARED", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.prepare(tx)
		f.st.FailWrites(errors.New("disk gone"))
		if err := f.p.Abort(bg, tx); err == nil {
			t.Fatal("abort succeeded without dropping the record")
		}
		f.wantState(tx, participant.Prepared)
		f.st.FailWrites(nil)
		if err := f.p.Abort(bg, tx); err != nil {
			t.Fatal(err)
		}
		f.wantState(tx, participant.Aborted)
	}},
	{"TX.2.6 commit rolls a PREPARED transaction forward in one write with the record's removal; a repeated commit returns nil", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.prepare(tx)
		for range 2 {
			if err := f.p.Commit(bg, tx); err != nil {
				t.Fatal(err)
			}
		}
		wantCalls(t, f.res.got(), "prepare 1", "commit 1")
		if got := keys(t, f.st, "app/"); !slices.Equal(got, []string{"app/1"}) || records(t, f.st) != 0 {
			t.Fatalf("store holds %v and %d records, want app/1 and none", got, records(t, f.st))
		}
		f.wantState(tx, participant.Committed)
	}},
	{"TX.2.6 prepareAndCommit's outcome survives a restart: asked again, the participant answers COMMITTED until its manager has decided", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		if v, err := f.p.PrepareAndCommit(bg, tx); err != nil || v != participant.Committed {
			t.Fatalf("prepareAndCommit: %v, %v", v, err)
		}
		marker := participant.ReservedPrefix + "committed/"
		if got := keys(t, f.st, marker); len(got) != 1 {
			t.Fatalf("markers %v, want one, written with the commit", got)
		}
		// The manager crashed before logging its decision: it resumes
		// voting and asks again, after this participant restarted too.
		f.mgr.SetState(tx, participant.Voting)
		f.restart()
		for range 2 {
			if v, err := f.p.PrepareAndCommit(bg, tx); err != nil || v != participant.Committed {
				t.Fatalf("prepareAndCommit again after a restart: %v, %v; want COMMITTED (UnknownTransaction would abort what committed)", v, err)
			}
		}
		if v := f.prepare(tx); v != participant.Committed {
			t.Fatalf("prepare after a restart: %v, want COMMITTED", v)
		}
		// Still undecided at the manager: the marker stays past Remember.
		time.Sleep(2 * remember)
		synctest.Wait()
		if got := keys(t, f.st, marker); len(got) != 1 {
			t.Fatalf("markers %v while the manager is voting, want kept", got)
		}
		f.mgr.SetState(tx, participant.Committed)
		time.Sleep(remember)
		synctest.Wait()
		if got := keys(t, f.st, marker); len(got) != 0 {
			t.Fatalf("markers %v after the manager decided, want none", got)
		}
		f.wantUnknown(tx)
		if got := keys(t, f.st, "app/"); !slices.Equal(got, []string{"app/1"}) {
			t.Fatalf("store holds %v, want app/1", got)
		}
	}},
	{"TX.2.6 a prepareAndCommit marker goes when the manager has forgotten the transaction", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		if v, err := f.p.PrepareAndCommit(bg, tx); err != nil || v != participant.Committed {
			t.Fatalf("prepareAndCommit: %v, %v", v, err)
		}
		f.mgr.Forget(tx)
		time.Sleep(2 * remember)
		synctest.Wait()
		if got := keys(t, f.st, participant.ReservedPrefix+"committed/"); len(got) != 0 {
			t.Fatalf("markers %v, want none", got)
		}
		f.wantUnknown(tx)
	}},
	{"TX.2.6 a commit whose write fails keeps the transaction PREPARED, and the next one rolls forward", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.prepare(tx)
		f.st.FailWrites(errors.New("disk full"))
		if err := f.p.Commit(bg, tx); err == nil {
			t.Fatal("commit succeeded without writing")
		}
		f.wantState(tx, participant.Prepared)
		f.st.FailWrites(nil)
		if err := f.p.Commit(bg, tx); err != nil {
			t.Fatal(err)
		}
		f.wantState(tx, participant.Committed)
	}},
	{"TX.2.7 commit of an unknown transaction fails with UnknownTransaction (rolled forward already)", func(t *testing.T, f *fixture) {
		wantKind(t, f.p.Commit(bg, f.mgr.Create()), djinn.UnknownTransaction)
		wantKind(t, f.p.Abort(bg, f.mgr.Create()), djinn.UnknownTransaction)
	}},
	{"TX.2.6 commit needs a PREPARED vote; abort of a committed transaction fails", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		wantKind(t, f.p.Commit(bg, tx), djinn.CannotCommit)
		f.prepare(tx)
		if err := f.p.Commit(bg, tx); err != nil {
			t.Fatal(err)
		}
		wantKind(t, f.p.Abort(bg, tx), djinn.CannotAbort)
		ab := f.mgr.Create()
		f.op(ab, "a")
		if err := f.p.Abort(bg, ab); err != nil {
			t.Fatal(err)
		}
		wantKind(t, f.p.Commit(bg, ab), djinn.CannotCommit)
	}},
}
