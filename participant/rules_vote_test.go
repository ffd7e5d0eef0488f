package participant_test

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/participant"
)

// voteRules are the rows of TestRules about voting: prepare and its answers
// (TX.2.6, TX.2.8).
var voteRules = []rule{
	{"TX.2.6 prepare of a read-only transaction votes NOTCHANGED and releases it", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "")
		if v := f.prepare(tx); v != participant.NotChanged {
			t.Fatalf("vote %v, want NOTCHANGED", v)
		}
		wantCalls(t, f.res.got(), "prepare 1", "abort 1")
		if n := records(t, f.st); n != 0 {
			t.Fatalf("%d prepared records, want none", n)
		}
	}},
	{"TX.2.6 TX.2.8 prepare votes PREPARED only once the prepared record is durable", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		if n := records(t, f.st); n != 0 {
			t.Fatalf("%d prepared records before the vote", n)
		}
		if v := f.prepare(tx); v != participant.Prepared {
			t.Fatalf("vote %v, want PREPARED", v)
		}
		if n := records(t, f.st); n != 1 {
			t.Fatalf("%d prepared records after voting PREPARED, want 1", n)
		}
	}},
	{"TX.2.6 prepare votes ABORTED, and rolls back, when the resource cannot guarantee a roll forward", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.res.failPrepare(errors.New("out of space"))
		if v := f.prepare(tx); v != participant.Aborted {
			t.Fatalf("vote %v, want ABORTED", v)
		}
		wantCalls(t, f.res.got(), "prepare 1", "abort 1")
	}},
	{"TX.2.6 TX.2.8 prepare votes ABORTED when the prepared record cannot be stored", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.st.FailWrites(errors.New("disk full"))
		if v := f.prepare(tx); v != participant.Aborted {
			t.Fatalf("vote %v, want ABORTED", v)
		}
		wantCalls(t, f.res.got(), "prepare 1", "abort 1")
	}},
	{"TX.2.6 a repeated prepare gets the same vote, without voting again", func(t *testing.T, f *fixture) {
		for _, c := range []struct {
			rec  string
			fail bool
			want participant.State
		}{{"a", false, participant.Prepared}, {"", false, participant.NotChanged}, {"a", true, participant.Aborted}} {
			tx := f.mgr.Create()
			f.op(tx, c.rec)
			if c.fail {
				f.res.failPrepare(errors.New("no"))
			}
			first := f.prepare(tx)
			f.res.failPrepare(nil)
			n := len(f.res.got())
			if again := f.prepare(tx); first != c.want || again != c.want {
				t.Fatalf("votes %v then %v, want %v twice", first, again, c.want)
			}
			if len(f.res.got()) != n {
				t.Fatalf("the repeated prepare reached the resource: %v", f.res.got())
			}
		}
	}},
	{"TX.2.6 prepare of a transaction past voting answers its state", func(t *testing.T, f *fixture) {
		committed := f.mgr.Create()
		f.op(committed, "a")
		f.prepare(committed)
		if err := f.p.Commit(bg, committed); err != nil {
			t.Fatal(err)
		}
		aborted := f.mgr.Create()
		f.op(aborted, "a")
		if err := f.p.Abort(bg, aborted); err != nil {
			t.Fatal(err)
		}
		if v := f.prepare(committed); v != participant.Committed {
			t.Fatalf("prepare after commit: %v, want COMMITTED", v)
		}
		if v := f.prepare(aborted); v != participant.Aborted {
			t.Fatalf("prepare after abort: %v, want ABORTED", v)
		}
	}},
	{"TX.2.6 prepare of an unknown transaction fails with UnknownTransaction", func(t *testing.T, f *fixture) {
		_, err := f.p.Prepare(bg, f.mgr.Create())
		wantKind(t, err, djinn.UnknownTransaction)
		_, err = f.p.PrepareAndCommit(bg, f.mgr.Create())
		wantKind(t, err, djinn.UnknownTransaction)
	}},
	{"TX.2.6 prepare waits for the operation under way", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		done, err := f.p.Join(bg, tx)
		if err != nil {
			t.Fatal(err)
		}
		voted := make(chan participant.State, 1)
		go func() {
			v, _ := f.p.Prepare(bg, tx)
			voted <- v
		}()
		synctest.Wait()
		select {
		case v := <-voted:
			t.Fatalf("prepare returned %v while an operation ran", v)
		default:
		}
		f.wantState(tx, participant.Voting)
		wantKind(t, f.try(tx, "b"), djinn.CannotJoin)
		f.res.change(tx, "a")
		done()
		if v := <-voted; v != participant.Prepared {
			t.Fatalf("vote %v, want PREPARED", v)
		}
	}},
}
