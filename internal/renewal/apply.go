package renewal

import (
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The state machine's changes: each Apply method runs one command.

// ApplyCreate creates a set and grants its lease.
func (s *State) ApplyCreate(c *statepb.RenewalCreate) (SetInfo, error) {
	id, err := djinn.IDFromBytes("set id", c.GetSetId())
	if err != nil {
		return SetInfo{}, err
	}
	cookie, err := djinn.IDFromBytes("lease cookie", c.GetCookie())
	if err != nil {
		return SetInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.sets[id]; dup {
		return SetInfo{}, djinn.Errorf(djinn.Internal, "renewal set %s: already exists", id)
	}
	if err := s.table.ApplyGrant(cookie, lease.Owner{Kind: LeaseKind, ID: id}, c.GetPrincipal(), c.GetExpiresUnixNanos(), c.GetHorizonUnixNanos()); err != nil {
		return SetInfo{}, err
	}
	st := newSet(id, cookie, c.GetPrincipal())
	s.addSetLocked(st)
	return st.info(), nil
}

func newSet(id, cookie djinn.ID, principal string) *set {
	st := &set{id: id, cookie: cookie, principal: principal}
	st.lis[0].next, st.lis[1].next = 1, 1
	return st
}

// AddResult is the outcome of ApplyAdd: whether the lease stayed in the set
// (a lease whose desired or actual expiration has passed is dropped at
// once, LR.2).
type AddResult struct {
	Kept bool
}

// ApplyAdd is renewFor (LR.2). A lease in another set of this service is
// refused; an equal lease in this set gets the new durations (the original
// copy is kept). A lease whose desired or actual expiration has passed is
// dropped at once, with a renewal failure event if and only if its actual
// expiration is before its desired one.
func (s *State) ApplyAdd(now int64, c *statepb.RenewalAdd) (AddResult, error) {
	id, err := djinn.IDFromBytes("set id", c.GetSetId())
	if err != nil {
		return AddResult{}, err
	}
	ref, err := wire.RefFrom("lease landlord", c.GetLandlord())
	if err != nil {
		return AddResult{}, err
	}
	cookie, err := djinn.IDFromBytes("lease cookie", c.GetCookie())
	if err != nil {
		return AddResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return AddResult{}, noSuchSet(id)
	}
	slot, ok := s.findLocked(KeyOf(ref, cookie))
	switch {
	case ok && s.setOf(slot) != st:
		return AddResult{}, djinn.Errorf(djinn.InvalidArgument, "lease %s: already in another renewal set of this service; remove it there first", cookie)
	case ok:
		cl := s.cls.Mut(slot)
		cl.desired, cl.renew = c.GetDesiredUnixNanos(), c.GetRenewNanos()
	default:
		if err := s.table.Quotas().Take(st.principal, quota.RenewalLeases, 1); err != nil {
			return AddResult{}, err
		}
		slot = s.addLeaseLocked(clientLease{
			set: st.num, landlord: s.landlordLocked(ref, c.GetLandlord()), cookie: cookie,
			actual: c.GetExpiresUnixNanos(), desired: c.GetDesiredUnixNanos(), renew: c.GetRenewNanos(),
			renewed: now, format: c.GetFormat(),
		})
	}
	if cl := s.cls.At(slot); cl.desired <= now || cl.actual <= now {
		s.endLocked(slot, cl.actual < cl.desired, nil)
		return AddResult{}, nil
	}
	s.cls.Mut(slot).attempts = 0
	delete(s.lastErr, slot)
	s.scheduleLocked(now, slot)
	return AddResult{Kept: true}, nil
}

// endLocked removes a client lease on the service's own account, with a
// renewal failure event when failed (LR.2.1) carrying err.
func (s *State) endLocked(slot uint32, failed bool, err *djinnpb.Error) {
	st, abs := s.setOf(slot), s.absoluteLocked(slot)
	s.removeLocked(slot)
	if !failed {
		return
	}
	p := &djinnpb.RenewalFailure{Lease: abs, Error: err}
	s.raiseLocked(st, FailureEventID, p)
}

// absoluteLocked returns the wire form of the client lease at slot, with
// its recorded expiration as an instant: events are kept and delivered
// later, so a duration would be stale.
func (s *State) absoluteLocked(slot uint32) *djinnpb.Lease {
	c := s.cls.At(slot)
	cookie := c.cookie
	return &djinnpb.Lease{
		Landlord: s.landlords[c.landlord].pb, Cookie: cookie[:],
		ExpirationUnixNanos: c.actual, Format: djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE,
	}
}

// raiseLocked gives the next sequence number of a set's event id to an
// event and keeps it for delivery if a listener is registered. An event
// with no registration still uses its sequence number (LR.2.1: two events
// never share one).
func (s *State) raiseLocked(st *set, eventID int64, payload *djinnpb.RenewalFailure) {
	a, err := anypb.New(payload)
	if err != nil {
		return // a message of ours always marshals
	}
	s.raiseAnyLocked(st, eventID, a)
}

func (s *State) raiseAnyLocked(st *set, eventID int64, payload *anypb.Any) {
	svc := s.service()
	l := &st.lis[eventID]
	seq := l.next
	l.next++
	if l.target == nil {
		return
	}
	if len(l.pending) >= DefaultMaxPending {
		s.overflowed++
		return
	}
	ev := &djinnpb.RemoteEvent{
		Source: &djinnpb.Ref{ServiceId: svc[:], ObjectId: st.id[:]}, EventId: eventID, Sequence: seq,
		Handback: l.handback, Payload: payload,
	}
	l.pending = append(l.pending, ev)
	if s.sink != nil {
		s.sink.Event(st.id, eventID, l.target, l.epoch, ev)
	}
}

// ApplyRemove takes a client lease out of a set (LR.2 remove). It returns
// the lease as it was, or nil when it was not in the set.
func (s *State) ApplyRemove(c *statepb.RenewalRemove) (*ClientLease, error) {
	id, err := djinn.IDFromBytes("set id", c.GetSetId())
	if err != nil {
		return nil, err
	}
	k, err := keyFrom(c.GetKey())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return nil, noSuchSet(id)
	}
	slot, ok := s.findLocked(k)
	if !ok || s.setOf(slot) != st {
		return nil, nil
	}
	v := s.viewLocked(slot)
	s.removeLocked(slot)
	return &v, nil
}

// ApplyListen sets or clears a set's registration for one event id. It
// returns the registration's sequence number (the last one used) and a
// channel closed when the leader's deliverer has switched (nil without
// one).
func (s *State) ApplyListen(c *statepb.RenewalListen) (ListenResult, error) {
	id, err := djinn.IDFromBytes("set id", c.GetSetId())
	if err != nil {
		return ListenResult{}, err
	}
	eid := c.GetEventId()
	if eid != FailureEventID && eid != WarningEventID {
		return ListenResult{}, djinn.Errorf(djinn.InvalidArgument, "event id %d: want %d or %d", eid, FailureEventID, WarningEventID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return ListenResult{}, noSuchSet(id)
	}
	l := &st.lis[eid]
	if want := c.GetOnlyIfEpoch(); want != 0 && want != l.epoch {
		return ListenResult{Seq: l.next - 1}, nil
	}
	l.epoch++
	l.target, l.handback, l.minWarning = c.GetTarget(), c.GetHandback(), c.GetMinWarningNanos()
	if l.target == nil {
		l.handback, l.minWarning = nil, 0
		clear(l.pending)
		l.pending = nil
	}
	if eid == WarningEventID {
		if l.target != nil {
			// A new registration is warned even of an expiration an
			// earlier one was warned of.
			st.warnedExp = 0
			s.warnSets[st] = struct{}{}
			select {
			case s.warn <- struct{}{}:
			default:
			}
		} else {
			delete(s.warnSets, st)
		}
	}
	res := ListenResult{Seq: l.next - 1}
	if s.sink != nil {
		res.Done = make(chan struct{})
		s.sink.Retargeted(st.id, eid, l.target, l.epoch, append([]*djinnpb.RemoteEvent(nil), l.pending...), res.Done)
	}
	return res, nil
}

// ListenResult is the outcome of ApplyListen.
type ListenResult struct {
	Seq  int64
	Done chan struct{}
}

// ApplyRenewed records successful renewals and schedules the next ones.
func (s *State) ApplyRenewed(now int64, c *statepb.RenewalRenewed) {
	keys, exps := c.GetKeys(), c.GetExpiresUnixNanos()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < len(exps) && (i+1)*len(Key{}) <= len(keys); i++ {
		k := Key(keys[i*len(Key{}) : (i+1)*len(Key{})])
		slot, ok := s.findLocked(k)
		if !ok {
			continue // removed meanwhile
		}
		cl := s.cls.Mut(slot)
		cl.actual, cl.renewed, cl.attempts = exps[i], now, 0
		delete(s.lastErr, slot)
		s.scheduleLocked(now, slot)
	}
}

// ApplyEnd takes client leases out of their sets on the service's own
// account, checking that the reason still holds: a renewFor applied since
// the leader decided may have changed it. Entries whose reason no longer
// holds are rescheduled.
func (s *State) ApplyEnd(now int64, c *statepb.RenewalEnd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range c.GetEntries() {
		k, err := keyFrom(e.GetKey())
		if err != nil {
			continue
		}
		slot, ok := s.findLocked(k)
		if !ok {
			continue
		}
		cl := s.cls.At(slot)
		switch e.GetReason() {
		case statepb.RenewalEndReason_RENEWAL_END_REASON_DESIRED:
			if cl.desired <= now {
				s.endLocked(slot, cl.actual < cl.desired, e.GetError())
				continue
			}
		case statepb.RenewalEndReason_RENEWAL_END_REASON_EXPIRED:
			if cl.actual <= now && cl.actual < cl.desired {
				s.endLocked(slot, true, e.GetError())
				continue
			}
		case statepb.RenewalEndReason_RENEWAL_END_REASON_DEFINITE:
			s.endLocked(slot, true, e.GetError())
			continue
		}
		s.scheduleLocked(now, slot)
	}
}

// ApplyWarn raises a set's expiration warning event, once for each set
// lease expiration.
func (s *State) ApplyWarn(c *statepb.RenewalWarn) {
	id, err := djinn.IDFromBytes("set id", c.GetSetId())
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok || st.lis[WarningEventID].target == nil || c.GetSetExpiresUnixNanos() == st.warnedExp {
		return
	}
	st.warnedExp = c.GetSetExpiresUnixNanos()
	a, err := anypb.New(&djinnpb.ExpirationWarning{SetLease: c.GetSetLease()})
	if err != nil {
		return
	}
	s.raiseAnyLocked(st, WarningEventID, a)
}

// ApplyDelivered forgets delivered events.
func (s *State) ApplyDelivered(c *statepb.RenewalDelivered) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range c.GetEntries() {
		id, err := djinn.IDFromBytes("set id", e.GetSetId())
		if err != nil {
			continue
		}
		st, ok := s.sets[id]
		eid := e.GetEventId()
		if !ok || (eid != FailureEventID && eid != WarningEventID) {
			continue
		}
		l := &st.lis[eid]
		n := 0
		for n < len(l.pending) && l.pending[n].GetSequence() <= e.GetThroughSequence() {
			n++
		}
		clear(l.pending[:n])
		l.pending = l.pending[n:]
		if len(l.pending) == 0 {
			l.pending = nil
		}
	}
}

// LeaseEnded destroys the set whose lease ended. Its client leases are left
// alone: neither renewed nor cancelled (LR.2).
func (s *State) LeaseEnded(id djinn.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return
	}
	st.keyed = nil // the set goes: no lease need leave its order one by one
	s.leasesOf(st, s.removeLocked)
	s.dropSetLocked(st)
	if s.sink != nil {
		s.sink.Removed(id)
	}
}
