package lds

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// snapshot is the state's encoded form: everything but the counts, which
// Restore derives. Lists are sorted, so equal states encode alike.
type snapshot struct {
	Registrations []snapRegistration
	Registrars    []snapRegistrar
	NextEvent     int64
}

type snapRegistration struct {
	Cookie     djinn.ID
	EventID    int64
	Listener   []byte // a djinnpb.Ref
	Handback   []byte
	AllGroups  bool
	Groups     []string
	Locators   []string
	Discovered []djinn.ID
	Seq        int64
}

type snapRegistrar struct {
	Registrar []byte // a djinnpb.DiscoveredRegistrar
	Live      bool
}

func sortIDs(ids []djinn.ID) {
	slices.SortFunc(ids, func(a, b djinn.ID) int { return bytes.Compare(a[:], b[:]) })
}

// Records returns the state as snapshot records, cut with wire.Chunks.
func (s *State) Records() ([]*statepb.LDSRecord, error) {
	s.mu.RLock()
	snap := snapshot{NextEvent: s.nextEvent}
	var err error
	for _, g := range s.regs {
		lb, merr := proto.Marshal(g.listener)
		err = cmp.Or(err, merr)
		sr := snapRegistration{Cookie: g.cookie, EventID: g.eventID, Listener: lb, Handback: g.handback, AllGroups: g.allGroups,
			Groups: g.groups, Locators: g.locators, Seq: g.seq}
		for id := range g.discovered {
			sr.Discovered = append(sr.Discovered, id)
		}
		sortIDs(sr.Discovered)
		snap.Registrations = append(snap.Registrations, sr)
	}
	ids := make([]djinn.ID, 0, len(s.table))
	for id := range s.table {
		ids = append(ids, id)
	}
	sortIDs(ids)
	for _, id := range ids {
		e := s.table[id]
		b, merr := proto.Marshal(e.Proto())
		err = cmp.Or(err, merr)
		snap.Registrars = append(snap.Registrars, snapRegistrar{Registrar: b, Live: e.live})
	}
	s.mu.RUnlock()
	slices.SortFunc(snap.Registrations, func(a, b snapRegistration) int { return bytes.Compare(a.Cookie[:], b.Cookie[:]) })
	if err != nil {
		return nil, djinn.Errorf(djinn.Internal, "lookup discovery snapshot: %v", err)
	}
	b, err := json.Marshal(snap)
	if err != nil {
		return nil, djinn.Errorf(djinn.Internal, "lookup discovery snapshot: %v", err)
	}
	return wire.Records(b, func(c []byte, last bool) *statepb.LDSRecord { return &statepb.LDSRecord{State: c, Last: last} }), nil
}

// Restore adds a snapshot record; the last replaces the state with the
// records' (leases are restored separately). A snapshot that breaks the
// state's rules is refused, naming what is wrong, and changes nothing.
func (s *State) Restore(r *statepb.LDSRecord) error {
	fx := &effects{}
	defer s.tell(fx)
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
		return djinn.Errorf(djinn.Internal, "lookup discovery snapshot: %v", err)
	}
	n := &State{}
	n.resetLocked()
	n.nextEvent = snap.NextEvent
	for i, sr := range snap.Registrars {
		var pb djinnpb.DiscoveredRegistrar
		if err := proto.Unmarshal(sr.Registrar, &pb); err != nil {
			return djinn.Errorf(djinn.Internal, "lookup discovery snapshot registrar %d: %v", i, err)
		}
		reg, err := storedRegistrar(&pb)
		if err == nil && n.table[reg.ID] != nil {
			err = djinn.Errorf(djinn.Internal, "registrar %s: twice", reg.ID)
		}
		if err != nil {
			return djinn.Errorf(djinn.Internal, "lookup discovery snapshot registrar %d: %v", i, err)
		}
		n.table[reg.ID] = &entry{Registrar: reg, live: sr.Live}
	}
	for i, sr := range snap.Registrations {
		var l djinnpb.Ref
		if err := proto.Unmarshal(sr.Listener, &l); err != nil {
			return djinn.Errorf(djinn.Internal, "lookup discovery snapshot registration %d listener: %v", i, err)
		}
		if n.regs[sr.Cookie] != nil || sr.EventID <= 0 || sr.EventID > snap.NextEvent {
			return djinn.Errorf(djinn.Internal, "lookup discovery snapshot registration %d: cookie %s twice, or event id %d outside 1 to %d", i, sr.Cookie, sr.EventID, snap.NextEvent)
		}
		g := &registration{cookie: sr.Cookie, eventID: sr.EventID, listener: &l, handback: sr.Handback, discovered: map[djinn.ID]struct{}{}, seq: sr.Seq}
		n.setSetsLocked(g, sr.AllGroups, sr.Groups, sr.Locators, &effects{})
		for _, id := range sr.Discovered {
			e := n.table[id]
			if e == nil || g.holds(id) {
				return djinn.Errorf(djinn.Internal, "lookup discovery snapshot registration %d: discovered registrar %s unknown, or twice", i, id)
			}
			n.holdLocked(g, e)
		}
		n.regs[sr.Cookie] = g
	}
	s.regs, s.table, s.nextEvent = n.regs, n.table, n.nextEvent
	s.allGroups, s.groups, s.locators = n.allGroups, n.groups, n.locators
	s.version++
	fx.changed = true
	return nil
}

// Reset empties the state before a restore.
func (s *State) Reset() {
	fx := &effects{changed: true}
	defer s.tell(fx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}
