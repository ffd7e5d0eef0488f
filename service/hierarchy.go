package service

import (
	"slices"
	"strings"

	"github.com/djinn-go/djinn"
)

// serviceTypes checks an item's service types and hierarchy and returns
// them as a Record holds them: the types, with those the hierarchy adds,
// sorted without duplicates; after them, within the slice's capacity, the
// hierarchy's (type, direct supertype) pairs, sorted.
func (l *Limits) serviceTypes(types []string, supertypes map[string][]string) ([]Name, error) {
	ts, err := l.typeSet(types)
	if err != nil || len(supertypes) == 0 {
		return ts, err
	}
	links, err := l.links(supertypes)
	if err != nil || len(links) == 0 {
		return ts, err
	}
	all := closure(ts, links)
	if len(all) > l.MaxTypes {
		return nil, overLimit("types count with their supertypes", len(all), "MaxTypes", l.MaxTypes)
	}
	for i := 0; i < len(links); i += 2 {
		if _, ok := slices.BinarySearchFunc(all, links[i], cmpName); !ok {
			return nil, djinn.Errorf(djinn.InvalidArgument, "supertypes of %q: not a type of the item (list it in Types, or among the supertypes of one of them)", clip(links[i].String()))
		}
	}
	if err := acyclic(all, links); err != nil {
		return nil, err
	}
	out := make([]Name, len(all)+len(links))
	copy(out, all)
	copy(out[len(all):], links)
	return out[:len(all)], nil
}

// links checks a hierarchy and returns its (type, direct supertype) pairs,
// flat, sorted, without duplicates.
func (l *Limits) links(supertypes map[string][]string) ([]Name, error) {
	subs := make([]string, 0, len(supertypes))
	n := 0
	for t, sup := range supertypes {
		subs = append(subs, t)
		n += len(sup)
	}
	if n > l.MaxTypes {
		return nil, overLimit("supertype links count", n, "MaxTypes", l.MaxTypes)
	}
	slices.Sort(subs) // so that the first bad value named is always the same
	type link struct{ sub, sup Name }
	var ls []link
	for _, t := range subs {
		sub, err := l.name(t)
		if err != nil {
			return nil, wrap(err, "supertypes type")
		}
		for i, s := range supertypes[t] {
			sup, err := l.name(s)
			if err != nil {
				return nil, wrap(err, "supertypes of %q [%d]", clip(t), i)
			}
			if sup == sub {
				return nil, djinn.Errorf(djinn.InvalidArgument, "supertypes of %q: names the type itself", clip(t))
			}
			ls = append(ls, link{sub, sup})
		}
	}
	slices.SortFunc(ls, func(a, b link) int {
		return cmp2(cmpName(a.sub, b.sub), cmpName(a.sup, b.sup))
	})
	ls = slices.Compact(ls)
	out := make([]Name, 0, 2*len(ls))
	for _, k := range ls {
		out = append(out, k.sub, k.sup)
	}
	return out, nil
}

func cmp2(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// closure returns ts with every type the links make a supertype of one of
// them, sorted without duplicates.
func closure(ts, links []Name) []Name {
	all := slices.Clone(ts)
	for i := 0; i < len(all); i++ {
		for _, s := range supersOf(links, all[i]) {
			if !slices.Contains(all, s) {
				all = append(all, s)
			}
		}
	}
	slices.SortFunc(all, cmpName)
	return all
}

// supersOf returns t's direct supertypes: the links are sorted by type.
func supersOf(links []Name, t Name) []Name {
	var out []Name
	for i := 0; i < len(links); i += 2 {
		if links[i] == t {
			out = append(out, links[i+1])
		}
	}
	return out
}

// acyclic refuses a hierarchy in which a type is its own supertype.
func acyclic(all, links []Name) error {
	const (
		unseen = iota
		open
		done
	)
	state := make(map[Name]int, len(all))
	var path []Name
	var visit func(t Name) error
	visit = func(t Name) error {
		switch state[t] {
		case open:
			at := slices.Index(path, t)
			return djinn.Errorf(djinn.InvalidArgument, "supertypes: %q is its own supertype (%s)", clip(t.String()), clip(strings.Join(strs(append(path[at:], t)), " < ")))
		case done:
			return nil
		}
		state[t] = open
		path = append(path, t)
		for _, s := range supersOf(links, t) {
			if err := visit(s); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		state[t] = done
		return nil
	}
	for _, t := range all {
		if err := visit(t); err != nil {
			return err
		}
	}
	return nil
}

// upward returns t and every supertype of it, by the links, added to
// seen.
func upward(links []Name, t Name, seen map[Name]bool) {
	if seen[t] {
		return
	}
	seen[t] = true
	for _, s := range supersOf(links, t) {
		upward(links, s, seen)
	}
}

// ServiceTypes calls add with the item's service types that Jini's
// getServiceTypes reports for it, for a template whose service types are
// tmpl, and a prefix: starting from its most specific types (those no
// other type of the item has as a supertype), a type that is neither one
// of tmpl's nor a supertype of one of them is reported if its name starts
// with prefix; if not, its direct supertypes are considered in its stead.
// A type equal to or a supertype of one of tmpl's is left out with its
// supertypes (they are supertypes of tmpl's type too). So an item whose
// Laser type extends Printer reports Laser alone, for a template naming
// Printer and for one naming nothing; with the prefix "Pri" and a
// template naming nothing, Printer. An item without a hierarchy has every
// type most specific: all its types but tmpl's are reported, those
// starting with prefix. add hears each type once; the work is linear in
// the item's types and links, however the hierarchy is shaped.
func (r *Record) ServiceTypes(tmpl []Name, prefix string, add func(Name)) {
	links := r.links()
	// Each type is looked at once, however many paths lead to it: the
	// template's types and their supertypes are marked seen first.
	seen := make(map[Name]bool, len(r.types))
	for _, b := range tmpl {
		upward(links, b, seen)
	}
	var walk func(t Name)
	walk = func(t Name) {
		if seen[t] {
			return
		}
		seen[t] = true
		if strings.HasPrefix(t.String(), prefix) {
			add(t)
			return
		}
		for _, s := range supersOf(links, t) {
			walk(s)
		}
	}
	for _, t := range r.types {
		if !r.isSomeSupertype(t) {
			walk(t)
		}
	}
}

// isSomeSupertype reports whether t is a direct supertype of some type.
func (r *Record) isSomeSupertype(t Name) bool {
	links := r.links()
	for i := 1; i < len(links); i += 2 {
		if links[i] == t {
			return true
		}
	}
	return false
}
