package lookup_test

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/service"
)

func TestNew(t *testing.T) {
	_, err := lookup.New(djinn.ID{}, service.Limits{})
	wantErr(t, err, djinn.InvalidArgument, "lookup service id")
	_, err = lookup.New(self, service.Limits{MaxFields: -1})
	wantErr(t, err, djinn.InvalidArgument, "MaxFields", "-1")
	r := newRegistry(t, service.Limits{MaxTypes: 3})
	lim := service.DefaultLimits()
	lim.MaxTypes = 3
	if r.Limits() != lim {
		t.Errorf("limits %+v, want %+v", r.Limits(), lim)
	}
}

// TestRegister: the rules of registration (DESIGN.md 6: register an item
// for a lease; the caller assigns ids; the registrar's own id is its own).
func TestRegister(t *testing.T) {
	mod := func(fn func(*service.Item)) service.Item { it := printer(); fn(&it); return it }
	for _, c := range []struct {
		name  string
		item  service.Item
		lease djinn.ID
		kind  djinn.Kind
		names []string
	}{
		{"6/a new item is registered", printer(), lid(1), "", nil},
		{"6/zero id refused: the caller assigns ids", mod(func(it *service.Item) { it.ID = djinn.ID{} }), lid(1), djinn.InvalidArgument, []string{"service id 0000", "zero"}},
		{"6/the registrar's own id refused", mod(func(it *service.Item) { it.ID = self }), lid(1), djinn.InvalidArgument, []string{self.String(), "own id"}},
		{"6/zero lease id refused", printer(), djinn.ID{}, djinn.InvalidArgument, []string{"lease id"}},
		{"6/a missing service reference refused", mod(func(it *service.Item) { it.Service = nil }), lid(1), djinn.InvalidArgument, []string{"service reference"}},
		{"6/an empty service type refused", mod(func(it *service.Item) { it.Types = []string{"A", ""} }), lid(1), djinn.InvalidArgument, []string{"types[1]", `""`}},
		{"6/a service type that is not UTF-8 refused", mod(func(it *service.Item) { it.Types = []string{"\xff"} }), lid(1), djinn.InvalidArgument, []string{"UTF-8"}},
		{"6/an empty entry type refused", mod(func(it *service.Item) { it.Entries[1].Type = "" }), lid(1), djinn.InvalidArgument, []string{"entries[1] type"}},
		{"6/an empty supertype refused", mod(func(it *service.Item) { it.Entries[0].Supertypes = []string{""} }), lid(1), djinn.InvalidArgument, []string{"supertype 0"}},
		{"6/a supertype repeating the chain refused", mod(func(it *service.Item) { it.Entries[2].Supertypes = []string{"Name", "ColorName"} }), lid(1), djinn.InvalidArgument, []string{`"ColorName"`, "chain"}},
		{"6/a field named twice refused", mod(func(it *service.Item) { it.Entries[1].Fields = append(it.Entries[1].Fields, f("room", null)) }), lid(1), djinn.InvalidArgument, []string{`"room"`, "twice"}},
		{"6/an empty field name refused", mod(func(it *service.Item) { it.Entries[0].Fields = []service.Field{f("", str("x"))} }), lid(1), djinn.InvalidArgument, []string{"field 0 name"}},
		{"6/a string value that is not UTF-8 refused", mod(func(it *service.Item) { it.Entries[0].Fields = []service.Field{f("name", str("\xc3"))} }), lid(1), djinn.InvalidArgument, []string{`"name"`, "UTF-8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRegistry(t, service.Limits{})
			_, err := r.Register(c.item, c.lease)
			if c.kind == "" {
				if err != nil {
					t.Fatal(err)
				}
				if n, _ := r.Len(); n != 1 {
					t.Fatalf("%d items", n)
				}
				return
			}
			wantErr(t, err, c.kind, c.names...)
			if n, _ := r.Len(); n != 0 {
				t.Fatalf("a refused item was registered")
			}
		})
	}
}

// TestRegisterStoresCanonicalForm: types sorted without duplicates,
// duplicate entries dropped (Jini), fields sorted by name; the caller's
// slices are not kept.
func TestRegisterStoresCanonicalForm(t *testing.T) {
	r := newRegistry(t, service.Limits{})
	it := printer()
	it.Types = []string{"Printer", "Object", "Printer"}
	it.Entries = append(it.Entries, service.Entry{Type: "Location", Supertypes: []string{"Entry"},
		Fields: []service.Field{f("room", str("301")), f("building", null), f("floor", i64(3))}})
	ok(t)(r.Register(it, lid(1)))
	it.Service[0] = 'X'
	it.Entries[0].Fields[0].Value = str("changed")
	got, err := r.Get(sid(1))
	if err != nil {
		t.Fatal(err)
	}
	want := lookup.Registration{Lease: lid(1), Item: service.Item{
		ID: sid(1), Service: []byte("ref-printer"), Types: []string{"Object", "Printer"},
		Entries: []service.Entry{
			{Type: "Name", Supertypes: []string{"Entry"}, Fields: []service.Field{f("name", str("laser"))}},
			{Type: "Location", Supertypes: []string{"Entry"}, Fields: []service.Field{f("building", null), f("floor", i64(3)), f("room", str("301"))}},
			{Type: "ColorName", Supertypes: []string{"Name", "Entry"}, Fields: []service.Field{f("name", str("red")), f("shade", str("dark"))}},
		}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stored\n%+v\nwant\n%+v", got, want)
	}
}

// TestRegisterReplaces: registering an id again replaces the item and keeps
// one registration, under the new lease (DESIGN.md 6, Reggie).
func TestRegisterReplaces(t *testing.T) {
	r := newRegistry(t, service.Limits{})
	ok(t)(r.Register(printer(), lid(1)))
	it := printer()
	it.Types = []string{"Scanner"}
	it.Entries = nil
	ok(t)(r.Register(it, lid(2)))
	if n, _ := r.Len(); n != 1 {
		t.Fatalf("%d items after replacing", n)
	}
	got, _ := r.Get(sid(1))
	if got.Lease != lid(2) || !reflect.DeepEqual(got.Item.Types, []string{"Scanner"}) || got.Item.Entries != nil {
		t.Fatalf("got %+v", got)
	}
	// The type index followed: the old type finds nothing.
	if n, _, _ := r.Lookup(service.Template{Types: []string{"Printer"}}, 0); n != 0 {
		t.Fatal("found under its old type")
	}
	if n, _, _ := r.Lookup(service.Template{Types: []string{"Scanner"}}, 0); n != 1 {
		t.Fatal("not found under its new type")
	}
}

func TestRemoveAndGet(t *testing.T) {
	r := newRegistry(t, service.Limits{})
	ok(t)(r.Register(printer(), lid(1)))
	ok(t)(r.Remove(sid(1)))
	_, err := r.Get(sid(1))
	wantErr(t, err, djinn.NoSuchObject, sid(1).String())
	_, err = r.Remove(sid(1))
	wantErr(t, err, djinn.NoSuchObject, sid(1).String())
	_, err = r.Remove(self)
	wantErr(t, err, djinn.InvalidArgument, "own id")
	_, err = r.Get(djinn.ID{})
	wantErr(t, err, djinn.InvalidArgument, "zero")
	if n, _, _ := r.Lookup(service.Template{Types: []string{"Printer"}}, 0); n != 0 {
		t.Fatal("a removed item is found")
	}
}

// entriesOf returns the stored entries of the item with id.
func entriesOf(t *testing.T, r *lookup.Registry, id djinn.ID) []service.Entry {
	t.Helper()
	reg, err := r.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return reg.Item.Entries
}

var (
	nameLaser = service.Entry{Type: "Name", Supertypes: []string{"Entry"}, Fields: []service.Field{f("name", str("laser"))}}
	location  = service.Entry{Type: "Location", Supertypes: []string{"Entry"}, Fields: []service.Field{f("building", null), f("floor", i64(3)), f("room", str("301"))}}
	colorRed  = service.Entry{Type: "ColorName", Supertypes: []string{"Name", "Entry"}, Fields: []service.Field{f("name", str("red")), f("shade", str("dark"))}}
	address   = service.Entry{Type: "Address", Fields: []service.Field{f("street", str("Main"))}}
)

func entry(e service.Entry, fields ...service.Field) service.Entry {
	e.Fields = fields
	return e
}

// TestAttributes: each attribute operation (DESIGN.md 6, Jini's
// ServiceRegistration), on the printer item, with the entries it leaves
// or its error; an error leaves the item unchanged, and a call that
// changes nothing tells no watch.
func TestAttributes(t *testing.T) {
	type op func(r *lookup.Registry) ([]lookup.Event, error)
	add := func(es ...service.Entry) op {
		return func(r *lookup.Registry) ([]lookup.Event, error) { return r.AddAttributes(sid(1), es) }
	}
	set := func(es ...service.Entry) op {
		return func(r *lookup.Registry) ([]lookup.Event, error) { return r.SetAttributes(sid(1), es) }
	}
	modify := func(tmpls []service.EntryTemplate, changes ...service.Entry) op {
		return func(r *lookup.Registry) ([]lookup.Event, error) { return r.ModifyAttributes(sid(1), tmpls, changes) }
	}
	tmpl := func(typ string, fields ...service.Field) service.EntryTemplate {
		return service.EntryTemplate{Type: typ, Fields: fields}
	}
	tmpls := func(ts ...service.EntryTemplate) []service.EntryTemplate { return ts }
	start := []service.Entry{nameLaser, location, colorRed}
	for _, c := range []struct {
		name  string
		op    op
		want  []service.Entry // nil with kind set: unchanged
		kind  djinn.Kind
		names []string
	}{
		{"add/appends a new entry", add(address), []service.Entry{nameLaser, location, colorRed, address}, "", nil},
		{"add/drops an entry equal to one the item has", add(location), start, "", nil},
		{"add/equal whatever the field order", add(entry(location, f("room", str("301")), f("floor", i64(3)), f("building", null))), start, "", nil},
		{"add/drops duplicates within the call", add(address, address), []service.Entry{nameLaser, location, colorRed, address}, "", nil},
		{"add/a null field makes a different entry", add(entry(address, f("street", null))), []service.Entry{nameLaser, location, colorRed, entry(address, f("street", null))}, "", nil},
		{"add/nothing to add", add(), start, "", nil},
		{"add/a bad entry changes nothing", add(address, service.Entry{Type: ""}), nil, djinn.InvalidArgument, []string{"added entries[1] type"}},
		{"add/unknown service", func(r *lookup.Registry) ([]lookup.Event, error) { return r.AddAttributes(sid(7), nil) }, nil, djinn.NoSuchObject, []string{sid(7).String()}},
		{"add/the registrar's own id", func(r *lookup.Registry) ([]lookup.Event, error) { return r.AddAttributes(self, nil) }, nil, djinn.InvalidArgument, []string{"own id"}},

		{"set/replaces every entry", set(address), []service.Entry{address}, "", nil},
		{"set/drops duplicates", set(address, location, address), []service.Entry{address, location}, "", nil},
		{"set/no entries", set(), nil, "", nil},
		{"set/the same entries", set(nameLaser, location, colorRed), start, "", nil},
		{"set/a bad entry changes nothing", set(address, entry(address, f("a", null), f("a", null))), nil, djinn.InvalidArgument, []string{"entries[1]", `"a"`, "twice"}},
		{"set/unknown service", func(r *lookup.Registry) ([]lookup.Event, error) { return r.SetAttributes(sid(7), nil) }, nil, djinn.NoSuchObject, []string{sid(7).String()}},

		{"modify/sets a field of the matching entry", modify(tmpls(tmpl("Name", f("name", str("laser")))), entry(nameLaser, f("name", str("inkjet")))),
			[]service.Entry{entry(nameLaser, f("name", str("inkjet"))), location, colorRed}, "", nil},
		{"modify/matches subtypes' entries too", modify(tmpls(tmpl("Name")), entry(nameLaser, f("name", str("x")))),
			[]service.Entry{entry(nameLaser, f("name", str("x"))), location, entry(colorRed, f("name", str("x")), f("shade", str("dark")))}, "", nil},
		{"modify/a change of a supertype of the template's type", modify(tmpls(tmpl("ColorName")), entry(nameLaser, f("name", str("blue")))),
			[]service.Entry{nameLaser, location, entry(colorRed, f("name", str("blue")), f("shade", str("dark")))}, "", nil},
		{"modify/a change of a subtype of the template's type refused", modify(tmpls(tmpl("Name")), colorRed), nil, djinn.InvalidArgument, []string{"changes[0]", `"ColorName"`, `"Name"`}},
		{"modify/a change of an unrelated type refused", modify(tmpls(tmpl("Location")), nameLaser), nil, djinn.InvalidArgument, []string{"changes[0]", `"Name"`, "supertype"}},
		{"modify/a zero Entry deletes the matching entries", modify(tmpls(tmpl("Location")), service.Entry{}), []service.Entry{nameLaser, colorRed}, "", nil},
		{"modify/deleting by a supertype deletes subtypes' entries", modify(tmpls(tmpl("Name")), service.Entry{}), []service.Entry{location}, "", nil},
		{"modify/null fields of a change are left alone", modify(tmpls(tmpl("Location")), entry(location, f("floor", null), f("room", str("302")))),
			[]service.Entry{nameLaser, entry(location, f("building", null), f("floor", i64(3)), f("room", str("302"))), colorRed}, "", nil},
		{"modify/a change sets a null field", modify(tmpls(tmpl("Location")), entry(location, f("building", str("B")))),
			[]service.Entry{nameLaser, entry(location, f("building", str("B")), f("floor", i64(3)), f("room", str("301"))), colorRed}, "", nil},
		{"modify/a field the entry lacks is added", modify(tmpls(tmpl("Location")), entry(location, f("colour", str("grey")))),
			[]service.Entry{nameLaser, entry(location, f("building", null), f("colour", str("grey")), f("floor", i64(3)), f("room", str("301"))), colorRed}, "", nil},
		{"modify/duplicates that result are dropped", modify(tmpls(tmpl("ColorName")), entry(colorRed, f("name", str("laser")))),
			[]service.Entry{nameLaser, location, entry(colorRed, f("name", str("laser")), f("shade", str("dark")))}, "", nil},
		{"modify/the highest index wins", modify(tmpls(tmpl("Location"), tmpl("Location")), entry(location, f("room", str("a"))), entry(location, f("room", str("b")))),
			[]service.Entry{nameLaser, entry(location, f("building", null), f("floor", i64(3)), f("room", str("b"))), colorRed}, "", nil},
		{"modify/templates match the entries as they were", modify(tmpls(tmpl("Location", f("room", str("301"))), tmpl("Location", f("room", str("a")))),
			entry(location, f("room", str("a"))), entry(location, f("floor", i64(9)))),
			[]service.Entry{nameLaser, entry(location, f("building", null), f("floor", i64(3)), f("room", str("a"))), colorRed}, "", nil},
		{"modify/each change is checked against its own template", modify(tmpls(tmpl("Location"), tmpl("Entry")), service.Entry{}, entry(location, f("room", str("b")))),
			nil, djinn.InvalidArgument, []string{"changes[1]"}},
		{"modify/a deletion wins over an update of the same type", modify(tmpls(tmpl("Location"), tmpl("Location")), entry(location, f("room", str("b"))), service.Entry{}),
			[]service.Entry{nameLaser, colorRed}, "", nil},
		{"modify/matching nothing changes nothing", modify(tmpls(tmpl("Location", f("floor", i64(9)))), service.Entry{}), start, "", nil},
		{"modify/a type the item has no entry of is not checked", modify(tmpls(tmpl("Address")), nameLaser), start, "", nil},
		{"modify/lengths differ", modify(tmpls(tmpl("Location")), service.Entry{}, service.Entry{}), nil, djinn.InvalidArgument, []string{"1 templates and 2 changes"}},
		{"modify/a change with fields but no type", modify(tmpls(tmpl("Location")), service.Entry{Fields: []service.Field{f("room", str("x"))}}), nil, djinn.InvalidArgument, []string{"changes[0] type"}},
		{"modify/a bad template", modify(tmpls(tmpl("")), service.Entry{}), nil, djinn.InvalidArgument, []string{"templates[0] type"}},
		{"modify/unknown service", func(r *lookup.Registry) ([]lookup.Event, error) { return r.ModifyAttributes(sid(7), nil, nil) }, nil, djinn.NoSuchObject, []string{sid(7).String()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRegistry(t, service.Limits{})
			ok(t)(r.Register(printer(), lid(1)))
			if err := r.AddWatch(wid(1), service.Template{}, service.AllTransitions); err != nil {
				t.Fatal(err)
			}
			before := entriesOf(t, r, sid(1))
			events, err := c.op(r)
			if c.kind != "" {
				wantErr(t, err, c.kind, c.names...)
				if got := entriesOf(t, r, sid(1)); !reflect.DeepEqual(got, before) {
					t.Fatalf("the error changed the entries to %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := entriesOf(t, r, sid(1))
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("entries\n%+v\nwant\n%+v", got, c.want)
			}
			changed := !reflect.DeepEqual(got, before)
			if changed != (len(events) == 1) || changed && events[0].Transition != service.MatchMatch {
				t.Fatalf("changed %v, events %+v", changed, events)
			}
		})
	}
}

func TestLookupCountAndMax(t *testing.T) {
	r := newRegistry(t, service.Limits{})
	for _, b := range []byte{5, 3, 9, 1, 7} {
		ok(t)(r.Register(service.Item{ID: sid(b), Service: []byte{b}, Types: []string{"A"}}, lid(b)))
	}
	ok(t)(r.Register(service.Item{ID: sid(2), Service: []byte{2}, Types: []string{"B"}}, lid(2)))
	ids := func(items []service.Item) (out []byte) {
		for _, it := range items {
			out = append(out, it.ID[1])
		}
		return out
	}
	for _, c := range []struct {
		name  string
		tmpl  service.Template
		max   int
		total int
		ids   []byte
	}{
		{"6/max below the count: the first by id", service.Template{Types: []string{"A"}}, 2, 5, []byte{1, 3}},
		{"6/max 0 only counts", service.Template{Types: []string{"A"}}, 0, 5, nil},
		{"6/max above the count", service.Template{Types: []string{"A"}}, 100, 5, []byte{1, 3, 5, 7, 9}},
		{"6/every item", service.Template{}, 3, 6, []byte{1, 2, 3}},
		{"6/by id", service.Template{ID: idp(sid(7))}, 1, 1, []byte{7}},
		{"6/by id and another type", service.Template{ID: idp(sid(7)), Types: []string{"B"}}, 1, 0, nil},
		{"6/no match", service.Template{Types: []string{"A", "B"}}, 1, 0, nil},
		{"6/a type nobody has", service.Template{Types: []string{"C"}}, 1, 0, nil},
	} {
		total, items, err := r.Lookup(c.tmpl, c.max)
		if err != nil {
			t.Fatal(err)
		}
		if total != c.total || !reflect.DeepEqual(ids(items), c.ids) {
			t.Errorf("%s: %d %v, want %d %v", c.name, total, ids(items), c.total, c.ids)
		}
	}
	_, _, err := r.Lookup(service.Template{}, -1)
	wantErr(t, err, djinn.InvalidArgument, "max -1")
	_, _, err = r.Lookup(service.Template{ID: &djinn.ID{}}, 1)
	wantErr(t, err, djinn.InvalidArgument, "template service id")
	_, _, err = r.Lookup(service.Template{Entries: []service.EntryTemplate{{Type: "X", Fields: []service.Field{f("a", null), f("a", str("x"))}}}}, 1)
	wantErr(t, err, djinn.InvalidArgument, `"a"`, "twice")
}

// browsing is a registry of three items for the browsing tests.
func browsing(t *testing.T) *lookup.Registry {
	r := newRegistry(t, service.Limits{})
	ok(t)(r.Register(printer(), lid(1)))
	ok(t)(r.Register(service.Item{ID: sid(2), Service: []byte("2"), Types: []string{"Printer", "Object", "net.Fax"}, Entries: []service.Entry{
		entry(nameLaser, f("name", str("b"))),
		entry(location, f("floor", i64(1))),
		{Type: "Name", Supertypes: []string{"Base"}, Fields: []service.Field{f("name", str("odd"))}},
	}}, lid(2)))
	ok(t)(r.Register(service.Item{ID: sid(3), Service: []byte("3"), Types: []string{"net.Clock"}, Entries: []service.Entry{address}}, lid(3)))
	return r
}

func TestEntryTypes(t *testing.T) {
	r := browsing(t)
	for _, c := range []struct {
		name string
		tmpl service.Template
		want []service.EntryType
	}{
		{"6/every item's entry types, sorted", service.Template{}, []service.EntryType{
			{Type: "Address"}, {Type: "ColorName", Supertypes: []string{"Name", "Entry"}},
			{Type: "Location", Supertypes: []string{"Entry"}},
			{Type: "Name", Supertypes: []string{"Base"}}, {Type: "Name", Supertypes: []string{"Entry"}}}},
		{"6/of the matching items only", service.Template{Types: []string{"net.Clock"}}, []service.EntryType{{Type: "Address"}}},
		{"6/entry templates select items, not entries", service.Template{Entries: []service.EntryTemplate{{Type: "Name", Fields: []service.Field{f("name", str("odd"))}}}}, []service.EntryType{
			{Type: "Location", Supertypes: []string{"Entry"}}, {Type: "Name", Supertypes: []string{"Base"}}, {Type: "Name", Supertypes: []string{"Entry"}}}},
		{"6/no matching item", service.Template{Types: []string{"Nothing"}}, nil},
	} {
		got, err := r.EntryTypes(c.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n%+v\nwant\n%+v", c.name, got, c.want)
		}
	}
	_, err := r.EntryTypes(service.Template{Types: []string{""}})
	wantErr(t, err, djinn.InvalidArgument, "template types[0]")
}

func TestFieldValues(t *testing.T) {
	r := browsing(t)
	ok(t)(r.Register(service.Item{ID: sid(4), Service: []byte("4"), Entries: []service.Entry{entry(nameLaser, f("name", null))}}, lid(4)))
	names := service.Template{Entries: []service.EntryTemplate{{Type: "Name"}}}
	for _, c := range []struct {
		name  string
		tmpl  service.Template
		set   int
		field string
		want  []service.Value
	}{
		{"6/distinct values, null first, then sorted", names, 0, "name", []service.Value{null, str("b"), str("laser"), str("odd"), str("red")}},
		{"6/only of the entries matching the set's template", service.Template{Entries: []service.EntryTemplate{{Type: "ColorName"}}}, 0, "name", []service.Value{str("red")}},
		{"6/entries lacking the field give nothing", names, 0, "shade", []service.Value{str("dark")}},
		{"6/a field no entry has", names, 0, "nothing", nil},
		{"6/of the matching items only", service.Template{Types: []string{"net.Fax"}, Entries: []service.EntryTemplate{{Type: "Name"}}}, 0, "name", []service.Value{str("b"), str("odd")}},
		{"6/the second set index", service.Template{Entries: []service.EntryTemplate{{Type: "Name"}, {Type: "Location"}}}, 1, "floor", []service.Value{i64(1), i64(3)}},
	} {
		got, err := r.FieldValues(c.tmpl, c.set, c.field)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	_, err := r.FieldValues(names, 1, "name")
	wantErr(t, err, djinn.InvalidArgument, "set index 1", "1 entry templates")
	_, err = r.FieldValues(names, -1, "name")
	wantErr(t, err, djinn.InvalidArgument, "set index -1")
	_, err = r.FieldValues(names, 0, "")
	wantErr(t, err, djinn.InvalidArgument, "field")
}

func TestServiceTypes(t *testing.T) {
	r := browsing(t)
	for _, c := range []struct {
		name   string
		tmpl   service.Template
		prefix string
		want   []string
	}{
		{"6/every type of every item, sorted", service.Template{}, "", []string{"Object", "Printer", "net.Clock", "net.Fax"}},
		{"6/with a prefix", service.Template{}, "net.", []string{"net.Clock", "net.Fax"}},
		{"6/of the matching items, the template's own types left out", service.Template{Types: []string{"Printer"}}, "", []string{"Object", "net.Fax"}},
		{"6/of items matching entries", service.Template{Entries: []service.EntryTemplate{{Type: "Address"}}}, "", []string{"net.Clock"}},
		{"6/no type with the prefix", service.Template{}, "zz", nil},
	} {
		got, err := r.ServiceTypes(c.tmpl, c.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	_, err := r.ServiceTypes(service.Template{}, strings.Repeat("x", 300))
	wantErr(t, err, djinn.ResourceExhausted, "MaxNameLen", "300")
}

// TestServiceTypesHierarchy is Jini's getServiceTypes on items that
// declare their type hierarchy: for each matching item, its most specific
// types that are neither a template type nor a supertype of one, or where
// such a type lacks the prefix, its nearest supertypes that have it.
func TestServiceTypesHierarchy(t *testing.T) {
	// The example: a Laser, which is a Printer, found by Printer.
	r := newRegistry(t, service.Limits{})
	laser := service.Item{ID: sid(1), Service: []byte("1"), Types: []string{"Laser"},
		Supertypes: map[string][]string{"Laser": {"Printer"}, "Printer": {"Device"}}}
	ok(t)(r.Register(laser, lid(1)))
	if got, err := r.ServiceTypes(service.Template{Types: []string{"Printer"}}, ""); err != nil || !reflect.DeepEqual(got, []string{"Laser"}) {
		t.Errorf("a Laser found as a Printer: service types %v, %v; want [Laser] alone", got, err)
	}

	ok(t)(r.Register(service.Item{ID: sid(2), Service: []byte("2"), Types: []string{"Scanner"}, Supertypes: map[string][]string{"Scanner": {"Device"}}}, lid(2)))
	ok(t)(r.Register(service.Item{ID: sid(3), Service: []byte("3"), Types: []string{"Printer", "Fax"}}, lid(3))) // flat
	ok(t)(r.Register(service.Item{ID: sid(4), Service: []byte("4"), Types: []string{"ColorLaser"},
		Supertypes: map[string][]string{"ColorLaser": {"Laser"}, "Laser": {"Printer"}, "Printer": {"Device"}}}, lid(4)))
	for _, c := range []struct {
		name   string
		types  []string
		prefix string
		want   []string
	}{
		{"getServiceTypes/the most specific types of each item", nil, "", []string{"ColorLaser", "Fax", "Laser", "Printer", "Scanner"}},
		{"getServiceTypes/a type equal to a template type left out", []string{"Printer"}, "", []string{"ColorLaser", "Fax", "Laser"}},
		{"getServiceTypes/supertypes of a template type left out", []string{"Laser"}, "", []string{"ColorLaser"}},
		{"getServiceTypes/the template's type itself left out", []string{"ColorLaser"}, "", nil},
		{"getServiceTypes/prefix: a type without it gives way to its supertypes, each reported once", nil, "Dev", []string{"Device"}},
		{"getServiceTypes/prefix: never a supertype of a template type", []string{"Printer"}, "Dev", nil},
		{"getServiceTypes/prefix on the most specific type", nil, "Col", []string{"ColorLaser"}},
		{"getServiceTypes/a flat item: all its types but the template's", []string{"Fax"}, "", []string{"Printer"}},
	} {
		got, err := r.ServiceTypes(service.Template{Types: c.types}, c.prefix)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// TestLookupOne: the one-item lookup counts every match and returns one of
// them, each with the chance intn gives it, without collecting them.
func TestLookupOne(t *testing.T) {
	r := newRegistry(t, service.Limits{})
	for _, b := range []byte{5, 3, 9} {
		ok(t)(r.Register(service.Item{ID: sid(b), Service: []byte{b}, Types: []string{"A"}}, lid(b)))
	}
	total, one, err := r.LookupOne(service.Template{Types: []string{"B"}}, func(int) int { return 0 })
	if err != nil || total != 0 || one != nil {
		t.Errorf("no match: %d %v %v", total, one, err)
	}
	// Reservoir sampling asks intn(1), intn(2), … once per match. With a
	// real random source every match turns up: missing one of three in
	// 300 picks has a chance below 1e-52.
	seen := map[byte]bool{}
	for range 300 {
		var calls []int
		total, one, err := r.LookupOne(service.Template{Types: []string{"A"}}, func(n int) int {
			calls = append(calls, n)
			return rand.IntN(n)
		})
		if err != nil || total != 3 || one == nil || !slices.Equal(calls, []int{1, 2, 3}) {
			t.Fatalf("%d %v %v (intn calls %v)", total, one, err, calls)
		}
		seen[one.ID[1]] = true
	}
	if len(seen) != 3 {
		t.Errorf("picks %v: want each of the three matches once", seen)
	}
	_, _, err = r.LookupOne(service.Template{ID: &djinn.ID{}}, func(int) int { return 0 })
	wantErr(t, err, djinn.InvalidArgument, "template service id")
}

// TestLookupByEntryIndex: lookups by entry type and field value find the
// same items however the item got its entries (registered, added, set,
// modified, replaced) and stop finding them once the entries change or
// the item goes.
func TestLookupByEntryIndex(t *testing.T) {
	r := newRegistry(t, service.Limits{})
	ok(t)(r.Register(printer(), lid(1)))
	find := func(et service.EntryTemplate) []byte {
		t.Helper()
		_, items, err := r.Lookup(service.Template{Entries: []service.EntryTemplate{et}}, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		for _, it := range items {
			out = append(out, it.ID[1])
		}
		return out
	}
	name := func(v string) service.EntryTemplate {
		return service.EntryTemplate{Type: "Name", Fields: []service.Field{f("name", str(v))}}
	}
	check := func(what string, et service.EntryTemplate, want ...byte) {
		t.Helper()
		if got := find(et); !slices.Equal(got, want) {
			t.Errorf("%s: found %v, want %v", what, got, want)
		}
	}
	check("registered field", name("laser"), 1)
	check("a subtype's field", name("red"), 1)
	check("supertype only", service.EntryTemplate{Type: "Entry"}, 1)
	check("null field", service.EntryTemplate{Type: "Location", Fields: []service.Field{f("building", null)}}, 1)
	check("value of another field", service.EntryTemplate{Type: "Location", Fields: []service.Field{f("room", i64(3))}})

	ok(t)(r.AddAttributes(sid(1), []service.Entry{{Type: "Name", Fields: []service.Field{f("name", str("added"))}}}))
	check("added", name("added"), 1)
	ok(t)(r.ModifyAttributes(sid(1), []service.EntryTemplate{name("added")}, []service.Entry{{Type: "Name", Fields: []service.Field{f("name", str("modified"))}}}))
	check("modified away", name("added"))
	check("modified to", name("modified"), 1)
	ok(t)(r.SetAttributes(sid(1), []service.Entry{{Type: "Name", Fields: []service.Field{f("name", str("set"))}}}))
	check("set away", name("laser"))
	check("set to", name("set"), 1)
	check("set away, type", service.EntryTemplate{Type: "Location"})

	two := printer()
	two.ID = sid(2)
	ok(t)(r.Register(two, lid(2)))
	check("second item", name("laser"), 2)
	check("both by type", service.EntryTemplate{Type: "Name"}, 1, 2)
	replaced := two
	replaced.Entries = nil
	ok(t)(r.Register(replaced, lid(2)))
	check("replaced without entries", service.EntryTemplate{Type: "Name"}, 1)
	ok(t)(r.Remove(sid(1)))
	check("removed", name("set"))
	check("nothing left with a Name", service.EntryTemplate{Type: "Name"})
}

// TestOwnItem: the registrar's own item (DESIGN.md 6) is found by lookups
// and browsing like any item, carries the registrar's service id, and is
// out of reach of the registration calls; an import keeps it.
func TestOwnItem(t *testing.T) {
	r := newRegistry(t, service.Limits{})
	wantErr(t, r.SetOwn(service.Item{ID: sid(9), Types: []string{"Registrar"}}), djinn.InvalidArgument, "own item service id")
	wantErr(t, r.SetOwn(service.Item{Types: []string{""}}), djinn.InvalidArgument)
	if err := r.SetOwn(service.Item{Service: []byte("me"), Types: []string{"Registrar"},
		Entries: []service.Entry{{Type: "ServiceInfo", Fields: []service.Field{f("name", str("lookup"))}}}}); err != nil {
		t.Fatal(err)
	}
	ok(t)(r.Register(printer(), lid(1)))
	total, items, err := r.Lookup(service.Template{}, 10)
	if err != nil || total != 2 || len(items) != 2 {
		t.Fatalf("every item: %d %v %v", total, items, err)
	}
	for _, tmpl := range []service.Template{
		{ID: idp(self)},
		{Types: []string{"Registrar"}},
		{Entries: []service.EntryTemplate{{Type: "ServiceInfo", Fields: []service.Field{f("name", str("lookup"))}}}},
	} {
		total, items, err := r.Lookup(tmpl, 10)
		if err != nil || total != 1 || items[0].ID != self || string(items[0].Service) != "me" {
			t.Errorf("%+v: %d %v %v, want the own item", tmpl, total, items, err)
		}
	}
	if types, err := r.ServiceTypes(service.Template{}, "Reg"); err != nil || !slices.Equal(types, []string{"Registrar"}) {
		t.Errorf("service types: %v %v", types, err)
	}
	_, err = r.Get(self)
	wantErr(t, err, djinn.InvalidArgument, "reserved")
	_, err = r.Register(service.Item{ID: self, Types: []string{"X"}}, lid(2))
	wantErr(t, err, djinn.InvalidArgument, "reserved")
	_, err = r.AddAttributes(self, nil)
	wantErr(t, err, djinn.InvalidArgument, "reserved")
	if err := r.Import(r.Export()); err != nil {
		t.Fatal(err)
	}
	if own, ok := r.Own(); !ok || own.ID != self || total != 2 {
		t.Errorf("after an import: %v %v", own, ok)
	}
}
