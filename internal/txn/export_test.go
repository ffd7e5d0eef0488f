package txn

import (
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

// ListVisits returns the ids State.List looked at so far, and the most
// it looked at with the state locked once.
func (s *State) ListVisits() (visited, heldMost int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owned.visited, s.owned.heldMost
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
