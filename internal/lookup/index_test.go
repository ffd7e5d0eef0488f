package lookup

import (
	"fmt"
	"testing"

	"github.com/djinn-go/djinn"
)

// TestIndexesEmptyAfterRemoval: the indexes keep no key of an item gone,
// whether the key was its alone or shared, through registrations,
// re-registrations that change the entries, and removals.
func TestIndexesEmptyAfterRemoval(t *testing.T) {
	r, err := New(djinn.ID{0xff, 1}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	str := NewString
	item := func(i, version int) Item {
		return Item{ID: djinn.ID{byte(i), byte(i >> 8), 1}, Ref: []byte("127.0.0.1:9"), Types: []string{"Printer", fmt.Sprintf("Model%d", i%3)},
			Entries: []Entry{{Type: "Name", Supertypes: []string{"Entry"}, Fields: []Field{
				{Name: "name", Value: str(fmt.Sprintf("p%d-v%d", i, version))}, // the item's own
				{Name: "floor", Value: str(fmt.Sprint(i % 4))},                 // shared
			}}}}
	}
	const n = 50
	for version := range 2 {
		for i := range n {
			if _, err := r.Register(item(i, version), djinn.ID{byte(i), 2}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := len(r.byField), n+4; got != want {
		t.Errorf("%d field keys with %d items registered, want %d (the names of the latest version and 4 floors)", got, n, want)
	}
	for i := range n {
		if _, err := r.Remove(item(i, 0).ID); err != nil {
			t.Fatal(err)
		}
	}
	if len(r.byType) != 0 || len(r.byEntryType) != 0 || len(r.byField) != 0 {
		t.Errorf("indexes after every item's removal: %d service type keys, %d entry type keys, %d field keys; want none",
			len(r.byType), len(r.byEntryType), len(r.byField))
	}
}
