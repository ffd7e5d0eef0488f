package mailbox

import (
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/statepb"
)

// LeaseKind is the kind of a registration's lease.
const LeaseKind lease.Kind = 1

// Part is the mailbox's share of the replicated state machine: its
// commands, its snapshot records and its leases.
func (s *State) Part() state.Part {
	return state.Part{
		Name: "mailbox",
		Commands: []state.Command{
			state.On(func(_ int64, c *statepb.MailboxRegister) any { return state.Result(s.ApplyRegister(c)) }),
			state.On(func(_ int64, c *statepb.MailboxEnable) any { return state.Result(s.ApplyEnable(c)) }),
			state.On(func(_ int64, c *statepb.MailboxDisable) any { return state.Result(s.ApplyDisable(c)) }),
			state.On(func(_ int64, c *statepb.MailboxStore) any { return s.ApplyStore(c) }),
			state.On(func(_ int64, c *statepb.MailboxDelivered) any { s.ApplyDelivered(c); return nil }),
			state.On(func(_ int64, c *statepb.MailboxUnknown) any { return s.ApplyUnknown(c) }),
			state.On(func(_ int64, c *statepb.MailboxPull) any { return state.Result(s.ApplyPull(c)) }),
		},
		Records: []state.Record{state.Restores(s.Restore)},
		View: func() (state.Dump, func()) {
			v := s.View()
			return func(emit func(proto.Message) error) error {
				return v.Each(func(r *statepb.MailboxRecord) error { return emit(r) })
			}, v.Release
		},
		Reset:  s.Reset,
		Leases: []state.LeaseKind{{Kind: LeaseKind, Name: "mailbox registration", Quota: quota.MailboxRegistrations, Ended: func(o lease.Owner) { s.LeaseEnded(o.ID) }}},
	}
}
