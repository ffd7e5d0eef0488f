package lookup_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/service"
)

// self is the lookup service's own id in every test registry.
var self = djinn.ID{0xff, 0xff}

func sid(b byte) djinn.ID { return djinn.ID{0, b} }
func wid(b byte) djinn.ID { return djinn.ID{1, b} }
func lid(b byte) djinn.ID { return djinn.ID{2, b} }

var (
	str = service.NewString
	i64 = service.NewInt
	// null is the null value: a field without one, a wildcard in a template.
	null service.Value
)

func f(name string, v service.Value) service.Field { return service.Field{Name: name, Value: v} }

func newRegistry(t testing.TB, lim service.Limits) *lookup.Registry {
	t.Helper()
	r, err := lookup.New(self, lim)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// printer is the item most tests start from: two service types and three
// entries, one of a subtype of another's type.
func printer() service.Item {
	return service.Item{
		ID:      sid(1),
		Service: []byte("ref-printer"),
		Types:   []string{"Printer", "Object"},
		Entries: []service.Entry{
			{Type: "Name", Supertypes: []string{"Entry"}, Fields: []service.Field{f("name", str("laser"))}},
			{Type: "Location", Supertypes: []string{"Entry"}, Fields: []service.Field{f("floor", i64(3)), f("room", str("301")), f("building", null)}},
			{Type: "ColorName", Supertypes: []string{"Name", "Entry"}, Fields: []service.Field{f("name", str("red")), f("shade", str("dark"))}},
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
