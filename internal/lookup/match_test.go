package lookup_test

import (
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/service"
)

func idp(id djinn.ID) *djinn.ID { return &id }

type et = service.EntryTemplate

// TestMatching is DESIGN.md 6's matching rule, one row per clause, on the
// printer item (Name laser; Location floor 3, room "301", building null;
// ColorName, a subtype of Name, red and dark). Each row is checked
// through Lookup and through a watch, whose index takes other paths.
func TestMatching(t *testing.T) {
	for _, c := range []struct {
		name string
		tmpl service.Template
		want bool
	}{
		{"6/empty template matches everything", service.Template{}, true}, // the clock item too
		{"6/id equal", service.Template{ID: idp(sid(1))}, true},
		{"6/id different", service.Template{ID: idp(sid(2))}, false},
		{"6/a type the item has", service.Template{Types: []string{"Printer"}}, true},
		{"6/every type the item has", service.Template{Types: []string{"Object", "Printer"}}, true},
		{"6/a type listed twice", service.Template{Types: []string{"Printer", "Printer"}}, true},
		{"6/one type the item lacks", service.Template{Types: []string{"Printer", "Scanner"}}, false},
		{"6/type names are case sensitive", service.Template{Types: []string{"printer"}}, false},
		{"6/entry by its type", service.Template{Entries: []et{{Type: "Location"}}}, true},
		{"6/entry by its type with a field", service.Template{Entries: []et{{Type: "Name", Fields: []service.Field{f("name", str("laser"))}}}}, true},
		{"6/entry field differs", service.Template{Entries: []et{{Type: "Location", Fields: []service.Field{f("floor", i64(4))}}}}, false},
		{"6/entry by a supertype: a subtype's entry matches", service.Template{Entries: []et{{Type: "Name", Fields: []service.Field{f("name", str("red"))}}}}, true},
		{"6/entry by a farther supertype", service.Template{Entries: []et{{Type: "Entry", Fields: []service.Field{f("floor", i64(3))}}}}, true},
		{"6/a supertype's entry does not match a subtype template", service.Template{Entries: []et{{Type: "ColorName", Fields: []service.Field{f("name", str("laser"))}}}}, false},
		{"6/entry type the item lacks", service.Template{Entries: []et{{Type: "Address"}}}, false},
		{"6/wildcard field matches any value", service.Template{Entries: []et{{Type: "Location", Fields: []service.Field{f("floor", null)}}}}, true},
		{"6/wildcard field matches a null field", service.Template{Entries: []et{{Type: "Location", Fields: []service.Field{f("building", null)}}}}, true},
		{"6/wildcard field matches a missing field", service.Template{Entries: []et{{Type: "Location", Fields: []service.Field{f("colour", null)}}}}, true},
		{"6/set field against a null field", service.Template{Entries: []et{{Type: "Location", Fields: []service.Field{f("building", str("A"))}}}}, false},
		{"6/set field the entry lacks", service.Template{Entries: []et{{Type: "Location", Fields: []service.Field{f("colour", str("A"))}}}}, false},
		{"6/same value of another kind", service.Template{Entries: []et{{Type: "Location", Fields: []service.Field{f("floor", str("3"))}}}}, false},
		{"6/int against float", service.Template{Entries: []et{{Type: "Location", Fields: []service.Field{f("floor", service.NewFloat(3))}}}}, false},
		{"6/every set field must match", service.Template{Entries: []et{{Type: "Location", Fields: []service.Field{f("floor", i64(3)), f("room", str("302"))}}}}, false},
		{"6/two entry templates, two entries", service.Template{Entries: []et{
			{Type: "Name", Fields: []service.Field{f("name", str("laser"))}},
			{Type: "Location", Fields: []service.Field{f("floor", i64(3))}}}}, true},
		{"6/two entry templates, one entry satisfies both", service.Template{Entries: []et{
			{Type: "Name", Fields: []service.Field{f("name", str("red"))}},
			{Type: "ColorName", Fields: []service.Field{f("shade", str("dark"))}}}}, true},
		{"6/the same template twice, one entry", service.Template{Entries: []et{{Type: "Location"}, {Type: "Location"}}}, true},
		{"6/two templates of one type, satisfied by different entries", service.Template{Entries: []et{
			{Type: "Name", Fields: []service.Field{f("name", str("laser"))}},
			{Type: "Name", Fields: []service.Field{f("name", str("red"))}}}}, true},
		{"6/two templates of one type, no entry for the second", service.Template{Entries: []et{
			{Type: "Location", Fields: []service.Field{f("floor", i64(3))}},
			{Type: "Location", Fields: []service.Field{f("floor", i64(4))}}}}, false},
		{"6/id, types and entries together", service.Template{ID: idp(sid(1)), Types: []string{"Printer"}, Entries: []et{{Type: "Name"}}}, true},
		{"6/id and types match, entries do not", service.Template{ID: idp(sid(1)), Types: []string{"Printer"}, Entries: []et{{Type: "Address"}}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRegistry(t, service.Limits{})
			// A second item of other types, which no template matches.
			ok(t)(r.Register(service.Item{ID: sid(9), Service: []byte("r"), Types: []string{"Clock"}}, lid(9)))
			if err := r.AddWatch(wid(1), c.tmpl, service.AllTransitions); err != nil {
				t.Fatal(err)
			}
			events := ok(t)(r.Register(printer(), lid(1)))
			total, items, err := r.Lookup(c.tmpl, 5)
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			if c.want {
				want = 1
			}
			clock := 0
			if len(c.tmpl.Types) == 0 && len(c.tmpl.Entries) == 0 && c.tmpl.ID == nil {
				clock = 1
			}
			if total != want+clock || len(items) != want+clock || len(events) != want {
				t.Fatalf("lookup found %d (%d items), watch heard %d events, want %d", total, len(items), len(events), want)
			}
			if want == 1 && (items[0].ID != sid(1) || events[0].Transition != service.NoMatchMatch) {
				t.Fatalf("found %s, heard %v", items[0].ID, events[0])
			}
		})
	}
}
