package lookup

import "strings"

// itemSet is a set of items. Most keys of the entry indexes name a single
// item (a field value unique to one service), so one item is held without
// a map; larger sets are keyed by pointer, the smallest key.
type itemSet struct {
	one  *item
	many map[*item]struct{}
}

func (s *itemSet) len() int {
	if s.many != nil {
		return len(s.many)
	}
	if s.one != nil {
		return 1
	}
	return 0
}

func (s *itemSet) add(it *item) {
	switch {
	case s.many != nil:
		s.many[it] = struct{}{}
	case s.one == nil || s.one == it:
		s.one = it
	default:
		s.many = map[*item]struct{}{s.one: {}, it: {}}
		s.one = nil
	}
}

// remove takes it out of the set and reports whether the set is empty.
func (s *itemSet) remove(it *item) bool {
	if s.many != nil {
		delete(s.many, it)
		return len(s.many) == 0
	}
	if s.one == it {
		s.one = nil
	}
	return s.one == nil
}

func (s *itemSet) each(fn func(*item)) {
	if s.many != nil {
		for it := range s.many {
			fn(it)
		}
		return
	}
	if s.one != nil {
		fn(s.one)
	}
}

// itemIndex maps keys to the items that have them. The sets are held in
// the map itself: an index has a key for about every distinct field value,
// and a set apart from its key would be one more object per key for the
// collector to mark.
type itemIndex[K comparable] map[K]itemSet

func (x itemIndex[K]) add(k K, it *item) {
	s := x[k]
	s.add(it)
	x[k] = s
}

func (x itemIndex[K]) remove(k K, it *item) {
	s, ok := x[k]
	if !ok {
		return
	}
	if s.remove(it) {
		delete(x, k)
		return
	}
	x[k] = s
}

// fieldKey is a field name with a value: the key of the field index.
type fieldKey struct {
	name name
	val  Value
}

// indexEntries indexes it's entries by their types (each type and
// supertype) and by their fields (name and value, null values included).
func (r *Registry) indexEntries(it *item) {
	for i := range it.entries {
		e := &it.entries[i]
		for _, t := range e.types {
			r.byEntryType.add(t, it)
		}
		for _, f := range e.fields {
			k := fieldKey(f)
			if _, ok := r.byField[k]; !ok {
				// The index's own copy of the value: the key may outlive
				// this item, and should not keep its values' bytes.
				k.val = Value{s: strings.Clone(k.val.s)}
			}
			r.byField.add(k, it)
		}
	}
}

// unindexEntries undoes indexEntries; it must run before it's entries
// change.
func (r *Registry) unindexEntries(it *item) {
	for i := range it.entries {
		e := &it.entries[i]
		for _, t := range e.types {
			r.byEntryType.remove(t, it)
		}
		for _, f := range e.fields {
			r.byField.remove(fieldKey(f), it)
		}
	}
}

// candidates returns the smallest indexed set that holds every item t can
// match and true, or false when t needs a scan of every item; an empty set
// and true mean nothing matches (a key no item has). The set comes from
// the service types, the entry templates' types, or their fields: an item
// matches an entry template only through an entry of its type with each
// of its field values, so it is in each of those sets.
func (r *Registry) candidates(t *template) (best itemSet, indexed bool) {
	n := -1 // best's size; -1 while there is none
	consider := func(s itemSet, ok bool) bool {
		if !ok {
			best, n = itemSet{}, 0
			return false
		}
		if l := s.len(); n < 0 || l < n {
			best, n = s, l
		}
		return true
	}
	for _, ty := range t.types {
		if s, ok := r.byType[ty]; !consider(s, ok) {
			return best, true
		}
	}
	for i := range t.entries {
		et := &t.entries[i]
		if s, ok := r.byEntryType[et.typ]; !consider(s, ok) {
			return best, true
		}
		for _, f := range et.fields {
			if s, ok := r.byField[fieldKey(f)]; !consider(s, ok) {
				return best, true
			}
		}
	}
	return best, n >= 0
}
