package service

import (
	"slices"
	"strings"
	"unique"

	"github.com/djinn-go/djinn"
)

// Name is an interned name — a service type, an entry type or supertype, a
// field name: equal names are equal Names, so comparing them is comparing
// pointers, a Name is 8 bytes, and each distinct name is stored once
// however many records use it. The zero Name is no name.
type Name struct{ h unique.Handle[string] }

// String returns the name.
func (n Name) String() string {
	if n == (Name{}) {
		return ""
	}
	return n.h.Value()
}

func makeName(s string) Name { return Name{unique.Make(s)} }

func cmpName(a, b Name) int { return strings.Compare(a.String(), b.String()) }

func strs(ns []Name) []string {
	if len(ns) == 0 {
		return nil
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.String()
	}
	return out
}

// FieldKey is a field as a Record holds it, an interned name and a value
// (null in an entry, never in a template), and the key an index finds the
// entries with that field value by. It is comparable.
type FieldKey struct {
	name Name
	val  Value
}

// Name returns the field's name.
func (k FieldKey) Name() Name { return k.name }

// Value returns the field's value.
func (k FieldKey) Value() Value { return k.val }

// Detached returns k with a copy of its value's bytes of its own. A key
// cut from a record shares that record's bytes (Record packs them): an
// index that keeps a key after the record is gone keeps a detached one.
func (k FieldKey) Detached() FieldKey {
	k.val = Value{s: strings.Clone(k.val.s)}
	return k
}

// entry is an entry as a Record holds it. types[0] is its type, the rest
// its supertypes nearest first; fields are sorted by name. Entries are
// never changed in place: a change builds a new one.
type entry struct {
	types  []Name
	fields []FieldKey
}

// is reports whether the entry is of type t: t is its type or a supertype.
func (e *entry) is(t Name) bool { return slices.Contains(e.types, t) }

// get returns the field named n.
func (e *entry) get(n Name) (Value, bool) {
	for _, f := range e.fields {
		if f.name == n {
			return f.val, true
		}
	}
	return Value{}, false
}

func (e *entry) equal(f *entry) bool {
	return slices.Equal(e.types, f.types) && slices.Equal(e.fields, f.fields)
}

// size is the entry's attribute bytes (Limits.MaxAttributeBytes).
func (e *entry) size() int {
	n := 0
	for _, t := range e.types {
		n += len(t.String())
	}
	for _, f := range e.fields {
		n += len(f.name.String()) + f.val.size()
	}
	return n
}

func (e *entry) public() Entry {
	out := Entry{Type: e.types[0].String(), Supertypes: strs(e.types[1:])}
	if len(e.fields) > 0 {
		out.Fields = make([]Field, len(e.fields))
		for i, f := range e.fields {
			out.Fields[i] = Field{Name: f.name.String(), Value: f.val}
		}
	}
	return out
}

// Record is an item in canonical form, checked against Limits (see
// Limits.Record), laid out for a registry that holds many of them for a
// long time: names interned, an item's entries in three allocations
// (their types, their fields, their values' bytes) however many there
// are, which is what the collector marks. A Record is immutable; the
// attribute calls return a new one. Copying a Record copies a handful of
// words and shares the rest.
//
// The canonical form: service types sorted without duplicates, the types
// the hierarchy implies included; each type's direct supertypes sorted
// without duplicates; entries without duplicates (Jini drops a duplicate
// entry wherever one would arise, keeping the first in place); each
// entry's fields sorted by name.
type Record struct {
	id  djinn.ID
	ref string
	// types are the service types, sorted, without duplicates.
	// types[len:cap] is the hierarchy: pairs (type, direct supertype),
	// sorted; it costs nothing for an item without one.
	types   []Name
	entries []entry
}

// ID returns the item's service id.
func (r *Record) ID() djinn.ID { return r.id }

// Types returns the item's service types, sorted: the caller must not
// change them.
func (r *Record) Types() []Name { return r.types[:len(r.types):len(r.types)] }

// HasType reports whether the item has service type t.
func (r *Record) HasType(t Name) bool { return slices.Contains(r.types, t) }

// links returns the hierarchy's (type, direct supertype) pairs, flat.
func (r *Record) links() []Name { return r.types[len(r.types):cap(r.types)] }

// NumEntries returns the number of entries.
func (r *Record) NumEntries() int { return len(r.entries) }

// EntryTypes returns entry i's type followed by its supertypes, nearest
// first: the caller must not change them.
func (r *Record) EntryTypes(i int) []Name { return r.entries[i].types }

// EntryFields returns entry i's fields, sorted by name: the caller must not
// change them.
func (r *Record) EntryFields(i int) []FieldKey { return r.entries[i].fields }

// Item returns the item in canonical form. It shares nothing with r.
func (r *Record) Item() Item {
	out := Item{ID: r.id, Service: []byte(r.ref), Types: strs(r.types)}
	if l := r.links(); len(l) > 0 {
		out.Supertypes = map[string][]string{}
		for i := 0; i < len(l); i += 2 {
			t := l[i].String()
			out.Supertypes[t] = append(out.Supertypes[t], l[i+1].String())
		}
	}
	if len(r.entries) > 0 {
		out.Entries = make([]Entry, len(r.entries))
		for i := range r.entries {
			out.Entries[i] = r.entries[i].public()
		}
	}
	return out
}

// withEntries returns r with entries es, packed.
func (r *Record) withEntries(es []entry) Record {
	n := *r
	n.entries = packEntries(es)
	return n
}

func entriesSize(es []entry) int {
	n := 0
	for i := range es {
		n += es[i].size()
	}
	return n
}

func entriesEqual(a, b []entry) bool {
	return slices.EqualFunc(a, b, func(x, y entry) bool { return x.equal(&y) })
}

// packEntries returns a copy of es laid out for the collector: the
// entries' types in one allocation, their fields in a second and the
// bytes of the fields' values in a third, rather than a few objects for
// every entry and one for every value. es is left as it was.
func packEntries(es []entry) []entry {
	if len(es) == 0 {
		return nil
	}
	nt, nf, nb := 0, 0, 0
	for i := range es {
		nt += len(es[i].types)
		nf += len(es[i].fields)
		for _, f := range es[i].fields {
			nb += len(f.val.s)
		}
	}
	var b strings.Builder
	b.Grow(nb)
	for i := range es {
		for _, f := range es[i].fields {
			b.WriteString(f.val.s)
		}
	}
	vals := b.String()
	types := make([]Name, 0, nt)
	fields := make([]FieldKey, 0, nf)
	out := make([]entry, len(es))
	for i := range es {
		t0, f0 := len(types), len(fields)
		types = append(types, es[i].types...)
		for _, f := range es[i].fields {
			n := len(f.val.s)
			fields = append(fields, FieldKey{name: f.name, val: Value{s: vals[:n]}})
			vals = vals[n:]
		}
		out[i].types = types[t0:len(types):len(types)]
		if len(fields) > f0 {
			out[i].fields = fields[f0:len(fields):len(fields)]
		}
	}
	return out
}

// dedupe drops entries equal to an earlier one, keeping order.
func dedupe(es []entry) []entry {
	out := es[:0:0]
	for i := range es {
		if !slices.ContainsFunc(out, func(o entry) bool { return o.equal(&es[i]) }) {
			out = append(out, es[i])
		}
	}
	return out
}
