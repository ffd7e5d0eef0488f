package mailbox

import (
	"bytes"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/slab"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The mailbox state in snapshots: one record per registration, written
// from a view while the state goes on.

// View is the mailbox state as it was when taken, with the leases it
// names: taking it copies no registration (slab.View). Release it once
// written.
type View struct {
	s      *State
	regs   *slab.View[registration]
	more   *slab.View[extra]
	leases *lease.TableView
}

// View takes a view of the state.
func (s *State) View() *View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &View{s: s, regs: s.regs.View(), more: s.more.View(), leases: s.leases.View()}
}

// Release lets the view go; it is read no more.
func (v *View) Release() {
	v.leases.Release()
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	v.s.regs.Release(v.regs)
	v.s.more.Release(v.more)
}

// Each calls fn with every registration as a snapshot record, and stops
// at fn's first error. The record is reused: fn must not keep it.
func (v *View) Each(fn func(*statepb.MailboxRecord) error) error {
	var rec statepb.MailboxRecord
	var id, listener, cookie djinn.ID
	return v.regs.Each(func(_ uint32, r *registration) error {
		e := &noExtra
		if r.more != 0 {
			e = v.more.At(r.more - 1)
		}
		var principal string
		var ok bool
		if cookie, principal, ok = v.leases.Lease(r.lease); !ok {
			return djinn.Errorf(djinn.Internal, "mailbox registration %s: its lease is not in the table", r.id)
		}
		id, listener = r.id, r.listener
		rec.RegistrationId, rec.ListenerId, rec.Cookie = id[:], listener[:], cookie[:]
		rec.Target, rec.NextIndex, rec.Principal, rec.Epoch, rec.Pull = e.target, e.next, principal, e.epoch, e.pull
		rec.Unknown = rec.Unknown[:0]
		for _, k := range e.unknown {
			rec.Unknown = append(rec.Unknown, k)
		}
		rec.Events = rec.Events[:0]
		for _, ev := range e.events {
			rec.Events = append(rec.Events, &statepb.StoredEvent{Index: ev.Index, Event: ev.Event})
		}
		return fn(&rec)
	})
}

// Records returns the state as snapshot records: what a view writes,
// gathered.
func (s *State) Records() []*statepb.MailboxRecord {
	v := s.View()
	defer v.Release()
	var out []*statepb.MailboxRecord
	_ = v.Each(func(r *statepb.MailboxRecord) error {
		out = append(out, &statepb.MailboxRecord{
			RegistrationId: bytes.Clone(r.RegistrationId), ListenerId: bytes.Clone(r.ListenerId), Cookie: bytes.Clone(r.Cookie), Target: r.Target,
			NextIndex: r.NextIndex, Principal: r.Principal, Epoch: r.Epoch, Pull: r.Pull,
			Unknown: append([]*djinnpb.EventKey(nil), r.Unknown...), Events: append([]*statepb.StoredEvent(nil), r.Events...),
		})
		return nil
	})
	return out
}

// Reset empties the state before a restore.
func (s *State) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.more.Each(func(_ uint32, e *extra) {
		if e.wait != nil {
			close(e.wait) // pullers look again, at the restored state
		}
	})
	s.regs.Reset()
	s.more.Reset()
	s.byID.Reset()
	s.byListener.Reset()
	s.stored = 0
}

// Restore adds one snapshot record. Its lease, restored before it, is
// the lease table's.
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
	h, ok := s.leases.Handle(cookie)
	if !ok {
		return djinn.Errorf(djinn.Internal, "mailbox registration %s: its lease %s is not in the snapshot", id, cookie)
	}
	e := extra{principal: rec.GetPrincipal(), target: rec.GetTarget(), epoch: rec.GetEpoch(), next: rec.GetNextIndex(), pull: rec.GetPull()}
	if len(rec.GetUnknown()) > 0 {
		e.unknown = map[eventKey]*djinnpb.EventKey{}
	}
	for _, k := range rec.GetUnknown() {
		e.unknown[eventKey{source: refKey(k.GetSource()), id: k.GetEventId()}] = k
	}
	for _, se := range rec.GetEvents() {
		e.events = append(e.events, Stored{Index: se.GetIndex(), Event: se.GetEvent()})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.findLocked(id); dup {
		return djinn.Errorf(djinn.Internal, "mailbox registration %s: twice in the snapshot", id)
	}
	if _, dup := s.byListener.Find(listener); dup {
		return djinn.Errorf(djinn.Internal, "mailbox listener %s: twice in the snapshot", listener)
	}
	slot := s.addLocked(registration{id: id, listener: listener, lease: h})
	if e.target != nil || e.epoch != 0 || e.next != 1 || e.pull != 0 || e.unknown != nil || e.events != nil {
		m := s.more.Alloc()
		*s.more.Mut(m) = e
		s.regs.Mut(slot).more = m + 1
	}
	s.stored += len(e.events)
	s.leases.Quotas().Add(e.principal, quota.StoredEvents, int64(len(e.events)))
	return nil
}
