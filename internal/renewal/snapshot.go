package renewal

import (
	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/slab"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The renewal state in snapshots: one record per set, with its client
// leases and its listeners' undelivered events; a set with many leases
// takes several records.

// View is the renewal state as it was when taken: the sets and landlords
// copied (they are few), the client leases a view of their slab (no lease
// copied). Release it once written.
type View struct {
	s         *State
	sets      []setCopy
	landlords []*djinnpb.Ref // by number
	cls       *slab.View[clientLease]
}

// setCopy is a set as a view holds it: its record without leases, and
// where its leases start.
type setCopy struct {
	rec   *statepb.RenewalSetRecord
	first uint32
}

// View takes a view of the state.
func (s *State) View() *View {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &View{s: s, sets: make([]setCopy, 0, len(s.sets)), landlords: make([]*djinnpb.Ref, len(s.landlords)), cls: s.cls.View()}
	for i, l := range s.landlords {
		if l != nil {
			v.landlords[i] = l.pb
		}
	}
	for _, st := range s.sets {
		rec := &statepb.RenewalSetRecord{SetId: st.id[:], Cookie: st.cookie[:], Principal: st.principal, WarnedExpiresUnixNanos: st.warnedExp}
		for eid, l := range st.lis {
			rec.Listeners = append(rec.Listeners, &statepb.RenewalListenerRecord{
				EventId: int64(eid), Target: l.target, Handback: l.handback, MinWarningNanos: l.minWarning,
				NextSequence: l.next, Epoch: l.epoch, Pending: append([]*djinnpb.RemoteEvent(nil), l.pending...),
			})
		}
		v.sets = append(v.sets, setCopy{rec: rec, first: st.first})
	}
	return v
}

// Release lets the view go; it is read no more.
func (v *View) Release() {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	v.s.cls.Release(v.cls)
}

// snapshotChunk is the most client leases in one snapshot record: about
// 4 MB, far below the record limit.
const snapshotChunk = 32768

// Each calls fn with the view's records, once, and stops at fn's first
// error.
// A big set takes several records, each well under a snapshot record's
// size limit: the first with the set, the others with its id and more of
// its leases. The lease records are reused: fn must not keep them.
func (v *View) Each(fn func(*statepb.RenewalSetRecord) error) error {
	recs := make([]statepb.RenewalLeaseRecord, snapshotChunk)
	cookies := make([]djinn.ID, snapshotChunk)
	for i := range v.sets {
		sc := &v.sets[i]
		rec := sc.rec
		next := sc.first
		for first := true; first || next != 0; first = false {
			if !first {
				rec = &statepb.RenewalSetRecord{SetId: sc.rec.SetId, Cookie: sc.rec.Cookie}
			}
			rec.Leases = rec.Leases[:0]
			for n := 0; next != 0 && n < snapshotChunk; n++ {
				c := v.cls.At(next - 1)
				cookies[n] = c.cookie
				r := &recs[n]
				r.Landlord, r.Cookie, r.ExpiresUnixNanos, r.Format = v.landlords[c.landlord], cookies[n][:], c.actual, c.format
				r.DesiredUnixNanos, r.RenewNanos, r.RenewedUnixNanos = c.desired, c.renew, c.renewed
				rec.Leases = append(rec.Leases, r)
				next = c.next
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
		sc.rec = nil // let the set's record go
	}
	return nil
}

// Records returns the state as snapshot records: what a view writes,
// gathered.
func (s *State) Records() []*statepb.RenewalSetRecord {
	v := s.View()
	defer v.Release()
	var out []*statepb.RenewalSetRecord
	_ = v.Each(func(r *statepb.RenewalSetRecord) error {
		c := &statepb.RenewalSetRecord{SetId: r.SetId, Cookie: r.Cookie, Principal: r.Principal, WarnedExpiresUnixNanos: r.WarnedExpiresUnixNanos, Listeners: r.Listeners}
		for _, l := range r.Leases {
			c.Leases = append(c.Leases, &statepb.RenewalLeaseRecord{Landlord: l.Landlord, Cookie: append([]byte(nil), l.Cookie...), ExpiresUnixNanos: l.ExpiresUnixNanos,
				Format: l.Format, DesiredUnixNanos: l.DesiredUnixNanos, RenewNanos: l.RenewNanos, RenewedUnixNanos: l.RenewedUnixNanos})
		}
		out = append(out, c)
		return nil
	})
	return out
}

// Reset empties the state before a restore.
func (s *State) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

// Restored builds the key orders of the sets restored.
func (s *State) Restored() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.sets {
		s.orderLocked(st)
	}
	return nil
}

// Restore adds one snapshot record (its lease is restored separately).
func (s *State) Restore(rec *statepb.RenewalSetRecord) error {
	id, err := djinn.IDFromBytes("set id", rec.GetSetId())
	if err != nil {
		return err
	}
	cookie, err := djinn.IDFromBytes("lease cookie", rec.GetCookie())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, more := s.sets[id]
	if !more {
		st = newSet(id, cookie, rec.GetPrincipal())
		st.warnedExp = rec.GetWarnedExpiresUnixNanos()
		s.addSetLocked(st)
	}
	for _, l := range rec.GetListeners() {
		eid := l.GetEventId()
		if eid != FailureEventID && eid != WarningEventID {
			return djinn.Errorf(djinn.Internal, "renewal set %s: listener for event id %d", id, eid)
		}
		st.lis[eid] = listener{
			target: l.GetTarget(), handback: l.GetHandback(), minWarning: l.GetMinWarningNanos(),
			next: l.GetNextSequence(), epoch: l.GetEpoch(), pending: l.GetPending(),
		}
	}
	if st.lis[WarningEventID].target != nil {
		s.warnSets[st] = struct{}{}
	}
	// The set's key order is built once its leases are in (Restored),
	// not lease by lease.
	st.unordered = st.unordered || len(rec.GetLeases()) > 0
	for _, lr := range rec.GetLeases() {
		if err := s.restoreLeaseLocked(st, lr); err != nil {
			return err
		}
	}
	return nil
}

func (s *State) restoreLeaseLocked(st *set, lr *statepb.RenewalLeaseRecord) error {
	ref, err := wire.RefFrom("lease landlord", lr.GetLandlord())
	if err != nil {
		return err
	}
	c, err := djinn.IDFromBytes("lease cookie", lr.GetCookie())
	if err != nil {
		return err
	}
	if _, dup := s.findLocked(KeyOf(ref, c)); dup {
		return djinn.Errorf(djinn.Internal, "renewal set %s: client lease %s twice in the snapshot", st.id, c)
	}
	slot := s.addLeaseLocked(clientLease{
		set: st.num, landlord: s.landlordLocked(ref, lr.GetLandlord()), cookie: c,
		actual: lr.GetExpiresUnixNanos(), desired: lr.GetDesiredUnixNanos(), renew: lr.GetRenewNanos(),
		renewed: lr.GetRenewedUnixNanos(), format: lr.GetFormat(),
	})
	s.table.Quotas().Add(st.principal, quota.RenewalLeases, 1)
	s.scheduleLocked(s.cls.At(slot).renewed, slot)
	return nil
}
