package renewal

import (
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/statepb"
)

// LeaseKind is the kind of a renewal set's own lease.
const LeaseKind lease.Kind = 2

// Part is the renewal service's share of the replicated state machine:
// its commands, its snapshot records and its leases.
func (s *State) Part() state.Part {
	return state.Part{
		Name: "renewal",
		Commands: []state.Command{
			state.On(func(_ int64, c *statepb.RenewalCreate) any { return state.Result(s.ApplyCreate(c)) }),
			state.On(func(now int64, c *statepb.RenewalAdd) any { return state.Result(s.ApplyAdd(now, c)) }),
			state.On(func(_ int64, c *statepb.RenewalRemove) any { return state.Result(s.ApplyRemove(c)) }),
			state.On(func(_ int64, c *statepb.RenewalListen) any { return state.Result(s.ApplyListen(c)) }),
			state.On(func(now int64, c *statepb.RenewalRenewed) any { s.ApplyRenewed(now, c); return nil }),
			state.On(func(now int64, c *statepb.RenewalEnd) any { s.ApplyEnd(now, c); return nil }),
			state.On(func(_ int64, c *statepb.RenewalWarn) any { s.ApplyWarn(c); return nil }),
			state.On(func(_ int64, c *statepb.RenewalDelivered) any { s.ApplyDelivered(c); return nil }),
		},
		Records: []state.Record{state.Restores(s.Restore)},
		View: func() (state.Dump, func()) {
			v := s.View()
			return func(emit func(proto.Message) error) error {
				return v.Each(func(r *statepb.RenewalSetRecord) error { return emit(r) })
			}, v.Release
		},
		Reset:    s.Reset,
		Restored: s.Restored,
		Leases:   []state.LeaseKind{{Kind: LeaseKind, Name: "renewal set", Quota: quota.RenewalSets, Ended: func(o lease.Owner) { s.LeaseEnded(o.ID) }}},
	}
}
