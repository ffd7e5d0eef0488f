package lookup

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

// matches reports whether the template matches item it (DESIGN.md 6): the
// id if the template has one, every service type, and for each entry
// template some entry; several entry templates may be satisfied by the
// same entry, as in Jini.
func (t *template) matches(it *item) bool {
	if t.hasID && t.id != it.id {
		return false
	}
	for _, ty := range t.types {
		if !it.hasType(ty) {
			return false
		}
	}
	for i := range t.entries {
		if !t.entries[i].matchesAny(it.entries) {
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
