package lookup

import (
	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/service"
)

// Registry is the lookup service's state: registered items, each with its
// lease id, and watches. It is deterministic and not safe for concurrent
// use; see the package doc.
type Registry struct {
	self djinn.ID
	lim  service.Limits

	items map[djinn.ID]*item
	// byType indexes items by each of their service types, byEntryType
	// by the types (and supertypes) of their entries, byField by their
	// entries' field values: lookups scan the smallest candidate set.
	byType      itemIndex[service.Name]
	byEntryType itemIndex[service.Name]
	byField     itemIndex[service.FieldKey]

	watches watchIndex

	// own is the lookup service's own item (DESIGN.md 6: the registrar
	// registers itself), set on each node by SetOwn: it names this node's
	// endpoint, so it is not replicated, has no lease, and never changes
	// by registration calls.
	own *item
}

// Registration is a registered item with the id of the lease that keeps it.
type Registration struct {
	Item  service.Item
	Lease djinn.ID
}

// New returns an empty registry for the lookup service whose own service id
// is self (refused as an item's id), holding registrations to limits (zero
// fields take DefaultLimits).
func New(self djinn.ID, limits service.Limits) (*Registry, error) {
	if self.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup service id %s: zero", self)
	}
	lim, err := limits.WithDefaults()
	if err != nil {
		return nil, err
	}
	r := &Registry{self: self, lim: lim}
	r.reset()
	return r, nil
}

func (r *Registry) reset() {
	r.items = map[djinn.ID]*item{}
	r.byType = itemIndex[service.Name]{}
	r.byEntryType = itemIndex[service.Name]{}
	r.byField = itemIndex[service.FieldKey]{}
	r.watches = newWatchIndex()
}

// SetOwn sets the lookup service's own item, whose service id must be the
// registry's own: lookups and browsing see it as one more item; Register,
// Get, the attribute calls and events never do. An item without an id
// gets the registry's.
func (r *Registry) SetOwn(it service.Item) error {
	if it.ID.IsZero() {
		it.ID = r.self
	}
	if it.ID != r.self {
		return djinn.Errorf(djinn.InvalidArgument, "own item service id %s: the lookup service's is %s", it.ID, r.self)
	}
	rec, err := r.lim.Record(it)
	if err != nil {
		return err
	}
	r.own = &item{Record: rec}
	return nil
}

// Own returns the lookup service's own item, if set.
func (r *Registry) Own() (service.Item, bool) {
	if r.own == nil {
		return service.Item{}, false
	}
	return r.own.Item(), true
}

// Limits returns the registry's limits, defaults filled in.
func (r *Registry) Limits() service.Limits { return r.lim }

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
	return Registration{Item: it.Item(), Lease: it.lease}, nil
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
func (r *Registry) Register(it service.Item, lease djinn.ID) ([]Event, error) {
	st, err := checkItem(r.lim, it, r.self)
	if err != nil {
		return nil, err
	}
	if lease.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "item %s lease id %s: zero", st.ID(), lease)
	}
	st.lease = lease
	old := r.items[st.ID()]
	if old != nil {
		r.unindex(old)
	}
	r.put(st)
	return r.notify(old, st), nil
}

// put stores it and indexes it.
func (r *Registry) put(it *item) {
	r.items[it.ID()] = it
	for _, t := range it.Types() {
		r.byType.add(t, it)
	}
	r.indexEntries(it)
}

// unindex takes it out of the indexes.
func (r *Registry) unindex(it *item) {
	for _, t := range it.Types() {
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
// equal to an entry it has or to an earlier one (Jini's addAttributes;
// service.Record.AddAttributes). On any error nothing changes. It returns
// the events the change causes, none when nothing was added.
func (r *Registry) AddAttributes(id djinn.ID, entries []service.Entry) ([]Event, error) {
	return r.change(id, func(rec *service.Record) (service.Record, bool, error) { return rec.AddAttributes(r.lim, entries) })
}

// SetAttributes replaces the entries of the item registered with id, less
// duplicates (Jini's setAttributes; service.Record.SetAttributes). On any
// error nothing changes. It returns the events the change causes, none
// when the entries are the same.
func (r *Registry) SetAttributes(id djinn.ID, entries []service.Entry) ([]Event, error) {
	return r.change(id, func(rec *service.Record) (service.Record, bool, error) { return rec.SetAttributes(r.lim, entries) })
}

// ModifyAttributes changes the entries of the item registered with id that
// match templates (Jini's modifyAttributes; service.Record.ModifyAttributes
// has the rules). On any error (bad arguments, a type mismatch, a limit)
// nothing changes. It returns the events the change causes, none when
// nothing changed.
func (r *Registry) ModifyAttributes(id djinn.ID, templates []service.EntryTemplate, changes []service.Entry) ([]Event, error) {
	return r.change(id, func(rec *service.Record) (service.Record, bool, error) {
		return rec.ModifyAttributes(r.lim, templates, changes)
	})
}

// change gives the item registered with id the record op makes of its
// own, if that differs, and returns the events.
func (r *Registry) change(id djinn.ID, op func(*service.Record) (service.Record, bool, error)) ([]Event, error) {
	it, err := r.find(id)
	if err != nil {
		return nil, err
	}
	next, changed, err := op(&it.Record)
	if err != nil || !changed {
		return nil, err
	}
	pre := *it
	r.unindexEntries(it)
	it.Record = next
	r.indexEntries(it)
	return r.notify(&pre, it), nil
}
