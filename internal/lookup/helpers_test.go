package lookup_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
)

// self is the lookup service's own id in every test registry.
var self = djinn.ID{0xff, 0xff}

func sid(b byte) djinn.ID { return djinn.ID{0, b} }
func wid(b byte) djinn.ID { return djinn.ID{1, b} }
func lid(b byte) djinn.ID { return djinn.ID{2, b} }

var (
	str = lookup.NewString
	i64 = lookup.NewInt64
)

func f(name string, v *lookup.Value) lookup.Field { return lookup.Field{Name: name, Value: v} }

func newRegistry(t testing.TB, lim lookup.Limits) *lookup.Registry {
	t.Helper()
	r, err := lookup.New(self, lim)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// printer is the item most tests start from: two service types and three
// entries, one of a subtype of another's type.
func printer() lookup.Item {
	return lookup.Item{
		ID:    sid(1),
		Ref:   []byte("ref-printer"),
		Types: []string{"Printer", "Object"},
		Entries: []lookup.Entry{
			{Type: "Name", Supertypes: []string{"Entry"}, Fields: []lookup.Field{f("name", str("laser"))}},
			{Type: "Location", Supertypes: []string{"Entry"}, Fields: []lookup.Field{f("floor", i64(3)), f("room", str("301")), f("building", nil)}},
			{Type: "ColorName", Supertypes: []string{"Name", "Entry"}, Fields: []lookup.Field{f("name", str("red")), f("shade", str("dark"))}},
		},
	}
}

// wantErr checks that err is of kind k and mentions every string in names.
func wantErr(t testing.TB, err error, k djinn.Kind, names ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", k)
	}
	if !errors.Is(err, k) {
		t.Fatalf("error %q is %s, want %s", err, djinn.KindOf(err), k)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not name %q", err, n)
		}
	}
}

// ok returns a function that fails t on an error and passes the events on:
// ok(t)(r.Register(item, lease)).
func ok(t testing.TB) func([]lookup.Event, error) []lookup.Event {
	return func(evs []lookup.Event, err error) []lookup.Event {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
}
