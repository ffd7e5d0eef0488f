package lookup_test

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
)

func TestNew(t *testing.T) {
	_, err := lookup.New(djinn.ID{}, lookup.Limits{})
	wantErr(t, err, djinn.InvalidArgument, "lookup service id")
	_, err = lookup.New(self, lookup.Limits{MaxFields: -1})
	wantErr(t, err, djinn.InvalidArgument, "MaxFields", "-1")
	r := newRegistry(t, lookup.Limits{MaxTypes: 3})
	lim := lookup.DefaultLimits()
	lim.MaxTypes = 3
	if r.Limits() != lim {
		t.Errorf("limits %+v, want %+v", r.Limits(), lim)
	}
}

// TestRegister: the rules of registration (DESIGN.md 6: register an item
// for a lease; the caller assigns ids; the registrar's own id is its own).
func TestRegister(t *testing.T) {
	mod := func(fn func(*lookup.Item)) lookup.Item { it := printer(); fn(&it); return it }
	for _, c := range []struct {
		name  string
		item  lookup.Item
		lease djinn.ID
		kind  djinn.Kind
		names []string
	}{
		{"6/a new item is registered", printer(), lid(1), "", nil},
		{"6/zero id refused: the caller assigns ids", mod(func(it *lookup.Item) { it.ID = djinn.ID{} }), lid(1), djinn.InvalidArgument, []string{"service id 0000", "zero"}},
		{"6/the registrar's own id refused", mod(func(it *lookup.Item) { it.ID = self }), lid(1), djinn.InvalidArgument, []string{self.String(), "own id"}},
		{"6/zero lease id refused", printer(), djinn.ID{}, djinn.InvalidArgument, []string{"lease id"}},
		{"6/a missing service reference refused", mod(func(it *lookup.Item) { it.Ref = nil }), lid(1), djinn.InvalidArgument, []string{"service reference"}},
		{"6/an empty service type refused", mod(func(it *lookup.Item) { it.Types = []string{"A", ""} }), lid(1), djinn.InvalidArgument, []string{"types[1]", `""`}},
		{"6/a service type that is not UTF-8 refused", mod(func(it *lookup.Item) { it.Types = []string{"\xff"} }), lid(1), djinn.InvalidArgument, []string{"UTF-8"}},
		{"6/an empty entry type refused", mod(func(it *lookup.Item) { it.Entries[1].Type = "" }), lid(1), djinn.InvalidArgument, []string{"entries[1] type"}},
		{"6/an empty supertype refused", mod(func(it *lookup.Item) { it.Entries[0].Supertypes = []string{""} }), lid(1), djinn.InvalidArgument, []string{"supertype 0"}},
		{"6/a supertype repeating the chain refused", mod(func(it *lookup.Item) { it.Entries[2].Supertypes = []string{"Name", "ColorName"} }), lid(1), djinn.InvalidArgument, []string{`"ColorName"`, "chain"}},
		{"6/a field named twice refused", mod(func(it *lookup.Item) { it.Entries[1].Fields = append(it.Entries[1].Fields, f("room", nil)) }), lid(1), djinn.InvalidArgument, []string{`"room"`, "twice"}},
		{"6/an empty field name refused", mod(func(it *lookup.Item) { it.Entries[0].Fields = []lookup.Field{f("", str("x"))} }), lid(1), djinn.InvalidArgument, []string{"field 0 name"}},
		{"6/the zero Value refused", mod(func(it *lookup.Item) { it.Entries[0].Fields = []lookup.Field{f("name", &lookup.Value{})} }), lid(1), djinn.InvalidArgument, []string{`"name"`, "invalid"}},
		{"6/a string value that is not UTF-8 refused", mod(func(it *lookup.Item) { it.Entries[0].Fields = []lookup.Field{f("name", str("\xc3"))} }), lid(1), djinn.InvalidArgument, []string{`"name"`, "UTF-8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRegistry(t, lookup.Limits{})
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
	r := newRegistry(t, lookup.Limits{})
	it := printer()
	it.Types = []string{"Printer", "Object", "Printer"}
	it.Entries = append(it.Entries, lookup.Entry{Type: "Location", Supertypes: []string{"Entry"},
		Fields: []lookup.Field{f("room", str("301")), f("building", nil), f("floor", i64(3))}})
	ok(t)(r.Register(it, lid(1)))
	it.Ref[0] = 'X'
	it.Entries[0].Fields[0].Value = str("changed")
	got, err := r.Get(sid(1))
	if err != nil {
		t.Fatal(err)
	}
	want := lookup.Registration{Lease: lid(1), Item: lookup.Item{
		ID: sid(1), Ref: []byte("ref-printer"), Types: []string{"Object", "Printer"},
		Entries: []lookup.Entry{
			{Type: "Name", Supertypes: []string{"Entry"}, Fields: []lookup.Field{f("name", str("laser"))}},
			{Type: "Location", Supertypes: []string{"Entry"}, Fields: []lookup.Field{f("building", nil), f("floor", i64(3)), f("room", str("301"))}},
			{Type: "ColorName", Supertypes: []string{"Name", "Entry"}, Fields: []lookup.Field{f("name", str("red")), f("shade", str("dark"))}},
		}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stored\n%+v\nwant\n%+v", got, want)
	}
}

// TestRegisterReplaces: registering an id again replaces the item and keeps
// one registration, under the new lease (DESIGN.md 6, Reggie).
func TestRegisterReplaces(t *testing.T) {
	r := newRegistry(t, lookup.Limits{})
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
	if n, _, _ := r.Lookup(lookup.Template{Types: []string{"Printer"}}, 0); n != 0 {
		t.Fatal("found under its old type")
	}
	if n, _, _ := r.Lookup(lookup.Template{Types: []string{"Scanner"}}, 0); n != 1 {
		t.Fatal("not found under its new type")
	}
}

func TestRemoveAndGet(t *testing.T) {
	r := newRegistry(t, lookup.Limits{})
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
	if n, _, _ := r.Lookup(lookup.Template{Types: []string{"Printer"}}, 0); n != 0 {
		t.Fatal("a removed item is found")
	}
}

// entriesOf returns the stored entries of the item with id.
func entriesOf(t *testing.T, r *lookup.Registry, id djinn.ID) []lookup.Entry {
	t.Helper()
	reg, err := r.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	return reg.Item.Entries
}

var (
	nameLaser = lookup.Entry{Type: "Name", Supertypes: []string{"Entry"}, Fields: []lookup.Field{f("name", str("laser"))}}
	location  = lookup.Entry{Type: "Location", Supertypes: []string{"Entry"}, Fields: []lookup.Field{f("building", nil), f("floor", i64(3)), f("room", str("301"))}}
	colorRed  = lookup.Entry{Type: "ColorName", Supertypes: []string{"Name", "Entry"}, Fields: []lookup.Field{f("name", str("red")), f("shade", str("dark"))}}
	address   = lookup.Entry{Type: "Address", Fields: []lookup.Field{f("street", str("Main"))}}
)

func entry(e lookup.Entry, fields ...lookup.Field) lookup.Entry {
	e.Fields = fields
	return e
}

// TestAttributes: each attribute operation (DESIGN.md 6, Jini's
// ServiceRegistration), on the printer item, with the entries it leaves
// or its error; an error leaves the item unchanged, and a call that
// changes nothing tells no watch.
func TestAttributes(t *testing.T) {
	type op func(r *lookup.Registry) ([]lookup.Event, error)
	add := func(es ...lookup.Entry) op {
		return func(r *lookup.Registry) ([]lookup.Event, error) { return r.AddAttributes(sid(1), es) }
	}
	set := func(es ...lookup.Entry) op {
		return func(r *lookup.Registry) ([]lookup.Event, error) { return r.SetAttributes(sid(1), es) }
	}
	modify := func(tmpls []lookup.EntryTemplate, changes ...lookup.Entry) op {
		return func(r *lookup.Registry) ([]lookup.Event, error) { return r.ModifyAttributes(sid(1), tmpls, changes) }
	}
	tmpl := func(typ string, fields ...lookup.Field) lookup.EntryTemplate {
		return lookup.EntryTemplate{Type: typ, Fields: fields}
	}
	tmpls := func(ts ...lookup.EntryTemplate) []lookup.EntryTemplate { return ts }
	start := []lookup.Entry{nameLaser, location, colorRed}
	for _, c := range []struct {
		name  string
		op    op
		want  []lookup.Entry // nil with kind set: unchanged
		kind  djinn.Kind
		names []string
	}{
		{"add/appends a new entry", add(address), []lookup.Entry{nameLaser, location, colorRed, address}, "", nil},
		{"add/drops an entry equal to one the item has", add(location), start, "", nil},
		{"add/equal whatever the field order", add(entry(location, f("room", str("301")), f("floor", i64(3)), f("building", nil))), start, "", nil},
		{"add/drops duplicates within the call", add(address, address), []lookup.Entry{nameLaser, location, colorRed, address}, "", nil},
		{"add/a null field makes a different entry", add(entry(address, f("street", nil))), []lookup.Entry{nameLaser, location, colorRed, entry(address, f("street", nil))}, "", nil},
		{"add/nothing to add", add(), start, "", nil},
		{"add/a bad entry changes nothing", add(address, lookup.Entry{Type: ""}), nil, djinn.InvalidArgument, []string{"added entries[1] type"}},
		{"add/unknown service", func(r *lookup.Registry) ([]lookup.Event, error) { return r.AddAttributes(sid(7), nil) }, nil, djinn.NoSuchObject, []string{sid(7).String()}},
		{"add/the registrar's own id", func(r *lookup.Registry) ([]lookup.Event, error) { return r.AddAttributes(self, nil) }, nil, djinn.InvalidArgument, []string{"own id"}},

		{"set/replaces every entry", set(address), []lookup.Entry{address}, "", nil},
		{"set/drops duplicates", set(address, location, address), []lookup.Entry{address, location}, "", nil},
		{"set/no entries", set(), nil, "", nil},
		{"set/the same entries", set(nameLaser, location, colorRed), start, "", nil},
		{"set/a bad entry changes nothing", set(address, entry(address, f("a", nil), f("a", nil))), nil, djinn.InvalidArgument, []string{"entries[1]", `"a"`, "twice"}},
		{"set/unknown service", func(r *lookup.Registry) ([]lookup.Event, error) { return r.SetAttributes(sid(7), nil) }, nil, djinn.NoSuchObject, []string{sid(7).String()}},

		{"modify/sets a field of the matching entry", modify(tmpls(tmpl("Name", f("name", str("laser")))), entry(nameLaser, f("name", str("inkjet")))),
			[]lookup.Entry{entry(nameLaser, f("name", str("inkjet"))), location, colorRed}, "", nil},
		{"modify/matches subtypes' entries too", modify(tmpls(tmpl("Name")), entry(nameLaser, f("name", str("x")))),
			[]lookup.Entry{entry(nameLaser, f("name", str("x"))), location, entry(colorRed, f("name", str("x")), f("shade", str("dark")))}, "", nil},
		{"modify/a change of a supertype of the template's type", modify(tmpls(tmpl("ColorName")), entry(nameLaser, f("name", str("blue")))),
			[]lookup.Entry{nameLaser, location, entry(colorRed, f("name", str("blue")), f("shade", str("dark")))}, "", nil},
		{"modify/a change of a subtype of the template's type refused", modify(tmpls(tmpl("Name")), colorRed), nil, djinn.InvalidArgument, []string{"changes[0]", `"ColorName"`, `"Name"`}},
		{"modify/a change of an unrelated type refused", modify(tmpls(tmpl("Location")), nameLaser), nil, djinn.InvalidArgument, []string{"changes[0]", `"Name"`, "supertype"}},
		{"modify/a zero Entry deletes the matching entries", modify(tmpls(tmpl("Location")), lookup.Entry{}), []lookup.Entry{nameLaser, colorRed}, "", nil},
		{"modify/deleting by a supertype deletes subtypes' entries", modify(tmpls(tmpl("Name")), lookup.Entry{}), []lookup.Entry{location}, "", nil},
		{"modify/null fields of a change are left alone", modify(tmpls(tmpl("Location")), entry(location, f("floor", nil), f("room", str("302")))),
			[]lookup.Entry{nameLaser, entry(location, f("building", nil), f("floor", i64(3)), f("room", str("302"))), colorRed}, "", nil},
		{"modify/a change sets a null field", modify(tmpls(tmpl("Location")), entry(location, f("building", str("B")))),
			[]lookup.Entry{nameLaser, entry(location, f("building", str("B")), f("floor", i64(3)), f("room", str("301"))), colorRed}, "", nil},
		{"modify/a field the entry lacks is added", modify(tmpls(tmpl("Location")), entry(location, f("colour", str("grey")))),
			[]lookup.Entry{nameLaser, entry(location, f("building", nil), f("colour", str("grey")), f("floor", i64(3)), f("room", str("301"))), colorRed}, "", nil},
		{"modify/duplicates that result are dropped", modify(tmpls(tmpl("ColorName")), entry(colorRed, f("name", str("laser")))),
			[]lookup.Entry{nameLaser, location, entry(colorRed, f("name", str("laser")), f("shade", str("dark")))}, "", nil},
		{"modify/the highest index wins", modify(tmpls(tmpl("Location"), tmpl("Location")), entry(location, f("room", str("a"))), entry(location, f("room", str("b")))),
			[]lookup.Entry{nameLaser, entry(location, f("building", nil), f("floor", i64(3)), f("room", str("b"))), colorRed}, "", nil},
		{"modify/templates match the entries as they were", modify(tmpls(tmpl("Location", f("room", str("301"))), tmpl("Location", f("room", str("a")))),
			entry(location, f("room", str("a"))), entry(location, f("floor", i64(9)))),
			[]lookup.Entry{nameLaser, entry(location, f("building", nil), f("floor", i64(3)), f("room", str("a"))), colorRed}, "", nil},
		{"modify/each change is checked against its own template", modify(tmpls(tmpl("Location"), tmpl("Entry")), lookup.Entry{}, entry(location, f("room", str("b")))),
			nil, djinn.InvalidArgument, []string{"changes[1]"}},
		{"modify/a deletion wins over an update of the same type", modify(tmpls(tmpl("Location"), tmpl("Location")), entry(location, f("room", str("b"))), lookup.Entry{}),
			[]lookup.Entry{nameLaser, colorRed}, "", nil},
		{"modify/matching nothing changes nothing", modify(tmpls(tmpl("Location", f("floor", i64(9)))), lookup.Entry{}), start, "", nil},
		{"modify/a type the item has no entry of is not checked", modify(tmpls(tmpl("Address")), nameLaser), start, "", nil},
		{"modify/lengths differ", modify(tmpls(tmpl("Location")), lookup.Entry{}, lookup.Entry{}), nil, djinn.InvalidArgument, []string{"1 templates and 2 changes"}},
		{"modify/a change with fields but no type", modify(tmpls(tmpl("Location")), lookup.Entry{Fields: []lookup.Field{f("room", str("x"))}}), nil, djinn.InvalidArgument, []string{"changes[0] type"}},
		{"modify/a bad template", modify(tmpls(tmpl("")), lookup.Entry{}), nil, djinn.InvalidArgument, []string{"templates[0] type"}},
		{"modify/unknown service", func(r *lookup.Registry) ([]lookup.Event, error) { return r.ModifyAttributes(sid(7), nil, nil) }, nil, djinn.NoSuchObject, []string{sid(7).String()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRegistry(t, lookup.Limits{})
			ok(t)(r.Register(printer(), lid(1)))
			if err := r.AddWatch(wid(1), lookup.Template{}, lookup.AllTransitions); err != nil {
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
			if changed != (len(events) == 1) || changed && events[0].Transition != lookup.MatchMatch {
				t.Fatalf("changed %v, events %+v", changed, events)
			}
		})
	}
}

func TestLookupCountAndMax(t *testing.T) {
	r := newRegistry(t, lookup.Limits{})
	for _, b := range []byte{5, 3, 9, 1, 7} {
		ok(t)(r.Register(lookup.Item{ID: sid(b), Ref: []byte{b}, Types: []string{"A"}}, lid(b)))
	}
	ok(t)(r.Register(lookup.Item{ID: sid(2), Ref: []byte{2}, Types: []string{"B"}}, lid(2)))
	ids := func(items []lookup.Item) (out []byte) {
		for _, it := range items {
			out = append(out, it.ID[1])
		}
		return out
	}
	for _, c := range []struct {
		name  string
		tmpl  lookup.Template
		max   int
		total int
		ids   []byte
	}{
		{"6/max below the count: the first by id", lookup.Template{Types: []string{"A"}}, 2, 5, []byte{1, 3}},
		{"6/max 0 only counts", lookup.Template{Types: []string{"A"}}, 0, 5, nil},
		{"6/max above the count", lookup.Template{Types: []string{"A"}}, 100, 5, []byte{1, 3, 5, 7, 9}},
		{"6/every item", lookup.Template{}, 3, 6, []byte{1, 2, 3}},
		{"6/by id", lookup.Template{ID: idp(sid(7))}, 1, 1, []byte{7}},
		{"6/by id and another type", lookup.Template{ID: idp(sid(7)), Types: []string{"B"}}, 1, 0, nil},
		{"6/no match", lookup.Template{Types: []string{"A", "B"}}, 1, 0, nil},
		{"6/a type nobody has", lookup.Template{Types: []string{"C"}}, 1, 0, nil},
	} {
		total, items, err := r.Lookup(c.tmpl, c.max)
		if err != nil {
			t.Fatal(err)
		}
		if total != c.total || !reflect.DeepEqual(ids(items), c.ids) {
			t.Errorf("%s: %d %v, want %d %v", c.name, total, ids(items), c.total, c.ids)
		}
	}
	_, _, err := r.Lookup(lookup.Template{}, -1)
	wantErr(t, err, djinn.InvalidArgument, "max -1")
	_, _, err = r.Lookup(lookup.Template{ID: &djinn.ID{}}, 1)
	wantErr(t, err, djinn.InvalidArgument, "template service id")
	_, _, err = r.Lookup(lookup.Template{Entries: []lookup.EntryTemplate{{Type: "X", Fields: []lookup.Field{f("a", nil), f("a", str("x"))}}}}, 1)
	wantErr(t, err, djinn.InvalidArgument, `"a"`, "twice")
}

// browsing is a registry of three items for the browsing tests.
func browsing(t *testing.T) *lookup.Registry {
	r := newRegistry(t, lookup.Limits{})
	ok(t)(r.Register(printer(), lid(1)))
	ok(t)(r.Register(lookup.Item{ID: sid(2), Ref: []byte("2"), Types: []string{"Printer", "Object", "net.Fax"}, Entries: []lookup.Entry{
		entry(nameLaser, f("name", str("b"))),
		entry(location, f("floor", i64(1))),
		{Type: "Name", Supertypes: []string{"Base"}, Fields: []lookup.Field{f("name", str("odd"))}},
	}}, lid(2)))
	ok(t)(r.Register(lookup.Item{ID: sid(3), Ref: []byte("3"), Types: []string{"net.Clock"}, Entries: []lookup.Entry{address}}, lid(3)))
	return r
}

func TestEntryTypes(t *testing.T) {
	r := browsing(t)
	for _, c := range []struct {
		name string
		tmpl lookup.Template
		want []lookup.EntryType
	}{
		{"6/every item's entry types, sorted", lookup.Template{}, []lookup.EntryType{
			{Type: "Address"}, {Type: "ColorName", Supertypes: []string{"Name", "Entry"}},
			{Type: "Location", Supertypes: []string{"Entry"}},
			{Type: "Name", Supertypes: []string{"Base"}}, {Type: "Name", Supertypes: []string{"Entry"}}}},
		{"6/of the matching items only", lookup.Template{Types: []string{"net.Clock"}}, []lookup.EntryType{{Type: "Address"}}},
		{"6/entry templates select items, not entries", lookup.Template{Entries: []lookup.EntryTemplate{{Type: "Name", Fields: []lookup.Field{f("name", str("odd"))}}}}, []lookup.EntryType{
			{Type: "Location", Supertypes: []string{"Entry"}}, {Type: "Name", Supertypes: []string{"Base"}}, {Type: "Name", Supertypes: []string{"Entry"}}}},
		{"6/no matching item", lookup.Template{Types: []string{"Nothing"}}, nil},
	} {
		got, err := r.EntryTypes(c.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n%+v\nwant\n%+v", c.name, got, c.want)
		}
	}
	_, err := r.EntryTypes(lookup.Template{Types: []string{""}})
	wantErr(t, err, djinn.InvalidArgument, "template types[0]")
}

func TestFieldValues(t *testing.T) {
	r := browsing(t)
	ok(t)(r.Register(lookup.Item{ID: sid(4), Ref: []byte("4"), Entries: []lookup.Entry{entry(nameLaser, f("name", nil))}}, lid(4)))
	names := lookup.Template{Entries: []lookup.EntryTemplate{{Type: "Name"}}}
	for _, c := range []struct {
		name  string
		tmpl  lookup.Template
		set   int
		field string
		want  []*lookup.Value
	}{
		{"6/distinct values, null first, then sorted", names, 0, "name", []*lookup.Value{nil, str("b"), str("laser"), str("odd"), str("red")}},
		{"6/only of the entries matching the set's template", lookup.Template{Entries: []lookup.EntryTemplate{{Type: "ColorName"}}}, 0, "name", []*lookup.Value{str("red")}},
		{"6/entries lacking the field give nothing", names, 0, "shade", []*lookup.Value{str("dark")}},
		{"6/a field no entry has", names, 0, "nothing", nil},
		{"6/of the matching items only", lookup.Template{Types: []string{"net.Fax"}, Entries: []lookup.EntryTemplate{{Type: "Name"}}}, 0, "name", []*lookup.Value{str("b"), str("odd")}},
		{"6/the second set index", lookup.Template{Entries: []lookup.EntryTemplate{{Type: "Name"}, {Type: "Location"}}}, 1, "floor", []*lookup.Value{i64(1), i64(3)}},
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
		tmpl   lookup.Template
		prefix string
		want   []string
	}{
		{"6/every type of every item, sorted", lookup.Template{}, "", []string{"Object", "Printer", "net.Clock", "net.Fax"}},
		{"6/with a prefix", lookup.Template{}, "net.", []string{"net.Clock", "net.Fax"}},
		{"6/of the matching items", lookup.Template{Types: []string{"Printer"}}, "", []string{"Object", "Printer", "net.Fax"}},
		{"6/of items matching entries", lookup.Template{Entries: []lookup.EntryTemplate{{Type: "Address"}}}, "", []string{"net.Clock"}},
		{"6/no type with the prefix", lookup.Template{}, "zz", nil},
	} {
		got, err := r.ServiceTypes(c.tmpl, c.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	_, err := r.ServiceTypes(lookup.Template{}, strings.Repeat("x", 300))
	wantErr(t, err, djinn.ResourceExhausted, "MaxNameLen", "300")
}

// TestLookupOne: the one-item lookup counts every match and returns one of
// them, each with the chance intn gives it, without collecting them.
func TestLookupOne(t *testing.T) {
	r := newRegistry(t, lookup.Limits{})
	for _, b := range []byte{5, 3, 9} {
		ok(t)(r.Register(lookup.Item{ID: sid(b), Ref: []byte{b}, Types: []string{"A"}}, lid(b)))
	}
	total, one, err := r.LookupOne(lookup.Template{Types: []string{"B"}}, func(int) int { return 0 })
	if err != nil || total != 0 || one != nil {
		t.Errorf("no match: %d %v %v", total, one, err)
	}
	// Reservoir sampling asks intn(1), intn(2), … once per match. With a
	// real random source every match turns up: missing one of three in
	// 300 picks has a chance below 1e-52.
	seen := map[byte]bool{}
	for range 300 {
		var calls []int
		total, one, err := r.LookupOne(lookup.Template{Types: []string{"A"}}, func(n int) int {
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
	_, _, err = r.LookupOne(lookup.Template{ID: &djinn.ID{}}, func(int) int { return 0 })
	wantErr(t, err, djinn.InvalidArgument, "template service id")
}

// TestLookupByEntryIndex: lookups by entry type and field value find the
// same items however the item got its entries (registered, added, set,
// modified, replaced) and stop finding them once the entries change or
// the item goes.
func TestLookupByEntryIndex(t *testing.T) {
	r := newRegistry(t, lookup.Limits{})
	ok(t)(r.Register(printer(), lid(1)))
	find := func(et lookup.EntryTemplate) []byte {
		t.Helper()
		_, items, err := r.Lookup(lookup.Template{Entries: []lookup.EntryTemplate{et}}, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		for _, it := range items {
			out = append(out, it.ID[1])
		}
		return out
	}
	name := func(v string) lookup.EntryTemplate {
		return lookup.EntryTemplate{Type: "Name", Fields: []lookup.Field{f("name", str(v))}}
	}
	check := func(what string, et lookup.EntryTemplate, want ...byte) {
		t.Helper()
		if got := find(et); !slices.Equal(got, want) {
			t.Errorf("%s: found %v, want %v", what, got, want)
		}
	}
	check("registered field", name("laser"), 1)
	check("a subtype's field", name("red"), 1)
	check("supertype only", lookup.EntryTemplate{Type: "Entry"}, 1)
	check("null field", lookup.EntryTemplate{Type: "Location", Fields: []lookup.Field{f("building", nil)}}, 1)
	check("value of another field", lookup.EntryTemplate{Type: "Location", Fields: []lookup.Field{f("room", i64(3))}})

	ok(t)(r.AddAttributes(sid(1), []lookup.Entry{{Type: "Name", Fields: []lookup.Field{f("name", str("added"))}}}))
	check("added", name("added"), 1)
	ok(t)(r.ModifyAttributes(sid(1), []lookup.EntryTemplate{name("added")}, []lookup.Entry{{Type: "Name", Fields: []lookup.Field{f("name", str("modified"))}}}))
	check("modified away", name("added"))
	check("modified to", name("modified"), 1)
	ok(t)(r.SetAttributes(sid(1), []lookup.Entry{{Type: "Name", Fields: []lookup.Field{f("name", str("set"))}}}))
	check("set away", name("laser"))
	check("set to", name("set"), 1)
	check("set away, type", lookup.EntryTemplate{Type: "Location"})

	two := printer()
	two.ID = sid(2)
	ok(t)(r.Register(two, lid(2)))
	check("second item", name("laser"), 2)
	check("both by type", lookup.EntryTemplate{Type: "Name"}, 1, 2)
	replaced := two
	replaced.Entries = nil
	ok(t)(r.Register(replaced, lid(2)))
	check("replaced without entries", lookup.EntryTemplate{Type: "Name"}, 1)
	ok(t)(r.Remove(sid(1)))
	check("removed", name("set"))
	check("nothing left with a Name", lookup.EntryTemplate{Type: "Name"})
}

// TestOwnItem: the registrar's own item (DESIGN.md 6) is found by lookups
// and browsing like any item, carries the registrar's service id, and is
// out of reach of the registration calls; an import keeps it.
func TestOwnItem(t *testing.T) {
	r := newRegistry(t, lookup.Limits{})
	wantErr(t, r.SetOwn(lookup.Item{ID: sid(9), Types: []string{"Registrar"}}), djinn.InvalidArgument, "own item service id")
	wantErr(t, r.SetOwn(lookup.Item{Types: []string{""}}), djinn.InvalidArgument)
	if err := r.SetOwn(lookup.Item{Ref: []byte("me"), Types: []string{"Registrar"},
		Entries: []lookup.Entry{{Type: "ServiceInfo", Fields: []lookup.Field{f("name", str("lookup"))}}}}); err != nil {
		t.Fatal(err)
	}
	ok(t)(r.Register(printer(), lid(1)))
	total, items, err := r.Lookup(lookup.Template{}, 10)
	if err != nil || total != 2 || len(items) != 2 {
		t.Fatalf("every item: %d %v %v", total, items, err)
	}
	for _, tmpl := range []lookup.Template{
		{ID: idp(self)},
		{Types: []string{"Registrar"}},
		{Entries: []lookup.EntryTemplate{{Type: "ServiceInfo", Fields: []lookup.Field{f("name", str("lookup"))}}}},
	} {
		total, items, err := r.Lookup(tmpl, 10)
		if err != nil || total != 1 || items[0].ID != self || string(items[0].Ref) != "me" {
			t.Errorf("%+v: %d %v %v, want the own item", tmpl, total, items, err)
		}
	}
	if types, err := r.ServiceTypes(lookup.Template{}, "Reg"); err != nil || !slices.Equal(types, []string{"Registrar"}) {
		t.Errorf("service types: %v %v", types, err)
	}
	_, err = r.Get(self)
	wantErr(t, err, djinn.InvalidArgument, "reserved")
	_, err = r.Register(lookup.Item{ID: self, Types: []string{"X"}}, lid(2))
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
