package lds

import (
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/statepb"
)

// LeaseKind is the kind of a registration's lease.
const LeaseKind lease.Kind = 8

// Part is the lookup discovery service's share of the replicated state
// machine: its commands, its snapshot records and its leases.
func (s *State) Part() state.Part {
	return state.Part{
		Name: "lds",
		Commands: []state.Command{
			state.On(func(_ int64, c *statepb.LDSRegister) any { return state.Result(s.ApplyRegister(c)) }),
			state.On(func(_ int64, c *statepb.LDSGroups) any { return state.Result(s.ApplyGroups(c)) }),
			state.On(func(_ int64, c *statepb.LDSLocators) any { return state.Result(s.ApplyLocators(c)) }),
			state.On(func(_ int64, c *statepb.LDSDiscard) any { return state.Result(s.ApplyDiscard(c)) }),
			state.On(func(_ int64, c *statepb.LDSFound) any { return s.ApplyFound(c) }),
			state.On(func(_ int64, c *statepb.LDSLost) any { return s.ApplyLost(c) }),
		},
		Records: []state.Record{state.Restores(s.Restore)},
		Snapshot: func() (state.Dump, error) {
			recs, err := s.Records()
			return state.Each(recs), err
		},
		Reset:  s.Reset,
		Leases: []state.LeaseKind{{Kind: LeaseKind, Name: "lookup discovery registration", Quota: quota.LDSRegistrations, Ended: func(o lease.Owner) { s.LeaseEnded(o.ID) }}},
	}
}
