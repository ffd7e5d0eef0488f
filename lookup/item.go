package lookup

import (
	"github.com/djinn-go/djinn/service"
)

// itemsEqual reports whether two items are the same in every part. Items
// are compared in the canonical form registrars return them in (and the
// JoinManager holds them in), where equal items are equal field by field.
func itemsEqual(a, b service.Item) bool { return a.Equal(b) }

// sameService reports whether two items differ at most in their entries.
func sameService(a, b service.Item) bool {
	a.Entries, b.Entries = nil, nil
	return a.Equal(b)
}

// change returns the item an attribute call would leave at a registrar,
// computed by the rules every registrar applies (package service): op
// changes the item's record; a nil op only puts the item into canonical
// form. Bad arguments get the registrar's errors, naming the bad value.
func change(it service.Item, op func(r *service.Record) (service.Record, bool, error)) (service.Item, error) {
	r, err := service.Limits{}.Record(it)
	if err != nil {
		return service.Item{}, err
	}
	if op != nil {
		if r, _, err = op(&r); err != nil {
			return service.Item{}, err
		}
	}
	return r.Item(), nil
}

// checkTemplate refuses a template a lookup service would refuse, by the
// rules every lookup service applies.
func checkTemplate(t service.Template) error {
	_, err := service.Limits{}.Matcher(t)
	return err
}
