package service_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/service"
)

var laser = service.Item{
	ID: djinn.ID{1}, Service: []byte("127.0.0.1:9"),
	Types:      []string{"Laser", "Laser"},
	Supertypes: map[string][]string{"Laser": {"Printer", "Printer"}, "Printer": {"Device"}, "Device": {}},
	Entries: []service.Entry{
		{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString("lp")}, {Name: "lang", Value: service.NewString("en")}}},
		{Type: "Name", Fields: []service.Field{{Name: "lang", Value: service.NewString("en")}, {Name: "name", Value: service.NewString("lp")}}},
	},
}

// TestCanonical: the canonical form sorts and drops duplicates, adds the
// types the hierarchy implies, and keeps the hierarchy's links sorted.
func TestCanonical(t *testing.T) {
	got, err := service.Limits{}.Canonical(laser)
	if err != nil {
		t.Fatal(err)
	}
	want := service.Item{
		ID: djinn.ID{1}, Service: []byte("127.0.0.1:9"),
		Types:      []string{"Device", "Laser", "Printer"},
		Supertypes: map[string][]string{"Laser": {"Printer"}, "Printer": {"Device"}},
		Entries: []service.Entry{{Type: "Name", Fields: []service.Field{
			{Name: "lang", Value: service.NewString("en")}, {Name: "name", Value: service.NewString("lp")}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("canonical form\n%+v\nwant\n%+v", got, want)
	}
	if again, err := (service.Limits{}).Canonical(got); err != nil || !again.Equal(got) {
		t.Errorf("the canonical form of a canonical item changed: %+v, %v", again, err)
	}
	flat := service.Item{Service: []byte("x"), Types: []string{"B", "A"}}
	if got, err := (service.Limits{}).Canonical(flat); err != nil || got.Supertypes != nil || !reflect.DeepEqual(got.Types, []string{"A", "B"}) {
		t.Errorf("a flat item: %+v, %v; want its types sorted and no hierarchy", got, err)
	}
}

// TestHierarchyRefused: a hierarchy that is not one names what is wrong.
func TestHierarchyRefused(t *testing.T) {
	item := func(types []string, sup map[string][]string) service.Item {
		return service.Item{Service: []byte("x"), Types: types, Supertypes: sup}
	}
	for _, c := range []struct {
		name string
		it   service.Item
		lim  service.Limits
		kind djinn.Kind
		want []string
	}{
		{"a type its own supertype", item([]string{"A"}, map[string][]string{"A": {"A"}}), service.Limits{}, djinn.InvalidArgument, []string{`"A"`, "itself"}},
		{"a cycle", item([]string{"A"}, map[string][]string{"A": {"B"}, "B": {"C"}, "C": {"A"}}), service.Limits{}, djinn.InvalidArgument, []string{"own supertype", "A < B < C < A"}},
		{"supertypes of a type the item does not have", item([]string{"A"}, map[string][]string{"Z": {"Y"}}), service.Limits{}, djinn.InvalidArgument, []string{`"Z"`, "not a type of the item"}},
		{"an empty supertype", item([]string{"A"}, map[string][]string{"A": {""}}), service.Limits{}, djinn.InvalidArgument, []string{`supertypes of "A" [0]`, "empty"}},
		{"an empty type with supertypes", item([]string{"A"}, map[string][]string{"": {"A"}}), service.Limits{}, djinn.InvalidArgument, []string{"supertypes type", "empty"}},
		{"a supertype not UTF-8", item([]string{"A"}, map[string][]string{"A": {"\xff"}}), service.Limits{}, djinn.InvalidArgument, []string{"UTF-8"}},
		{"more types than MaxTypes with the supertypes", item([]string{"A"}, map[string][]string{"A": {"B"}, "B": {"C"}}), service.Limits{MaxTypes: 2}, djinn.ResourceExhausted, []string{"MaxTypes", " 3"}},
		{"more links than MaxTypes", item([]string{"A"}, map[string][]string{"A": {"B", "C", "D"}}), service.Limits{MaxTypes: 2}, djinn.ResourceExhausted, []string{"links", "MaxTypes"}},
		{"a supertype name over MaxNameLen", item([]string{"A"}, map[string][]string{"A": {strings.Repeat("b", 11)}}), service.Limits{MaxNameLen: 10}, djinn.ResourceExhausted, []string{"MaxNameLen"}},
	} {
		_, err := c.lim.Record(c.it)
		if !errors.Is(err, c.kind) {
			t.Errorf("%s: %v, want %v", c.name, err, c.kind)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}

// TestRecordRefuses: an item without a reference, and negative limits.
func TestRecordRefuses(t *testing.T) {
	if _, err := (service.Limits{}).Record(service.Item{Types: []string{"A"}}); !errors.Is(err, djinn.InvalidArgument) || !strings.Contains(err.Error(), "reference: missing") {
		t.Errorf("an item without a reference: %v", err)
	}
	if _, err := (service.Limits{MaxTypes: -1}).Record(laser); !errors.Is(err, djinn.InvalidArgument) || !strings.Contains(err.Error(), "MaxTypes -1") {
		t.Errorf("a negative limit: %v", err)
	}
}

// TestTemplateMatches is the matching rule (DESIGN.md 6) through the
// one-off Template.Matches; the registry's tests cover it row by row.
func TestTemplateMatches(t *testing.T) {
	id := djinn.ID{1}
	for _, c := range []struct {
		name string
		tmpl service.Template
		want bool
	}{
		{"6/empty template", service.Template{}, true},
		{"6/by id", service.Template{ID: &id}, true},
		{"6/a type the hierarchy gives", service.Template{Types: []string{"Device"}}, true},
		{"6/a type the item lacks", service.Template{Types: []string{"Scanner"}}, false},
		{"6/entry field", service.Template{Entries: []service.EntryTemplate{{Type: "Name", Fields: []service.Field{{Name: "lang", Value: service.NewString("en")}}}}}, true},
		{"6/wildcard field", service.Template{Entries: []service.EntryTemplate{{Type: "Name", Fields: []service.Field{{Name: "lang"}}}}}, true},
		{"6/entry field differs", service.Template{Entries: []service.EntryTemplate{{Type: "Name", Fields: []service.Field{{Name: "lang", Value: service.NewString("fr")}}}}}, false},
		{"a bad template matches nothing", service.Template{Types: []string{""}}, false},
	} {
		if got := c.tmpl.Matches(laser); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestAttributeCalls: the calls a JoinManager computes and a registrar
// applies, on a record, say whether anything changed and leave the
// record alone on an error.
func TestAttributeCalls(t *testing.T) {
	r, err := service.Limits{}.Record(laser)
	if err != nil {
		t.Fatal(err)
	}
	loc := service.Entry{Type: "Location", Fields: []service.Field{{Name: "floor", Value: service.NewInt(3)}}}
	added, changed, err := r.AddAttributes(service.Limits{}, []service.Entry{loc, loc})
	if err != nil || !changed || added.NumEntries() != 2 {
		t.Fatalf("AddAttributes: %d entries, changed %v, %v; want 2, true", added.NumEntries(), changed, err)
	}
	if _, changed, err := added.AddAttributes(service.Limits{}, []service.Entry{loc}); err != nil || changed {
		t.Errorf("adding an entry the item has: changed %v, %v; want no change", changed, err)
	}
	moved, changed, err := added.ModifyAttributes(service.Limits{}, []service.EntryTemplate{{Type: "Location"}},
		[]service.Entry{{Type: "Location", Fields: []service.Field{{Name: "floor", Value: service.NewInt(4)}}}})
	if v, _ := moved.Item().Entries[1].Get("floor"); err != nil || !changed || v != service.NewInt(4) {
		t.Errorf("ModifyAttributes: floor %v, changed %v, %v; want 4", v, changed, err)
	}
	same, changed, err := added.SetAttributes(service.Limits{MaxEntries: 1}, []service.Entry{loc, loc, laser.Entries[0]})
	if err == nil || changed || same.NumEntries() != 2 {
		t.Errorf("SetAttributes over MaxEntries: changed %v, %d entries, %v; want an error and the record as it was", changed, same.NumEntries(), err)
	}
}

// TestServiceTypesDiamonds: a hierarchy of diamonds, each type reached by
// two paths from below, is walked once per type (the answer comes at
// once, where following every path would take 2^31 steps).
func TestServiceTypesDiamonds(t *testing.T) {
	const n = 31
	sup := map[string][]string{}
	for i := range n {
		a, l, r, b := fmt.Sprint("T", i), fmt.Sprint("L", i), fmt.Sprint("R", i), fmt.Sprint("T", i+1)
		sup[a], sup[l], sup[r] = []string{l, r}, []string{b}, []string{b}
	}
	rec, err := service.Limits{MaxTypes: 4 * n}.Record(service.Item{Service: []byte("x"), Types: []string{"T0"}, Supertypes: sup})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	rec.ServiceTypes(nil, fmt.Sprint("T", n), func(n service.Name) { got = append(got, n.String()) })
	if want := []string{fmt.Sprint("T", n)}; !slices.Equal(got, want) {
		t.Errorf("service types with the top's prefix: %v, want %v", got, want)
	}
}
