package lookup

import (
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The kinds of the lookup service's leases.
const (
	ItemLeaseKind  lease.Kind = 6 // a registered item's
	WatchLeaseKind lease.Kind = 7 // a notify registration's
)

// Part is the lookup service's share of the replicated state machine:
// its commands, its snapshot records and its leases.
func (s *State) Part() state.Part {
	return state.Part{
		Name: "lookup",
		Commands: []state.Command{
			state.On(func(_ int64, c *statepb.LookupRegister) any { return s.ApplyRegister(c) }),
			state.On(func(_ int64, c *statepb.LookupAttributes) any { return s.ApplyAttributes(c) }),
			state.On(func(_ int64, c *statepb.LookupNotify) any { return state.Result(s.ApplyNotify(c)) }),
		},
		Records: []state.Record{state.Restores(s.Restore)},
		Snapshot: func() (state.Dump, error) {
			snap, err := s.export() // now, between applies; encoded while they go on
			return func(emit func(proto.Message) error) error {
				recs, err := snap.records()
				if err != nil {
					return err
				}
				return state.Each(recs)(emit)
			}, err
		},
		Reset: s.Reset,
		Leases: []state.LeaseKind{
			{Kind: ItemLeaseKind, Name: "lookup registration", Quota: quota.LookupItems, Ended: s.LeaseEnded},
			{Kind: WatchLeaseKind, Name: "lookup notification", Quota: quota.LookupWatches, Ended: s.LeaseEnded},
		},
	}
}
