package mailbox

import (
	"sync"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// eventKey is a (source, event id) pair, the identity of a kind of event
// (EV.2.3.2). Sources compare by reference identity.
type eventKey struct {
	source [32]byte
	id     int64
}

func keyOf(ev *djinnpb.RemoteEvent) eventKey {
	return eventKey{source: refKey(ev.GetSource()), id: ev.GetEventId()}
}

func refKey(r *djinnpb.Ref) [32]byte {
	var k [32]byte
	copy(k[:16], r.GetServiceId())
	copy(k[16:], r.GetObjectId())
	return k
}

// Stored is a stored event with its arrival index.
type Stored struct {
	Index uint64
	Event *djinnpb.RemoteEvent
}

type registration struct {
	id        djinn.ID
	principal string
	listener  djinn.ID
	cookie    djinn.ID
	target    *djinnpb.Ref                   // nil: delivery disabled
	epoch     uint64                         // bumped by every enable and disable
	unknown   map[eventKey]*djinnpb.EventKey // nil while empty
	events    []Stored
	next      uint64 // index of the next stored event
	// pull numbers the registration's current pull stream: bumped by
	// every pull and every enable of delivery to a target, which
	// supersede the streams before.
	pull uint64
	// wait is closed when an event is stored or the pull stream is
	// superseded; pullers wait on it.
	wait chan struct{}
}

// Sink observes the state machine's changes in log order, on the leader.
// Its methods are called from Apply with the state locked: they must not
// block or call back into State. Each returns nothing; work is queued.
type Sink interface {
	Stored(reg djinn.ID, target *djinnpb.Ref, epoch uint64, ev Stored)
	// Retargeted: delivery now goes to target (nil: disabled). events is
	// everything stored. done is closed when the change is in effect.
	Retargeted(reg djinn.ID, target *djinnpb.Ref, epoch uint64, events []Stored, done chan struct{})
	Forgot(reg djinn.ID, match func(Stored) bool)
	Removed(reg djinn.ID)
}

// State is the replicated mailbox state.
type State struct {
	mu sync.Mutex
	// regs, byListener and sink are guarded by mu.
	regs       map[djinn.ID]*registration
	byListener map[djinn.ID]*registration
	sink       Sink

	leases    *lease.Table
	maxStored int
	// service returns the cluster's service id (set by Init).
	service func() djinn.ID
}

// NewState returns an empty mailbox state whose leases live in t.
// maxStored bounds stored events per registration; service returns the
// mailbox's service id.
func NewState(t *lease.Table, maxStored int, service func() djinn.ID) *State {
	return &State{
		regs: make(map[djinn.ID]*registration), byListener: make(map[djinn.ID]*registration),
		leases: t, maxStored: maxStored, service: service,
	}
}

// SetSink attaches (or, with nil, detaches) the leader's deliverer and
// returns, for each registration with delivery enabled, its target and
// stored events so the deliverer can start.
func (s *State) SetSink(k Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sink = k
	if k == nil {
		return
	}
	for _, r := range s.regs {
		if r.target != nil && len(r.events) > 0 {
			k.Retargeted(r.id, r.target, r.epoch, append([]Stored(nil), r.events...), nil)
		}
	}
}

// Len returns the number of registrations and of stored events.
func (s *State) Len() (regs, events int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.regs {
		events += len(r.events)
	}
	return len(s.regs), events
}

// Registrations returns the number of registrations.
func (s *State) Registrations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.regs)
}

// Info is a registration as clients see it.
type Info struct {
	ID, Listener, Cookie djinn.ID
	Principal            string
	Target               *djinnpb.Ref
	Stored               int
	Unknown              []*djinnpb.EventKey
}

func (r *registration) info() Info {
	in := Info{ID: r.id, Listener: r.listener, Cookie: r.cookie, Principal: r.principal, Target: r.target, Stored: len(r.events)}
	for _, k := range r.unknown {
		in.Unknown = append(in.Unknown, k)
	}
	return in
}

func noSuchRegistration(id djinn.ID) error {
	return djinn.Errorf(djinn.NoSuchObject, "mailbox registration %s: no such registration (lease expired or cancelled)", id)
}

// Get returns a registration.
func (s *State) Get(id djinn.ID) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.regs[id]
	if !ok {
		return Info{}, noSuchRegistration(id)
	}
	return r.info(), nil
}

// ByListener returns the registration a mailbox listener belongs to.
func (s *State) ByListener(listener djinn.ID) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.byListener[listener]
	if !ok {
		return Info{}, djinn.Errorf(djinn.NoSuchObject, "mailbox listener %s: no such listener (its registration's lease ended)", listener)
	}
	return r.info(), nil
}

// IsUnknown reports whether the registration's unknown-event list holds
// the event's (source, id).
func (s *State) IsUnknown(reg djinn.ID, ev *djinnpb.RemoteEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.regs[reg]
	if !ok {
		return false
	}
	_, bad := r.unknown[keyOf(ev)]
	return bad
}

// After returns, for pull stream number pull, up to max stored events with
// an index above after, and a channel closed when another event is stored
// or the stream is superseded (then InvalidIterator).
func (s *State) After(reg djinn.ID, pull, after uint64, max int) ([]Stored, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.regs[reg]
	if !ok {
		return nil, nil, noSuchRegistration(reg)
	}
	if r.pull != pull {
		return nil, nil, superseded(reg)
	}
	var out []Stored
	for _, e := range r.events {
		if e.Index > after {
			out = append(out, e)
			if len(out) == max {
				break
			}
		}
	}
	if r.wait == nil {
		r.wait = make(chan struct{})
	}
	return out, r.wait, nil
}

// ApplyRegister creates a registration and grants its lease.
func (s *State) ApplyRegister(c *statepb.MailboxRegister) (Info, error) {
	id, err := djinn.IDFromBytes("registration id", c.GetRegistrationId())
	if err != nil {
		return Info{}, err
	}
	listener, err := djinn.IDFromBytes("listener id", c.GetListenerId())
	if err != nil {
		return Info{}, err
	}
	cookie, err := djinn.IDFromBytes("lease cookie", c.GetCookie())
	if err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.regs[id]; dup {
		return Info{}, djinn.Errorf(djinn.Internal, "mailbox registration %s: already exists", id)
	}
	if _, dup := s.byListener[listener]; dup {
		return Info{}, djinn.Errorf(djinn.Internal, "mailbox listener %s: already exists", listener)
	}
	if err := s.leases.ApplyGrant(cookie, lease.Owner{Kind: LeaseKind, ID: id}, c.GetPrincipal(), c.GetExpiresUnixNanos(), c.GetHorizonUnixNanos()); err != nil {
		return Info{}, err
	}
	r := &registration{id: id, principal: c.GetPrincipal(), listener: listener, cookie: cookie, next: 1}
	s.regs[id] = r
	s.byListener[listener] = r
	return r.info(), nil
}

// CheckTarget enforces EM.4.1: a mailbox listener of this mailbox cannot be
// a target, which would make a notification loop. Every listener this
// service's id names is one of the mailbox's own.
func (s *State) CheckTarget(t *djinnpb.Ref) error {
	if t == nil {
		return nil
	}
	svc, err := djinn.IDFromBytes("target service id", t.GetServiceId())
	if err != nil {
		return err
	}
	if _, err := djinn.IDFromBytes("target object id", t.GetObjectId()); err != nil {
		return err
	}
	if err := djinn.CheckEndpoint(t.GetEndpoint()); err != nil {
		return djinn.Errorf(djinn.InvalidArgument, "target: %v", err)
	}
	if svc == s.service() {
		obj, _ := djinn.IDFromBytes("", t.GetObjectId())
		return djinn.Errorf(djinn.InvalidArgument, "target %s: a mailbox listener of this mailbox cannot be a delivery target: the mailbox would deliver to itself; give a listener outside it", obj)
	}
	return nil
}

// ApplyEnable sets the target (nil disables), clearing the unknown-event
// list (EM.4.1). It returns a channel closed when the leader's deliverer has
// switched, or nil where there is no deliverer.
func (s *State) ApplyEnable(c *statepb.MailboxEnable) (chan struct{}, error) {
	id, err := djinn.IDFromBytes("registration id", c.GetRegistrationId())
	if err != nil {
		return nil, err
	}
	if err := s.CheckTarget(c.GetTarget()); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.regs[id]
	if !ok {
		return nil, noSuchRegistration(id)
	}
	r.target = c.GetTarget()
	r.epoch++
	if r.target != nil {
		r.unknown = nil
		r.supersedeLocked() // push and pull are exclusive
	}
	return s.retargetLocked(r), nil
}

// supersedeLocked ends the registration's pull stream: a newer consumer
// takes the events.
func (r *registration) supersedeLocked() {
	r.pull++
	r.wakeLocked()
}

// wakeLocked wakes the pullers waiting on the registration.
func (r *registration) wakeLocked() {
	if r.wait != nil {
		close(r.wait)
		r.wait = nil
	}
}

// PullBegun is what ApplyPull returns: the new pull stream's number, and a
// channel closed when push delivery has stopped (nil when there is none
// to stop here).
type PullBegun struct {
	Pull uint64
	Done chan struct{}
}

// ApplyPull begins a pull stream (River's MailboxPullRegistration): push
// and pull are exclusive, so it disables push delivery, and it supersedes
// the registration's earlier pull stream, whose puller gets
// InvalidIterator.
func (s *State) ApplyPull(c *statepb.MailboxPull) (PullBegun, error) {
	id, err := djinn.IDFromBytes("registration id", c.GetRegistrationId())
	if err != nil {
		return PullBegun{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.regs[id]
	if !ok {
		return PullBegun{}, noSuchRegistration(id)
	}
	r.supersedeLocked()
	b := PullBegun{Pull: r.pull}
	if r.target != nil {
		r.target = nil
		r.epoch++
		b.Done = s.retargetLocked(r)
	}
	return b, nil
}

func superseded(id djinn.ID) error {
	return djinn.Errorf(djinn.InvalidIterator, "mailbox registration %s: this pull stream was superseded by delivery enabled to a target or by a newer pull; pull again to take the events back (those received and not acknowledged come again)", id)
}

// ApplyDisable clears the target. With only_if_epoch set it does so only
// while no enable or disable came since: a delivery failure must not
// disable a target the client set since.
func (s *State) ApplyDisable(c *statepb.MailboxDisable) (chan struct{}, error) {
	id, err := djinn.IDFromBytes("registration id", c.GetRegistrationId())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.regs[id]
	if !ok {
		return nil, noSuchRegistration(id)
	}
	if want := c.GetOnlyIfEpoch(); want != 0 && want != r.epoch {
		return nil, nil
	}
	r.target = nil
	r.epoch++
	return s.retargetLocked(r), nil
}

func (s *State) retargetLocked(r *registration) chan struct{} {
	if s.sink == nil {
		return nil
	}
	done := make(chan struct{})
	s.sink.Retargeted(r.id, r.target, r.epoch, append([]Stored(nil), r.events...), done)
	return done
}

// StoreResult is the outcome of ApplyStore: how many events, from the
// first, were stored, and why the next one was refused.
type StoreResult struct {
	Accepted int
	Err      error
}

// ApplyStore stores events that arrived at a mailbox listener, in order,
// until one is refused: with NoSuchObject when the registration is gone
// (EM.4.1), UnknownEvent when the event's (source, id) is on the
// unknown-event list (EM.4.1), and ResourceExhausted when the registration
// holds its maximum of stored events.
func (s *State) ApplyStore(c *statepb.MailboxStore) StoreResult {
	lid, err := djinn.IDFromBytes("listener id", c.GetListenerId())
	if err != nil {
		return StoreResult{Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.byListener[lid]
	if !ok {
		return StoreResult{Err: djinn.Errorf(djinn.NoSuchObject, "mailbox listener %s: no such listener (its registration's lease ended)", lid)}
	}
	var res StoreResult
	for _, ev := range c.GetEvents() {
		if _, bad := r.unknown[keyOf(ev)]; bad {
			res.Err = unknownEvent(ev)
			break
		}
		if len(r.events) >= s.maxStored {
			res.Err = djinn.Errorf(djinn.ResourceExhausted, "mailbox registration %s: holds %d stored events, the most allowed", r.id, s.maxStored)
			break
		}
		if err := s.leases.Quotas().Take(r.principal, quota.StoredEvents, 1); err != nil {
			res.Err = err
			break
		}
		st := Stored{Index: r.next, Event: ev}
		r.next++
		r.events = append(r.events, st)
		res.Accepted++
		if s.sink != nil && r.target != nil {
			s.sink.Stored(r.id, r.target, r.epoch, st)
		}
	}
	if res.Accepted > 0 {
		r.wakeLocked()
	}
	return res
}

func unknownEvent(ev *djinnpb.RemoteEvent) error {
	return djinn.Errorf(djinn.UnknownEvent, "event id %d from %x: refused by the registration's target (UnknownEvent)", ev.GetEventId(), ev.GetSource().GetObjectId())
}

// ApplyDelivered forgets stored events through an index, for each entry.
// Registrations already gone are skipped.
func (s *State) ApplyDelivered(c *statepb.MailboxDelivered) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range c.GetEntries() {
		id, err := djinn.IDFromBytes("registration id", e.GetRegistrationId())
		if err != nil {
			continue
		}
		if r, ok := s.regs[id]; ok {
			s.leases.Quotas().Release(r.principal, quota.StoredEvents, int64(r.forgetThrough(e.GetThroughIndex())))
		}
	}
}

// forgetThrough forgets the stored events through an index, and returns
// how many.
func (r *registration) forgetThrough(through uint64) int {
	n := 0
	for n < len(r.events) && r.events[n].Index <= through {
		n++
	}
	if n > 0 {
		clear(r.events[:n])
		r.events = r.events[n:]
		if len(r.events) == 0 {
			r.events = nil
		}
	}
	return n
}

// ApplyUnknown adds (source, id) pairs to the unknown-event list and drops
// stored events that match them (EM.4.1: they will never be delivered).
func (s *State) ApplyUnknown(c *statepb.MailboxUnknown) error {
	id, err := djinn.IDFromBytes("registration id", c.GetRegistrationId())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.regs[id]
	if !ok {
		return noSuchRegistration(id)
	}
	if r.unknown == nil && len(c.GetKeys()) > 0 {
		r.unknown = map[eventKey]*djinnpb.EventKey{}
	}
	for _, k := range c.GetKeys() {
		r.unknown[eventKey{source: refKey(k.GetSource()), id: k.GetEventId()}] = k
	}
	kept := r.events[:0]
	for _, e := range r.events {
		if _, bad := r.unknown[keyOf(e.Event)]; !bad {
			kept = append(kept, e)
		}
	}
	clear(r.events[len(kept):])
	s.leases.Quotas().Release(r.principal, quota.StoredEvents, int64(len(r.events)-len(kept)))
	r.events = kept
	if s.sink != nil {
		unknown := make(map[eventKey]bool, len(r.unknown))
		for k := range r.unknown {
			unknown[k] = true
		}
		s.sink.Forgot(r.id, func(st Stored) bool { return unknown[keyOf(st.Event)] })
	}
	return nil
}

// LeaseEnded removes the registration whose lease ended: its listener is no
// longer valid (EM.4.1) and its events are dropped.
func (s *State) LeaseEnded(id djinn.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.regs[id]
	if !ok {
		return
	}
	delete(s.regs, id)
	delete(s.byListener, r.listener)
	s.leases.Quotas().Release(r.principal, quota.StoredEvents, int64(len(r.events)))
	if r.wait != nil {
		close(r.wait)
		r.wait = nil
	}
	if s.sink != nil {
		s.sink.Removed(id)
	}
}

// Records returns the state for a snapshot.
func (s *State) Records() []*statepb.MailboxRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*statepb.MailboxRecord, 0, len(s.regs))
	for _, r := range s.regs {
		rec := &statepb.MailboxRecord{
			RegistrationId: r.id[:], ListenerId: r.listener[:], Cookie: r.cookie[:],
			Target: r.target, NextIndex: r.next, Principal: r.principal, Epoch: r.epoch, Pull: r.pull,
		}
		for _, k := range r.unknown {
			rec.Unknown = append(rec.Unknown, k)
		}
		for _, e := range r.events {
			rec.Events = append(rec.Events, &statepb.StoredEvent{Index: e.Index, Event: e.Event})
		}
		out = append(out, rec)
	}
	return out
}

// Reset empties the state before a restore.
func (s *State) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.regs {
		if r.wait != nil {
			close(r.wait) // pullers look again, at the restored state
			r.wait = nil
		}
	}
	s.regs = make(map[djinn.ID]*registration)
	s.byListener = make(map[djinn.ID]*registration)
}

// Restore adds one snapshot record (its lease is restored separately).
func (s *State) Restore(rec *statepb.MailboxRecord) error {
	id, err := djinn.IDFromBytes("registration id", rec.GetRegistrationId())
	if err != nil {
		return err
	}
	listener, err := djinn.IDFromBytes("listener id", rec.GetListenerId())
	if err != nil {
		return err
	}
	cookie, err := djinn.IDFromBytes("lease cookie", rec.GetCookie())
	if err != nil {
		return err
	}
	r := &registration{id: id, principal: rec.GetPrincipal(), listener: listener, cookie: cookie, target: rec.GetTarget(), epoch: rec.GetEpoch(),
		next: rec.GetNextIndex(), pull: rec.GetPull()}
	if len(rec.GetUnknown()) > 0 {
		r.unknown = map[eventKey]*djinnpb.EventKey{}
	}
	for _, k := range rec.GetUnknown() {
		r.unknown[eventKey{source: refKey(k.GetSource()), id: k.GetEventId()}] = k
	}
	for _, e := range rec.GetEvents() {
		r.events = append(r.events, Stored{Index: e.GetIndex(), Event: e.GetEvent()})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.regs[id] = r
	s.byListener[listener] = r
	s.leases.Quotas().Add(r.principal, quota.StoredEvents, int64(len(r.events)))
	return nil
}
