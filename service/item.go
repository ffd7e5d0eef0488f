package service

import (
	"maps"
	"slices"

	"github.com/djinn-go/djinn"
)

// Field is a named field of an entry or an entry template. A null Value is
// a field without a value in an entry and a wildcard in a template (which
// may as well leave the field out).
type Field struct {
	Name  string
	Value Value
}

// Entry is an attribute of a service item: a typed record (Jini's Entry).
// Type is its type name; Supertypes are the names of the types it
// inherits, nearest first, not including Type (entry types have single
// inheritance, as Java classes do, so this is a chain), so that a template
// for a supertype matches it. Field names are unique within an entry.
//
// Two entries are equal when their type, supertypes and fields (names and
// values, null included) are equal, whatever order the fields were given
// in.
type Entry struct {
	Type       string
	Supertypes []string
	Fields     []Field
}

// Get returns the value of the field named name, and whether e has it.
func (e Entry) Get(name string) (Value, bool) {
	for _, f := range e.Fields {
		if f.Name == name {
			return f.Value, true
		}
	}
	return Value{}, false
}

// EntryTemplate matches entries: an entry matches when its type is Type or
// lists Type among its supertypes, and it has a field equal to each field
// the template sets (null fields are wildcards; an entry that lacks a
// field does not match a template that sets it). Field names are unique
// within a template.
type EntryTemplate struct {
	Type   string
	Fields []Field
}

// Item is a service item: a registered service's id, its reference, its
// types and its attribute entries.
type Item struct {
	// ID is the service id; the zero ID asks a registrar to assign one.
	ID djinn.ID
	// Service is the service's reference: bytes a registrar stores and
	// returns untouched (djinn's services store their address).
	Service []byte
	// Types names the service's types. A template naming a type matches
	// the items that have it, here or among the supertypes Supertypes
	// declares.
	Types []string
	// Supertypes declares the type hierarchy: for a type of the item, the
	// types it directly extends or implements. Each of those is a type of
	// the item too, so an item may list only its most specific type in
	// Types and declare the rest here. A registrar needs the hierarchy to
	// answer ServiceTypes as Jini does (leaving out the supertypes of the
	// types asked for); an item without one, whose Types lists every type
	// flat, works everywhere else the same.
	Supertypes map[string][]string
	// Entries are the item's attributes.
	Entries []Entry
}

// Template selects items: an item matches when ID is nil or equal to its
// id, it has every type in Types, and each entry template matches at least
// one of its entries. Entry templates are independent: one entry may
// satisfy several of them, as in Jini. The zero template matches every
// item.
type Template struct {
	ID      *djinn.ID
	Types   []string
	Entries []EntryTemplate
}

// EntryType is an entry type in use, as browsing reports it: its name and
// its supertypes' names, nearest first.
type EntryType struct {
	Type       string
	Supertypes []string
}

// Clone returns a copy of it that shares nothing with it.
func (it Item) Clone() Item {
	it.Service = slices.Clone(it.Service)
	it.Types = slices.Clone(it.Types)
	if it.Supertypes != nil {
		sup := make(map[string][]string, len(it.Supertypes))
		for t, s := range it.Supertypes {
			sup[t] = slices.Clone(s)
		}
		it.Supertypes = sup
	}
	it.Entries = slices.Clone(it.Entries)
	for i := range it.Entries {
		it.Entries[i].Supertypes = slices.Clone(it.Entries[i].Supertypes)
		it.Entries[i].Fields = slices.Clone(it.Entries[i].Fields)
	}
	return it
}

// Equal reports whether it and o are the same in every part, an empty
// list or map equal to none. Items in canonical form (Record.Item) are
// equal when they describe the same service; others may differ in order
// alone.
func (it Item) Equal(o Item) bool {
	return it.ID == o.ID && string(it.Service) == string(o.Service) && slices.Equal(it.Types, o.Types) &&
		maps.EqualFunc(it.Supertypes, o.Supertypes, slices.Equal) && slices.EqualFunc(it.Entries, o.Entries, Entry.Equal)
}

// Equal reports whether e and o are the same field by field, in order.
func (e Entry) Equal(o Entry) bool {
	return e.Type == o.Type && slices.Equal(e.Supertypes, o.Supertypes) && slices.Equal(e.Fields, o.Fields)
}

// Clone returns a copy of t that shares nothing with it.
func (t Template) Clone() Template {
	if t.ID != nil {
		id := *t.ID
		t.ID = &id
	}
	t.Types = slices.Clone(t.Types)
	t.Entries = slices.Clone(t.Entries)
	for i := range t.Entries {
		t.Entries[i].Fields = slices.Clone(t.Entries[i].Fields)
	}
	return t
}
