package service

import (
	"fmt"
	"slices"

	"github.com/djinn-go/djinn"
)

// The attribute calls of a registration (Jini's ServiceRegistration
// addAttributes, modifyAttributes and setAttributes), as every registrar
// applies them and a JoinManager computes them. Each returns the record
// as the call leaves it and whether that differs from r; on any error
// (bad arguments, a limit) it returns r unchanged.

// AddAttributes adds entries, dropping those equal to an entry r has or to
// an earlier one.
func (r *Record) AddAttributes(l Limits, entries []Entry) (Record, bool, error) {
	l, err := l.resolved()
	if err != nil {
		return *r, false, err
	}
	add, err := l.entries("added entries", entries)
	if err != nil {
		return *r, false, err
	}
	return r.setEntries(&l, dedupe(append(slices.Clip(r.entries), add...)))
}

// SetAttributes replaces the entries with entries, less duplicates.
func (r *Record) SetAttributes(l Limits, entries []Entry) (Record, bool, error) {
	l, err := l.resolved()
	if err != nil {
		return *r, false, err
	}
	es, err := l.entries("entries", entries)
	if err != nil {
		return *r, false, err
	}
	return r.setEntries(&l, es)
}

// CheckEntries checks entries an AddAttributes (what "added entries") or
// a SetAttributes ("entries") would take, on their own: the rules and
// limits that do not depend on the record they change (the record's
// totals are checked as they change it). Its errors are theirs.
func (l Limits) CheckEntries(what string, entries []Entry) error {
	l, err := l.resolved()
	if err != nil {
		return err
	}
	_, err = l.entries(what, entries)
	return err
}

// CheckModification checks the templates and changes a ModifyAttributes
// would take, on their own: one change per template, and the rules and
// limits that do not depend on the record (a change's type against the
// record's supertypes is checked as it changes it). Its errors are
// ModifyAttributes'.
func (l Limits) CheckModification(templates []EntryTemplate, changes []Entry) error {
	l, err := l.resolved()
	if err != nil {
		return err
	}
	if len(templates) != len(changes) {
		return djinn.Errorf(djinn.InvalidArgument, "modify attributes: %d templates and %d changes: want one change per template", len(templates), len(changes))
	}
	_, _, err = l.modification(templates, changes)
	return err
}

// ModifyAttributes changes the entries that match templates. templates and
// changes have the same length. Every entry r has is compared, as it was
// before the call, with each template i; if it matches:
//
//   - if changes[i] is the zero Entry (Jini's null), the entry is deleted;
//   - otherwise each field that changes[i] sets (non-null) is stored into
//     the entry, added if the entry lacks it; changes[i]'s null fields and
//     supertypes play no part. When several matching templates set the same
//     field, the highest index wins.
//
// Duplicate entries that result are dropped. changes[i].Type must be
// templates[i].Type or a supertype of it. A type's supertypes are known
// from the entries that carry it, so this is checked against every entry
// of r whose type chain holds templates[i].Type: the change's type must
// come after it in that chain. When r has no entry of the template's type
// the call changes nothing for that index and the type is not checked.
func (r *Record) ModifyAttributes(l Limits, templates []EntryTemplate, changes []Entry) (Record, bool, error) {
	l, err := l.resolved()
	if err != nil {
		return *r, false, err
	}
	if err := l.CheckModification(templates, changes); err != nil {
		return *r, false, err
	}
	tmpls, chs, err := l.modification(templates, changes)
	if err != nil {
		return *r, false, err
	}
	if err := r.checkChangeTypes(tmpls, chs); err != nil {
		return *r, false, err
	}
	out := make([]entry, 0, len(r.entries))
	var matched []int
next:
	for j := range r.entries {
		e := &r.entries[j]
		matched = matched[:0]
		for i := range tmpls {
			if tmpls[i].matches(e) {
				if chs[i] == nil {
					continue next
				}
				matched = append(matched, i)
			}
		}
		ne := *e
		for _, i := range matched {
			ne.fields = setFields(ne.fields, chs[i].fields)
		}
		if len(ne.fields) > l.MaxFields {
			return *r, false, overLimit(fmt.Sprintf("entry %d (type %q) field count", j, clip(ne.types[0].String())), len(ne.fields), "MaxFields", l.MaxFields)
		}
		out = append(out, ne)
	}
	return r.setEntries(&l, dedupe(out))
}

// modification checks ModifyAttributes' arguments: a nil change is a
// deletion.
func (l *Limits) modification(templates []EntryTemplate, changes []Entry) ([]entryTmpl, []*entry, error) {
	tmpls, size, err := l.entryTemplates("templates", templates)
	if err != nil {
		return nil, nil, err
	}
	chs := make([]*entry, len(changes))
	for i, c := range changes {
		if c.Type == "" && len(c.Supertypes) == 0 && len(c.Fields) == 0 {
			continue // deletion
		}
		e, n, err := l.entry(c)
		if err != nil {
			return nil, nil, wrap(err, "changes[%d]", i)
		}
		if size += n; size > l.MaxAttributeBytes {
			return nil, nil, overLimit("templates and changes attribute bytes", size, "MaxAttributeBytes", l.MaxAttributeBytes)
		}
		chs[i] = &e
	}
	return tmpls, chs, nil
}

// checkChangeTypes refuses a change whose type is neither its template's
// nor a supertype of it, by the chains of r's entries.
func (r *Record) checkChangeTypes(tmpls []entryTmpl, chs []*entry) error {
	for i, c := range chs {
		if c == nil || c.types[0] == tmpls[i].typ {
			continue
		}
		for j := range r.entries {
			chain := r.entries[j].types
			at := slices.Index(chain, tmpls[i].typ)
			if at >= 0 && !slices.Contains(chain[at+1:], c.types[0]) {
				return djinn.Errorf(djinn.InvalidArgument, "changes[%d] type %q: neither the template's type %q nor a supertype of it (entry %d, type %q, has supertypes %q)",
					i, clip(c.types[0].String()), clip(tmpls[i].typ.String()), j, clip(chain[0].String()), strs(chain[1:]))
			}
		}
	}
	return nil
}

// setFields returns fs with the set fields of ch stored into it, as a new
// slice if anything changes.
func setFields(fs, ch []FieldKey) []FieldKey {
	copied := false
	for _, c := range ch {
		if c.val.s == "" {
			continue
		}
		i, found := slices.BinarySearchFunc(fs, c.name, func(f FieldKey, n Name) int { return cmpName(f.name, n) })
		if found && fs[i].val == c.val {
			continue
		}
		if !copied {
			fs = slices.Clone(fs)
			copied = true
		}
		if found {
			fs[i].val = c.val
		} else {
			fs = slices.Insert(fs, i, c)
		}
	}
	return fs
}

// setEntries returns r with entries es, if they differ from its own and
// fit the limits.
func (r *Record) setEntries(l *Limits, es []entry) (Record, bool, error) {
	if len(es) > l.MaxEntries {
		return *r, false, overLimit(fmt.Sprintf("item %s entry count", r.id), len(es), "MaxEntries", l.MaxEntries)
	}
	if n := entriesSize(es); n > l.MaxAttributeBytes {
		return *r, false, overLimit(fmt.Sprintf("item %s attribute bytes", r.id), n, "MaxAttributeBytes", l.MaxAttributeBytes)
	}
	if entriesEqual(r.entries, es) {
		return *r, false, nil
	}
	return r.withEntries(es), true, nil
}
