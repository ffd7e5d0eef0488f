package lds

import (
	"bytes"
	"cmp"
	"maps"
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// registration is one client's registration (LD.3.1), named by its lease's
// cookie.
type registration struct {
	cookie     djinn.ID
	eventID    int64
	listener   *djinnpb.Ref
	handback   []byte
	allGroups  bool
	groups     []string              // the managed set of groups, sorted; empty with allGroups
	locators   []string              // the managed set of locators, canonical, sorted
	discovered map[djinn.ID]struct{} // the managed set of registrars
	seq        int64                 // the last event's sequence number
}

// byGroup reports whether g wants r by group. A registrar of no group has
// left them all: no group wants it, not even all groups (as in package
// discovery).
func (g *registration) byGroup(r *Registrar) bool {
	if g.allGroups {
		return len(r.Groups) > 0
	}
	for _, x := range r.Groups {
		if contains(g.groups, x) {
			return true
		}
	}
	return false
}

// byLocator reports whether g wants r by locator.
func (g *registration) byLocator(r *Registrar) bool { return contains(g.locators, r.Locator) }

func (g *registration) interested(r *Registrar) bool { return g.byGroup(r) || g.byLocator(r) }

func (g *registration) holds(id djinn.ID) bool {
	_, ok := g.discovered[id]
	return ok
}

// entry is a lookup service of the table.
type entry struct {
	Registrar
	// live: the leader's discovery holds it. An entry that is not live was
	// lost (LDSLost) or discarded by a client and not found again yet; it
	// stays while some registration still has it discovered.
	live    bool
	holders int // the registrations that have it discovered
}

// Delivery is an event for a registration's listener: discovered or
// discarded lookup services, sorted by service id.
type Delivery struct {
	Registration djinn.ID // its lease cookie
	EventID      int64
	Seq          int64
	Listener     *djinnpb.Ref
	Handback     []byte
	Discarded    bool
	Registrars   []Registrar
}

// Payload returns the event's payload.
func (d Delivery) Payload() *djinnpb.RemoteDiscoveryEvent {
	ev := &djinnpb.RemoteDiscoveryEvent{Discarded: d.Discarded, Registrars: make([]*djinnpb.DiscoveredRegistrar, len(d.Registrars))}
	for i, r := range d.Registrars {
		ev.Registrars[i] = r.Proto()
	}
	return ev
}

// Hooks are what the leader's service hears of applied commands, in log
// order, outside the state's lock. Any may be nil.
type Hooks struct {
	// Deliver gets the events to send.
	Deliver func([]Delivery)
	// Changed hears that the union of the managed sets (Wanted) changed.
	Changed func()
	// Ended hears that a registration ended (its lease did).
	Ended func(cookie djinn.ID)
}

// effects are what an applied command tells the hooks.
type effects struct {
	deliveries []Delivery
	changed    bool
	ended      []djinn.ID
}

// State is the lookup discovery service's replicated state: the
// registrations with their managed sets and the table of lookup services
// the leader's discovery found. Every change comes from the log through the
// Apply methods (and LeaseEnded), which are deterministic; the query
// methods are safe to call concurrently with them.
type State struct {
	mu sync.RWMutex
	// Guarded by mu.
	regs      map[djinn.ID]*registration // by lease cookie
	table     map[djinn.ID]*entry        // by service id
	nextEvent int64
	// The managed sets' members counted over the registrations: their union
	// is what discovery looks for. version changes with the union.
	allGroups int
	groups    map[string]int
	locators  map[string]int
	version   uint64
	restoring []byte

	leases *lease.Table

	hooksMu sync.Mutex
	hooks   Hooks // guarded by hooksMu
}

// NewState returns an empty state whose leases live in t.
func NewState(t *lease.Table) *State {
	s := &State{leases: t}
	s.resetLocked()
	return s
}

func (s *State) resetLocked() {
	s.regs, s.table = map[djinn.ID]*registration{}, map[djinn.ID]*entry{}
	s.groups, s.locators = map[string]int{}, map[string]int{}
	s.nextEvent, s.allGroups, s.restoring = 0, 0, nil
	s.version++
}

// SetHooks sets what hears applied changes.
func (s *State) SetHooks(h Hooks) {
	s.hooksMu.Lock()
	defer s.hooksMu.Unlock()
	s.hooks = h
}

// tell hands an applied command's effects to the hooks.
func (s *State) tell(fx *effects) {
	s.hooksMu.Lock()
	h := s.hooks
	s.hooksMu.Unlock()
	for _, c := range fx.ended {
		if h.Ended != nil {
			h.Ended(c)
		}
	}
	if h.Deliver != nil && len(fx.deliveries) > 0 {
		h.Deliver(fx.deliveries)
	}
	if h.Changed != nil && fx.changed {
		h.Changed()
	}
}

// setSetsLocked replaces g's managed sets, keeping the counts of their
// members over all registrations, and notes in fx when the union of the
// managed sets changes.
func (s *State) setSetsLocked(g *registration, all bool, groups, locators []string, fx *effects) {
	before := s.version
	s.allGroups += b2i(all) - b2i(g.allGroups)
	if (s.allGroups > 0) != (s.allGroups+b2i(g.allGroups)-b2i(all) > 0) {
		s.version++
	}
	s.recount(s.groups, g.groups, groups)
	s.recount(s.locators, g.locators, locators)
	g.allGroups, g.groups, g.locators = all, groups, locators
	fx.changed = fx.changed || s.version != before
}

// recount moves one registration's members in counts from the sorted set
// old to the sorted set new, and bumps the version when a member joins or
// leaves the union.
func (s *State) recount(counts map[string]int, old, new []string) {
	for _, k := range old {
		counts[k]--
	}
	for _, k := range new {
		counts[k]++
	}
	for _, set := range [][]string{old, new} {
		for _, k := range set {
			after, ok := counts[k]
			if !ok {
				continue // done with it
			}
			if before := after + b2i(contains(old, k)) - b2i(contains(new, k)); (before > 0) != (after > 0) {
				s.version++
			}
			if after == 0 {
				delete(counts, k)
			}
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *State) holdLocked(g *registration, e *entry) {
	g.discovered[e.ID] = struct{}{}
	e.holders++
}

// dropLocked removes e from g's managed set of registrars, and from the
// table when nothing keeps it there.
func (s *State) dropLocked(g *registration, e *entry) {
	delete(g.discovered, e.ID)
	e.holders--
	s.pruneLocked(e)
}

func (s *State) pruneLocked(e *entry) {
	if !e.live && e.holders <= 0 {
		delete(s.table, e.ID)
	}
}

// eventLocked numbers an event for g.
func eventLocked(g *registration, discarded bool, rs []Registrar) Delivery {
	g.seq++
	slices.SortFunc(rs, func(a, b Registrar) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return Delivery{Registration: g.cookie, EventID: g.eventID, Seq: g.seq, Listener: g.listener, Handback: g.handback, Discarded: discarded, Registrars: rs}
}

// events appends g's discarded event (gone) and then its discovered event
// (found), each only when not empty (LD.4.2: one event for all the lookup
// services of a change).
func events(ds []Delivery, g *registration, gone, found []Registrar) []Delivery {
	if len(gone) > 0 {
		ds = append(ds, eventLocked(g, true, gone))
	}
	if len(found) > 0 {
		ds = append(ds, eventLocked(g, false, found))
	}
	return ds
}

// sortDeliveries orders events by registration, then sequence number, so
// that every replica produces them in the same order.
func sortDeliveries(ds []Delivery) {
	slices.SortFunc(ds, func(a, b Delivery) int {
		return cmp.Or(bytes.Compare(a.Registration[:], b.Registration[:]), cmp.Compare(a.Seq, b.Seq))
	})
}

// reconcileLocked brings g's managed set of registrars in line with its
// managed sets of groups and locators: it discards those it no longer
// wants (LD.4.1.1: neither by a group nor by a locator) and discovers the
// live ones it wants and has not discovered.
func (s *State) reconcileLocked(g *registration) []Delivery {
	var gone, found []Registrar
	for id := range g.discovered {
		e := s.table[id]
		if !g.interested(&e.Registrar) {
			gone = append(gone, e.Registrar)
			s.dropLocked(g, e)
		}
	}
	for _, e := range s.table {
		if e.live && !g.holds(e.ID) && g.interested(&e.Registrar) {
			s.holdLocked(g, e)
			found = append(found, e.Registrar)
		}
	}
	return events(nil, g, gone, found)
}

func (s *State) findLocked(cookie djinn.ID) (*registration, error) {
	g, ok := s.regs[cookie]
	if !ok {
		return nil, ErrNoRegistration
	}
	return g, nil
}

// ErrNoRegistration answers for a registration that does not exist — or
// is another principal's, to whom it does not.
var ErrNoRegistration = djinn.Errorf(djinn.NoSuchObject, "lookup discovery registration: no such registration (its lease ended or was cancelled)")

// ApplyRegister makes a registration (LD.3.1), grants its lease and
// returns its event id, a number no other registration had. The live
// lookup services it wants are discovered for it at once, in one event.
func (s *State) ApplyRegister(c *statepb.LDSRegister) (int64, error) {
	cookie, err := djinn.IDFromBytes("lease cookie", c.GetCookie())
	if err != nil {
		return 0, err
	}
	// Checked as stored: the service checked it as handed in (RefTo), and
	// an entry accepted before that check was strict must replay.
	if _, err := wire.RefStored("listener", c.GetListener()); err != nil {
		return 0, err
	}
	groups, err := CheckGroups("groups", c.GetGroups(), MaxGroups)
	if err != nil {
		return 0, err
	}
	if c.GetAllGroups() && len(groups) > 0 {
		return 0, djinn.Errorf(djinn.InvalidArgument, "groups %q with all groups: choose one", clip(groups[0]))
	}
	locators, err := CheckLocators("locators", c.GetLocators())
	if err != nil {
		return 0, err
	}
	fx := &effects{}
	defer s.tell(fx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.regs[cookie]; ok {
		return 0, djinn.Errorf(djinn.Internal, "lease cookie %s: in use", cookie)
	}
	if err := s.leases.ApplyGrant(cookie, lease.Owner{Kind: LeaseKind, ID: cookie}, c.GetPrincipal(), c.GetExpiresUnixNanos(), c.GetHorizonUnixNanos()); err != nil {
		return 0, err
	}
	s.nextEvent++
	g := &registration{cookie: cookie, eventID: s.nextEvent, listener: proto.CloneOf(c.GetListener()), handback: bytes.Clone(c.GetHandback()),
		discovered: map[djinn.ID]struct{}{}}
	s.regs[cookie] = g
	s.setSetsLocked(g, c.GetAllGroups(), groups, locators, fx)
	fx.deliveries = s.reconcileLocked(g)
	return g.eventID, nil
}

// Info is a registration's state, as GetRegistration returns it.
type Info struct {
	EventID   int64
	AllGroups bool
	Groups    []string // sorted; empty with AllGroups
	Locators  []string // canonical, sorted
	Seq       int64    // the last event's sequence number
}

func (g *registration) info() Info {
	return Info{EventID: g.eventID, AllGroups: g.allGroups, Groups: slices.Clone(g.groups), Locators: slices.Clone(g.locators), Seq: g.seq}
}

// The operations on a managed set (djinnpb.SetOp).
func opName(op djinnpb.SetOp) string {
	switch op {
	case djinnpb.SetOp_SET_OP_ADD:
		return "add"
	case djinnpb.SetOp_SET_OP_SET:
		return "set"
	case djinnpb.SetOp_SET_OP_REMOVE:
		return "remove"
	}
	return op.String()
}

// ApplyGroups adds, sets or removes groups of a registration's managed set
// (LD.4.1.1) and returns the registration's new state. Lookup services it
// no longer wants are discarded in one event; live ones it now wants and
// has not discovered are discovered in another.
func (s *State) ApplyGroups(c *statepb.LDSGroups) (Info, error) {
	cookie, err := djinn.IDFromBytes("registration lease cookie", c.GetCookie())
	if err != nil {
		return Info{}, err
	}
	op := c.GetOp()
	in, err := CheckGroupsChange(op, c.GetAllGroups(), c.GetGroups())
	if err != nil {
		return Info{}, err
	}
	fx := &effects{}
	defer s.tell(fx)
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.findLocked(cookie)
	if err != nil {
		return Info{}, err
	}
	all, groups := false, in
	switch op {
	case djinnpb.SetOp_SET_OP_ADD, djinnpb.SetOp_SET_OP_REMOVE:
		if g.allGroups {
			return Info{}, djinn.Errorf(djinn.Unsupported, "%s groups: the registration discovers all groups and has no managed set of groups to change; set groups instead", opName(op))
		}
		if op == djinnpb.SetOp_SET_OP_ADD {
			groups = union(g.groups, in)
		} else {
			groups = minus(g.groups, in)
		}
	case djinnpb.SetOp_SET_OP_SET:
		all = c.GetAllGroups()
	default:
		return Info{}, djinn.Errorf(djinn.InvalidArgument, "groups operation %d: want add, set or remove", op)
	}
	if len(groups) > MaxGroups {
		return Info{}, djinn.Errorf(djinn.ResourceExhausted, "groups: the managed set would have %d groups, at most %d", len(groups), MaxGroups)
	}
	s.setSetsLocked(g, all, groups, g.locators, fx)
	fx.deliveries = s.reconcileLocked(g)
	return g.info(), nil
}

// ApplyLocators adds, sets or removes locators of a registration's managed
// set (LD.4.1.1) and returns the registration's new state, with events as
// ApplyGroups.
func (s *State) ApplyLocators(c *statepb.LDSLocators) (Info, error) {
	cookie, err := djinn.IDFromBytes("registration lease cookie", c.GetCookie())
	if err != nil {
		return Info{}, err
	}
	in, err := CheckLocatorsChange(c.GetOp(), c.GetLocators())
	if err != nil {
		return Info{}, err
	}
	fx := &effects{}
	defer s.tell(fx)
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.findLocked(cookie)
	if err != nil {
		return Info{}, err
	}
	var locators []string
	switch op := c.GetOp(); op {
	case djinnpb.SetOp_SET_OP_ADD:
		locators = union(g.locators, in)
	case djinnpb.SetOp_SET_OP_SET:
		locators = in
	case djinnpb.SetOp_SET_OP_REMOVE:
		locators = minus(g.locators, in)
	default:
		return Info{}, djinn.Errorf(djinn.InvalidArgument, "locators operation %d: want add, set or remove", op)
	}
	if len(locators) > MaxLocators {
		return Info{}, djinn.Errorf(djinn.ResourceExhausted, "locators: the managed set would have %d locators, at most %d", len(locators), MaxLocators)
	}
	s.setSetsLocked(g, g.allGroups, g.groups, locators, fx)
	fx.deliveries = s.reconcileLocked(g)
	return g.info(), nil
}

// ApplyDiscard is a client's discard of a lookup service (LD.4.1.1
// discard). It reports whether the registration had discovered it; if not,
// nothing changes. Otherwise the registration gets a discarded event, and
// the lookup service is no longer live: no registration is given it again
// before discovery finds it again (LDSFound), which then gives it to every
// registration that wants it and does not have it, this one included. The
// others that have it keep it.
func (s *State) ApplyDiscard(c *statepb.LDSDiscard) (bool, error) {
	cookie, err := djinn.IDFromBytes("registration lease cookie", c.GetCookie())
	if err != nil {
		return false, err
	}
	id, err := djinn.IDFromBytes("registrar service id", c.GetRegistrarServiceId())
	if err != nil {
		return false, err
	}
	fx := &effects{}
	defer s.tell(fx)
	s.mu.Lock()
	defer s.mu.Unlock()
	g, err := s.findLocked(cookie)
	if err != nil {
		return false, err
	}
	if !g.holds(id) {
		return false, nil
	}
	e := s.table[id]
	e.live = false
	s.dropLocked(g, e)
	fx.deliveries = []Delivery{eventLocked(g, true, []Registrar{e.Registrar})}
	return true, nil
}

// ApplyFound records lookup services the leader's discovery found, or
// found again, or heard new member groups or addresses from (LD.3.1).
// Each becomes live. A registration that wants one and has not discovered
// it gets it, in one discovered event for all; one that has it and wants it
// no longer (its groups changed: a passive no-interest discard) loses it,
// in one discarded event.
func (s *State) ApplyFound(c *statepb.LDSFound) error {
	found, err := registrars(c.GetRegistrars())
	if err != nil {
		return err
	}
	fx := &effects{}
	defer s.tell(fx)
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := slices.SortedFunc(maps.Keys(found), func(a, b djinn.ID) int { return bytes.Compare(a[:], b[:]) })
	es := make([]*entry, len(ids))
	for i, id := range ids {
		e := s.table[id]
		if e == nil {
			e = &entry{}
			s.table[id] = e
		}
		e.Registrar, e.live = found[id], true
		es[i] = e
	}
	s.foundLocked(es, fx)
	return nil
}

func registrars(pbs []*djinnpb.DiscoveredRegistrar) (map[djinn.ID]Registrar, error) {
	out := map[djinn.ID]Registrar{}
	for _, pb := range pbs {
		r, err := storedRegistrar(pb)
		if err != nil {
			return nil, err
		}
		out[r.ID] = r
	}
	return out, nil
}

// foundLocked gives the live entries es to the registrations that want
// them and drops them from those that have them and no longer want them.
func (s *State) foundLocked(es []*entry, fx *effects) {
	for _, g := range s.regs {
		var gone, got []Registrar
		for _, e := range es {
			had, wants := g.holds(e.ID), g.interested(&e.Registrar)
			switch {
			case had && !wants:
				s.dropLocked(g, e)
				gone = append(gone, e.Registrar)
			case !had && wants:
				s.holdLocked(g, e)
				got = append(got, e.Registrar)
			}
		}
		fx.deliveries = events(fx.deliveries, g, gone, got)
	}
	sortDeliveries(fx.deliveries)
}

// applyUnwanted records lookup services the leader's discovery dropped
// because the groups and locators it looks for no longer take them. That
// is no loss while discovery looks for them again: LD.3.1 discards a
// lookup service for a registration only at the registration's request,
// when it wants it no longer, or when the lookup service changed its
// groups or went silent, and the narrowing may have been undone already
// (a registration that wants it was made since), so the decision is taken
// here, in log order. Each live one is taken with its groups as discovery
// last knew them. If some registration wants it in a way discovery looks
// for (by locator, or by group when groups is set: the leader runs group
// discovery), it is taken as found (ApplyFound): those that no longer want
// it discard it (its groups changed: a passive no-interest discard), those
// that want it keep it or get it, and discovery, looking for it again,
// finds it or loses it. Otherwise nothing looks for it any more: it is
// lost (ApplyLost). Lookup services that are not live (a client discarded
// them) wait for discovery to find them again.
func (s *State) applyUnwanted(pbs []*djinnpb.DiscoveredRegistrar, groups bool) error {
	known, err := registrars(pbs)
	if err != nil {
		return err
	}
	fx := &effects{}
	defer s.tell(fx)
	s.mu.Lock()
	defer s.mu.Unlock()
	var es []*entry
	served := map[*entry]bool{}
	for _, id := range slices.SortedFunc(maps.Keys(known), func(a, b djinn.ID) int { return bytes.Compare(a[:], b[:]) }) {
		e := s.table[id]
		if e == nil || !e.live {
			continue
		}
		e.Registrar = known[id]
		es = append(es, e)
		for _, g := range s.regs {
			if g.byLocator(&e.Registrar) || groups && g.byGroup(&e.Registrar) {
				served[e] = true
				break
			}
		}
		e.live = served[e]
	}
	for _, g := range s.regs {
		var gone, got []Registrar
		for _, e := range es {
			had := g.holds(e.ID)
			switch wants := g.interested(&e.Registrar); {
			case had && (!wants || !served[e] && g.byGroup(&e.Registrar)):
				s.dropLocked(g, e)
				gone = append(gone, e.Registrar)
			case !had && wants && served[e]:
				s.holdLocked(g, e)
				got = append(got, e.Registrar)
			}
		}
		fx.deliveries = events(fx.deliveries, g, gone, got)
	}
	for _, e := range es {
		s.pruneLocked(e)
	}
	sortDeliveries(fx.deliveries)
	return nil
}

// ApplyLost records lookup services the leader's discovery lost: they went
// silent and unreachable, left their groups, or are no longer looked for
// (LD.3.1, a passive communication discard). Each is no longer live. A
// registration that has one and wants it by group loses it, in one
// discarded event; one that wants it only by locator keeps it and hears
// nothing. With unwanted set it is no loss: see applyUnwanted.
func (s *State) ApplyLost(c *statepb.LDSLost) error {
	if c.GetUnwanted() {
		return s.applyUnwanted(c.GetRegistrars(), c.GetGroupDiscovery())
	}
	ids := make([]djinn.ID, 0, len(c.GetServiceIds()))
	for _, b := range c.GetServiceIds() {
		id, err := djinn.IDFromBytes("lost registrar service id", b)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	fx := &effects{}
	defer s.tell(fx)
	s.mu.Lock()
	defer s.mu.Unlock()
	var es []*entry
	for _, id := range ids {
		if e := s.table[id]; e != nil && !slices.Contains(es, e) {
			e.live = false
			es = append(es, e)
		}
	}
	for _, g := range s.regs {
		var gone []Registrar
		for _, e := range es {
			if g.holds(e.ID) && g.byGroup(&e.Registrar) {
				s.dropLocked(g, e)
				gone = append(gone, e.Registrar)
			}
		}
		fx.deliveries = events(fx.deliveries, g, gone, nil)
	}
	for _, e := range es {
		s.pruneLocked(e)
	}
	sortDeliveries(fx.deliveries)
	return nil
}

// LeaseEnded ends the registration whose lease ended (expired or was
// cancelled).
func (s *State) LeaseEnded(cookie djinn.ID) {
	fx := &effects{}
	defer s.tell(fx)
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.regs[cookie]
	if !ok {
		return
	}
	for id := range g.discovered {
		s.dropLocked(g, s.table[id])
	}
	s.setSetsLocked(g, false, nil, nil, fx)
	delete(s.regs, cookie)
	fx.ended = append(fx.ended, cookie)
}

// Registration returns a registration's state.
func (s *State) Registration(cookie djinn.ID) (Info, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g, err := s.findLocked(cookie)
	if err != nil {
		return Info{}, err
	}
	return g.info(), nil
}

// Registrars returns the lookup services discovered for a registration
// (its managed set of registrars), by service id.
func (s *State) Registrars(cookie djinn.ID) ([]Registrar, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	g, err := s.findLocked(cookie)
	if err != nil {
		return nil, err
	}
	out := make([]Registrar, 0, len(g.discovered))
	for id := range g.discovered {
		out = append(out, s.table[id].Registrar)
	}
	slices.SortFunc(out, func(a, b Registrar) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out, nil
}

// Wanted is the union of the registrations' managed sets: what the
// leader's discovery looks for.
type Wanted struct {
	AllGroups bool     // some registration wants every group
	Groups    []string // sorted
	Locators  []string // canonical, sorted
	// Version changes whenever the union does.
	Version uint64
}

// Wanted returns the union of the managed sets.
func (s *State) Wanted() Wanted {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Wanted{AllGroups: s.allGroups > 0, Groups: slices.Sorted(maps.Keys(s.groups)), Locators: slices.Sorted(maps.Keys(s.locators)), Version: s.version}
}

// Known returns the lookup services of the table, live or not, by service
// id.
func (s *State) Known() []Registrar {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Registrar, 0, len(s.table))
	for _, e := range s.table {
		out = append(out, e.Registrar)
	}
	slices.SortFunc(out, func(a, b Registrar) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

// LocatorsWanted returns how many distinct locators the registrations
// want discovered, and how many of locators (canonical) are not among
// them.
func (s *State) LocatorsWanted(locators []string) (wanted, fresh int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, l := range locators {
		if s.locators[l] == 0 {
			fresh++
		}
	}
	return len(s.locators), fresh
}

// firstFresh returns the first of locators not wanted yet ("" if none).
func (s *State) firstFresh(locators []string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, l := range locators {
		if s.locators[l] == 0 {
			return l
		}
	}
	return ""
}

// Len returns the numbers of registrations and of lookup services in the
// table.
func (s *State) Len() (registrations, registrars int) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.regs), len(s.table)
}
