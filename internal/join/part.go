package join

import (
	"slices"
	"strings"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Part is the join settings' share of the replicated state machine: their
// commands and snapshot records.
func (s *State) Part() state.Part {
	return state.Part{
		Name: "join",
		Commands: []state.Command{
			state.On(func(_ int64, c *statepb.JoinConfigure) any { return state.Result(s.ApplyConfigure(c)) }),
			state.On(func(_ int64, c *statepb.JoinGroupsChange) any { return state.Result(s.ApplyGroups(c)) }),
			state.On(func(_ int64, c *statepb.JoinLocatorsChange) any { return state.Result(s.ApplyLocators(c)) }),
			state.On(func(_ int64, c *statepb.JoinAttributesChange) any { return state.Result(s.ApplyAttributes(c)) }),
		},
		Records:  []state.Record{state.Restores(s.Restore)},
		Snapshot: func() (state.Dump, error) { return state.Each(s.Records()), nil },
		Reset:    s.Reset,
	}
}

// Records returns every service's settings as snapshot records, by name.
func (s *State) Records() []*statepb.JoinRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*statepb.JoinRecord, 0, len(s.joins))
	for _, j := range s.joins {
		r := &statepb.JoinRecord{Service: j.Service, Groups: slices.Clone(j.Groups), Locators: slices.Clone(j.Locators),
			Attributes: wire.Entries(j.Attributes), GroupsSet: j.GroupsSet, LocatorsSet: j.LocatorsSet, AttributesSet: j.AttributesSet}
		if !j.ID.IsZero() {
			r.ServiceId = j.ID[:]
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b *statepb.JoinRecord) int { return strings.Compare(a.GetService(), b.GetService()) })
	return out
}

// Restore restores one service's settings from a snapshot record, checked
// as the commands check them.
func (s *State) Restore(r *statepb.JoinRecord) error {
	if err := checkName(r.GetService()); err != nil {
		return err
	}
	var id djinn.ID
	if len(r.GetServiceId()) > 0 {
		var err error
		if id, err = djinn.IDFromBytes("service id", r.GetServiceId()); err != nil {
			return err
		}
	}
	groups, err := CheckGroups("groups", r.GetGroups())
	if err != nil {
		return err
	}
	locators, err := lds.CheckLocators("locators", r.GetLocators())
	if err != nil {
		return err
	}
	attrs, err := checkAttributes(r.GetAttributes())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.joins[r.GetService()]; dup {
		return djinn.Errorf(djinn.InvalidArgument, "join record of %s: twice in the snapshot", clip(r.GetService()))
	}
	s.joins[r.GetService()] = &Join{Service: r.GetService(), ID: id, Groups: groups, Locators: locators, Attributes: attrs,
		GroupsSet: r.GetGroupsSet(), LocatorsSet: r.GetLocatorsSet(), AttributesSet: r.GetAttributesSet()}
	return nil
}
