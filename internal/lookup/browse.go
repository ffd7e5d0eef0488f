package lookup

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/djinn-go/djinn"
)

// each calls fn for every item tmpl matches, the registry's own included,
// in no particular order. It
// looks an id up directly; otherwise it scans the smallest indexed set
// that holds every match (see candidates), or every item when the
// template names no type, entry or field.
func (r *Registry) each(t *template, fn func(*item)) {
	if r.own != nil && t.matches(r.own) {
		fn(r.own)
	}
	if t.hasID {
		if it, ok := r.items[t.id]; ok && t.matches(it) {
			fn(it)
		}
		return
	}
	filter := func(it *item) {
		if t.matches(it) {
			fn(it)
		}
	}
	if set, ok := r.candidates(t); ok {
		set.each(filter)
		return
	}
	for _, it := range r.items {
		filter(it)
	}
}

// Lookup returns how many items tmpl matches and the first max of them in
// service id order (bytewise). For the one-item lookup of DESIGN.md 6 the
// caller asks for them all and picks one at random, outside the state
// machine. A negative max is refused; 0 only counts.
func (r *Registry) Lookup(tmpl Template, max int) (total int, items []Item, err error) {
	total, found, err := r.lookup(tmpl, max)
	if len(found) > 0 {
		items = make([]Item, len(found))
		for i, it := range found {
			items[i] = it.public()
		}
	}
	return total, items, err
}

func (r *Registry) lookup(tmpl Template, max int) (total int, found []*item, err error) {
	if max < 0 {
		return 0, nil, djinn.Errorf(djinn.InvalidArgument, "lookup max %d: must not be negative", max)
	}
	t, err := r.lim.template(tmpl)
	if err != nil {
		return 0, nil, err
	}
	if max == 0 {
		r.each(t, func(*item) { total++ })
		return total, nil, nil
	}
	r.each(t, func(it *item) { found = append(found, it) })
	total = len(found)
	slices.SortFunc(found, func(a, b *item) int { return bytes.Compare(a.id[:], b.id[:]) })
	return total, found[:min(max, total)], nil
}

// LookupOne returns how many items tmpl matches and one of them, chosen
// uniformly at random by intn (intn(n) returns a number in [0, n)), or
// nil when none matches: the one-item lookup of DESIGN.md 6, without
// collecting the matches.
func (r *Registry) LookupOne(tmpl Template, intn func(n int) int) (total int, one *Item, err error) {
	total, pick, err := r.lookupOne(tmpl, intn)
	if pick == nil {
		return total, nil, err
	}
	p := pick.public()
	return total, &p, nil
}

func (r *Registry) lookupOne(tmpl Template, intn func(n int) int) (total int, pick *item, err error) {
	t, err := r.lim.template(tmpl)
	if err != nil {
		return 0, nil, err
	}
	r.each(t, func(it *item) {
		total++
		if intn(total) == 0 { // keep each of n matches with chance 1/n
			pick = it
		}
	})
	return total, pick, nil
}

// LookupEncoded is Lookup, or LookupOne when one is set (max is then not
// used), with the items in their wire form: each is the protobuf encoding
// of the djinnpb.ServiceItem that ItemToProto gives for it. The items
// share one buffer.
func (r *Registry) LookupEncoded(tmpl Template, max int, one bool, intn func(n int) int) (total int, items [][]byte, err error) {
	var found []*item
	if one {
		var pick *item
		if total, pick, err = r.lookupOne(tmpl, intn); pick != nil {
			found = []*item{pick}
		}
	} else {
		total, found, err = r.lookup(tmpl, max)
	}
	if len(found) == 0 {
		return total, nil, err
	}
	return total, encodeItems(found), nil
}

// EntryType is an entry type as browsing reports it: its name and its
// supertypes, nearest first.
type EntryType struct {
	Type       string
	Supertypes []string
}

// EntryTypes returns the distinct entry types, with their supertypes, of
// the entries of the items tmpl matches, sorted by type, then supertypes.
// Entries of one type name declared with different supertypes are reported
// once per declaration. (Jini's getEntryClasses also leaves out the
// classes of entries that match an entry template of exactly their class;
// this reports every type.)
func (r *Registry) EntryTypes(tmpl Template) ([]EntryType, error) {
	t, err := r.lim.template(tmpl)
	if err != nil {
		return nil, err
	}
	seen := map[name][][]name{}
	var chains [][]name
	r.each(t, func(it *item) {
		for i := range it.entries {
			c := it.entries[i].types
			if !slices.ContainsFunc(seen[c[0]], func(o []name) bool { return slices.Equal(o, c) }) {
				seen[c[0]] = append(seen[c[0]], c)
				chains = append(chains, c)
			}
		}
	})
	slices.SortFunc(chains, func(a, b []name) int { return slices.CompareFunc(a, b, cmpName) })
	var out []EntryType
	for _, c := range chains {
		out = append(out, EntryType{Type: c[0].Value(), Supertypes: strs(c[1:])})
	}
	return out, nil
}

// FieldValues returns the distinct values of field among the entries that
// match tmpl.Entries[setIndex] in the items tmpl matches, sorted: null (a
// nil) first, then by Value.Compare. Entries that lack the field give
// nothing. Any field name may be asked for: the registry does not know a
// type's fields beyond those its entries carry.
func (r *Registry) FieldValues(tmpl Template, setIndex int, field string) ([]*Value, error) {
	t, err := r.lim.template(tmpl)
	if err != nil {
		return nil, err
	}
	if setIndex < 0 || setIndex >= len(t.entries) {
		return nil, djinn.Errorf(djinn.InvalidArgument, "set index %d: the template has %d entry templates", setIndex, len(t.entries))
	}
	f, err := r.lim.name(field)
	if err != nil {
		return nil, wrap(err, "field")
	}
	et := &t.entries[setIndex]
	seen := map[Value]bool{}
	r.each(t, func(it *item) {
		for i := range it.entries {
			e := &it.entries[i]
			if et.matches(e) {
				if v, ok := e.get(f); ok {
					seen[v] = true
				}
			}
		}
	})
	var vals []Value
	for v := range seen {
		vals = append(vals, v)
	}
	slices.SortFunc(vals, Value.Compare)
	var out []*Value
	for i := range vals {
		if vals[i].s == "" {
			out = append(out, nil)
		} else {
			out = append(out, &vals[i])
		}
	}
	return out, nil
}

// ServiceTypes returns the distinct service type names starting with
// prefix of the items tmpl matches, sorted. The registry holds each item's
// types as a flat list, so unlike Jini's getServiceTypes it cannot leave
// out the types a template type inherits from: it reports every name,
// those named in the template included.
func (r *Registry) ServiceTypes(tmpl Template, prefix string) ([]string, error) {
	t, err := r.lim.template(tmpl)
	if err != nil {
		return nil, err
	}
	if len(prefix) > r.lim.MaxNameLen {
		return nil, overLimit(fmt.Sprintf("service type prefix %q bytes", clip(prefix)), len(prefix), "MaxNameLen", r.lim.MaxNameLen)
	}
	seen := map[name]bool{}
	r.each(t, func(it *item) {
		for _, ty := range it.types {
			if strings.HasPrefix(ty.Value(), prefix) {
				seen[ty] = true
			}
		}
	})
	var out []string
	for ty := range seen {
		out = append(out, ty.Value())
	}
	slices.Sort(out)
	return out, nil
}
