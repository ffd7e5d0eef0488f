package renewal

import (
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// This file is the leader's side of the schedule: taking due client leases
// and putting back the ones a failed renewal must retry. Time comes in as
// arguments; nothing here is replicated.

// renewal is one client lease to renew, or to probe.
type renewal struct {
	// slot and serial name the client lease in the state, as long as it
	// is the one taken.
	slot    uint32
	serial  uint32
	key     Key
	cookie  djinn.ID
	request time.Duration // what to ask the landlord for
	actual  int64         // its expiration when taken
	// probe: a check that the landlord still holds the lease, asking for
	// the time it has left, so that it is not extended.
	probe bool
}

// SetProbe sets how long a client lease may go unchecked at its landlord
// between renewals (0 or less: until its renewal). A long lease is renewed
// a third of its grant before it expires; one cancelled behind the set's
// back (at its landlord, by its holder) would go unnoticed until then, so
// the leader checks it every d with a renewal that asks for the time it has
// left: that extends nothing, needs no log entry, rides in the landlord's
// RenewAll with the renewals, and a definite answer (UnknownLease) ends the
// lease with a failure event at once. Call it before the state is used.
func (s *State) SetProbe(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probe = int64(max(d, 0))
}

// scheduleLocked puts a client lease in the schedule for its next action:
// renewal a third of its granted time before it expires, or its removal
// when its desired expiration comes first (LR.2: a lease whose actual
// expiration is beyond its desired one is not renewed), or a probe before
// either when the lease would otherwise go unchecked longer than the probe
// interval.
func (s *State) scheduleLocked(now int64, slot uint32) {
	due, probe := s.nextLocked(now, s.cls.At(slot))
	cl := s.cls.Mut(slot)
	cl.early, cl.probe = true, probe
	s.pushLocked(slot, due)
}

// pushLocked puts the client lease at slot in the schedule, due then.
func (s *State) pushLocked(slot uint32, due int64) {
	s.cls.Mut(slot).due = due
	s.sched.Set(slot, due)
	if s.sched.IsMin(slot) {
		s.signal()
	}
}

// takenLocked returns the slot of the client lease r was taken as, if it
// is still there and still out of the schedule.
func (s *State) takenLocked(r renewal) (uint32, bool) {
	slot, ok := s.findLocked(r.key)
	if !ok || slot != r.slot || s.cls.At(slot).serial != r.serial || s.sched.Has(slot) {
		return 0, false
	}
	return slot, true
}

// nextLocked returns when the lease is next due, and whether for a probe.
func (s *State) nextLocked(now int64, cl *clientLease) (int64, bool) {
	if cl.actual >= cl.desired {
		return cl.desired, false
	}
	due := min(max(cl.renewAt(), now), cl.desired)
	if s.probe > 0 {
		if p := max(cl.renewed, cl.checked) + s.probe; p < due {
			return max(p, now), true
		}
	}
	return due, false
}

// renewAt is when the lease is due for renewal: a third of its granted
// time before it expires.
func (c *clientLease) renewAt() int64 {
	granted := max(c.actual-c.renewed, 0)
	return c.actual - granted/3
}

// probed puts back a probed client lease: found alive at checked, or not
// known to be otherwise (the probe failed indefinitely). A lease that was
// removed, or put back by a command since it was taken, is left alone.
func (s *State) probed(r renewal, alive bool, checked, now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.takenLocked(r)
	if !ok {
		return
	}
	if alive {
		s.cls.Mut(slot).checked = checked
	} else {
		s.cls.Mut(slot).checked = now // tried: the next probe is an interval later
	}
	s.scheduleLocked(now, slot)
}

// work is what the schedule hands the leader in one pass.
type work struct {
	renew map[*landlord][]renewal
	ends  []*statepb.RenewalEnding
	n     int
}

// take pops the client leases due by now (renewals up to window early, so
// renewals to one landlord batch), at most max of them, and returns them
// with the time the next one falls due (never if none). The caller comes
// back when that one is due, not a window before: the window is how far
// ahead of the first due lease take reaches, so leases due shortly after it
// share its call. Retries and releases are not anticipated: their due time
// is a delay, and a retry due at a lease's expiration, taken early, would
// be retried at once again and again until then.
func (s *State) take(now, window int64, max int) (work, int64) {
	w := work{renew: map[*landlord][]renewal{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	var later []uint32
	alive := map[*set]bool{}
	for s.sched.Len() > 0 && w.n < max {
		slot, _ := s.sched.Min()
		cl := s.cls.At(slot)
		if cl.due > now && (cl.due-cl.ahead(window) > now || cl.actual >= cl.desired) {
			break
		}
		s.sched.Pop()
		st := s.setNums[cl.set]
		live, ok := alive[st]
		if !ok {
			live = s.table.Alive(st.cookie, time.Unix(0, now))
			alive[st] = live
		}
		if end, ok := s.dueLocked(now, window, slot, live, &later); ok {
			if end != nil {
				w.ends = append(w.ends, end)
			} else {
				r := s.renewalLocked(now, window, slot)
				ll := s.landlords[cl.landlord]
				w.renew[ll] = append(w.renew[ll], r)
			}
			w.n++
		}
	}
	for _, slot := range later {
		s.sched.Push(slot, s.cls.At(slot).due)
	}
	next := int64(never)
	if s.sched.Len() > 0 {
		_, next = s.sched.Min()
	}
	return w, next
}

// dueLocked decides what a due client lease, just taken off the schedule,
// needs: nothing now (it goes on later, false), its end (an entry), or a
// renewal or probe (nil).
func (s *State) dueLocked(now, window int64, slot uint32, live bool, later *[]uint32) (*statepb.RenewalEnding, bool) {
	cl := s.cls.At(slot)
	switch {
	case !live:
		// The set's lease has ended and the log is about to destroy
		// the set: no further action on its leases (LR.2).
		m := s.cls.Mut(slot)
		m.due, m.early, m.probe = now+int64(time.Second), false, false
		*later = append(*later, slot)
		return nil, false
	case cl.desired <= now:
		return &statepb.RenewalEnding{Key: keyBytes(s.keyAt(slot)), Reason: statepb.RenewalEndReason_RENEWAL_END_REASON_DESIRED, Error: s.lastErr[slot]}, true
	case cl.actual <= now:
		return &statepb.RenewalEnding{Key: keyBytes(s.keyAt(slot)), Reason: statepb.RenewalEndReason_RENEWAL_END_REASON_EXPIRED, Error: s.lastErr[slot]}, true
	case cl.actual >= cl.desired:
		// Not renewed (LR.2): it waits for its desired expiration.
		m := s.cls.Mut(slot)
		m.due, m.probe = cl.desired, false
		*later = append(*later, slot)
		return nil, false
	}
	return nil, true
}

// renewalLocked is the renewal (or probe) of the due client lease at slot.
func (s *State) renewalLocked(now, window int64, slot uint32) renewal {
	cl := s.cls.At(slot)
	r := renewal{slot: slot, serial: cl.serial, key: s.keyAt(slot), cookie: cl.cookie, request: cl.request(now), actual: cl.actual}
	if cl.probe && cl.renewAt()-cl.ahead(window) > now {
		// Checked now, renewed later.
		r.request, r.probe = time.Duration(cl.actual-now), true
	}
	return r
}

func keyBytes(k Key) []byte { return k[:] }

// ahead returns how early take may renew the lease: up to window, but no
// more than a quarter of its granted time, so that a short lease is not due
// again as soon as it is renewed; and not at all when due is a retry or
// release time, a delay that must pass.
func (c *clientLease) ahead(window int64) int64 {
	if !c.early {
		return 0
	}
	return min(window, max(c.actual-c.renewed, 0)/4)
}

// request is the duration to ask for (LR.2): the renewal duration, but no
// more than the remaining desired duration, except that Any is asked as is.
func (c *clientLease) request(now int64) time.Duration {
	if c.renew == int64(djinn.Any) {
		return djinn.Any
	}
	if c.desired == never {
		return time.Duration(c.renew)
	}
	return time.Duration(min(c.renew, c.desired-now))
}

// retry puts back a client lease whose renewal failed indefinitely, to be
// tried again at due (no later than its expiration, when it fails), and
// remembers the error for the failure event. A lease that was removed, or
// put back by a command since it was taken, is left alone.
func (s *State) retry(r renewal, err *djinnpb.Error, due int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.takenLocked(r)
	if !ok {
		return
	}
	cl := s.cls.Mut(slot)
	cl.attempts++
	cl.early, cl.probe = false, false
	s.lastErr[slot] = err
	s.pushLocked(slot, min(due, cl.actual))
}

// attempts returns how many renewals of the lease failed in a row (0 once
// it is gone).
func (s *State) attempts(r renewal) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.findLocked(r.key)
	if !ok || slot != r.slot || s.cls.At(slot).serial != r.serial {
		return 0
	}
	return int(s.cls.At(slot).attempts)
}

// release puts back taken client leases whose outcome could not be
// recorded, to be looked at again at due.
func (s *State) release(keys []Key, due int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if slot, ok := s.findLocked(k); ok && !s.sched.Has(slot) {
			cl := s.cls.Mut(slot)
			cl.early, cl.probe = false, false
			s.pushLocked(slot, due)
		}
	}
}

// promote puts every client lease back in the schedule, as a new leader
// must: leases taken by an earlier term of this node were left out.
func (s *State) promote(now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for slot := range s.cls.Cap() {
		if s.cls.Live(slot) && !s.sched.Has(slot) {
			cl := s.cls.Mut(slot)
			cl.attempts, cl.early, cl.probe = 0, false, false
			delete(s.lastErr, slot)
			s.pushLocked(slot, now)
		}
	}
	s.signal()
}

// warnCheck is a set whose expiration warning the leader watches.
type warnCheck struct {
	id, cookie djinn.ID
	minWarning time.Duration
	warnedExp  int64
}

func (s *State) warnChecks() []warnCheck {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]warnCheck, 0, len(s.warnSets))
	for st := range s.warnSets {
		out = append(out, warnCheck{id: st.id, cookie: st.cookie, minWarning: time.Duration(st.lis[WarningEventID].minWarning), warnedExp: st.warnedExp})
	}
	return out
}

// SetSink attaches (or, with nil, detaches) the leader's deliverer and
// hands it every registration with undelivered events.
func (s *State) SetSink(k Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sink = k
	if k == nil {
		return
	}
	for _, st := range s.sets {
		for eid, l := range st.lis {
			if l.target != nil && len(l.pending) > 0 {
				k.Retargeted(st.id, int64(eid), l.target, l.epoch, append([]*djinnpb.RemoteEvent(nil), l.pending...), nil)
			}
		}
	}
}

// Overflowed returns how many events were not kept because their
// registration held its maximum of undelivered events.
func (s *State) Overflowed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overflowed
}
