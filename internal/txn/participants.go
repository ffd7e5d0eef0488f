package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Op is a call the manager makes to a participant (TX.2.6).
type Op uint8

// The calls.
const (
	OpPrepare Op = iota + 1
	OpPrepareAndCommit
	OpCommit
	OpAbort
)

func (o Op) String() string {
	switch o {
	case OpPrepare:
		return "prepare"
	case OpPrepareAndCommit:
		return "prepareAndCommit"
	case OpCommit:
		return "commit"
	case OpAbort:
		return "abort"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Participants calls participants (TX.2.6) on behalf of the manager mgr.
//
// Call asks participant p to do op for transaction id, presenting the
// transaction's secret (which a participant may check), and reports the
// answer to done, exactly once: the vote for a prepare (PREPARED,
// NOTCHANGED, ABORTED; COMMITTED from prepareAndCommit), 0 for a commit or
// an abort, or an error with its djinn kind. ctx bounds the call, and so
// does timeout from the call's start; once either ends, done must come
// promptly. A participant in this process, whose call waits for nothing
// but this process, may ignore timeout: the manager leaves the deadline's
// timer to the calls that wait on the network.
//
// The manager calls Call from one of its workers, a bounded set shared by
// every vote and outcome: a call that waits on the network should return
// at once and report from another goroutine, so that a participant slow to
// answer holds no worker. A call that only waits for this process (a
// participant in it, writing to its disk) may run to its end and report
// before it returns. done does not block.
type Participants interface {
	Call(ctx context.Context, timeout time.Duration, op Op, p *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID, done func(djinnpb.TransactionState, error))
}

// BlockingParticipants calls participants one blocking call at a time.
type BlockingParticipants interface {
	Prepare(ctx context.Context, p *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error)
	PrepareAndCommit(ctx context.Context, p *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error)
	Commit(ctx context.Context, p *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID) error
	Abort(ctx context.Context, p *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID) error
}

// Blocking returns Participants that make each call of b on the worker
// that asks for it, to its end, without a deadline of its own: for
// participants in this process, whose calls wait for nothing but it.
func Blocking(b BlockingParticipants) Participants { return blocking{b} }

type blocking struct{ b BlockingParticipants }

func (b blocking) Call(ctx context.Context, _ time.Duration, op Op, p *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID, done func(djinnpb.TransactionState, error)) {
	done(CallBlocking(ctx, b.b, op, p, mgr, id, secret))
}

// CallBlocking makes call op of b.
func CallBlocking(ctx context.Context, b BlockingParticipants, op Op, p *djinnpb.Ref, mgr djinn.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	switch op {
	case OpPrepare:
		return b.Prepare(ctx, p, mgr, id, secret)
	case OpPrepareAndCommit:
		return b.PrepareAndCommit(ctx, p, mgr, id, secret)
	case OpCommit:
		return 0, b.Commit(ctx, p, mgr, id, secret)
	case OpAbort:
		return 0, b.Abort(ctx, p, mgr, id, secret)
	}
	return 0, djinn.Errorf(djinn.InvalidArgument, "participant call %v: unknown", op)
}
