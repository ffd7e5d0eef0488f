package lock

import (
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/djinn-go/djinn"
)

// The table's export and import (snapshots), its determinism, and the
// memory a set takes.

// TestExportImport: Import of an Export is the same table: the same
// export, and the same answers to the same calls afterwards.
func TestExportImport(t *testing.T) {
	f := newFixture(t, 0)
	for _, c := range []struct {
		id, related uint64
		txn         bool
	}{{1, 0, false}, {2, 1, false}, {3, 0, true}, {4, 3, true}, {5, 0, false}} {
		if err := f.tbl.CreateSet(c.id, c.related, c.txn); err != nil {
			t.Fatal(err)
		}
	}
	t1, t2, t3, t9 := Txn(1), Txn(2, 1), Txn(3, 2, 1), Txn(9)
	f.acquire(1, Owner(1), R, Granted)
	f.acquire(1, Owner(2), R, Granted)
	f.change(1, Owner(1), R, W, Queued)
	f.acquire(1, Owner(3), IR, Queued)
	f.acquire(2, t1, U, Granted)
	f.acquire(2, t3, W, Granted)
	f.acquire(3, t2, IW, Granted)
	f.acquire(3, t9, R, Queued)
	f.acquire(4, t9, W, Granted)
	f.acquire(4, t3, R, Queued)
	f.acquire(5, Owner(4), W, Granted)
	f.release(5, Owner(4), W)
	snap := f.tbl.Export()
	imp, err := Import(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(imp.Export(), snap) {
		t.Fatalf("export of the import differs:\n%+v\n%+v", imp.Export(), snap)
	}
	if err := imp.check(); err != nil {
		t.Fatal(err)
	}
	g := &fixture{t: t, tbl: imp, next: f.next}
	script := []func(f *fixture) any{
		func(f *fixture) any { return f.release(1, Owner(2), R) },
		func(f *fixture) any { e, err := f.tbl.CommitTxn(3); return []any{e, err} },
		func(f *fixture) any { _, r := f.acquire(3, t1, R, Queued); return r },
		func(f *fixture) any { e, err := f.tbl.DropGroup(4, t9); return []any{e, err} },
		func(f *fixture) any { _, r := f.acquire(5, Owner(4), W, Granted); return r },
		func(f *fixture) any { e, err := f.tbl.AbortTxn(1); return []any{e, err} },
		func(f *fixture) any {
			_, err := f.tbl.Acquire(Request{ID: 500, Set: 1, Holder: Owner(3), Mode: W})
			return err
		},
	}
	for i, step := range script {
		if a, b := step(f), step(g); !reflect.DeepEqual(a, b) {
			t.Fatalf("step %d: original %+v, imported %+v", i, a, b)
		}
	}
	if !reflect.DeepEqual(f.tbl.Export(), g.tbl.Export()) {
		t.Fatalf("the tables parted ways")
	}
}

// TestImportRejects: Import names the first bad value of a snapshot.
func TestImportRejects(t *testing.T) {
	good := func() Snapshot {
		return Snapshot{Sets: []SetState{{
			ID: 1, Group: 1, Fence: 2,
			Holders: []HolderInfo{{Holder: Owner(1), Locks: []Lock{{R, 1}}}, {Holder: Owner(2), Locks: []Lock{{R, 2}}}},
			Waiters: []Request{{ID: 7, Set: 1, Holder: Owner(1), From: R, Mode: W}},
		}}}
	}
	if _, err := Import(good()); err != nil {
		t.Fatalf("the good snapshot: %v", err)
	}
	rows := []struct {
		name    string
		mutate  func(s *Snapshot)
		mention string
	}{
		{"set 0", func(s *Snapshot) { s.Sets[0].ID = 0 }, "lock set 0"},
		{"a set twice", func(s *Snapshot) { s.Sets = append(s.Sets, s.Sets[0]) }, "appears twice"},
		{"a fence past the set's", func(s *Snapshot) { s.Sets[0].Fence = 1 }, "fence 2"},
		{"a fence twice", func(s *Snapshot) { s.Sets[0].Holders[1].Locks[0].Fence = 1 }, "fence 1"},
		{"a bad mode", func(s *Snapshot) { s.Sets[0].Holders[0].Locks[0].Mode = 8 }, "mode 8"},
		{"a holder twice", func(s *Snapshot) { s.Sets[0].Holders[1].Holder = Owner(1) }, "owner 1"},
		{"a holder without locks", func(s *Snapshot) { s.Sets[0].Holders[1].Locks = nil }, "owner 2"},
		{"a request twice", func(s *Snapshot) { s.Sets[0].Waiters = append(s.Sets[0].Waiters, s.Sets[0].Waiters[0]) }, "request 7"},
		{"a request in the wrong set", func(s *Snapshot) { s.Sets[0].Waiters[0].Set = 3 }, "request 7"},
		{"a change of a lock not held", func(s *Snapshot) { s.Sets[0].Waiters[0].From = IW }, "iw"},
		{"lineages that disagree", func(s *Snapshot) {
			s.Sets[0].Holders[0].Holder = Txn(3, 1)
			s.Sets[0].Holders[1].Holder = Txn(1, 2)
			s.Sets[0].Waiters = nil
		}, "transaction 1"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			s := good()
			row.mutate(&s)
			_, err := Import(s)
			wantKind(t, err, djinn.InvalidArgument, row.mention)
		})
	}
}

// TestDeterministicOrder: answers that gather from many sets list them in
// ascending set order, whatever the order the sets were made in.
func TestDeterministicOrder(t *testing.T) {
	tbl := New()
	f := &fixture{t: t, tbl: tbl}
	ids := []uint64{7, 3, 9, 1, 5}
	for _, id := range ids {
		if err := tbl.CreateSet(id, 0, false); err != nil {
			t.Fatal(err)
		}
	}
	var want []Grant
	for _, id := range ids {
		f.acquire(id, Owner(1), W, Granted)
	}
	slices.Sort(ids)
	for _, id := range ids {
		r, _ := f.acquire(id, Owner(2), R, Queued)
		want = append(want, Grant{Request: r, Set: id, Fence: 2})
	}
	slices.SortFunc(want, func(a, b Grant) int { return int(a.Set) - int(b.Set) })
	e, err := tbl.DropHolder(Owner(1))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(e.Grants, want) {
		t.Errorf("grants %+v, want %+v", e.Grants, want)
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// shapes are the holders BenchmarkSets and TestMemoryPerSet give their
// sets: for set i, an owner of its own, a top-level transaction of its
// own, a nested transaction of its own under a parent shared by ten sets,
// or one under a parent of its own (the worst case: two transactions to
// know per set).
var shapes = []struct {
	name   string
	holder func(i uint64) Holder
}{
	{"owner", func(i uint64) Holder { return Owner(i) }},
	{"transaction", func(i uint64) Holder { return Txn(i) }},
	{"nested", func(i uint64) Holder { return Txn(i, 1<<40+i/10) }},
	{"nested-own-parent", func(i uint64) Holder { return Txn(i, 1<<40+i) }},
}

// buildSets fills a table with n sets, each with one lock of one holder.
func buildSets(tb testing.TB, n int, holder func(uint64) Holder) *Table {
	tbl := New()
	for i := 1; i <= n; i++ {
		id := uint64(i)
		if err := tbl.CreateSet(id, 0, false); err != nil {
			tb.Fatal(err)
		}
		if _, err := tbl.Acquire(Request{ID: id, Set: id, Holder: holder(id), Mode: W}); err != nil {
			tb.Fatal(err)
		}
	}
	return tbl
}

func heapBytes() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkSets reports the memory a lock set with one holder holding one
// lock costs (B/set), for each shape of holder.
//
//	go test -run XXX -bench Sets -benchtime 1000000x ./internal/lock
func BenchmarkSets(b *testing.B) {
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			before := heapBytes()
			tbl := buildSets(b, b.N, sh.holder)
			b.StopTimer()
			b.ReportMetric(float64(heapBytes()-before)/float64(b.N), "B/set")
			runtime.KeepAlive(tbl)
		})
	}
}

// TestMemoryPerSet logs what a set with one holder costs. The target is a
// million sets in well under 300 MB; a nested transaction that is the
// only one under its parent costs more, and is only logged.
func TestMemoryPerSet(t *testing.T) {
	const n = 100_000
	for _, sh := range shapes {
		before := heapBytes()
		tbl := buildSets(t, n, sh.holder)
		per := float64(heapBytes()-before) / n
		runtime.KeepAlive(tbl)
		t.Logf("%s: %.0f bytes per set", sh.name, per)
		if per > 300 && sh.name != "nested-own-parent" {
			t.Errorf("%s: %.0f bytes per set, want under 300", sh.name, per)
		}
	}
}
