package lookup

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
	"unique"

	"github.com/djinn-go/djinn"
)

// Field is a named field of an entry or an entry template. A nil Value is
// a null field in an entry and a wildcard in an entry template.
type Field struct {
	Name  string
	Value *Value
}

// Entry is an attribute entry: a typed record (Jini's Entry). Type is the
// entry's type name; Supertypes are its ancestors' type names, nearest
// first, not including Type (entry types have single inheritance, as Java
// classes do, so this is a chain). Field names are unique within an entry.
//
// The registry stores an entry's fields sorted by name: two entries are
// equal when their type, supertypes and fields (names and values, null
// included) are equal, whatever order the fields were given in. A null
// field and an absent one differ only there and in FieldValues, which
// reports nulls.
type Entry struct {
	Type       string
	Supertypes []string
	Fields     []Field
}

// EntryTemplate matches entries: an entry matches when its Type is the
// template's Type or lists it among its Supertypes, and it has a field
// equal to every field the template sets (a nil Value is a wildcard; an
// entry that lacks a field does not match a template that sets it). Field
// names are unique within a template.
type EntryTemplate struct {
	Type   string
	Fields []Field
}

// Item is a service item (DESIGN.md 6): the service's id, its reference
// (opaque to the registry), the names of its types including every type it
// inherits or implements, and its attribute entries.
//
// The registry stores Types sorted and without duplicates, and Entries
// without duplicates (Jini's rule: a duplicate entry is dropped, the first
// is kept in place).
type Item struct {
	ID      djinn.ID
	Ref     []byte
	Types   []string
	Entries []Entry
}

// Template selects items (DESIGN.md 6): an item matches when ID is nil or
// equal to its id, it has every type in Types, and each entry template
// matches at least one of its entries. Entry templates are independent:
// one entry may satisfy several of them. The empty template matches every
// item.
type Template struct {
	ID      *djinn.ID
	Types   []string
	Entries []EntryTemplate
}

// name is an interned name: equal names share one handle, so comparing
// names is comparing pointers and each distinct name is stored once
// however many items use it.
type name = unique.Handle[string]

func cmpName(a, b name) int { return strings.Compare(a.Value(), b.Value()) }

func strs(ns []name) []string {
	if len(ns) == 0 {
		return nil
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Value()
	}
	return out
}

// field is a stored field. In an entry a zero val is null; in an entry
// template fields are set (wildcards are dropped).
type field struct {
	name name
	val  Value
}

// entry is a stored entry. types[0] is its type, the rest its supertypes
// nearest first; fields are sorted by name. Entries are never changed in
// place: a change builds a new one.
type entry struct {
	types  []name
	fields []field
}

// is reports whether the entry is of type t: t is its type or a supertype.
func (e *entry) is(t name) bool { return slices.Contains(e.types, t) }

// get returns the field named n.
func (e *entry) get(n name) (Value, bool) {
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
		n += len(t.Value())
	}
	for _, f := range e.fields {
		n += len(f.name.Value()) + f.val.size()
	}
	return n
}

func (e *entry) public() Entry {
	out := Entry{Type: e.types[0].Value(), Supertypes: strs(e.types[1:])}
	if len(e.fields) > 0 {
		out.Fields = make([]Field, len(e.fields))
		vals := make([]Value, len(e.fields))
		for i, f := range e.fields {
			out.Fields[i].Name = f.name.Value()
			if f.val.s != "" {
				vals[i] = f.val
				out.Fields[i].Value = &vals[i]
			}
		}
	}
	return out
}

// item is a stored registration. Its fields other than entries never
// change; entries is replaced, never changed in place.
type item struct {
	id, lease djinn.ID
	ref       string
	types     []name // sorted by name, no duplicates
	entries   []entry
}

func (it *item) hasType(t name) bool { return slices.Contains(it.types, t) }

func (it *item) public() Item {
	out := Item{ID: it.id, Ref: []byte(it.ref), Types: strs(it.types)}
	if len(it.entries) > 0 {
		out.Entries = make([]Entry, len(it.entries))
		for i := range it.entries {
			out.Entries[i] = it.entries[i].public()
		}
	}
	return out
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
// every entry and one for every value. A registry holds many items for a
// long time and the collector marks every object of them in every cycle,
// so the fewer the better. es is left as it was.
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
	types := make([]name, 0, nt)
	fields := make([]field, 0, nf)
	out := make([]entry, len(es))
	for i := range es {
		t0, f0 := len(types), len(fields)
		types = append(types, es[i].types...)
		for _, f := range es[i].fields {
			n := len(f.val.s)
			fields = append(fields, field{name: f.name, val: Value{s: vals[:n]}})
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

// entryTmpl is a stored entry template: its type and its set fields,
// sorted by name.
type entryTmpl struct {
	typ    name
	fields []field
}

// template is a stored template: types sorted without duplicates.
type template struct {
	hasID   bool
	id      djinn.ID
	types   []name
	entries []entryTmpl
}

func (t *template) public() Template {
	var out Template
	if t.hasID {
		id := t.id
		out.ID = &id
	}
	out.Types = strs(t.types)
	if len(t.entries) > 0 {
		out.Entries = make([]EntryTemplate, len(t.entries))
		for i, et := range t.entries {
			out.Entries[i] = EntryTemplate{Type: et.typ.Value()}
			if len(et.fields) > 0 {
				out.Entries[i].Fields = make([]Field, len(et.fields))
				for j, f := range et.fields {
					v := f.val
					out.Entries[i].Fields[j] = Field{Name: f.name.Value(), Value: &v}
				}
			}
		}
	}
	return out
}

// clip shortens a long string for an error message.
func clip(s string) string {
	const n = 48
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// wrap puts where the bad value is in front of err's message, keeping its
// kind. Validation builds no message until something is wrong.
func wrap(err error, format string, args ...any) error {
	return &djinn.Error{Kind: djinn.KindOf(err), Message: fmt.Sprintf(format, args...) + " " + err.Error()}
}

// name checks and interns a name.
func (l *Limits) name(s string) (name, error) {
	switch {
	case s == "":
		return name{}, djinn.Errorf(djinn.InvalidArgument, "\"\": must not be empty")
	case len(s) > l.MaxNameLen:
		return name{}, djinn.Errorf(djinn.ResourceExhausted, "%q (%d bytes): over the limit MaxNameLen of %d", clip(s), len(s), l.MaxNameLen)
	case !utf8.ValidString(s):
		return name{}, djinn.Errorf(djinn.InvalidArgument, "%q: not valid UTF-8", clip(s))
	}
	return unique.Make(s), nil
}

// typeSet checks a list of service type names and returns it sorted,
// without duplicates.
func (l *Limits) typeSet(ss []string) ([]name, error) {
	if len(ss) > l.MaxTypes {
		return nil, overLimit("types count", len(ss), "MaxTypes", l.MaxTypes)
	}
	if len(ss) == 0 {
		return nil, nil
	}
	out := make([]name, 0, len(ss))
	for i, s := range ss {
		n, err := l.name(s)
		if err != nil {
			return nil, wrap(err, "types[%d]", i)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, cmpName)
	return slices.Clip(slices.Compact(out)), nil
}

// fields checks fields and returns them sorted by name with their size.
// In a template (tmpl) null fields are wildcards and are dropped; in an
// entry they are kept, null.
func (l *Limits) fields(fs []Field, tmpl bool) ([]field, int, error) {
	if len(fs) > l.MaxFields {
		return nil, 0, overLimit("field count", len(fs), "MaxFields", l.MaxFields)
	}
	if len(fs) == 0 {
		return nil, 0, nil
	}
	out := make([]field, 0, len(fs))
	size := 0
	for i, f := range fs {
		n, err := l.name(f.Name)
		if err != nil {
			return nil, 0, wrap(err, "field %d name", i)
		}
		size += len(f.Name)
		var v Value
		if f.Value != nil {
			v = *f.Value
			if !v.valid() {
				return nil, 0, djinn.Errorf(djinn.InvalidArgument, "field %q value %s: not a value (build values with NewString, NewInt64 and the like)", clip(f.Name), v)
			}
			if v.Kind() == KindString && !utf8.ValidString(v.payload()) {
				return nil, 0, djinn.Errorf(djinn.InvalidArgument, "field %q value %s: not valid UTF-8 (use a bytes value)", clip(f.Name), clip(v.String()))
			}
			size += v.size()
		}
		out = append(out, field{name: n, val: v})
	}
	slices.SortFunc(out, func(a, b field) int { return cmpName(a.name, b.name) })
	for i := 1; i < len(out); i++ {
		if out[i].name == out[i-1].name {
			return nil, 0, djinn.Errorf(djinn.InvalidArgument, "field %q: named twice", clip(out[i].name.Value()))
		}
	}
	if tmpl {
		out = slices.DeleteFunc(out, func(f field) bool { return f.val.s == "" })
		if len(out) == 0 {
			return nil, size, nil
		}
	}
	return slices.Clip(out), size, nil
}

// entry checks an entry and returns its stored form and size.
func (l *Limits) entry(e Entry) (entry, int, error) {
	t, err := l.name(e.Type)
	if err != nil {
		return entry{}, 0, wrap(err, "type")
	}
	if len(e.Supertypes) > l.MaxTypes {
		return entry{}, 0, wrap(overLimit("supertype count", len(e.Supertypes), "MaxTypes", l.MaxTypes), "type %q", clip(e.Type))
	}
	types := make([]name, 1, 1+len(e.Supertypes))
	types[0] = t
	size := len(e.Type)
	for i, s := range e.Supertypes {
		n, err := l.name(s)
		if err != nil {
			return entry{}, 0, wrap(err, "type %q supertype %d", clip(e.Type), i)
		}
		if slices.Contains(types, n) {
			return entry{}, 0, djinn.Errorf(djinn.InvalidArgument, "type %q supertype %q: already in its type chain %q", clip(e.Type), clip(s), clip(strings.Join(append([]string{e.Type}, e.Supertypes...), " < ")))
		}
		types = append(types, n)
		size += len(s)
	}
	fs, n, err := l.fields(e.Fields, false)
	if err != nil {
		return entry{}, 0, wrap(err, "type %q", clip(e.Type))
	}
	return entry{types: types, fields: fs}, size + n, nil
}

// entries checks a list of entries and returns their stored form without
// duplicates. what names the list in errors.
func (l *Limits) entries(what string, es []Entry) ([]entry, error) {
	if len(es) > l.MaxEntries {
		return nil, overLimit(what+" count", len(es), "MaxEntries", l.MaxEntries)
	}
	if len(es) == 0 {
		return nil, nil
	}
	out := make([]entry, 0, len(es))
	size := 0
	for i, e := range es {
		se, n, err := l.entry(e)
		if err != nil {
			return nil, wrap(err, "%s[%d]", what, i)
		}
		size += n
		if size > l.MaxAttributeBytes {
			return nil, overLimit(what+" attribute bytes", size, "MaxAttributeBytes", l.MaxAttributeBytes)
		}
		out = append(out, se)
	}
	return slices.Clip(dedupe(out)), nil
}

// item checks an item and returns its stored form.
func (l *Limits) item(it Item, self djinn.ID) (*item, error) {
	if err := checkServiceID(it.ID, self); err != nil {
		return nil, err
	}
	switch {
	case len(it.Ref) == 0:
		return nil, djinn.Errorf(djinn.InvalidArgument, "item %s service reference: missing", it.ID)
	case len(it.Ref) > l.MaxRefBytes:
		return nil, wrap(overLimit("service reference bytes", len(it.Ref), "MaxRefBytes", l.MaxRefBytes), "item %s", it.ID)
	}
	types, err := l.typeSet(it.Types)
	if err != nil {
		return nil, wrap(err, "item %s", it.ID)
	}
	es, err := l.entries("entries", it.Entries)
	if err != nil {
		return nil, wrap(err, "item %s", it.ID)
	}
	return &item{id: it.ID, ref: string(it.Ref), types: types, entries: es}, nil
}

// entryTemplate checks an entry template.
func (l *Limits) entryTemplate(et EntryTemplate) (entryTmpl, int, error) {
	t, err := l.name(et.Type)
	if err != nil {
		return entryTmpl{}, 0, wrap(err, "type")
	}
	fs, n, err := l.fields(et.Fields, true)
	if err != nil {
		return entryTmpl{}, 0, wrap(err, "type %q", clip(et.Type))
	}
	return entryTmpl{typ: t, fields: fs}, len(et.Type) + n, nil
}

// entryTemplates checks a list of entry templates, keeping order and
// duplicates. what names the list in errors.
func (l *Limits) entryTemplates(what string, ets []EntryTemplate) ([]entryTmpl, int, error) {
	if len(ets) > l.MaxEntries {
		return nil, 0, overLimit(what+" count", len(ets), "MaxEntries", l.MaxEntries)
	}
	if len(ets) == 0 {
		return nil, 0, nil
	}
	out := make([]entryTmpl, 0, len(ets))
	size := 0
	for i, et := range ets {
		st, n, err := l.entryTemplate(et)
		if err != nil {
			return nil, 0, wrap(err, "%s[%d]", what, i)
		}
		size += n
		if size > l.MaxAttributeBytes {
			return nil, 0, overLimit(what+" attribute bytes", size, "MaxAttributeBytes", l.MaxAttributeBytes)
		}
		out = append(out, st)
	}
	return out, size, nil
}

// template checks a template and returns its stored form.
func (l *Limits) template(t Template) (*template, error) {
	out := &template{}
	if t.ID != nil {
		if t.ID.IsZero() {
			return nil, djinn.Errorf(djinn.InvalidArgument, "template service id %s: zero (leave it nil to match any id)", t.ID)
		}
		out.hasID, out.id = true, *t.ID
	}
	var err error
	if out.types, err = l.typeSet(t.Types); err != nil {
		return nil, wrap(err, "template")
	}
	if out.entries, _, err = l.entryTemplates("entries", t.Entries); err != nil {
		return nil, wrap(err, "template")
	}
	return out, nil
}

// checkServiceID refuses the zero id and the registrar's own.
func checkServiceID(id, self djinn.ID) error {
	switch id {
	case djinn.ID{}:
		return djinn.Errorf(djinn.InvalidArgument, "service id %s: zero (the caller assigns ids)", id)
	case self:
		return djinn.Errorf(djinn.InvalidArgument, "service id %s: the lookup service's own id is reserved", id)
	}
	return nil
}
