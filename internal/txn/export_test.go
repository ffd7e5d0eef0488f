package txn

import (
	"maps"
	"slices"
	"testing"

	"github.com/djinn-go/djinn"
)

// SecretOf returns transaction id's secret as svc's state holds it (zero
// for one it does not know), for tests that work under transactions they
// name by id.
func SecretOf(svc *Service, id uint64) djinn.ID {
	in, _ := svc.state.Get(id)
	return in.Secret
}

// SetListBytes bounds List's pages at n bytes until the test ends, for
// tests of descriptions past the bound that would take too many
// participants to build. Tests that call it do not run in parallel.
func SetListBytes(t testing.TB, n int) {
	old := listBytes
	listBytes = n
	t.Cleanup(func() { listBytes = old })
}

// AllTransactions returns every transaction of s, by id: the listing
// tests check the pages against, read whole.
func AllTransactions(s *State) []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := slices.Sorted(maps.Keys(s.txns))
	out := make([]Info, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.txns[id].info())
	}
	return out
}

// ResetHeldMost forgets the most a listing of s looked at with the state
// locked once (ListVisits' heldMost), for a test of the calls after.
func ResetHeldMost(s *State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owned.heldMost = 0
}

// WalkStep is how many transactions State.Highest takes with the state
// locked once.
func WalkStep() int { return walkStep }

// SetWalkStep makes State.Highest take at most n transactions with the
// state locked once until the test ends. Tests that call it do not run
// in parallel.
func SetWalkStep(t testing.TB, n int) {
	old := walkStep
	walkStep = n
	t.Cleanup(func() { walkStep = old })
}

// ListSkips is how many transactions of other states than the one asked
// State.List skips with the state locked once.
func ListSkips() int { return listSkips }

// SetListSkips makes State.List skip at most n transactions with the
// state locked once until the test ends. Tests that call it do not run
// in parallel.
func SetListSkips(t testing.TB, n int) {
	old := listSkips
	listSkips = n
	t.Cleanup(func() { listSkips = old })
}
