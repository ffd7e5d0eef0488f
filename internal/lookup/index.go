package lookup

import "github.com/djinn-go/djinn/service"

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

// add puts it in k's set. A set of several items changes in place: the
// map is written only for a new key and for a set's first growth, so the
// key it stores stays the one written then (see indexField).
func (x itemIndex[K]) add(k K, it *item) {
	s, ok := x[k]
	switch {
	case !ok:
		x[k] = itemSet{one: it}
	case s.many != nil:
		s.many[it] = struct{}{}
	case s.one != it:
		x[k] = itemSet{many: map[*item]struct{}{s.one: {}, it: {}}}
	}
}

// remove takes it out of k's set, and the key out of x when the set is
// left empty. Like add, it changes a set of several items in place.
func (x itemIndex[K]) remove(k K, it *item) {
	if s, ok := x[k]; ok && s.remove(it) {
		delete(x, k)
	}
}

// indexEntries indexes it's entries by their types (each type and
// supertype) and by their fields (name and value, null values included).
func (r *Registry) indexEntries(it *item) {
	for i := range it.NumEntries() {
		for _, t := range it.EntryTypes(i) {
			r.byEntryType.add(t, it)
		}
		for _, f := range it.EntryFields(i) {
			r.indexField(f, it)
		}
	}
}

// indexField adds it to the set of field key k, which holds it's value
// bytes. A key held by one item alone shares that item's bytes: most field
// values are some item's own (a name, a serial number), and a copy would
// be one more object per value for the collector to mark. The key goes
// when that item does. When a second item comes, the key is replaced by a
// copy of its own, since the first item may leave while the key stays;
// after that the map is not written with another item's key (add and
// remove change a set of several items in place).
func (r *Registry) indexField(k service.FieldKey, it *item) {
	s, ok := r.byField[k]
	if !ok || s.one == nil || s.one == it {
		r.byField.add(k, it)
		return
	}
	delete(r.byField, k) // so that the key stored next is the copy
	r.byField[k.Detached()] = itemSet{many: map[*item]struct{}{s.one: {}, it: {}}}
}

// unindexEntries undoes indexEntries; it must run before it's entries
// change.
func (r *Registry) unindexEntries(it *item) {
	for i := range it.NumEntries() {
		for _, t := range it.EntryTypes(i) {
			r.byEntryType.remove(t, it)
		}
		for _, f := range it.EntryFields(i) {
			r.byField.remove(f, it)
		}
	}
}

// candidates returns the smallest indexed set that holds every item m can
// match and true, or false when m needs a scan of every item; an empty set
// and true mean nothing matches (a key no item has). The set comes from
// the service types, the entry templates' types, or their fields: an item
// matches an entry template only through an entry of its type with each
// of its field values, so it is in each of those sets.
func (r *Registry) candidates(m *service.Matcher) (best itemSet, indexed bool) {
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
	for _, ty := range m.Types() {
		if s, ok := r.byType[ty]; !consider(s, ok) {
			return best, true
		}
	}
	for i := range m.NumEntries() {
		if s, ok := r.byEntryType[m.EntryType(i)]; !consider(s, ok) {
			return best, true
		}
		for _, f := range m.EntryFields(i) {
			if s, ok := r.byField[f]; !consider(s, ok) {
				return best, true
			}
		}
	}
	return best, n >= 0
}
