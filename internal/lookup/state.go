package lookup

import (
	"cmp"
	"encoding/json"
	"sync"

	"github.com/djinn-go/djinn/internal/wire"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
	"github.com/djinn-go/djinn/service"
)

// State is the lookup service's replicated state: the registry, each
// registration's lease (its cookie names the registration), and the
// watches (notify registrations) with their event ids, listeners and
// sequence numbers. Every change comes from the log, through the Apply
// methods; they are deterministic.
type State struct {
	mu sync.RWMutex
	// Guarded by mu.
	reg       *Registry               // made at the first use, once the service id is known
	regs      map[djinn.ID]djinn.ID   // registration cookie → service id
	cookies   map[djinn.ID]djinn.ID   // service id → its registration's cookie
	watches   map[djinn.ID]*watchMeta // by watch id (its lease's cookie)
	nextEvent int64
	restoring []byte

	self   func() djinn.ID
	own    func() service.Item // the registrar's own item, nil for none
	limits service.Limits
	leases *lease.Table
	// notify, when set, hears the service events to deliver, in log
	// order, outside mu; the leader's service sets it.
	notify func([]Delivery)
}

type watchMeta struct {
	eventID  int64
	listener *djinnpb.Ref
	handback []byte
	seq      int64 // the last sequence number given
}

// Delivery is a service event for a watch's listener.
type Delivery struct {
	Watch    djinn.ID
	EventID  int64
	Seq      int64
	Listener *djinnpb.Ref
	Handback []byte
	Event    *djinnpb.ServiceEvent
}

// NewState returns an empty state whose leases live in t; self gives the
// registrar's service id (the cluster's).
func NewState(t *lease.Table, self func() djinn.ID, limits service.Limits) *State {
	s := &State{leases: t, self: self, limits: limits}
	s.resetLocked()
	return s
}

func (s *State) resetLocked() {
	s.reg = nil
	s.regs, s.cookies, s.watches = map[djinn.ID]djinn.ID{}, map[djinn.ID]djinn.ID{}, map[djinn.ID]*watchMeta{}
	s.nextEvent, s.restoring = 0, nil
}

// SetNotify sets the function that hears the events to deliver.
func (s *State) SetNotify(fn func([]Delivery)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify = fn
}

func (s *State) tell(ds []Delivery) {
	if len(ds) == 0 {
		return
	}
	s.mu.Lock()
	fn := s.notify
	s.mu.Unlock()
	if fn != nil {
		fn(ds)
	}
}

func (s *State) registryLocked() (*Registry, error) {
	if s.reg == nil {
		r, err := New(s.self(), s.limits)
		if err != nil {
			return nil, err
		}
		if s.own != nil {
			if err := r.SetOwn(s.own()); err != nil {
				return nil, err
			}
		}
		s.reg = r
	}
	return s.reg, nil
}

// SetOwn sets the function that makes the registrar's own item (see
// Registry.SetOwn); it runs when the registry is made, once the service id
// is known. The item is this node's: it is not replicated.
func (s *State) SetOwn(own func() service.Item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.own = own
	if s.reg != nil {
		return s.reg.SetOwn(own())
	}
	return nil
}

// deliveriesLocked numbers the registry's events for their watches.
func (s *State) deliveriesLocked(evs []Event) []Delivery {
	out := make([]Delivery, 0, len(evs))
	for _, ev := range evs {
		w, ok := s.watches[ev.Watch]
		if !ok {
			continue
		}
		w.seq++
		se := &djinnpb.ServiceEvent{Transition: djinnpb.Transition(ev.Transition), ServiceId: ev.ServiceID[:]}
		if ev.Item != nil {
			se.Item = wire.Item(*ev.Item)
		}
		out = append(out, Delivery{Watch: ev.Watch, EventID: w.eventID, Seq: w.seq, Listener: w.listener, Handback: w.handback, Event: se})
	}
	return out
}

// ApplyRegister registers an item (replacing one with the same service
// id, whose old registration ends) and grants its lease.
func (s *State) ApplyRegister(c *statepb.LookupRegister) error {
	it, err := wire.ItemFrom(c.GetItem())
	if err != nil {
		return err
	}
	if it.ID.IsZero() {
		return djinn.Errorf(djinn.InvalidArgument, "service id: missing (the leader assigns one)")
	}
	cookie, err := djinn.IDFromBytes("lease cookie", c.GetCookie())
	if err != nil {
		return err
	}
	p := c.GetPrincipal()
	var ds []Delivery
	defer func() { s.tell(ds) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, replacing := s.cookies[it.ID]
	if replacing {
		if owner, _ := s.leases.Principal(prev); owner != p {
			return errTaken(it.ID)
		}
	} else if err := s.leases.CheckGrant(ItemLeaseKind, p); err != nil {
		return err
	}
	r, err := s.registryLocked()
	if err != nil {
		return err
	}
	evs, err := r.Register(it, cookie)
	if err != nil {
		return err
	}
	owner := lease.Owner{Kind: ItemLeaseKind, ID: cookie}
	if replacing {
		err = s.leases.ApplyGrantReplacing(prev, cookie, owner, p, c.GetExpiresUnixNanos(), c.GetHorizonUnixNanos())
		delete(s.regs, prev)
	} else {
		err = s.leases.ApplyGrant(cookie, owner, p, c.GetExpiresUnixNanos(), c.GetHorizonUnixNanos())
	}
	if err != nil {
		// A cookie in use: never from a working leader.
		rev, _ := r.Remove(it.ID)
		ds = s.deliveriesLocked(append(evs, rev...))
		delete(s.cookies, it.ID)
		if replacing {
			s.leases.ApplyRelease(prev[:])
		}
		return err
	}
	s.regs[cookie], s.cookies[it.ID] = it.ID, cookie
	ds = s.deliveriesLocked(evs)
	return nil
}

// errTaken refuses a registration under a service id another principal's
// item holds. It says no more than a lookup by that id shows anyone — that
// an item holds it — and nothing of the item, its owner or its lease; the
// item stays as its owner registered it.
func errTaken(id djinn.ID) error {
	return djinn.Errorf(djinn.PermissionDenied, "service id %s: registered by another principal; register under a service id of your own, or none (the lookup service assigns one)", id)
}

// The attribute operations of ApplyAttributes.
const (
	OpAdd    = 1
	OpModify = 2
	OpSet    = 3
)

// ApplyAttributes changes the attributes of the registration named by its
// lease cookie.
func (s *State) ApplyAttributes(c *statepb.LookupAttributes) error {
	cookie, err := djinn.IDFromBytes("registration lease cookie", c.GetCookie())
	if err != nil {
		return err
	}
	var ds []Delivery
	defer func() { s.tell(ds) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.regs[cookie]
	if !ok || s.reg == nil {
		return djinn.Errorf(djinn.UnknownLease, "registration: unknown (its lease ended, or it was replaced)")
	}
	var evs []Event
	switch c.GetOp() {
	case OpAdd:
		evs, err = s.reg.AddAttributes(id, wire.EntriesFrom(c.GetEntries()))
	case OpModify:
		evs, err = s.reg.ModifyAttributes(id, wire.EntryTemplatesFrom(c.GetTemplates()), wire.EntriesFrom(c.GetEntries()))
	case OpSet:
		evs, err = s.reg.SetAttributes(id, wire.EntriesFrom(c.GetEntries()))
	default:
		return djinn.Errorf(djinn.InvalidArgument, "attribute operation %d: unknown", c.GetOp())
	}
	if err != nil {
		return err
	}
	ds = s.deliveriesLocked(evs)
	return nil
}

// CheckAttributes checks the arguments of an attribute change (op OpAdd,
// OpModify or OpSet) that do not depend on the registration it changes,
// with the errors its apply (ApplyAttributes) would answer: the server
// answers them before it looks whose the registration is.
func (s *State) CheckAttributes(op int32, entries []*djinnpb.Entry, templates []*djinnpb.EntryTemplate) error {
	switch op {
	case OpAdd:
		return s.limits.CheckEntries("added entries", wire.EntriesFrom(entries))
	case OpModify:
		return s.limits.CheckModification(wire.EntryTemplatesFrom(templates), wire.EntriesFrom(entries))
	case OpSet:
		return s.limits.CheckEntries("entries", wire.EntriesFrom(entries))
	}
	return djinn.Errorf(djinn.InvalidArgument, "attribute operation %d: unknown", op)
}

// ApplyNotify adds a watch and grants its lease; it returns the watch's
// event id.
func (s *State) ApplyNotify(c *statepb.LookupNotify) (int64, error) {
	cookie, err := djinn.IDFromBytes("lease cookie", c.GetCookie())
	if err != nil {
		return 0, err
	}
	tmpl, err := wire.TemplateFrom(c.GetTemplate())
	if err != nil {
		return 0, err
	}
	if c.GetListener() == nil {
		return 0, djinn.Errorf(djinn.InvalidArgument, "listener: missing")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.registryLocked()
	if err != nil {
		return 0, err
	}
	if err := r.AddWatch(cookie, tmpl, service.Transition(c.GetTransitions())); err != nil {
		return 0, err
	}
	if err := s.leases.ApplyGrant(cookie, lease.Owner{Kind: WatchLeaseKind, ID: cookie}, c.GetPrincipal(), c.GetExpiresUnixNanos(), c.GetHorizonUnixNanos()); err != nil {
		_ = r.RemoveWatch(cookie)
		return 0, err
	}
	s.nextEvent++
	s.watches[cookie] = &watchMeta{eventID: s.nextEvent, listener: c.GetListener(), handback: c.GetHandback()}
	return s.nextEvent, nil
}

// LeaseEnded removes the registration or watch whose lease ended.
func (s *State) LeaseEnded(o lease.Owner) {
	var ds []Delivery
	defer func() { s.tell(ds) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch o.Kind {
	case ItemLeaseKind:
		id, ok := s.regs[o.ID]
		if !ok {
			return
		}
		delete(s.regs, o.ID)
		delete(s.cookies, id)
		evs, err := s.reg.Remove(id)
		if err == nil {
			ds = s.deliveriesLocked(evs)
		}
	case WatchLeaseKind:
		if _, ok := s.watches[o.ID]; !ok {
			return
		}
		delete(s.watches, o.ID)
		_ = s.reg.RemoveWatch(o.ID)
	}
}

// Lookup returns the number of items matching tmpl and up to max of them.
func (s *State) Lookup(tmpl service.Template, max int) (total int, items []service.Item, err error) {
	err = s.Browse(func(r *Registry) error {
		total, items, err = r.Lookup(tmpl, max)
		return err
	})
	return total, items, err
}

// LookupEncoded is Registry.LookupEncoded on the current registry.
func (s *State) LookupEncoded(tmpl service.Template, max int, one bool, intn func(int) int) (total int, items [][]byte, err error) {
	err = s.Browse(func(r *Registry) error {
		total, items, err = r.LookupEncoded(tmpl, max, one, intn)
		return err
	})
	return total, items, err
}

// Browse runs fn on the registry, which fn must only read: reads run
// concurrently with each other.
func (s *State) Browse(fn func(*Registry) error) error {
	for {
		s.mu.RLock()
		if r := s.reg; r != nil {
			defer s.mu.RUnlock()
			return fn(r)
		}
		s.mu.RUnlock()
		s.mu.Lock()
		_, err := s.registryLocked()
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// Registration returns the service id the registration cookie names.
func (s *State) Registration(cookie djinn.ID) (djinn.ID, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.regs[cookie]
	return id, ok
}

// Watch returns a watch's event id and last sequence number.
func (s *State) Watch(id djinn.ID) (eventID, seq int64, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	w, ok := s.watches[id]
	if !ok {
		return 0, 0, false
	}
	return w.eventID, w.seq, true
}

// Len returns the numbers of registrations and watches.
func (s *State) Len() (items, watches int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.regs), len(s.watches)
}

type snapshot struct {
	Items     []snapItem
	Watches   []snapWatch
	NextEvent int64
}

type snapItem struct {
	Item   []byte // a djinnpb.ServiceItem
	Cookie djinn.ID
}

type snapWatch struct {
	ID          djinn.ID
	Template    []byte // a djinnpb.ServiceTemplate
	Transitions service.Transition
	EventID     int64
	Listener    []byte // a djinnpb.Ref
	Handback    []byte
	Seq         int64
}

// Records returns the state as snapshot records. It only reads, so
// lookups go on while it runs: with 100,000 items it takes a few hundred
// milliseconds. Changes wait (they come through Apply, which does not run
// during a snapshot anyway).
func (s *State) Records() ([]*statepb.LookupRecord, error) {
	snap, err := s.export()
	if err != nil {
		return nil, err
	}
	return snap.records()
}

// export gathers the state as plain values that no later change touches
// (the items encoded afresh): a snapshot encodes them afterwards, while
// applies go on.
func (s *State) export() (snapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	snap := snapshot{NextEvent: s.nextEvent}
	var err error
	if s.reg != nil {
		regs := s.reg.ExportEncoded()
		snap.Items = make([]snapItem, len(regs))
		for i, r := range regs {
			snap.Items[i] = snapItem{Item: r.Item, Cookie: r.Lease}
		}
		for _, w := range s.reg.ExportWatches() {
			meta := s.watches[w.ID]
			if meta == nil {
				continue
			}
			tb, merr := proto.Marshal(wire.Template(w.Template))
			err = cmp.Or(err, merr)
			lb, merr := proto.Marshal(meta.listener)
			err = cmp.Or(err, merr)
			snap.Watches = append(snap.Watches, snapWatch{ID: w.ID, Template: tb, Transitions: w.Transitions, EventID: meta.eventID,
				Listener: lb, Handback: meta.handback, Seq: meta.seq})
		}
	}
	if err != nil {
		return snapshot{}, djinn.Errorf(djinn.Internal, "lookup snapshot: %v", err)
	}
	return snap, nil
}

// records encodes an exported state as snapshot records.
func (snap snapshot) records() ([]*statepb.LookupRecord, error) {
	b, err := json.Marshal(snap)
	if err != nil {
		return nil, djinn.Errorf(djinn.Internal, "lookup snapshot: %v", err)
	}
	return wire.Records(b, func(c []byte, last bool) *statepb.LookupRecord { return &statepb.LookupRecord{State: c, Last: last} }), nil
}

// Restore adds a snapshot record; the last replaces the state with the
// records' (leases are restored separately).
func (s *State) Restore(r *statepb.LookupRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restoring = append(s.restoring, r.GetState()...)
	if !r.GetLast() {
		return nil
	}
	b := s.restoring
	s.restoring = nil
	var snap snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return djinn.Errorf(djinn.Internal, "lookup snapshot: %v", err)
	}
	var ex Snapshot
	regs, cookies, watches := map[djinn.ID]djinn.ID{}, map[djinn.ID]djinn.ID{}, map[djinn.ID]*watchMeta{}
	for _, si := range snap.Items {
		it, err := service.DecodeItem(si.Item) // the wire form Records wrote
		if err != nil {
			return djinn.Errorf(djinn.Internal, "lookup snapshot item: %v", err)
		}
		ex.Registrations = append(ex.Registrations, Registration{Item: it, Lease: si.Cookie})
		regs[si.Cookie], cookies[it.ID] = it.ID, si.Cookie
	}
	for _, sw := range snap.Watches {
		var tp djinnpb.ServiceTemplate
		var lp djinnpb.Ref
		if err := cmp.Or(proto.Unmarshal(sw.Template, &tp), proto.Unmarshal(sw.Listener, &lp)); err != nil {
			return djinn.Errorf(djinn.Internal, "lookup snapshot watch: %v", err)
		}
		tmpl, err := wire.TemplateFrom(&tp)
		if err != nil {
			return err
		}
		ex.Watches = append(ex.Watches, Watch{ID: sw.ID, Template: tmpl, Transitions: sw.Transitions})
		watches[sw.ID] = &watchMeta{eventID: sw.EventID, listener: &lp, handback: sw.Handback, seq: sw.Seq}
	}
	if len(ex.Registrations)+len(ex.Watches) > 0 {
		reg, err := s.registryLocked()
		if err != nil {
			return err
		}
		if err := reg.Import(ex); err != nil {
			return err
		}
	}
	s.regs, s.cookies, s.watches, s.nextEvent = regs, cookies, watches, snap.NextEvent
	return nil
}

// Reset empties the state before a restore.
func (s *State) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}
