package txn

import "github.com/djinn-go/djinn"

// SecretOf returns transaction id's secret as svc's state holds it (zero
// for one it does not know), for tests that work under transactions they
// name by id.
func SecretOf(svc *Service, id uint64) djinn.ID {
	in, _ := svc.state.Get(id)
	return in.Secret
}
