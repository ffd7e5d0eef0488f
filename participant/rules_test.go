package participant_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/participant/participanttest"
)

const (
	remember = time.Minute
	idle     = 5 * time.Minute
)

var bg = context.Background()

// TestRules has one row per participant rule of the specification, named
// by its section. Each row runs under testing/synctest: time is fake, and
// synctest.Wait waits for the background work to settle.
func TestRules(t *testing.T) {
	rows := []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
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
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := start(t, func(c *participant.Config) { c.Remember, c.Idle = remember, idle })
				r.run(t, f)
			})
		})
	}
}

// TestPrepareAndCommitEquivalence checks TX.2.6: prepareAndCommit answers
// and leaves the participant and its store exactly as prepare followed, on
// PREPARED, by commit, from every state a transaction can be in.
func TestPrepareAndCommitEquivalence(t *testing.T) {
	setups := []struct {
		name  string
		setup func(f *fixture, tx participant.Tx)
	}{
		{"ACTIVE with changes", func(f *fixture, tx participant.Tx) { f.op(tx, "a") }},
		{"ACTIVE read-only", func(f *fixture, tx participant.Tx) { f.op(tx, "") }},
		{"ACTIVE, the resource refuses", func(f *fixture, tx participant.Tx) {
			f.op(tx, "a")
			f.res.failPrepare(errors.New("no"))
		}},
		{"ACTIVE, the store fails", func(f *fixture, tx participant.Tx) {
			f.op(tx, "a")
			f.st.FailWrites(errors.New("disk full"))
		}},
		{"PREPARED", func(f *fixture, tx participant.Tx) { f.op(tx, "a"); f.prepare(tx) }},
		{"NOTCHANGED", func(f *fixture, tx participant.Tx) { f.op(tx, ""); f.prepare(tx) }},
		{"COMMITTED", func(f *fixture, tx participant.Tx) {
			f.op(tx, "a")
			f.prepare(tx)
			if err := f.p.Commit(bg, tx); err != nil {
				f.t.Fatal(err)
			}
		}},
		{"ABORTED", func(f *fixture, tx participant.Tx) {
			f.op(tx, "a")
			if err := f.p.Abort(bg, tx); err != nil {
				f.t.Fatal(err)
			}
		}},
		{"unknown", func(f *fixture, tx participant.Tx) {}},
	}
	type outcome struct {
		vote  participant.State
		kind  djinn.Kind
		state participant.State
		known bool
		app   []string
		recs  int
	}
	run := func(t *testing.T, setup func(*fixture, participant.Tx), pac bool) outcome {
		var o outcome
		synctest.Test(t, func(t *testing.T) {
			f := start(t)
			tx := f.mgr.Create()
			setup(f, tx)
			if pac {
				v, err := f.p.PrepareAndCommit(bg, tx)
				o.vote, o.kind = v, djinn.KindOf(err)
			} else {
				// TX.2.6's code.
				v, err := f.p.Prepare(bg, tx)
				if err == nil && v == participant.Prepared {
					err = f.p.Commit(bg, tx)
					v = participant.Committed
				}
				if err != nil {
					v = 0
				}
				o.vote, o.kind = v, djinn.KindOf(err)
			}
			f.st.FailWrites(nil)
			o.state, o.known = f.p.State(tx)
			o.app, o.recs = keys(t, f.st, "app/"), records(t, f.st)
		})
		return o
	}
	for _, s := range setups {
		t.Run(s.name, func(t *testing.T) {
			want := run(t, s.setup, false)
			got := run(t, s.setup, true)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("prepareAndCommit: %+v\nprepare, commit: %+v", got, want)
			}
		})
	}
}

// TestManagerFake checks the fake manager's join rules, which the rows
// above rely on (TX.2.3).
func TestManagerFake(t *testing.T) {
	m := participanttest.NewManager()
	tx := m.Create()
	self := djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.NewID(), Object: djinn.NewID()}
	join := func(tx participant.Tx, self djinn.Ref, crash int64) error {
		_, err := m.Join(bg, tx, self, crash)
		return err
	}
	if err := join(tx, self, 1); err != nil {
		t.Fatal(err)
	}
	if err := join(tx, self, 1); err != nil {
		t.Fatalf("repeated join: %v", err)
	}
	wantKind(t, join(tx, self, 2), djinn.CrashCount)
	if st, _ := m.GetState(bg, tx); st != participant.Aborted {
		t.Fatalf("state after a crash count change: %v", st)
	}
	wantKind(t, join(tx, djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.NewID(), Object: djinn.NewID()}, 1), djinn.CannotJoin)

	top := m.Create()
	mid := m.CreateNested(top)
	leaf := m.CreateNested(mid)
	for _, c := range []struct {
		tx   participant.Tx
		want string
	}{{top, "[]"}, {mid, fmt.Sprint([]participant.Tx{top})}, {leaf, fmt.Sprint([]participant.Tx{mid, top})}} {
		anc, err := m.Join(bg, c.tx, self, 1)
		if err != nil || fmt.Sprint(anc) != c.want {
			t.Fatalf("join %d: ancestors %v, %v; want %s", c.tx.ID, anc, err, c.want)
		}
	}
}
