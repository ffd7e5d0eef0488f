package renewal

import (
	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The renewal state in snapshots: one record per set, with its client
// leases and its listeners' undelivered events.

// Snapshot copies the state for a snapshot and returns a function that
// turns the copy into records, one per set, outside the state's lock: a
// million client leases are copied in a few tens of milliseconds, while
// building their records takes far longer.
func (s *State) Snapshot() func(emit func(*statepb.RenewalSetRecord) error) error {
	type leaseCopy struct {
		landlord                        *djinnpb.Ref
		cookie                          djinn.ID
		actual, desired, renew, renewed int64
		format                          djinnpb.SerialFormat
	}
	type setCopy struct {
		rec    *statepb.RenewalSetRecord
		leases []leaseCopy
	}
	s.mu.Lock()
	sets := make([]setCopy, 0, len(s.sets))
	for _, st := range s.sets {
		sc := setCopy{rec: &statepb.RenewalSetRecord{SetId: st.id[:], Cookie: st.cookie[:], Principal: st.principal, WarnedExpiresUnixNanos: st.warnedExp}}
		for eid, l := range st.lis {
			sc.rec.Listeners = append(sc.rec.Listeners, &statepb.RenewalListenerRecord{
				EventId: int64(eid), Target: l.target, Handback: l.handback, MinWarningNanos: l.minWarning,
				NextSequence: l.next, Epoch: l.epoch, Pending: append([]*djinnpb.RemoteEvent(nil), l.pending...),
			})
		}
		sc.leases = make([]leaseCopy, 0, len(st.leases))
		for cl := range st.leases {
			sc.leases = append(sc.leases, leaseCopy{cl.landlord.pb, cl.cookie, cl.actual, cl.desired, cl.renew, cl.renewed, cl.format})
		}
		sets = append(sets, sc)
	}
	s.mu.Unlock()
	return func(emit func(*statepb.RenewalSetRecord) error) error {
		for i := range sets {
			sc := &sets[i]
			// A big set takes several records, each well under a
			// snapshot record's size limit: the first with the set, the
			// others with its id and more of its leases.
			rec := sc.rec
			for first := true; first || len(sc.leases) > 0; first = false {
				n := min(len(sc.leases), snapshotChunk)
				if !first {
					rec = &statepb.RenewalSetRecord{SetId: sc.rec.SetId, Cookie: sc.rec.Cookie}
				}
				rec.Leases = make([]*statepb.RenewalLeaseRecord, n)
				for j, c := range sc.leases[:n] {
					rec.Leases[j] = &statepb.RenewalLeaseRecord{
						Landlord: c.landlord, Cookie: c.cookie[:], ExpiresUnixNanos: c.actual, Format: c.format,
						DesiredUnixNanos: c.desired, RenewNanos: c.renew, RenewedUnixNanos: c.renewed,
					}
				}
				if err := emit(rec); err != nil {
					return err
				}
				sc.leases = sc.leases[n:]
			}
			*sc = setCopy{} // let the set's records go
		}
		return nil
	}
}

// snapshotChunk is the most client leases in one snapshot record: about
// 4 MB, far below the record limit.
const snapshotChunk = 32768

// Reset empties the state before a restore.
func (s *State) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
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
	st, more := s.sets[id]
	s.mu.Unlock()
	if !more {
		st = newSet(id, cookie, rec.GetPrincipal())
		st.warnedExp = rec.GetWarnedExpiresUnixNanos()
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
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sets[id] = st
	if st.lis[WarningEventID].target != nil {
		s.warnSets[st] = struct{}{}
	}
	for _, lr := range rec.GetLeases() {
		ref, err := wire.RefFrom("lease landlord", lr.GetLandlord())
		if err != nil {
			return err
		}
		c, err := djinn.IDFromBytes("lease cookie", lr.GetCookie())
		if err != nil {
			return err
		}
		cl := &clientLease{
			set: st, landlord: s.landlordLocked(ref, lr.GetLandlord()), cookie: c,
			actual: lr.GetExpiresUnixNanos(), desired: lr.GetDesiredUnixNanos(), renew: lr.GetRenewNanos(),
			renewed: lr.GetRenewedUnixNanos(), format: lr.GetFormat(), heapIdx: -1,
		}
		s.leases.put(KeyOf(ref, c), cl)
		st.leases[cl] = struct{}{}
		s.table.Quotas().Add(st.principal, quota.RenewalLeases, 1)
		s.scheduleLocked(cl.renewed, cl)
	}
	return nil
}
