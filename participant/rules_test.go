package participant_test

import (
	"context"
	"errors"
	"fmt"
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

// rule is one row of TestRules, named by the section of the rule it
// checks: run acts on a fresh participant and checks what the rule says.
type rule struct {
	name string
	run  func(t *testing.T, f *fixture)
}

// TestRules has one row per participant rule of the specification, named
// by its section (the rows are in the rules_*_test.go files, by topic).
// Each row runs under testing/synctest: time is fake, and synctest.Wait
// waits for the background work to settle.
func TestRules(t *testing.T) {
	for _, rows := range [][]rule{joinRules, voteRules, outcomeRules, lifetimeRules, nestedRules} {
		for _, r := range rows {
			t.Run(r.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					f := start(t, func(c *participant.Config) { c.Remember, c.Idle = remember, idle })
					r.run(t, f)
				})
			})
		}
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
