package participant_test

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/participant"
)

// lifetimeRules are the rows of TestRules about how long transactions are
// held, restarts and recovery (TX.2.6, TX.2.8, TX.2.8.1).
var lifetimeRules = []rule{
	{"TX.2.6 NOTCHANGED, COMMITTED and ABORTED are remembered for a while, then forgotten", func(t *testing.T, f *fixture) {
		var txs []participant.Tx
		for _, rec := range []string{"", "a", "b"} {
			tx := f.mgr.Create()
			f.op(tx, rec)
			txs = append(txs, tx)
		}
		f.prepare(txs[0])
		f.prepare(txs[1])
		if err := f.p.Commit(bg, txs[1]); err != nil {
			t.Fatal(err)
		}
		if err := f.p.Abort(bg, txs[2]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(remember - time.Second)
		synctest.Wait()
		for i, want := range []participant.State{participant.NotChanged, participant.Committed, participant.Aborted} {
			if v := f.prepare(txs[i]); v != want {
				t.Fatalf("prepare %d within Remember: %v, want %v", txs[i].ID, v, want)
			}
		}
		time.Sleep(2 * remember)
		synctest.Wait()
		for _, tx := range txs {
			_, err := f.p.Prepare(bg, tx)
			wantKind(t, err, djinn.UnknownTransaction)
		}
		if n := f.p.Len(); n != 0 {
			t.Fatalf("%d transactions held, want none", n)
		}
	}},
	{"TX.2.6 an idle ACTIVE transaction the manager aborted or forgot is rolled back", func(t *testing.T, f *fixture) {
		aborted, forgotten, live := f.mgr.Create(), f.mgr.Create(), f.mgr.Create()
		for _, tx := range []participant.Tx{aborted, forgotten, live} {
			f.op(tx, "a")
		}
		f.mgr.SetState(aborted, participant.Aborted)
		f.mgr.Forget(forgotten)
		time.Sleep(idle + idle/2)
		synctest.Wait()
		f.wantState(live, participant.Active)
		for _, tx := range []participant.Tx{aborted, forgotten} {
			if st, ok := f.p.State(tx); ok && st != participant.Aborted {
				t.Fatalf("transaction %d: %v, want rolled back", tx.ID, st)
			}
		}
		calls := f.res.got()
		slices.Sort(calls)
		wantCalls(t, calls, "abort 1", "abort 2")
	}},
	{"TX.2.6 an idle ACTIVE transaction stays while its manager cannot be reached", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.mgr.FailGetState(djinn.Errorf(djinn.Unavailable, "manager unreachable"))
		time.Sleep(3 * idle)
		synctest.Wait()
		f.wantState(tx, participant.Active)
		f.op(tx, "b")
	}},
	{"TX.2.6 a PREPARED transaction is never dropped, however long its manager is away", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.prepare(tx)
		f.mgr.FailGetState(djinn.Errorf(djinn.Unavailable, "manager unreachable"))
		time.Sleep(24 * time.Hour)
		synctest.Wait()
		f.wantState(tx, participant.Prepared)
		if records(t, f.st) != 1 {
			t.Fatal("the prepared record is gone")
		}
		f.mgr.FailGetState(nil)
		f.mgr.SetState(tx, participant.Committed)
		time.Sleep(2 * idle)
		synctest.Wait()
		if got := keys(t, f.st, "app/"); !slices.Equal(got, []string{"app/1"}) || records(t, f.st) != 0 {
			t.Fatalf("store holds %v and %d records, want it rolled forward", got, records(t, f.st))
		}
	}},
	{"TX.2.8 a restarted participant holds its prepared transactions, PREPARED, before any call", func(t *testing.T, f *fixture) {
		f.mgr.FailGetState(djinn.Errorf(djinn.Unavailable, "manager unreachable"))
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.prepare(tx)
		f.res = newFakeRes()
		f.cfg.Resource = f.res
		f.restart()
		f.wantState(tx, participant.Prepared)
		wantCalls(t, f.res.got(), "recover 1")
		if v := f.prepare(tx); v != participant.Prepared {
			t.Fatalf("prepare after restart: %v, want PREPARED", v)
		}
		wantKind(t, f.try(tx, "b"), djinn.CannotJoin)
		if err := f.p.Commit(bg, tx); err != nil {
			t.Fatal(err)
		}
		if got := keys(t, f.st, "app/"); !slices.Equal(got, []string{"app/1"}) {
			t.Fatalf("store holds %v after the commit", got)
		}
	}},
	{"TX.2.8.1 recovery rolls forward when getState says COMMITTED", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.prepare(tx)
		f.mgr.SetState(tx, participant.Committed)
		f.restart()
		synctest.Wait()
		f.wantState(tx, participant.Committed)
		if got := keys(t, f.st, "app/"); !slices.Equal(got, []string{"app/1"}) || records(t, f.st) != 0 {
			t.Fatalf("store holds %v and %d records", got, records(t, f.st))
		}
	}},
	{"TX.2.8.1 recovery rolls back when getState fails with UnknownTransaction or NoSuchObject, or says ABORTED", func(t *testing.T, f *fixture) {
		unknown, aborted := f.mgr.Create(), f.mgr.Create()
		for _, tx := range []participant.Tx{unknown, aborted} {
			f.op(tx, "a")
			f.prepare(tx)
		}
		f.mgr.Forget(unknown)
		f.mgr.SetState(aborted, participant.Aborted)
		f.restart()
		synctest.Wait()
		f.wantState(unknown, participant.Aborted)
		f.wantState(aborted, participant.Aborted)
		if records(t, f.st) != 0 || len(keys(t, f.st, "app/")) != 0 {
			t.Fatal("rolled back transactions left records or data")
		}

		gone := f.mgr.Create()
		f.op(gone, "a")
		f.prepare(gone)
		f.mgr.FailGetState(djinn.Errorf(djinn.NoSuchObject, "no manager there"))
		f.restart()
		synctest.Wait()
		f.wantState(gone, participant.Aborted)
	}},
	{"TX.2.8.1 recovery asks again after a pause while getState fails", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.prepare(tx)
		f.mgr.FailGetState(djinn.Errorf(djinn.Unavailable, "manager unreachable"))
		f.restart()
		asked := func() int {
			n := 0
			for _, c := range f.mgr.Calls() {
				if c == fmt.Sprintf("getState %d", tx.ID) {
					n++
				}
			}
			return n
		}
		synctest.Wait()
		if n := asked(); n != 1 {
			t.Fatalf("asked %d times at once, want 1", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := asked(); n < 3 || n > 12 {
			t.Fatalf("asked %d times in a minute of failures, want a few (backoff)", n)
		}
		f.wantState(tx, participant.Prepared)
		f.mgr.FailGetState(nil)
		f.mgr.SetState(tx, participant.Committed)
		time.Sleep(time.Minute)
		synctest.Wait()
		f.wantState(tx, participant.Committed)
	}},
	{"TX.2.8.1 recovery waits while the manager is still voting; the manager's own commit settles it", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.prepare(tx)
		f.mgr.SetState(tx, participant.Voting)
		f.restart()
		time.Sleep(time.Minute)
		synctest.Wait()
		f.wantState(tx, participant.Prepared)
		if err := f.p.Commit(bg, tx); err != nil {
			t.Fatal(err)
		}
		f.wantState(tx, participant.Committed)
	}},
	{"TX.2.6 a closed participant refuses calls and operations as unavailable", func(t *testing.T, f *fixture) {
		tx := f.mgr.Create()
		f.op(tx, "a")
		f.p.Close()
		wantKind(t, f.try(tx, "b"), djinn.Unavailable)
		_, err := f.p.Prepare(bg, tx)
		wantKind(t, err, djinn.Unavailable)
	}},
}
