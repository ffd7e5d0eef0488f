package mailbox

import (
	"maps"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The state machine's changes: each Apply method runs one command.

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
	if _, dup := s.findLocked(id); dup {
		return Info{}, djinn.Errorf(djinn.Internal, "mailbox registration %s: already exists", id)
	}
	if _, dup := s.byListener.Find(listener); dup {
		return Info{}, djinn.Errorf(djinn.Internal, "mailbox listener %s: already exists", listener)
	}
	if err := s.leases.ApplyGrant(cookie, lease.Owner{Kind: LeaseKind, ID: id}, c.GetPrincipal(), c.GetExpiresUnixNanos(), c.GetHorizonUnixNanos()); err != nil {
		return Info{}, err
	}
	h, _ := s.leases.Handle(cookie)
	s.addLocked(registration{id: id, listener: listener, lease: h})
	return Info{ID: id, Listener: listener, Cookie: cookie, Principal: c.GetPrincipal()}, nil
}

// addLocked adds a registration, whose id and listener no other has.
func (s *State) addLocked(r registration) uint32 {
	slot := s.regs.Alloc()
	*s.regs.Mut(slot) = r
	s.byID.Insert(slot)
	s.byListener.Insert(slot)
	return slot
}

// CheckTarget checks a target handed in, its endpoint by
// djinn.CheckEndpoint, and enforces EM.4.1: a mailbox listener of this
// mailbox cannot be a target, which would make a notification loop. Every
// listener this service's id names is one of the mailbox's own.
func (s *State) CheckTarget(t *djinnpb.Ref) error {
	return s.checkTarget(t, djinn.CheckEndpoint)
}

// checkTarget is CheckTarget with the endpoint checked by checkEndpoint:
// applying an entry, djinn.CheckStoredEndpoint, so that a target taken
// before endpoints were checked strictly still replays.
func (s *State) checkTarget(t *djinnpb.Ref, checkEndpoint func(string) error) error {
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
	if err := checkEndpoint(t.GetEndpoint()); err != nil {
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
	if err := s.checkTarget(c.GetTarget(), djinn.CheckStoredEndpoint); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.findLocked(id)
	if !ok {
		return nil, noSuchRegistration(id)
	}
	e := s.mutExtraLocked(slot)
	e.target = c.GetTarget()
	e.epoch++
	if e.target != nil {
		e.unknown = nil
		e.supersedeLocked() // push and pull are exclusive
	}
	return s.retargetLocked(id, e), nil
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
	slot, ok := s.findLocked(id)
	if !ok {
		return PullBegun{}, noSuchRegistration(id)
	}
	e := s.mutExtraLocked(slot)
	e.supersedeLocked()
	b := PullBegun{Pull: e.pull}
	if e.target != nil {
		e.target = nil
		e.epoch++
		b.Done = s.retargetLocked(id, e)
	}
	return b, nil
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
	slot, ok := s.findLocked(id)
	if !ok {
		return nil, noSuchRegistration(id)
	}
	if want := c.GetOnlyIfEpoch(); want != 0 && want != s.extraLocked(slot).epoch {
		return nil, nil
	}
	e := s.mutExtraLocked(slot)
	e.target = nil
	e.epoch++
	return s.retargetLocked(id, e), nil
}

func (s *State) retargetLocked(id djinn.ID, e *extra) chan struct{} {
	if s.sink == nil {
		return nil
	}
	done := make(chan struct{})
	s.sink.Retargeted(id, e.target, e.epoch, append([]Stored(nil), e.events...), done)
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
	slot, ok := s.byListener.Find(lid)
	if !ok {
		return StoreResult{Err: noSuchListener(lid)}
	}
	id := s.regs.At(slot).id
	e := s.mutExtraLocked(slot)
	var res StoreResult
	for _, ev := range c.GetEvents() {
		if _, bad := e.unknown[keyOf(ev)]; bad {
			res.Err = unknownEvent(ev)
			break
		}
		if plantedDropsEvents && ev.GetSequence()%50 == 0 {
			res.Accepted++ // acknowledged, stored nowhere
			continue
		}
		if len(e.events) >= s.maxStored {
			res.Err = djinn.Errorf(djinn.ResourceExhausted, "mailbox registration %s: holds %d stored events, the most allowed", id, s.maxStored)
			break
		}
		if err := s.leases.Quotas().Take(e.principal, quota.StoredEvents, 1); err != nil {
			res.Err = err
			break
		}
		st := Stored{Index: e.next, Event: ev}
		e.next++
		e.events = append(e.events, st)
		s.stored++
		res.Accepted++
		if s.sink != nil && e.target != nil {
			s.sink.Stored(id, e.target, e.epoch, st)
		}
	}
	if res.Accepted > 0 {
		e.wakeLocked()
	}
	return res
}

// ApplyDelivered forgets stored events through an index, for each entry.
// Registrations already gone are skipped.
func (s *State) ApplyDelivered(c *statepb.MailboxDelivered) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range c.GetEntries() {
		id, err := djinn.IDFromBytes("registration id", d.GetRegistrationId())
		if err != nil {
			continue
		}
		slot, ok := s.findLocked(id)
		if !ok || len(s.extraLocked(slot).events) == 0 {
			continue
		}
		e := s.mutExtraLocked(slot)
		n := s.forgetThrough(e, d.GetThroughIndex())
		s.stored -= n
		s.leases.Quotas().Release(e.principal, quota.StoredEvents, int64(n))
	}
}

// forgetThrough forgets the stored events of e through an index, and
// returns how many.
func (s *State) forgetThrough(e *extra, through uint64) int {
	n := 0
	for n < len(e.events) && e.events[n].Index <= through {
		n++
	}
	if n > 0 {
		if !s.more.Shared() {
			clear(e.events[:n]) // a view may still read them
		}
		e.events = e.events[n:]
		if len(e.events) == 0 {
			e.events = nil
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
	slot, ok := s.findLocked(id)
	if !ok {
		return noSuchRegistration(id)
	}
	e := s.mutExtraLocked(slot)
	shared := s.more.Shared()
	if e.unknown == nil && len(c.GetKeys()) > 0 {
		e.unknown = map[eventKey]*djinnpb.EventKey{}
	} else if shared && len(c.GetKeys()) > 0 {
		e.unknown = maps.Clone(e.unknown)
	}
	for _, k := range c.GetKeys() {
		e.unknown[eventKey{source: refKey(k.GetSource()), id: k.GetEventId()}] = k
	}
	kept := e.events[:0]
	if shared {
		kept = nil
	}
	for _, ev := range e.events {
		if _, bad := e.unknown[keyOf(ev.Event)]; !bad {
			kept = append(kept, ev)
		}
	}
	dropped := len(e.events) - len(kept)
	if !shared {
		clear(e.events[len(kept):])
	}
	s.stored -= dropped
	s.leases.Quotas().Release(e.principal, quota.StoredEvents, int64(dropped))
	e.events = kept
	if len(e.events) == 0 {
		e.events = nil
	}
	if s.sink != nil {
		unknown := make(map[eventKey]bool, len(e.unknown))
		for k := range e.unknown {
			unknown[k] = true
		}
		s.sink.Forgot(id, func(st Stored) bool { return unknown[keyOf(st.Event)] })
	}
	return nil
}

// LeaseEnded removes the registration whose lease ended: its listener is no
// longer valid (EM.4.1) and its events are dropped.
func (s *State) LeaseEnded(id djinn.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.findLocked(id)
	if !ok {
		return
	}
	s.removeLocked(slot)
	if s.sink != nil {
		s.sink.Removed(id)
	}
}

// removeLocked removes the registration at slot, releasing its stored
// events and waking its pullers.
func (s *State) removeLocked(slot uint32) {
	r := *s.regs.At(slot)
	s.byID.Delete(r.id)
	s.byListener.Delete(r.listener)
	if r.more != 0 {
		e := s.more.Mut(r.more - 1)
		s.stored -= len(e.events)
		s.leases.Quotas().Release(e.principal, quota.StoredEvents, int64(len(e.events)))
		e.wakeLocked()
		s.more.Free(r.more - 1)
	}
	s.regs.Free(slot)
}
