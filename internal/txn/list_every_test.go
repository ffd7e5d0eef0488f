package txn_test

import (
	"slices"
	"testing"

	"github.com/djinn-go/djinn/internal/txn"
)

// TestEveryPrincipalsListingLocksInBoundedSteps (trust: one principal's
// load never starves another's): listing every principal's transactions
// (an operator's Resources.List) and those of the highest ids (the console's
// view) lock the state, which every transaction call waits for, for a
// bounded number at a time — a page, one past it and ListSkips skipped;
// WalkStep of the highest — and release it between. Before, both copied
// and sorted every transaction's id (up to some 2 million remembered)
// with the state locked once.
func TestEveryPrincipalsListingLocksInBoundedSteps(t *testing.T) {
	l := newLister(t)
	skips, step := txn.ListSkips(), txn.WalkStep()
	principals := []string{"cn:a", "cn:b", "cn:c"}
	var active []uint64
	first := l.create("cn:a", 0)
	active = append(active, first)
	for i := range 3 * skips {
		l.abort(l.create(principals[i%3], 0))
	}
	last := l.create("cn:c", 0)
	active = append(active, last)
	st := l.log.State

	txn.ResetHeldMost(st)
	ins, next := st.ListEvery(0, 10, txn.Active)
	if len(ins) != 1 || ins[0].ID != first || next <= first {
		t.Fatalf("first page of ACTIVE: %d, next %d; want transaction %d and a next past it", len(ins), next, first)
	}
	ins, next = st.ListEvery(next, 10, txn.Active)
	if len(ins) != 1 || ins[0].ID != last || next != 0 {
		t.Fatalf("second page of ACTIVE: %d, next %d; want transaction %d, no next", len(ins), next, last)
	}
	if _, held := st.ListVisits(); held > 10+skips+1 {
		t.Fatalf("looked at %d transactions with the state locked once, want at most %d (a page of 10, %d skipped, one past)", held, 10+skips+1, skips)
	}
	if got, _ := pageEvery(t, st, txn.Active, 1000); !slices.Equal(got, active) {
		t.Fatalf("ACTIVE of every principal: %v, want %v", got, active)
	}
	if n := st.CountEvery(txn.Aborted); n != 3*skips {
		t.Fatalf("ABORTED of every principal counted %d, want %d", n, 3*skips)
	}

	txn.ResetHeldMost(st)
	before, _ := st.ListVisits()
	highest := st.Highest(3 * step)
	if len(highest) != 3*step || highest[0].ID != last {
		t.Fatalf("the %d highest: %d, the first %d; want %d, the first %d", 3*step, len(highest), highest[0].ID, 3*step, last)
	}
	for i := 1; i < len(highest); i++ {
		if highest[i].ID >= highest[i-1].ID {
			t.Fatalf("the highest: %d after %d, want the highest first", highest[i].ID, highest[i-1].ID)
		}
	}
	visited, held := st.ListVisits()
	if held > step || visited-before != 3*step {
		t.Fatalf("the %d highest: looked at %d, at most %d with the state locked once; want %d, at most %d", 3*step, visited-before, held, 3*step, step)
	}
}
