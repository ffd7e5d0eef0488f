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
