package mailbox

import (
	"sort"
	"sync"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/slab"
	"github.com/djinn-go/djinn/proto/djinnpb"
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

// registration is what every registration holds, by value in the
// state's slab: 40 bytes and no pointer. Its lease's cookie and principal
// are the lease table's, found by the lease's handle; the rest of its
// state, which most registrations never have, is an extra.
type registration struct {
	id       djinn.ID
	listener djinn.ID
	lease    lease.Handle
	// more is 1 + the slot of the registration's extra, 0 for none.
	more uint32
}

// extra is the state a registration gains once used: a delivery target,
// stored events, unknown events, pull streams. Without one, a
// registration has no target, no event, epoch and pull 0, and its next
// event's index is 1.
//
// A snapshot's view shares an extra's target, map and slice: while one is
// held (State.more.Shared), they are replaced, never changed in place
// (events are appended past every view's end, which no view reads).
type extra struct {
	// principal is the registration's, kept for its quotas: its lease may
	// end before its stored events are released.
	principal string
	target    *djinnpb.Ref // nil: delivery disabled
	epoch     uint64       // bumped by every enable and disable
	next      uint64       // index of the next stored event
	unknown   map[eventKey]*djinnpb.EventKey
	events    []Stored
	// pull numbers the registration's current pull stream: bumped by
	// every pull and every enable of delivery to a target, which
	// supersede the streams before.
	pull uint64
	// wait is closed when an event is stored or the pull stream is
	// superseded; pullers wait on it.
	wait chan struct{}
}

// noExtra is the extra of a registration that has none.
var noExtra = extra{next: 1}

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
	// regs, more, byID, byListener, stored and sink are guarded by mu.
	regs       slab.Slab[registration]
	more       slab.Slab[extra]
	byID       *slab.Index[djinn.ID]
	byListener *slab.Index[djinn.ID]
	stored     int // events stored, in every registration
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
	s := &State{leases: t, maxStored: maxStored, service: service}
	s.byID = slab.NewIndex(func(slot uint32) djinn.ID { return s.regs.At(slot).id })
	s.byListener = slab.NewIndex(func(slot uint32) djinn.ID { return s.regs.At(slot).listener })
	return s
}

// findLocked returns the slot of registration id.
func (s *State) findLocked(id djinn.ID) (uint32, bool) { return s.byID.Find(id) }

// extraLocked returns the extra of the registration at slot, to read
// only: noExtra when it has none.
func (s *State) extraLocked(slot uint32) *extra {
	if m := s.regs.At(slot).more; m != 0 {
		return s.more.At(m - 1)
	}
	return &noExtra
}

// mutExtraLocked returns the extra of the registration at slot, to
// change, giving it one first if it has none. The pointer is good until
// the next extra is made or let go.
func (s *State) mutExtraLocked(slot uint32) *extra {
	r := s.regs.At(slot)
	if r.more == 0 {
		m := s.more.Alloc()
		e := s.more.Mut(m)
		*e = noExtra
		_, e.principal, _ = s.leases.Owned(r.lease, lease.Owner{Kind: LeaseKind, ID: r.id})
		s.regs.Mut(slot).more = m + 1
		return e
	}
	return s.more.Mut(r.more - 1)
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
	s.regs.Each(func(slot uint32, r *registration) {
		if e := s.extraLocked(slot); e.target != nil && len(e.events) > 0 {
			k.Retargeted(r.id, e.target, e.epoch, append([]Stored(nil), e.events...), nil)
		}
	})
}

// Len returns the number of registrations and of stored events.
func (s *State) Len() (regs, events int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.regs.Len(), s.stored
}

// Registrations returns the number of registrations.
func (s *State) Registrations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.regs.Len()
}

// Info is a registration as clients see it.
type Info struct {
	ID, Listener, Cookie djinn.ID
	Principal            string
	Target               *djinnpb.Ref
	Stored               int
	// Last is the index of the last event stored (0: none yet), whether
	// or not it was acknowledged since.
	Last    uint64
	Unknown []*djinnpb.EventKey
}

// infoLocked returns the registration at slot as clients see it, or
// false when its lease has just ended (it is removed in the same Apply).
func (s *State) infoLocked(slot uint32) (Info, bool) {
	r := s.regs.At(slot)
	cookie, principal, ok := s.leases.Owned(r.lease, lease.Owner{Kind: LeaseKind, ID: r.id})
	if !ok {
		return Info{}, false
	}
	e := s.extraLocked(slot)
	in := Info{ID: r.id, Listener: r.listener, Cookie: cookie, Principal: principal, Target: e.target, Stored: len(e.events), Last: e.next - 1}
	for _, k := range e.unknown {
		in.Unknown = append(in.Unknown, k)
	}
	return in, true
}

func noSuchRegistration(id djinn.ID) error {
	return djinn.Errorf(djinn.NoSuchObject, "mailbox registration %s: no such registration (lease expired or cancelled)", id)
}

func noSuchListener(id djinn.ID) error {
	return djinn.Errorf(djinn.NoSuchObject, "mailbox listener %s: no such listener (its registration's lease ended)", id)
}

// Get returns a registration.
func (s *State) Get(id djinn.ID) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slot, ok := s.findLocked(id); ok {
		if in, ok := s.infoLocked(slot); ok {
			return in, nil
		}
	}
	return Info{}, noSuchRegistration(id)
}

// ByListener returns the registration a mailbox listener belongs to.
func (s *State) ByListener(listener djinn.ID) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slot, ok := s.byListener.Find(listener); ok {
		if in, ok := s.infoLocked(slot); ok {
			return in, nil
		}
	}
	return Info{}, noSuchListener(listener)
}

// IsUnknown reports whether the registration's unknown-event list holds
// the event's (source, id).
func (s *State) IsUnknown(reg djinn.ID, ev *djinnpb.RemoteEvent) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.findLocked(reg)
	if !ok {
		return false
	}
	_, bad := s.extraLocked(slot).unknown[keyOf(ev)]
	return bad
}

// After returns, for pull stream number pull, up to max stored events with
// an index above after (none for max 0), and a channel closed when another
// event is stored, the registration ends or the stream is superseded (then
// InvalidIterator).
func (s *State) After(reg djinn.ID, pull, after uint64, max int) ([]Stored, <-chan struct{}, error) {
	return s.AppendAfter(nil, reg, pull, after, max)
}

// AppendAfter is After appending the events to buf[:0]: a caller that is
// done with them by its next call reuses one slice.
func (s *State) AppendAfter(buf []Stored, reg djinn.ID, pull, after uint64, max int) ([]Stored, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.findLocked(reg)
	if !ok {
		return nil, nil, noSuchRegistration(reg)
	}
	if s.extraLocked(slot).pull != pull {
		return nil, nil, superseded(reg)
	}
	e := s.mutExtraLocked(slot)
	// Stored events are in index order.
	i := sort.Search(len(e.events), func(i int) bool { return e.events[i].Index > after })
	var out []Stored
	if n := min(max, len(e.events)-i); n > 0 {
		out = append(buf[:0], e.events[i:i+n]...)
	}
	if e.wait == nil {
		e.wait = make(chan struct{})
	}
	return out, e.wait, nil
}

// wakeLocked wakes the pullers waiting on the registration.
func (e *extra) wakeLocked() {
	if e.wait != nil {
		close(e.wait)
		e.wait = nil
	}
}

// supersedeLocked ends the registration's pull stream: a newer consumer
// takes the events.
func (e *extra) supersedeLocked() {
	e.pull++
	e.wakeLocked()
}

func superseded(id djinn.ID) error {
	return djinn.Errorf(djinn.InvalidIterator, "mailbox registration %s: this pull stream was superseded by delivery enabled to a target or by a newer pull; pull again to take the events back (those received and not acknowledged come again)", id)
}

func unknownEvent(ev *djinnpb.RemoteEvent) error {
	return djinn.Errorf(djinn.UnknownEvent, "event id %d from %x: refused by the registration's target (UnknownEvent)", ev.GetEventId(), ev.GetSource().GetObjectId())
}
