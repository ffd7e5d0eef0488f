package lock

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
)

// fixture is a table under test with a counter for request ids.
type fixture struct {
	t    *testing.T
	tbl  *Table
	next uint64
}

// newFixture returns a table with non-transactional sets 1..n.
func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	f := &fixture{t: t, tbl: New()}
	for id := uint64(1); id <= uint64(n); id++ {
		if err := f.tbl.CreateSet(id, 0, false); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// acquire runs a request and checks its outcome; it returns the request
// id and the result.
func (f *fixture) acquire(set uint64, h Holder, m Mode, want Outcome) (uint64, Result) {
	f.t.Helper()
	return f.request(Request{Set: set, Holder: h, Mode: m}, want)
}

func (f *fixture) change(set uint64, h Holder, from, to Mode, want Outcome) (uint64, Result) {
	f.t.Helper()
	return f.request(Request{Set: set, Holder: h, From: from, Mode: to}, want)
}

func (f *fixture) request(r Request, want Outcome) (uint64, Result) {
	f.t.Helper()
	f.next++
	r.ID = f.next
	res, err := f.tbl.Acquire(r)
	if err != nil {
		f.t.Fatalf("Acquire(%+v): %v", r, err)
	}
	if res.Outcome != want {
		f.t.Fatalf("Acquire(%+v) = %v, want %v", r, res.Outcome, want)
	}
	return r.ID, res
}

func (f *fixture) release(set uint64, h Holder, m Mode) []Grant {
	f.t.Helper()
	g, err := f.tbl.Release(set, h, m)
	if err != nil {
		f.t.Fatalf("Release(%d, %v, %v): %v", set, h, m, err)
	}
	return g
}

// held returns holder's count in mode m in set.
func (f *fixture) held(set uint64, h Holder, m Mode) int {
	f.t.Helper()
	hs, err := f.tbl.Holders(set)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, hi := range hs {
		if hi.Holder.Txn == h.Txn && hi.Holder.ID == h.ID {
			return hi.Count(m)
		}
	}
	return 0
}

// waiting returns the ids waiting in set, in queue order.
func (f *fixture) waiting(set uint64) []uint64 {
	f.t.Helper()
	ws, err := f.tbl.Waiters(set)
	if err != nil {
		f.t.Fatal(err)
	}
	var ids []uint64
	for _, w := range ws {
		ids = append(ids, w.ID)
	}
	return ids
}

func (f *fixture) valid(set, fence uint64) bool {
	f.t.Helper()
	ok, err := f.tbl.Validate(set, fence)
	if err != nil {
		f.t.Fatal(err)
	}
	return ok
}

// granted returns the request ids of grants.
func granted(gs []Grant) []uint64 {
	var ids []uint64
	for _, g := range gs {
		ids = append(ids, g.Request)
	}
	return ids
}

func wantIDs(t *testing.T, what string, got, want []uint64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func wantKind(t *testing.T, err error, k djinn.Kind, mentions ...string) {
	t.Helper()
	if !errors.Is(err, k) {
		t.Fatalf("error %v: want kind %s", err, k)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not name %q", err, m)
		}
	}
}

// TestConflictsTable11 checks Conflicts against every cell of spec 1.3.1.3,
// Table 1-1, transcribed row by row (granted) and column by column
// (requested: IR R U IW W); "*" is a conflict.
func TestConflictsTable11(t *testing.T) {
	table := map[Mode]string{
		IR: "    *",
		R:  "   **",
		U:  "  ***",
		IW: " ** *",
		W:  "*****",
	}
	n := 0
	for _, g := range modes {
		for j, r := range modes {
			want := table[g][j] == '*'
			if got := Conflicts(g, r); got != want {
				t.Errorf("Conflicts(granted %v, requested %v) = %v, want %v", g, r, got, want)
			}
			if Conflicts(g, r) != Conflicts(r, g) {
				t.Errorf("Conflicts(%v, %v) is not symmetric", g, r)
			}
			n++
		}
	}
	if n != 25 {
		t.Fatalf("checked %d pairs, want 25", n)
	}
	for _, bad := range []Mode{0, W + 1} {
		if Conflicts(bad, W) || Conflicts(W, bad) {
			t.Errorf("invalid mode %d conflicts", bad)
		}
	}
}

// TestModeNames: the IDL's lock_mode (spec 2.1.1) by short and long name.
func TestModeNames(t *testing.T) {
	for _, m := range modes {
		for _, s := range []string{m.String(), strings.ToUpper(m.String()), longNames[m]} {
			got, err := ParseMode(s)
			if err != nil || got != m {
				t.Errorf("ParseMode(%q) = %v, %v; want %v", s, got, err, m)
			}
		}
	}
	if s := strings.Join([]string{IR.String(), R.String(), U.String(), IW.String(), W.String()}, ","); s != "ir,r,u,iw,w" {
		t.Errorf("mode names %s", s)
	}
	if s := Mode(9).String(); s != "mode(9)" {
		t.Errorf("Mode(9).String() = %q", s)
	}
	for _, bad := range []string{"", "x", "rw", "intention"} {
		_, err := ParseMode(bad)
		wantKind(t, err, djinn.InvalidArgument, `"`+bad+`"`)
	}
}

// TestMultiplePossession: spec 1.3.2 — a count per mode; others are
// blocked until every conflicting count is released.
func TestMultiplePossession(t *testing.T) {
	f := newFixture(t, 1)
	a, b := Owner(1), Owner(2)
	f.acquire(1, a, R, Granted)
	f.acquire(1, a, R, Granted)
	f.acquire(1, a, W, Granted) // its own locks never conflict
	if f.held(1, a, R) != 2 || f.held(1, a, W) != 1 {
		t.Fatalf("counts r=%d w=%d, want 2 and 1", f.held(1, a, R), f.held(1, a, W))
	}
	wb, _ := f.acquire(1, b, R, Queued)
	wantIDs(t, "grants after w release", granted(f.release(1, a, W)), []uint64{wb})
	if f.held(1, a, R) != 2 {
		t.Errorf("a's read count = %d after releasing its write lock, want 2", f.held(1, a, R))
	}
	// b's IW request conflicts with both of a's read locks.
	wb2, _ := f.acquire(1, b, IW, Queued)
	wantIDs(t, "grants after first r release", granted(f.release(1, a, R)), nil)
	wantIDs(t, "grants after second r release", granted(f.release(1, a, R)), []uint64{wb2})
}

// TestFIFO: spec 1.3.1.3 — waiting requests are served first come first
// served, and a compatible request waits behind an incompatible one.
func TestFIFO(t *testing.T) {
	f := newFixture(t, 1)
	a, b, c, d := Owner(1), Owner(2), Owner(3), Owner(4)
	f.acquire(1, a, R, Granted)
	wb, _ := f.acquire(1, b, W, Queued)
	wc, _ := f.acquire(1, c, R, Queued) // compatible with a, but b is first
	wd, _ := f.acquire(1, d, IR, Queued)
	wantIDs(t, "queue", f.waiting(1), []uint64{wb, wc, wd})
	if r, err := f.tbl.Acquire(Request{ID: 99, Set: 1, Holder: c, Mode: R, Try: true}); err != nil || r.Outcome != Refused {
		t.Errorf("try behind the queue = %v, %v; want refused", r.Outcome, err)
	}
	wantIDs(t, "grants after a releases", granted(f.release(1, a, R)), []uint64{wb})
	wantIDs(t, "grants after b releases", granted(f.release(1, b, W)), []uint64{wc, wd})
}

// TestFamilyException: spec 1.3.1.3, last sentence — a transaction of the
// same family as a holder is held up by conflicts only, not by the queue,
// both when it asks and when locks are given up; owners and other
// families wait their turn.
func TestFamilyException(t *testing.T) {
	f := newFixture(t, 1)
	top, child, sibling, other := Txn(1), Txn(2, 1), Txn(3, 1), Txn(5)
	x, y := Owner(8), Owner(9)
	f.acquire(1, top, R, Granted)
	wx, _ := f.acquire(1, x, W, Queued)
	f.acquire(1, child, R, Granted) // passes x: its family holds a lock
	wo, _ := f.acquire(1, other, IR, Queued)
	wy, _ := f.acquire(1, y, IR, Queued)
	ws, _ := f.acquire(1, sibling, W, Queued) // passes the queue, but child's R conflicts
	wantIDs(t, "queue", f.waiting(1), []uint64{wx, wo, wy, ws})
	// child's release lets the sibling through; x still conflicts with
	// top's R and holds up other and y.
	wantIDs(t, "grants after child releases", granted(f.release(1, child, R)), []uint64{ws})
	e, err := f.tbl.CommitTxn(3) // the sibling's W passes to top
	if err != nil || len(e.Grants) != 0 {
		t.Fatalf("CommitTxn(3) = %+v, %v", e, err)
	}
	if f.held(1, top, W) != 1 || f.held(1, top, R) != 1 {
		t.Fatalf("top holds r=%d w=%d, want 1 and 1", f.held(1, top, R), f.held(1, top, W))
	}
	e, err = f.tbl.CommitTxn(1) // top-level: its locks are dropped
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "grants after top commits", granted(e.Grants), []uint64{wx})
	wantIDs(t, "queue after", f.waiting(1), []uint64{wo, wy})
}

// TestChangeMode: spec 2.3 change_mode — the held lock stays held while the
// request waits, and is swapped for the new one at the grant, which may
// let waiting requests through.
func TestChangeMode(t *testing.T) {
	t.Run("held while waiting, swapped at grant", func(t *testing.T) {
		f := newFixture(t, 1)
		a, b, c := Owner(1), Owner(2), Owner(3)
		_, ra := f.acquire(1, a, R, Granted)
		f.acquire(1, b, R, Granted)
		wa, _ := f.change(1, a, R, W, Queued)
		if f.held(1, a, R) != 1 || !f.valid(1, ra.Fence) {
			t.Fatalf("a's read lock not held while its change waits")
		}
		wc, _ := f.acquire(1, c, R, Queued) // behind a's change
		gs := f.release(1, b, R)
		wantIDs(t, "grants", granted(gs), []uint64{wa})
		if f.held(1, a, R) != 0 || f.held(1, a, W) != 1 {
			t.Errorf("after the grant a holds r=%d w=%d, want 0 and 1", f.held(1, a, R), f.held(1, a, W))
		}
		if f.valid(1, ra.Fence) || !f.valid(1, gs[0].Fence) {
			t.Errorf("fences: the read grant's should be dead and the write grant's live")
		}
		wantIDs(t, "queue", f.waiting(1), []uint64{wc})
	})
	t.Run("a granted change lets waiters through", func(t *testing.T) {
		f := newFixture(t, 1)
		t1, t2, t3 := Txn(1), Txn(2), Txn(3)
		f.acquire(1, t1, U, Granted)
		f.acquire(1, t2, R, Granted)
		w1, _ := f.change(1, t1, U, W, Queued)
		w3, _ := f.acquire(1, t3, R, Queued)
		wantIDs(t, "grants after t2 releases", granted(f.release(1, t2, R)), []uint64{w1})
		// t1 passes the queue (it holds a lock) and gives its W up.
		_, res := f.change(1, t1, W, R, Granted)
		wantIDs(t, "grants of the downgrade", granted(res.Grants), []uint64{w3})
	})
	t.Run("the queue is looked at again after a change", func(t *testing.T) {
		// y's change to IW waits for its child's R; x's IR waits for y's W
		// and is first. When the child lets go, y's change is granted, and
		// x, passed over a moment before, is granted too.
		f := newFixture(t, 1)
		y, child, x := Txn(5), Txn(6, 5), Owner(7)
		f.acquire(1, y, W, Granted)
		f.acquire(1, child, R, Granted)
		wx, _ := f.acquire(1, x, IR, Queued)
		wy, _ := f.change(1, y, W, IW, Queued)
		wantIDs(t, "grants", granted(f.release(1, child, R)), []uint64{wy, wx})
	})
	t.Run("an owner's change passes the queue (2.3)", func(t *testing.T) {
		// Spec 2.3: change_mode blocks only while the new mode conflicts
		// with a mode another client holds. An owner's downgrade is granted
		// at once though b waits (for the owner's own W), and lets b in;
		// queued behind b it would deadlock.
		f := newFixture(t, 1)
		a, b := Owner(1), Owner(2)
		f.acquire(1, a, W, Granted)
		wb, _ := f.acquire(1, b, R, Queued)
		_, res := f.change(1, a, W, R, Granted)
		wantIDs(t, "grants of the downgrade", granted(res.Grants), []uint64{wb})
	})
	t.Run("an owner's upgrade of U passes the queue (1.3.1.1, 2.3)", func(t *testing.T) {
		// U exists so that read-then-update cannot deadlock: the holder of
		// U changes it to W while b waits for W behind it.
		f := newFixture(t, 1)
		a, b := Owner(1), Owner(2)
		f.acquire(1, a, U, Granted)
		wb, _ := f.acquire(1, b, W, Queued)
		f.change(1, a, U, W, Granted)
		wantIDs(t, "queue", f.waiting(1), []uint64{wb})
	})
}

// TestLockNotHeld: spec 2.1.1 LockNotHeld, for unlock and change_mode,
// one row per way of not holding the lock. Every row answers an error of
// kind djinn.LockNotHeld.
func TestLockNotHeld(t *testing.T) {
	a, b, d := Owner(1), Owner(2), Owner(3)
	parent, child := Txn(10), Txn(11, 10)
	setup := func(t *testing.T) *fixture {
		f := newFixture(t, 2)
		f.acquire(1, a, R, Granted)
		f.acquire(2, parent, W, Granted)
		f.acquire(2, child, R, Granted)
		return f
	}
	rows := []struct {
		name string
		call func(f *fixture) error
	}{
		{"2.3 unlock of a mode not held", func(f *fixture) error { _, err := f.tbl.Release(1, a, W); return err }},
		{"2.3 unlock by a client that holds nothing", func(f *fixture) error { _, err := f.tbl.Release(1, b, R); return err }},
		{"2.3 unlock in a set where the lock is not held", func(f *fixture) error { _, err := f.tbl.Release(2, a, R); return err }},
		{"1.3.2 unlock past the count", func(f *fixture) error {
			f.release(1, a, R)
			_, err := f.tbl.Release(1, a, R)
			return err
		}},
		{"1.5 a child cannot drop its parent's lock", func(f *fixture) error { _, err := f.tbl.Release(2, child, W); return err }},
		{"1.5 a parent cannot drop its child's lock", func(f *fixture) error { _, err := f.tbl.Release(2, parent, R); return err }},
		{"2.3 change_mode from a mode not held", func(f *fixture) error {
			_, err := f.tbl.Acquire(Request{ID: 100, Set: 1, Holder: a, From: W, Mode: R})
			return err
		}},
		{"2.3 change_mode by a client that holds nothing", func(f *fixture) error {
			_, err := f.tbl.Acquire(Request{ID: 100, Set: 1, Holder: b, From: R, Mode: W})
			return err
		}},
		{"2.3 change_mode of a lock a waiting change_mode claims", func(f *fixture) error {
			f.acquire(1, d, R, Granted)
			f.change(1, a, R, W, Queued)
			_, err := f.tbl.Acquire(Request{ID: 100, Set: 1, Holder: a, From: R, Mode: U})
			return err
		}},
		{"2.3 unlock of a lock a waiting change_mode claims", func(f *fixture) error {
			f.acquire(1, d, R, Granted)
			f.change(1, a, R, W, Queued)
			_, err := f.tbl.Release(1, a, R)
			return err
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			err := row.call(setup(t))
			wantKind(t, err, djinn.LockNotHeld)
			if !errors.Is(err, djinn.ErrLockNotHeld) {
				t.Errorf("%v is not djinn.ErrLockNotHeld", err)
			}
		})
	}
}

// TestRelatedSets: spec 2.5 create_related and 2.2 drop_locks — related
// sets drop a transaction's locks together, and only theirs.
func TestRelatedSets(t *testing.T) {
	tbl := New()
	for _, c := range []struct{ id, related uint64 }{{1, 0}, {2, 1}, {3, 2}, {4, 0}, {5, 1}} {
		if err := tbl.CreateSet(c.id, c.related, true); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{t: t, tbl: tbl}
	for id, want := range map[uint64]uint64{1: 1, 2: 1, 3: 1, 4: 4, 5: 1} {
		if s, _ := tbl.Set(id); s.Group != want {
			t.Errorf("set %d: group %d, want %d", id, s.Group, want)
		}
	}
	tx, u, v := Txn(1), Txn(2), Txn(3)
	for id := uint64(1); id <= 4; id++ {
		f.acquire(id, tx, W, Granted)
	}
	f.acquire(5, v, R, Granted)
	wt5, _ := f.acquire(5, tx, W, Queued)
	wu1, _ := f.acquire(1, u, R, Queued)
	f.acquire(4, u, R, Queued)
	e, err := tbl.DropGroup(2, tx)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "grants", granted(e.Grants), []uint64{wu1})
	wantIDs(t, "cancelled", e.Cancelled, []uint64{wt5})
	for id, want := range map[uint64]int{1: 0, 2: 0, 3: 0, 4: 1} {
		if got := f.held(id, tx, W); got != want {
			t.Errorf("set %d: tx holds %d write locks, want %d", id, got, want)
		}
	}
	// A removed set leaves the rest of its group together.
	if _, err := tbl.RemoveSet(1); err != nil {
		t.Fatal(err)
	}
	f.acquire(3, u, W, Granted)
	f.acquire(5, u, IR, Granted)
	e, err = tbl.DropGroup(3, u)
	if err != nil || len(e.Grants) != 0 {
		t.Fatalf("DropGroup(3, u) = %+v, %v", e, err)
	}
	if f.held(3, u, W) != 0 || f.held(5, u, IR) != 0 {
		t.Errorf("u's locks in the rest of the group survived")
	}
	if s, _ := tbl.Set(3); s.Group != 2 {
		t.Errorf("set 3: group %d after set 1 left, want 2", s.Group)
	}
	wantKind(t, tbl.CreateSet(6, 99, true), djinn.NoSuchObject, "99")
	wantKind(t, tbl.CreateSet(6, 4, false), djinn.InvalidArgument, "4")
	wantKind(t, tbl.CreateSet(4, 0, true), djinn.InvalidArgument, "4", "exists")
	_, err = tbl.Acquire(Request{ID: 77, Set: 4, Holder: Owner(1), Mode: R})
	wantKind(t, err, djinn.InvalidArgument, "owner 1", "transactional")
}

// TestNested: spec 1.5 — a nested transaction is granted over its
// ancestors' locks and blocked by a sibling's or an unrelated client's;
// its release leaves its ancestors' locks alone; committed, its locks
// pass to its parent.
func TestNested(t *testing.T) {
	f := newFixture(t, 1)
	t1, t2, t3, t4 := Txn(1), Txn(2, 1), Txn(3, 1), Txn(4, 2, 1)
	t5, o := Txn(5), Owner(9)
	f.acquire(1, t1, W, Granted)
	f.acquire(1, t2, W, Granted) // over its parent's W
	f.acquire(1, t4, R, Granted) // over its parent's and grandparent's W
	w3, _ := f.acquire(1, t3, R, Queued)
	w5, _ := f.acquire(1, t5, IR, Queued)
	wo, _ := f.acquire(1, o, IR, Queued)
	f.release(1, Txn(4), R) // Release does not look at the lineage
	if f.held(1, t1, W) != 1 || f.held(1, t2, W) != 1 {
		t.Fatalf("a child's release took an ancestor's lock")
	}
	f.acquire(1, t4, R, Granted)
	f.acquire(1, t2, R, Granted)
	if e, err := f.tbl.CommitTxn(4); err != nil || len(e.Grants)+len(e.Cancelled) != 0 {
		t.Fatalf("CommitTxn(4) = %+v, %v", e, err)
	}
	if f.held(1, t2, R) != 2 || f.held(1, t2, W) != 1 {
		t.Fatalf("after t4 commits t2 holds r=%d w=%d, want 2 and 1", f.held(1, t2, R), f.held(1, t2, W))
	}
	// t2's locks pass to t1: t3, waiting for t2's W, is granted now that
	// an ancestor of its holds it.
	e, err := f.tbl.CommitTxn(2)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "grants after t2 commits", granted(e.Grants), []uint64{w3})
	if f.held(1, t1, W) != 2 || f.held(1, t1, R) != 2 {
		t.Errorf("after t2 commits t1 holds r=%d w=%d, want 2 and 2", f.held(1, t1, R), f.held(1, t1, W))
	}
	// The top-level commit drops the family's locks, t3's included.
	e, err = f.tbl.CommitTxn(1)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "grants after t1 commits", granted(e.Grants), []uint64{w5, wo})
	if hs, _ := f.tbl.Holders(1); len(hs) != 2 {
		t.Errorf("holders %+v, want t5 and the owner only", hs)
	}
}

// TestNestedParentWaitsForChild: spec 1.5 — a child is not committed
// relative to its parent, so the parent's request waits for the child's
// conflicting lock.
func TestNestedParentWaitsForChild(t *testing.T) {
	f := newFixture(t, 1)
	parent, child := Txn(1), Txn(2, 1)
	f.acquire(1, parent, R, Granted)
	f.acquire(1, child, W, Granted)
	wp, _ := f.acquire(1, parent, IR, Queued)
	e, err := f.tbl.CommitTxn(2)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "grants after the child commits", granted(e.Grants), []uint64{wp})
}

// TestAbortTxn: an aborted transaction's locks and its nested
// transactions' are dropped and their waiting requests cancelled; its
// parent's are kept.
func TestAbortTxn(t *testing.T) {
	f := newFixture(t, 2)
	t1, t2, t4 := Txn(1), Txn(2, 1), Txn(4, 2, 1)
	f.acquire(1, t1, R, Granted)
	f.acquire(1, t2, W, Granted)
	f.acquire(2, Owner(9), R, Granted)
	w4, _ := f.acquire(2, t4, W, Queued)
	w8, _ := f.acquire(1, Owner(8), R, Queued)
	e, err := f.tbl.AbortTxn(2)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "grants", granted(e.Grants), []uint64{w8})
	wantIDs(t, "cancelled", e.Cancelled, []uint64{w4})
	if f.held(1, t1, R) != 1 || f.held(1, t2, W) != 0 {
		t.Errorf("after aborting t2: t1 r=%d, t2 w=%d; want 1 and 0", f.held(1, t1, R), f.held(1, t2, W))
	}
	if e, err := f.tbl.AbortTxn(77); err != nil || len(e.Grants)+len(e.Cancelled) != 0 {
		t.Errorf("AbortTxn of an unknown transaction = %+v, %v; want nothing", e, err)
	}
	if err := f.tbl.check(); err != nil {
		t.Fatal(err)
	}
	if len(f.tbl.parties) != 3 { // t1 and the two owners
		t.Errorf("%d parties known after the abort, want 3", len(f.tbl.parties))
	}
}

// TestDropHolder: an owner's lease ended — exactly its locks go, its
// waiting requests are cancelled, and the requests it held up are granted
// in order.
func TestDropHolder(t *testing.T) {
	f := newFixture(t, 3)
	a, b, c, d, e, g := Owner(1), Owner(2), Owner(3), Owner(4), Owner(5), Owner(6)
	f.acquire(1, a, R, Granted)
	f.acquire(2, a, W, Granted)
	f.acquire(1, b, R, Granted)
	f.acquire(3, g, W, Granted)
	wc, _ := f.acquire(1, c, W, Queued)
	wd, _ := f.acquire(2, d, R, Queued)
	we, _ := f.acquire(2, e, IR, Queued)
	wa, _ := f.acquire(3, a, R, Queued)
	eff, err := f.tbl.DropHolder(a)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "grants", granted(eff.Grants), []uint64{wd, we})
	wantIDs(t, "cancelled", eff.Cancelled, []uint64{wa})
	wantIDs(t, "set 1 queue", f.waiting(1), []uint64{wc})
	if f.held(1, b, R) != 1 || f.held(3, g, W) != 1 || f.held(1, a, R) != 0 {
		t.Errorf("DropHolder took the wrong locks")
	}
	if eff, err := f.tbl.DropHolder(a); err != nil || len(eff.Grants)+len(eff.Cancelled) != 0 {
		t.Errorf("second DropHolder = %+v, %v; want nothing", eff, err)
	}
}

// TestDeadlock: a request whose waiting would close a cycle, across sets,
// is refused with djinn.ErrDeadlock and nothing is queued.
func TestDeadlock(t *testing.T) {
	t.Run("two sets", func(t *testing.T) {
		f := newFixture(t, 2)
		a, b := Owner(1), Owner(2)
		f.acquire(1, a, W, Granted)
		f.acquire(2, b, W, Granted)
		wa, _ := f.acquire(2, a, W, Queued)
		before := f.tbl.Export()
		_, err := f.tbl.Acquire(Request{ID: 10, Set: 1, Holder: b, Mode: R})
		if !errors.Is(err, djinn.ErrDeadlock) || djinn.KindOf(err) != djinn.Deadlock {
			t.Fatalf("got %v, want a deadlock", err)
		}
		for _, s := range []string{"request 10", "owner 2", "request " + itoa(wa), "owner 1"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%q does not name %s", err, s)
			}
		}
		if !reflect.DeepEqual(f.tbl.Export(), before) {
			t.Errorf("the refused request changed the table")
		}
		if r, err := f.tbl.Acquire(Request{ID: 11, Set: 1, Holder: b, Mode: R, Try: true}); err != nil || r.Outcome != Refused {
			t.Errorf("try_lock = %v, %v; want refused, not a deadlock", r.Outcome, err)
		}
	})
	t.Run("three sets", func(t *testing.T) {
		f := newFixture(t, 3)
		a, b, c := Txn(1), Txn(2), Txn(3)
		f.acquire(1, a, W, Granted)
		f.acquire(2, b, W, Granted)
		f.acquire(3, c, W, Granted)
		f.acquire(2, a, R, Queued)
		f.acquire(3, b, R, Queued)
		_, err := f.tbl.Acquire(Request{ID: 10, Set: 1, Holder: c, Mode: IR})
		if !errors.Is(err, djinn.ErrDeadlock) {
			t.Fatalf("got %v, want a deadlock", err)
		}
		// Without the last edge there is no cycle.
		f.acquire(1, Owner(4), IR, Queued)
	})
	t.Run("behind the queue", func(t *testing.T) {
		// An owner's second read waits behind b, which waits for the
		// owner's first: a cycle through the queue. A transaction's
		// passes the queue (1.3.1.3) and is granted.
		f := newFixture(t, 2)
		a, b, tx := Owner(1), Owner(2), Txn(3)
		f.acquire(1, a, R, Granted)
		f.acquire(1, b, W, Queued)
		_, err := f.tbl.Acquire(Request{ID: 10, Set: 1, Holder: a, Mode: R})
		if !errors.Is(err, djinn.ErrDeadlock) {
			t.Fatalf("got %v, want a deadlock", err)
		}
		f.acquire(2, tx, R, Granted)
		f.acquire(2, b, W, Queued)
		f.acquire(2, tx, R, Granted)
	})
	t.Run("waiting in line is no cycle", func(t *testing.T) {
		f := newFixture(t, 1)
		f.acquire(1, Owner(1), W, Granted)
		f.acquire(1, Owner(2), W, Queued)
		f.acquire(1, Owner(3), R, Queued)
		f.acquire(1, Owner(2), IR, Queued) // owner 2 holds nothing
	})
}

// TestCancel: a cancelled request leaves its queue and lets through the
// requests it held up; cancelling what is not waiting is an error.
func TestCancel(t *testing.T) {
	f := newFixture(t, 1)
	a, b, c := Owner(1), Owner(2), Owner(3)
	_, ra := f.acquire(1, a, R, Granted)
	wb, _ := f.acquire(1, b, W, Queued)
	wc, _ := f.acquire(1, c, R, Queued)
	gs, err := f.tbl.Cancel(wb)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, "grants", granted(gs), []uint64{wc})
	if gs[0].Fence != ra.Fence+1 {
		t.Errorf("fence %d, want %d", gs[0].Fence, ra.Fence+1)
	}
	_, err = f.tbl.Cancel(wb)
	wantKind(t, err, djinn.NoSuchObject, "request "+itoa(wb))
	_, err = f.tbl.Cancel(wc) // granted, no longer waiting
	wantKind(t, err, djinn.NoSuchObject, "request "+itoa(wc))
}

// TestFencing: a grant's fence validates while the grant is held, and not
// after its lock is released, changed, dropped or aborted; a nested
// transaction's fences survive its commit into its parent.
func TestFencing(t *testing.T) {
	f := newFixture(t, 1)
	a := Owner(1)
	_, r1 := f.acquire(1, a, R, Granted)
	_, r2 := f.acquire(1, a, R, Granted)
	f.release(1, a, R) // the last granted goes
	if !f.valid(1, r1.Fence) || f.valid(1, r2.Fence) {
		t.Errorf("after release: fence %d valid=%v, %d valid=%v; want true, false", r1.Fence, f.valid(1, r1.Fence), r2.Fence, f.valid(1, r2.Fence))
	}
	_, r3 := f.change(1, a, R, W, Granted)
	if f.valid(1, r1.Fence) || !f.valid(1, r3.Fence) || r3.Fence != r2.Fence+1 {
		t.Errorf("after change_mode: the old fence should die and the new one (%d) live", r3.Fence)
	}
	if _, err := f.tbl.DropHolder(a); err != nil {
		t.Fatal(err)
	}
	if f.valid(1, r3.Fence) {
		t.Errorf("fence %d valid after the holder was dropped", r3.Fence)
	}
	parent, child := Txn(1), Txn(2, 1)
	_, p1 := f.acquire(1, parent, R, Granted)
	_, c1 := f.acquire(1, child, W, Granted)
	if _, err := f.tbl.CommitTxn(2); err != nil {
		t.Fatal(err)
	}
	hs, _ := f.tbl.Holders(1)
	want := []HolderInfo{{Holder: parent, Locks: []Lock{{R, p1.Fence}, {W, c1.Fence}}}}
	if !reflect.DeepEqual(norm(hs), norm(want)) {
		t.Errorf("holders after commit %+v, want %+v", hs, want)
	}
	if !f.valid(1, c1.Fence) {
		t.Errorf("the child's fence died when it committed into its parent")
	}
	f.release(1, parent, W)
	if f.valid(1, c1.Fence) || !f.valid(1, p1.Fence) {
		t.Errorf("the parent's release of the inherited W: fences wrong")
	}
	if _, err := f.tbl.AbortTxn(1); err != nil {
		t.Fatal(err)
	}
	if f.valid(1, p1.Fence) {
		t.Errorf("fence %d valid after its transaction aborted", p1.Fence)
	}
	_, err := f.tbl.Validate(1, 0)
	wantKind(t, err, djinn.InvalidArgument, "fence 0")
	_, err = f.tbl.Validate(1, 999)
	wantKind(t, err, djinn.InvalidArgument, "fence 999")
	_, err = f.tbl.Validate(42, 1)
	wantKind(t, err, djinn.NoSuchObject, "lock set 42")
}

// TestTryLock: spec 2.3 try_lock — granted when lock would be, refused
// otherwise, and a refusal changes nothing, fences included.
func TestTryLock(t *testing.T) {
	f := newFixture(t, 1)
	f.request(Request{Set: 1, Holder: Owner(1), Mode: U, Try: true}, Granted)
	before := f.tbl.Export()
	f.request(Request{Set: 1, Holder: Owner(2), Mode: U, Try: true}, Refused)
	if !reflect.DeepEqual(f.tbl.Export(), before) {
		t.Errorf("a refused try changed the table")
	}
	f.request(Request{Set: 1, Holder: Owner(2), Mode: R, Try: true}, Granted)
}

// TestBadInput: every bad argument is an error naming it, and changes
// nothing; never a panic.
func TestBadInput(t *testing.T) {
	f := newFixture(t, 1)
	if err := f.tbl.CreateSet(2, 0, true); err != nil {
		t.Fatal(err)
	}
	f.acquire(1, Txn(5, 4), R, Granted)
	wq, _ := f.acquire(1, Owner(1), W, Queued)
	acquire := func(r Request) func(*Table) error {
		return func(tb *Table) error {
			if r.ID == 0 {
				r.ID = 9
			}
			_, err := tb.Acquire(r)
			return err
		}
	}
	errOnly := func(_ any, err error) error { return err }
	rows := []struct {
		name     string
		call     func(tb *Table) error
		kind     djinn.Kind
		mentions []string
	}{
		{"unknown set: Acquire", acquire(Request{Set: 42, Holder: Owner(1), Mode: IR}), djinn.NoSuchObject, []string{"lock set 42"}},
		{"unknown set: Release", func(tb *Table) error { return errOnly(tb.Release(42, Owner(1), R)) }, djinn.NoSuchObject, []string{"lock set 42"}},
		{"unknown set: RemoveSet", func(tb *Table) error { return errOnly(tb.RemoveSet(42)) }, djinn.NoSuchObject, []string{"lock set 42"}},
		{"unknown set: DropGroup", func(tb *Table) error { return errOnly(tb.DropGroup(42, Owner(1))) }, djinn.NoSuchObject, []string{"lock set 42"}},
		{"unknown set: Holders", func(tb *Table) error { return errOnly(tb.Holders(42)) }, djinn.NoSuchObject, []string{"lock set 42"}},
		{"unknown set: Waiters", func(tb *Table) error { return errOnly(tb.Waiters(42)) }, djinn.NoSuchObject, []string{"lock set 42"}},
		{"unknown set: Set", func(tb *Table) error { return errOnly(tb.Set(42)) }, djinn.NoSuchObject, []string{"lock set 42"}},
		{"unknown set: Validate", func(tb *Table) error { return errOnly(tb.Validate(42, 1)) }, djinn.NoSuchObject, []string{"lock set 42"}},
		{"2.5 unknown related set", func(tb *Table) error { return tb.CreateSet(3, 42, false) }, djinn.NoSuchObject, []string{"lock set 42"}},
		{"set id 0", func(tb *Table) error { return tb.CreateSet(0, 0, false) }, djinn.InvalidArgument, []string{"lock set 0"}},
		{"set id taken", func(tb *Table) error { return tb.CreateSet(1, 0, false) }, djinn.InvalidArgument, []string{"lock set 1"}},
		{"2.1.1 mode 0", acquire(Request{Set: 1, Holder: Owner(2), Mode: 0}), djinn.InvalidArgument, []string{"mode 0"}},
		{"2.1.1 mode 6", acquire(Request{Set: 1, Holder: Owner(2), Mode: 6}), djinn.InvalidArgument, []string{"mode 6"}},
		{"2.1.1 held mode 9", acquire(Request{Set: 1, Holder: Owner(2), From: 9, Mode: IR}), djinn.InvalidArgument, []string{"held mode 9"}},
		{"2.1.1 release mode 7", func(tb *Table) error { return errOnly(tb.Release(1, Owner(2), 7)) }, djinn.InvalidArgument, []string{"mode 7"}},
		{"request id 0", func(tb *Table) error { return errOnly(tb.Acquire(Request{Set: 1, Holder: Owner(2), Mode: R})) }, djinn.InvalidArgument, []string{"request id 0"}},
		{"request id already waiting", acquire(Request{ID: wq, Set: 1, Holder: Owner(2), Mode: IR}), djinn.InvalidArgument, []string{"request " + itoa(wq)}},
		{"owner 0", acquire(Request{Set: 1, Holder: Owner(0), Mode: IR}), djinn.InvalidArgument, []string{"owner 0"}},
		{"transaction 0", acquire(Request{Set: 1, Holder: Txn(0), Mode: IR}), djinn.InvalidArgument, []string{"transaction 0"}},
		{"an id past 2^63", acquire(Request{Set: 1, Holder: Owner(1 << 63), Mode: IR}), djinn.InvalidArgument, []string{"owner 9223372036854775808"}},
		{"an owner with a lineage", acquire(Request{Set: 1, Holder: Holder{ID: 3, Lineage: []uint64{1}}, Mode: IR}), djinn.InvalidArgument, []string{"owner 3"}},
		{"a lineage that repeats", acquire(Request{Set: 1, Holder: Txn(6, 7, 6), Mode: IR}), djinn.InvalidArgument, []string{"transaction 6", "[7 6]"}},
		{"a lineage with 0", acquire(Request{Set: 1, Holder: Txn(6, 0), Mode: IR}), djinn.InvalidArgument, []string{"transaction 6", "[0]"}},
		{"a lineage that contradicts the known one", acquire(Request{Set: 1, Holder: Txn(5, 8), Mode: IR}), djinn.InvalidArgument, []string{"transaction 5", "[8]", "[4]"}},
		{"an ancestor's lineage that contradicts", acquire(Request{Set: 1, Holder: Txn(6, 5, 9), Mode: IR}), djinn.InvalidArgument, []string{"transaction 6", "transaction 5"}},
		{"2.4 an owner on a transactional set", acquire(Request{Set: 2, Holder: Owner(2), Mode: R}), djinn.InvalidArgument, []string{"lock set 2", "owner 2"}},
		{"CommitTxn(0)", func(tb *Table) error { return errOnly(tb.CommitTxn(0)) }, djinn.InvalidArgument, []string{"transaction 0"}},
		{"AbortTxn(0)", func(tb *Table) error { return errOnly(tb.AbortTxn(0)) }, djinn.InvalidArgument, []string{"transaction 0"}},
		{"DropHolder of owner 0", func(tb *Table) error { return errOnly(tb.DropHolder(Owner(0))) }, djinn.InvalidArgument, []string{"owner 0"}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			before := f.tbl.Export()
			wantKind(t, row.call(f.tbl), row.kind, row.mentions...)
			if !reflect.DeepEqual(f.tbl.Export(), before) {
				t.Errorf("the refused call changed the table")
			}
		})
	}
	if err := f.tbl.check(); err != nil {
		t.Fatal(err)
	}
}
