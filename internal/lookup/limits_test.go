package lookup_test

import (
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/service"
)

// TestLimits: every limit, exceeded by a registration, an attribute call or
// a template, gives ResourceExhausted naming the limit and the value, and
// changes nothing (DESIGN.md 7: quotas on everything that holds memory).
func TestLimits(t *testing.T) {
	lim := service.Limits{MaxEntries: 2, MaxFields: 2, MaxAttributeBytes: 60, MaxRefBytes: 8, MaxTypes: 2, MaxNameLen: 10}
	small := func() service.Item {
		return service.Item{ID: sid(1), Service: []byte("ref"), Types: []string{"A"}, Entries: []service.Entry{{Type: "E", Fields: []service.Field{f("a", str("x"))}}}}
	}
	mod := func(fn func(*service.Item)) service.Item { it := small(); fn(&it); return it }
	e := func(typ string, n int) service.Entry {
		out := service.Entry{Type: typ}
		for i := range n {
			out.Fields = append(out.Fields, f(string(rune('a'+i)), str("v")))
		}
		return out
	}
	reg := func(it service.Item) func(r *lookup.Registry) error {
		return func(r *lookup.Registry) error { _, err := r.Register(it, lid(1)); return err }
	}
	watch := func(tmpl service.Template) func(r *lookup.Registry) error {
		return func(r *lookup.Registry) error { return r.AddWatch(wid(1), tmpl, service.AllTransitions) }
	}
	long := strings.Repeat("n", 11)
	for _, c := range []struct {
		name  string
		op    func(r *lookup.Registry) error
		limit string
		value string
	}{
		{"7/entries of an item", reg(mod(func(it *service.Item) { it.Entries = []service.Entry{e("E", 0), e("F", 0), e("G", 0)} })), "MaxEntries", " 3"},
		{"7/entries of a call, duplicates included", reg(mod(func(it *service.Item) { it.Entries = []service.Entry{e("E", 0), e("E", 0), e("E", 0)} })), "MaxEntries", " 3"},
		{"7/fields of an entry", reg(mod(func(it *service.Item) { it.Entries = []service.Entry{e("E", 3)} })), "MaxFields", " 3"},
		{"7/service types", reg(mod(func(it *service.Item) { it.Types = []string{"A", "B", "C"} })), "MaxTypes", " 3"},
		{"7/supertypes", reg(mod(func(it *service.Item) { it.Entries[0].Supertypes = []string{"A", "B", "C"} })), "MaxTypes", " 3"},
		{"7/a service type's length", reg(mod(func(it *service.Item) { it.Types = []string{long} })), "MaxNameLen", "11 bytes"},
		{"7/an entry type's length", reg(mod(func(it *service.Item) { it.Entries[0].Type = long })), "MaxNameLen", "11 bytes"},
		{"7/a field name's length", reg(mod(func(it *service.Item) { it.Entries[0].Fields[0].Name = long })), "MaxNameLen", "11 bytes"},
		{"7/the reference", reg(mod(func(it *service.Item) { it.Service = []byte("123456789") })), "MaxRefBytes", " 9"},
		{"7/attribute bytes", reg(mod(func(it *service.Item) { it.Entries[0].Fields[0].Value = str(strings.Repeat("x", 60)) })), "MaxAttributeBytes", " 62"},
		{"7/entries after adding", func(r *lookup.Registry) error {
			_, err := r.AddAttributes(sid(9), []service.Entry{e("F", 0), e("G", 0)})
			return err
		}, "MaxEntries", " 3"},
		{"7/attribute bytes after adding", func(r *lookup.Registry) error {
			_, err := r.AddAttributes(sid(9), []service.Entry{{Type: "F", Fields: []service.Field{f("b", str(strings.Repeat("y", 57)))}}})
			return err
		}, "MaxAttributeBytes", " 62"},
		{"7/attribute bytes after setting", func(r *lookup.Registry) error {
			_, err := r.SetAttributes(sid(9), []service.Entry{{Type: "F", Fields: []service.Field{f("b", str(strings.Repeat("y", 60)))}}})
			return err
		}, "MaxAttributeBytes", " 62"},
		{"7/fields after modifying", func(r *lookup.Registry) error {
			_, err := r.ModifyAttributes(sid(9), []service.EntryTemplate{{Type: "E"}}, []service.Entry{{Type: "E", Fields: []service.Field{f("b", str("1")), f("c", str("2"))}}})
			return err
		}, "MaxFields", " 3"},
		{"7/attribute bytes of a modify call", func(r *lookup.Registry) error {
			_, err := r.ModifyAttributes(sid(9), []service.EntryTemplate{{Type: "E"}}, []service.Entry{{Type: "E", Fields: []service.Field{f("a", str(strings.Repeat("z", 59)))}}})
			return err
		}, "MaxAttributeBytes", " 62"},
		{"7/attribute bytes after modifying", func(r *lookup.Registry) error {
			// The item holds 3 bytes in E and 42 in F; E grows by 19.
			_, err := r.ModifyAttributes(sid(10), []service.EntryTemplate{{Type: "E"}}, []service.Entry{{Type: "E", Fields: []service.Field{f("a", str(strings.Repeat("z", 20)))}}})
			return err
		}, "MaxAttributeBytes", " 64"},
		{"7/modify's templates", func(r *lookup.Registry) error {
			_, err := r.ModifyAttributes(sid(9), make([]service.EntryTemplate, 3), make([]service.Entry, 3))
			return err
		}, "MaxEntries", " 3"},
		{"7/a template's types", watch(service.Template{Types: []string{"A", "B", "C"}}), "MaxTypes", " 3"},
		{"7/a template's entry templates", watch(service.Template{Entries: make([]service.EntryTemplate, 3)}), "MaxEntries", " 3"},
		{"7/an entry template's fields", watch(service.Template{Entries: []service.EntryTemplate{{Type: "E", Fields: []service.Field{f("a", null), f("b", null), f("c", null)}}}}), "MaxFields", " 3"},
		{"7/a template's names", watch(service.Template{Entries: []service.EntryTemplate{{Type: long}}}), "MaxNameLen", "11 bytes"},
		{"7/a template's attribute bytes", watch(service.Template{Entries: []service.EntryTemplate{{Type: "E", Fields: []service.Field{f("a", str(strings.Repeat("x", 60)))}}}}), "MaxAttributeBytes", " 62"},
		{"7/a lookup's template", func(r *lookup.Registry) error {
			_, _, err := r.Lookup(service.Template{Types: []string{"A", "B", "C"}}, 1)
			return err
		}, "MaxTypes", " 3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRegistry(t, lim)
			keep := small()
			keep.ID = sid(9)
			ok(t)(r.Register(keep, lid(9)))
			keep.ID = sid(10)
			keep.Entries = append(keep.Entries, service.Entry{Type: "F", Fields: []service.Field{f("b", str(strings.Repeat("y", 40)))}})
			ok(t)(r.Register(keep, lid(10)))
			before := r.Export()
			err := c.op(r)
			wantErr(t, err, djinn.ResourceExhausted, c.limit, c.value)
			if after := r.Export(); !equalSnapshots(before, after) {
				t.Fatalf("the refused call changed the registry")
			}
		})
	}
}
