package lookup

import (
	"fmt"
	"slices"

	"github.com/djinn-go/djinn"
)

// Registry is the lookup service's state: registered items, each with its
// lease id, and watches. It is deterministic and not safe for concurrent
// use; see the package doc.
type Registry struct {
	self djinn.ID
	lim  Limits

	items map[djinn.ID]*item
	// byType indexes items by each of their service types, byEntryType
	// by the types (and supertypes) of their entries, byField by their
	// entries' field values: lookups scan the smallest candidate set.
	byType      itemIndex[name]
	byEntryType itemIndex[name]
	byField     itemIndex[fieldKey]

	watches watchIndex

	// own is the lookup service's own item (DESIGN.md 6: the registrar
	// registers itself), set on each node by SetOwn: it names this node's
	// endpoint, so it is not replicated, has no lease, and never changes
	// by registration calls.
	own *item
}

// Registration is a registered item with the id of the lease that keeps it.
type Registration struct {
	Item  Item
	Lease djinn.ID
}

// New returns an empty registry for the lookup service whose own service id
// is self (refused as an item's id), holding registrations to limits (zero
// fields take DefaultLimits).
func New(self djinn.ID, limits Limits) (*Registry, error) {
	if self.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup service id %s: zero", self)
	}
	lim, err := limits.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Registry{self: self, lim: lim}
	r.reset()
	return r, nil
}

func (r *Registry) reset() {
	r.items = map[djinn.ID]*item{}
	r.byType = itemIndex[name]{}
	r.byEntryType = itemIndex[name]{}
	r.byField = itemIndex[fieldKey]{}
	r.watches = newWatchIndex()
}

// SetOwn sets the lookup service's own item, whose service id must be the
// registry's own: lookups and browsing see it as one more item; Register,
// Get, the attribute calls and events never do. An item without an id
// gets the registry's.
func (r *Registry) SetOwn(it Item) error {
	if it.ID.IsZero() {
		it.ID = r.self
	}
	if it.ID != r.self {
		return djinn.Errorf(djinn.InvalidArgument, "own item service id %s: the lookup service's is %s", it.ID, r.self)
	}
	// item refuses the reserved id: check the rest under a stand-in.
	standIn := djinn.ID{1}
	if standIn == r.self {
		standIn = djinn.ID{2}
	}
	st, err := r.lim.item(Item{ID: standIn, Ref: it.Ref, Types: it.Types, Entries: it.Entries}, r.self)
	if err != nil {
		return err
	}
	st.id = r.self
	r.own = st
	return nil
}

// Own returns the lookup service's own item, if set.
func (r *Registry) Own() (Item, bool) {
	if r.own == nil {
		return Item{}, false
	}
	return r.own.public(), true
}

// Limits returns the registry's limits, defaults filled in.
func (r *Registry) Limits() Limits { return r.lim }

// Len returns the number of registered items and of watches.
func (r *Registry) Len() (items, watches int) { return len(r.items), len(r.watches.all) }

func notRegistered(id djinn.ID) error {
	return djinn.Errorf(djinn.NoSuchObject, "service %s: not registered (its lease ended or was cancelled)", id)
}

// find returns the registered item with id.
func (r *Registry) find(id djinn.ID) (*item, error) {
	if err := checkServiceID(id, r.self); err != nil {
		return nil, err
	}
	it, ok := r.items[id]
	if !ok {
		return nil, notRegistered(id)
	}
	return it, nil
}

// Get returns the item registered with id and its lease id.
func (r *Registry) Get(id djinn.ID) (Registration, error) {
	it, err := r.find(id)
	if err != nil {
		return Registration{}, err
	}
	return Registration{Item: it.public(), Lease: it.lease}, nil
}

// Register registers item under lease, replacing the item registered with
// the same id if there is one (the registration keeps its id and takes the
// new lease). The caller assigns ids: a zero id is refused, and so is the
// lookup service's own. The stored item drops duplicate types and entries.
//
// A replacement is one change from the old item to the new, so a watch
// hears at most one event of it: MatchMatch when it matched both, even
// when the new item is identical to the old (Reggie also tells of
// identical re-registrations, as a MatchNoMatch then a NoMatchMatch; one
// MatchMatch says the same without a moment in which the service seems
// gone). It returns the events, in watch id order.
func (r *Registry) Register(it Item, lease djinn.ID) ([]Event, error) {
	st, err := r.lim.item(it, r.self)
	if err != nil {
		return nil, err
	}
	if lease.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "item %s lease id %s: zero", st.id, lease)
	}
	st.lease = lease
	old := r.items[st.id]
	if old != nil {
		r.unindex(old)
	}
	r.put(st)
	return r.notify(old, st), nil
}

// put stores it and indexes it.
func (r *Registry) put(it *item) {
	it.entries = packEntries(it.entries)
	r.items[it.id] = it
	for _, t := range it.types {
		r.byType.add(t, it)
	}
	r.indexEntries(it)
}

// unindex takes it out of the indexes.
func (r *Registry) unindex(it *item) {
	for _, t := range it.types {
		r.byType.remove(t, it)
	}
	r.unindexEntries(it)
}

// Remove removes the item registered with id: its lease ended or was
// cancelled. It returns the MatchNoMatch events this causes, in watch id
// order.
func (r *Registry) Remove(id djinn.ID) ([]Event, error) {
	it, err := r.find(id)
	if err != nil {
		return nil, err
	}
	delete(r.items, id)
	r.unindex(it)
	return r.notify(it, nil), nil
}

// AddAttributes adds entries to the item registered with id, dropping those
// equal to an entry it has or to an earlier one (Jini's addAttributes).
// On any error nothing changes. It returns the events the change causes,
// none when nothing was added.
func (r *Registry) AddAttributes(id djinn.ID, entries []Entry) ([]Event, error) {
	it, err := r.find(id)
	if err != nil {
		return nil, err
	}
	add, err := r.lim.entries("added entries", entries)
	if err != nil {
		return nil, err
	}
	out := dedupe(append(slices.Clip(it.entries), add...))
	return r.setEntries(it, out)
}

// SetAttributes replaces the entries of the item registered with id, less
// duplicates (Jini's setAttributes). On any error nothing changes. It
// returns the events the change causes, none when the entries are the same.
func (r *Registry) SetAttributes(id djinn.ID, entries []Entry) ([]Event, error) {
	it, err := r.find(id)
	if err != nil {
		return nil, err
	}
	es, err := r.lim.entries("entries", entries)
	if err != nil {
		return nil, err
	}
	return r.setEntries(it, es)
}

// ModifyAttributes changes the entries of the item registered with id that
// match templates (Jini's modifyAttributes). templates and changes have the
// same length. Every entry the item has is compared, as it was before the
// call, with each template i; if it matches:
//
//   - if changes[i] is the zero Entry (Jini's null), the entry is deleted;
//   - otherwise each field that changes[i] sets (non-null) is stored into
//     the entry, added if the entry lacks it; changes[i]'s null fields and
//     supertypes play no part. When several matching templates set the same
//     field, the highest index wins.
//
// Duplicate entries that result are dropped. changes[i].Type must be
// templates[i].Type or a supertype of it. The registry knows a type's
// supertypes from the entries that carry it, so this is checked against
// every entry of the item whose type chain holds templates[i].Type: the
// change's type must come after it in that chain. When the item has no
// entry of the template's type the call changes nothing for that index and
// the type is not checked. On any error (bad arguments, a type mismatch, a
// limit) nothing changes. It returns the events the change causes, none
// when nothing changed.
func (r *Registry) ModifyAttributes(id djinn.ID, templates []EntryTemplate, changes []Entry) ([]Event, error) {
	it, err := r.find(id)
	if err != nil {
		return nil, err
	}
	if len(templates) != len(changes) {
		return nil, djinn.Errorf(djinn.InvalidArgument, "modify attributes: %d templates and %d changes: want one change per template", len(templates), len(changes))
	}
	tmpls, size, err := r.lim.entryTemplates("templates", templates)
	if err != nil {
		return nil, err
	}
	chs := make([]*entry, len(changes))
	for i, c := range changes {
		if c.Type == "" && len(c.Supertypes) == 0 && len(c.Fields) == 0 {
			continue // deletion
		}
		e, n, err := r.lim.entry(c)
		if err != nil {
			return nil, wrap(err, "changes[%d]", i)
		}
		if size += n; size > r.lim.MaxAttributeBytes {
			return nil, overLimit("templates and changes attribute bytes", size, "MaxAttributeBytes", r.lim.MaxAttributeBytes)
		}
		chs[i] = &e
	}
	for i, c := range chs {
		if c == nil || c.types[0] == tmpls[i].typ {
			continue
		}
		for j := range it.entries {
			chain := it.entries[j].types
			at := slices.Index(chain, tmpls[i].typ)
			if at >= 0 && !slices.Contains(chain[at+1:], c.types[0]) {
				return nil, djinn.Errorf(djinn.InvalidArgument, "changes[%d] type %q: neither the template's type %q nor a supertype of it (entry %d, type %q, has supertypes %q)",
					i, clip(c.types[0].Value()), clip(tmpls[i].typ.Value()), j, clip(chain[0].Value()), strs(chain[1:]))
			}
		}
	}
	out := make([]entry, 0, len(it.entries))
	var matched []int
next:
	for j := range it.entries {
		e := &it.entries[j]
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
		if len(ne.fields) > r.lim.MaxFields {
			return nil, overLimit(fmt.Sprintf("entry %d (type %q) field count", j, clip(ne.types[0].Value())), len(ne.fields), "MaxFields", r.lim.MaxFields)
		}
		out = append(out, ne)
	}
	return r.setEntries(it, dedupe(out))
}

// setFields returns fs with the set fields of ch stored into it, as a new
// slice if anything changes.
func setFields(fs, ch []field) []field {
	copied := false
	for _, c := range ch {
		if c.val.s == "" {
			continue
		}
		i, found := slices.BinarySearchFunc(fs, c.name, func(f field, n name) int { return cmpName(f.name, n) })
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

// setEntries gives it entries es, if they differ from its own and fit the
// limits, and returns the events.
func (r *Registry) setEntries(it *item, es []entry) ([]Event, error) {
	if len(es) > r.lim.MaxEntries {
		return nil, overLimit(fmt.Sprintf("item %s entry count", it.id), len(es), "MaxEntries", r.lim.MaxEntries)
	}
	if n := entriesSize(es); n > r.lim.MaxAttributeBytes {
		return nil, overLimit(fmt.Sprintf("item %s attribute bytes", it.id), n, "MaxAttributeBytes", r.lim.MaxAttributeBytes)
	}
	if entriesEqual(it.entries, es) {
		return nil, nil
	}
	if len(es) == 0 {
		es = nil
	}
	pre := *it
	r.unindexEntries(it)
	it.entries = packEntries(es)
	r.indexEntries(it)
	return r.notify(&pre, it), nil
}
