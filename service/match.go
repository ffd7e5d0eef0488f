package service

import (
	"github.com/djinn-go/djinn"
)

// entryTmpl is an entry template as a Matcher holds it: its type and its
// set fields, sorted by name (wildcards dropped).
type entryTmpl struct {
	typ    Name
	fields []FieldKey
}

// Matcher is a Template checked and compiled (see Limits.Matcher): its
// service types sorted without duplicates, its entry templates' wildcard
// fields dropped and set ones sorted by name. It is immutable.
type Matcher struct {
	hasID   bool
	id      djinn.ID
	types   []Name
	entries []entryTmpl
}

// ID returns the service id the template names, if it names one.
func (m *Matcher) ID() (djinn.ID, bool) { return m.id, m.hasID }

// Types returns the service types the template names, sorted: the caller
// must not change them.
func (m *Matcher) Types() []Name { return m.types }

// NumEntries returns the number of entry templates.
func (m *Matcher) NumEntries() int { return len(m.entries) }

// EntryType returns entry template i's type.
func (m *Matcher) EntryType(i int) Name { return m.entries[i].typ }

// EntryFields returns the fields entry template i sets, sorted by name:
// the caller must not change them.
func (m *Matcher) EntryFields(i int) []FieldKey { return m.entries[i].fields }

// Template returns the template the matcher was compiled from, in its
// stored form: types sorted without duplicates, wildcard fields left out,
// set fields sorted by name. It shares nothing with m.
func (m *Matcher) Template() Template {
	var out Template
	if m.hasID {
		id := m.id
		out.ID = &id
	}
	out.Types = strs(m.types)
	if len(m.entries) > 0 {
		out.Entries = make([]EntryTemplate, len(m.entries))
		for i, et := range m.entries {
			out.Entries[i] = EntryTemplate{Type: et.typ.String()}
			if len(et.fields) > 0 {
				out.Entries[i].Fields = make([]Field, len(et.fields))
				for j, f := range et.fields {
					out.Entries[i].Fields[j] = Field{Name: f.name.String(), Value: f.val}
				}
			}
		}
	}
	return out
}

// Matches reports whether the template matches the item: the id if the
// template names one, every service type, and for each entry template
// some entry; several entry templates may be satisfied by the same entry.
func (m *Matcher) Matches(r *Record) bool {
	if m.hasID && m.id != r.id {
		return false
	}
	for _, t := range m.types {
		if !r.HasType(t) {
			return false
		}
	}
	for i := range m.entries {
		if !m.entries[i].matchesAny(r.entries) {
			return false
		}
	}
	return true
}

// matches reports whether the entry template matches entry e: e is of the
// template's type (its type or one of its supertypes), and has every field
// the template sets, with an equal value. A null field equals no set value.
func (et *entryTmpl) matches(e *entry) bool {
	if !e.is(et.typ) {
		return false
	}
	for _, f := range et.fields {
		v, ok := e.get(f.name)
		if !ok || v != f.val {
			return false
		}
	}
	return true
}

func (et *entryTmpl) matchesAny(es []entry) bool {
	for i := range es {
		if et.matches(&es[i]) {
			return true
		}
	}
	return false
}

// FieldValues calls add with the value (null included) of the field named
// field in each entry of the item that entry template set matches; entries
// without the field give nothing. set must be an index of the template's
// entry templates.
func (r *Record) FieldValues(m *Matcher, set int, field Name, add func(Value)) {
	et := &m.entries[set]
	for i := range r.entries {
		e := &r.entries[i]
		if et.matches(e) {
			if v, ok := e.get(field); ok {
				add(v)
			}
		}
	}
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

// Matcher checks a template and compiles it. A template naming the zero
// id, an empty or invalid name or a field twice is refused with
// djinn.InvalidArgument, one over the limits with djinn.ResourceExhausted,
// each naming the bad value.
func (l Limits) Matcher(t Template) (*Matcher, error) {
	l, err := l.resolved()
	if err != nil {
		return nil, err
	}
	out := &Matcher{}
	if t.ID != nil {
		if t.ID.IsZero() {
			return nil, djinn.Errorf(djinn.InvalidArgument, "template service id %s: zero (leave it nil to match any id)", t.ID)
		}
		out.hasID, out.id = true, *t.ID
	}
	if out.types, err = l.typeSet(t.Types); err != nil {
		return nil, wrap(err, "template")
	}
	if out.entries, _, err = l.entryTemplates("entries", t.Entries); err != nil {
		return nil, wrap(err, "template")
	}
	return out, nil
}

// Matches reports whether t matches it, by Jini's rules (see Template),
// with both checked against the default limits (the item may lack a
// reference); an item or template those refuse matches nothing. To match many items, compile the template once
// (Limits.Matcher) and check each item's Record.
func (t Template) Matches(it Item) bool {
	m, err := Limits{}.Matcher(t)
	if err != nil {
		return false
	}
	l := DefaultLimits()
	r, err := l.record(it)
	return err == nil && m.Matches(&r)
}
