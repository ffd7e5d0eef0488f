package lookup

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/service"
)

// each calls fn for every item m matches, the registry's own included, in
// no particular order. It looks an id up directly; otherwise it scans the
// smallest indexed set that holds every match (see candidates), or every
// item when the template names no type, entry or field.
func (r *Registry) each(m *service.Matcher, fn func(*item)) {
	if r.own != nil && m.Matches(&r.own.Record) {
		fn(r.own)
	}
	if id, ok := m.ID(); ok {
		if it, ok := r.items[id]; ok && m.Matches(&it.Record) {
			fn(it)
		}
		return
	}
	filter := func(it *item) {
		if m.Matches(&it.Record) {
			fn(it)
		}
	}
	if set, ok := r.candidates(m); ok {
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
func (r *Registry) Lookup(tmpl service.Template, max int) (total int, items []service.Item, err error) {
	total, found, err := r.lookup(tmpl, max)
	if len(found) > 0 {
		items = make([]service.Item, len(found))
		for i, it := range found {
			items[i] = it.Item()
		}
	}
	return total, items, err
}

func (r *Registry) lookup(tmpl service.Template, max int) (total int, found []*item, err error) {
	if max < 0 {
		return 0, nil, djinn.Errorf(djinn.InvalidArgument, "lookup max %d: must not be negative", max)
	}
	m, err := r.lim.Matcher(tmpl)
	if err != nil {
		return 0, nil, err
	}
	if max == 0 {
		r.each(m, func(*item) { total++ })
		return total, nil, nil
	}
	r.each(m, func(it *item) { found = append(found, it) })
	total = len(found)
	slices.SortFunc(found, byID)
	return total, found[:min(max, total)], nil
}

func byID(a, b *item) int {
	x, y := a.ID(), b.ID()
	return bytes.Compare(x[:], y[:])
}

// LookupOne returns how many items tmpl matches and one of them, chosen
// uniformly at random by intn (intn(n) returns a number in [0, n)), or
// nil when none matches: the one-item lookup of DESIGN.md 6, without
// collecting the matches.
func (r *Registry) LookupOne(tmpl service.Template, intn func(n int) int) (total int, one *service.Item, err error) {
	total, pick, err := r.lookupOne(tmpl, intn)
	if pick == nil {
		return total, nil, err
	}
	p := pick.Item()
	return total, &p, nil
}

func (r *Registry) lookupOne(tmpl service.Template, intn func(n int) int) (total int, pick *item, err error) {
	m, err := r.lim.Matcher(tmpl)
	if err != nil {
		return 0, nil, err
	}
	r.each(m, func(it *item) {
		total++
		if intn(total) == 0 { // keep each of n matches with chance 1/n
			pick = it
		}
	})
	return total, pick, nil
}

// MaxAnswer bounds a lookup's answer: the bytes of its total and its
// items as a LookupResponse (or a LookupAnswer) carries them. It is
// wire.MaxReply, what a gRPC client receives by default (4 MiB), less
// 64 KiB for what may wrap the answer (a session's reply, a LookupStream's
// response), so that every answer reaches a client that did not raise its
// receive limit.
const MaxAnswer = wire.MaxReply

// LookupEncoded is Lookup, or LookupOne when one is set (max is then not
// used), with the items in their wire form (service.Record.AppendWire).
// The items share one buffer. An answer over MaxAnswer is refused
// ResourceExhausted before any item is encoded, naming its size and how
// many of the first items fit (the items come in service id order, so a
// lookup for that many gets them).
func (r *Registry) LookupEncoded(tmpl service.Template, max int, one bool, intn func(n int) int) (total int, items [][]byte, err error) {
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
	wire, err := checkAnswer(total, found)
	if err != nil {
		return 0, nil, err
	}
	return total, encodeItemsIn(found, wire), nil
}

// checkAnswer refuses an answer of total and found over MaxAnswer. It
// returns the items' wire size (the sum of their WireSize), which
// encoding them takes.
func checkAnswer(total int, found []*item) (int, error) {
	size := protowire.SizeTag(answerTotal) + protowire.SizeVarint(uint64(total))
	wire, first := 0, 0
	fit := -1 // how many of the first items fit, once one does not
	for i, it := range found {
		n := it.WireSize()
		if i == 0 {
			first = n
		}
		wire += n
		size += protowire.SizeTag(answerItems) + protowire.SizeBytes(n)
		if size > MaxAnswer && fit < 0 {
			fit = i
		}
	}
	if fit < 0 {
		return wire, nil
	}
	// The first match alone passes the bound: fewer matches cannot help,
	// nor can a client's larger receive limit (no answer passes the
	// bound). Its registrant can shrink it; other templates skip it.
	next := fmt.Sprintf("the first match alone, service %s, takes %d bytes, so no lookup can return it, whatever the client's receive limit: its registrant can make it smaller (SetAttributes), and a template it does not match gets the others",
		found[0].ID(), first)
	if fit > 0 {
		next = fmt.Sprintf("ask for fewer matches: at most %d (the first %d, in service id order, fit)", fit, fit)
	}
	return 0, djinn.Errorf(djinn.ResourceExhausted, "lookup answer of %d bytes (%d items): an answer holds at most %d, what a client receives by default less room around it; %s",
		size, len(found), MaxAnswer, next)
}

// The field numbers of a LookupResponse's (and a LookupAnswer's) total
// and items.
const (
	answerTotal protowire.Number = 1
	answerItems protowire.Number = 2
)

// EntryTypes returns the distinct entry types, with their supertypes, of
// the entries of the items tmpl matches, sorted by type, then supertypes.
// Entries of one type name declared with different supertypes are reported
// once per declaration. (Jini's getEntryClasses also leaves out the
// classes of entries that match an entry template of exactly their class;
// this reports every type.)
func (r *Registry) EntryTypes(tmpl service.Template) ([]service.EntryType, error) {
	m, err := r.lim.Matcher(tmpl)
	if err != nil {
		return nil, err
	}
	seen := map[service.Name][][]service.Name{}
	var chains [][]service.Name
	r.each(m, func(it *item) {
		for i := range it.NumEntries() {
			c := it.EntryTypes(i)
			if !slices.ContainsFunc(seen[c[0]], func(o []service.Name) bool { return slices.Equal(o, c) }) {
				seen[c[0]] = append(seen[c[0]], c)
				chains = append(chains, c)
			}
		}
	})
	slices.SortFunc(chains, func(a, b []service.Name) int {
		return slices.CompareFunc(a, b, func(x, y service.Name) int { return strings.Compare(x.String(), y.String()) })
	})
	var out []service.EntryType
	for _, c := range chains {
		out = append(out, service.EntryType{Type: c[0].String(), Supertypes: names(c[1:])})
	}
	return out, nil
}

func names(ns []service.Name) []string {
	if len(ns) == 0 {
		return nil
	}
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.String()
	}
	return out
}

// FieldValues returns the distinct values of field among the entries that
// match tmpl.Entries[setIndex] in the items tmpl matches, sorted by
// service.Value.Compare (null, the zero Value, first). Entries that lack
// the field give nothing. Any field name may be asked for: the registry
// does not know a type's fields beyond those its entries carry.
func (r *Registry) FieldValues(tmpl service.Template, setIndex int, field string) ([]service.Value, error) {
	m, err := r.lim.Matcher(tmpl)
	if err != nil {
		return nil, err
	}
	if setIndex < 0 || setIndex >= m.NumEntries() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "set index %d: the template has %d entry templates", setIndex, m.NumEntries())
	}
	f, err := r.lim.Name(field)
	if err != nil {
		return nil, wrap(err, "field")
	}
	seen := map[service.Value]bool{}
	r.each(m, func(it *item) {
		it.FieldValues(m, setIndex, f, func(v service.Value) { seen[v] = true })
	})
	var out []service.Value
	for v := range seen {
		out = append(out, v)
	}
	slices.SortFunc(out, service.Value.Compare)
	return out, nil
}

// ServiceTypes returns the service type names starting with prefix of the
// items tmpl matches, each once, sorted, as Jini's getServiceTypes
// answers: for each item its most specific types that are neither one of
// the template's types nor a supertype of one, or where such a type does
// not start with prefix, its nearest supertypes that do
// (service.Record.ServiceTypes). An item that declares no hierarchy has
// every type most specific, so all its types but the template's are
// reported.
func (r *Registry) ServiceTypes(tmpl service.Template, prefix string) ([]string, error) {
	m, err := r.lim.Matcher(tmpl)
	if err != nil {
		return nil, err
	}
	if len(prefix) > r.lim.MaxNameLen {
		return nil, overLimit(fmt.Sprintf("service type prefix %q bytes", clip(prefix)), len(prefix), "MaxNameLen", r.lim.MaxNameLen)
	}
	seen := map[service.Name]bool{}
	r.each(m, func(it *item) {
		it.ServiceTypes(m.Types(), prefix, func(t service.Name) { seen[t] = true })
	})
	var out []string
	for ty := range seen {
		out = append(out, ty.String())
	}
	slices.Sort(out)
	return out, nil
}
