package lookup

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/service"
)

// TestIndexesEmptyAfterRemoval: the indexes keep no key of an item gone,
// whether the key was its alone or shared, through registrations,
// re-registrations that change the entries, and removals.
func TestIndexesEmptyAfterRemoval(t *testing.T) {
	r, err := New(djinn.ID{0xff, 1}, service.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	str := service.NewString
	item := func(i, version int) service.Item {
		return service.Item{ID: djinn.ID{byte(i), byte(i >> 8), 1}, Service: []byte("127.0.0.1:9"), Types: []string{"Printer", fmt.Sprintf("Model%d", i%3)},
			Entries: []service.Entry{{Type: "Name", Supertypes: []string{"Entry"}, Fields: []service.Field{
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

// TestFieldKeyBytes: a field key shares the bytes of the one item that has
// its value, and takes a copy of its own when a second item comes, so that
// no key keeps a removed item's bytes.
func TestFieldKeyBytes(t *testing.T) {
	r, err := New(djinn.ID{0xff, 1}, service.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	item := func(i byte) service.Item {
		return service.Item{ID: djinn.ID{i, 1}, Service: []byte("127.0.0.1:9"),
			Entries: []service.Entry{{Type: "Location", Fields: []service.Field{{Name: "floor", Value: service.NewString("3")}}}}}
	}
	// bytes returns where the stored item id's floor value and the
	// index's key for it keep their bytes.
	bytes := func(id djinn.ID) (it, key *byte) {
		f := r.items[id].EntryFields(0)[0]
		for k := range r.byField {
			if k == f {
				fs, _ := f.Value().AsString()
				ks, _ := k.Value().AsString()
				return unsafe.StringData(fs), unsafe.StringData(ks)
			}
		}
		t.Fatalf("no index key for item %s's floor", id)
		return nil, nil
	}
	a, b, c := item(1), item(2), item(3)
	if _, err := r.Register(a, djinn.ID{1, 2}); err != nil {
		t.Fatal(err)
	}
	if ib, kb := bytes(a.ID); ib != kb {
		t.Errorf("a key held by one item alone has bytes of its own, want the item's")
	}
	aBytes, _ := bytes(a.ID)
	for _, it := range []service.Item{b, c} {
		if _, err := r.Register(it, djinn.ID{it.ID[0], 2}); err != nil {
			t.Fatal(err)
		}
		ib, kb := bytes(it.ID)
		if kb == aBytes || kb == ib {
			t.Errorf("with item %s, a key held by several items shares one item's bytes, want a copy of its own", it.ID)
		}
	}
	cBytes, _ := bytes(c.ID)
	for _, it := range []service.Item{c, a} {
		if _, err := r.Remove(it.ID); err != nil {
			t.Fatal(err)
		}
		if _, kb := bytes(b.ID); kb == aBytes || kb == cBytes {
			t.Errorf("after item %s's removal, the key keeps a removed item's bytes", it.ID)
		}
	}
}
