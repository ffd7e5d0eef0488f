package txn

import (
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/statepb"
)

// LeaseKind is the kind of a transaction's lease.
const LeaseKind lease.Kind = 3

// Part is the transaction manager's share of the replicated state
// machine: its commands, its snapshot records and its leases.
func (s *State) Part() state.Part {
	return state.Part{
		Name: "txn",
		Commands: []state.Command{
			state.On(func(_ int64, c *statepb.TxnCreate) any { return state.Result(s.ApplyCreate(c)) }),
			state.On(func(now int64, c *statepb.TxnJoin) any { return s.ApplyJoin(now, c) }),
			state.On(func(_ int64, c *statepb.TxnVoting) any { return state.Result(s.ApplyVoting(c)) }),
			state.On(func(now int64, c *statepb.TxnDecide) any { return state.Result(s.ApplyDecide(now, c)) }),
			state.On(func(_ int64, c *statepb.TxnNotified) any { s.ApplyNotified(c); return nil }),
			state.On(func(now int64, c *statepb.TxnPromote) any { return s.ApplyPromote(now, c) }),
			state.On(func(_ int64, c *statepb.TxnForget) any { s.ApplyForget(c); return nil }),
		},
		Records: []state.Record{
			state.Restores(func(c *statepb.TxnCounter) error { s.RestoreCounter(c); return nil }),
			state.Restores(s.Restore),
		},
		Snapshot: func() (state.Dump, error) {
			counter, txns := s.Records()
			return func(emit func(proto.Message) error) error {
				if err := emit(counter); err != nil {
					return err
				}
				return state.Each(txns)(emit)
			}, nil
		},
		Reset:    s.Reset,
		Restored: s.Restored,
		Leases:   []state.LeaseKind{{Kind: LeaseKind, Name: "transaction", Quota: quota.Transactions, Ended: func(o lease.Owner) { s.LeaseEnded(o.ID) }}},
	}
}
