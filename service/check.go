package service

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/djinn-go/djinn"
)

// clip shortens a long string for an error message.
func clip(s string) string {
	const n = 48
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// wrap puts where the bad value is in front of err's message, keeping its
// kind. Checks build no message until something is wrong.
func wrap(err error, format string, args ...any) error {
	return &djinn.Error{Kind: djinn.KindOf(err), Message: fmt.Sprintf(format, args...) + " " + err.Error()}
}

// Name checks a name — not empty, valid UTF-8, within MaxNameLen — and
// returns it interned.
func (l Limits) Name(s string) (Name, error) {
	l, err := l.resolved()
	if err != nil {
		return Name{}, err
	}
	return l.name(s)
}

func (l *Limits) name(s string) (Name, error) {
	switch {
	case s == "":
		return Name{}, djinn.Errorf(djinn.InvalidArgument, "\"\": must not be empty")
	case len(s) > l.MaxNameLen:
		return Name{}, djinn.Errorf(djinn.ResourceExhausted, "%q (%d bytes): over the limit MaxNameLen of %d", clip(s), len(s), l.MaxNameLen)
	case !utf8.ValidString(s):
		return Name{}, djinn.Errorf(djinn.InvalidArgument, "%q: not valid UTF-8", clip(s))
	}
	return makeName(s), nil
}

// typeSet checks a list of service type names and returns it sorted,
// without duplicates.
func (l *Limits) typeSet(ss []string) ([]Name, error) {
	if len(ss) > l.MaxTypes {
		return nil, overLimit("types count", len(ss), "MaxTypes", l.MaxTypes)
	}
	if len(ss) == 0 {
		return nil, nil
	}
	out := make([]Name, 0, len(ss))
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
func (l *Limits) fields(fs []Field, tmpl bool) ([]FieldKey, int, error) {
	if len(fs) > l.MaxFields {
		return nil, 0, overLimit("field count", len(fs), "MaxFields", l.MaxFields)
	}
	if len(fs) == 0 {
		return nil, 0, nil
	}
	out := make([]FieldKey, 0, len(fs))
	size := 0
	for i, f := range fs {
		n, err := l.name(f.Name)
		if err != nil {
			return nil, 0, wrap(err, "field %d name", i)
		}
		size += len(f.Name) + f.Value.size()
		if f.Value.Kind() == ValueString && !utf8.ValidString(f.Value.s[1:]) {
			return nil, 0, djinn.Errorf(djinn.InvalidArgument, "field %q value %s: not valid UTF-8 (use a bytes value)", clip(f.Name), clip(f.Value.String()))
		}
		out = append(out, FieldKey{name: n, val: f.Value})
	}
	slices.SortFunc(out, func(a, b FieldKey) int { return cmpName(a.name, b.name) })
	for i := 1; i < len(out); i++ {
		if out[i].name == out[i-1].name {
			return nil, 0, djinn.Errorf(djinn.InvalidArgument, "field %q: named twice", clip(out[i].name.String()))
		}
	}
	if tmpl {
		out = slices.DeleteFunc(out, func(f FieldKey) bool { return f.val.s == "" })
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
	types := make([]Name, 1, 1+len(e.Supertypes))
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

// Record checks an item and returns it in canonical form. The item must
// have a service reference; its id may be zero (a registrar assigns one).
// Every bad value gets an error naming it: djinn.InvalidArgument for a
// broken rule (an empty or invalid name, a field named twice, an entry
// type in its own chain, a type its own supertype), djinn.ResourceExhausted
// for a value over one of the limits.
func (l Limits) Record(it Item) (Record, error) {
	l, err := l.resolved()
	if err != nil {
		return Record{}, err
	}
	switch {
	case len(it.Service) == 0:
		return Record{}, djinn.Errorf(djinn.InvalidArgument, "item %s service reference: missing", it.ID)
	case len(it.Service) > l.MaxRefBytes:
		return Record{}, wrap(overLimit("service reference bytes", len(it.Service), "MaxRefBytes", l.MaxRefBytes), "item %s", it.ID)
	}
	return l.record(it)
}

// record checks an item but for its reference.
func (l *Limits) record(it Item) (Record, error) {
	types, err := l.serviceTypes(it.Types, it.Supertypes)
	if err != nil {
		return Record{}, wrap(err, "item %s", it.ID)
	}
	es, err := l.entries("entries", it.Entries)
	if err != nil {
		return Record{}, wrap(err, "item %s", it.ID)
	}
	return Record{id: it.ID, ref: string(it.Service), types: types, entries: packEntries(es)}, nil
}

// Canonical returns it in canonical form (see Record), or the error
// Record gives.
func (l Limits) Canonical(it Item) (Item, error) {
	r, err := l.Record(it)
	if err != nil {
		return Item{}, err
	}
	return r.Item(), nil
}
