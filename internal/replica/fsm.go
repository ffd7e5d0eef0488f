package replica

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// fsm adapts a StateMachine to raft's FSM and BatchingFSM.
type fsm struct {
	sm      StateMachine
	applied func(index uint64)
	// proposer, once the node has one, holds the commands of the entries
	// this node proposed and has in flight: applied as they are, not
	// decoded again, and answered to their proposers as they apply.
	proposer atomic.Pointer[proposer]

	mu sync.Mutex
	// restoreErr is the last error Restore returned; guarded by mu.
	restoreErr error
}

var (
	_ raft.FSM         = (*fsm)(nil)
	_ raft.BatchingFSM = (*fsm)(nil)
)

func (f *fsm) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

func (f *fsm) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	var cmd statepb.Command
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		if p := f.proposer.Load(); p != nil {
			if e, ok := p.takeOwn(l.Data); ok {
				out[i] = f.applyAll(l.Index, e.cmds)
				e.answer(out[i])
				continue
			}
		}
		cmd.Reset()
		if err := proto.Unmarshal(l.Data, &cmd); err != nil {
			// A command that does not decode was written by a broken or
			// newer member; applying nothing keeps every replica equal.
			out[i] = djinn.Errorf(djinn.Internal, "log entry %d: undecodable command: %v", l.Index, err)
			continue
		}
		if len(cmd.Batch) > 0 {
			out[i] = f.applyBatch(l.Index, &cmd)
			continue
		}
		out[i] = f.sm.Apply(l.Index, &cmd)
	}
	if len(logs) > 0 && f.applied != nil {
		f.applied(logs[len(logs)-1].Index)
	}
	return out
}

// applyAll applies the commands of an entry this node proposed: one, whose
// result is the entry's, or several, whose results are.
func (f *fsm) applyAll(index uint64, cmds []*statepb.Command) any {
	if len(cmds) == 1 {
		return f.sm.Apply(index, cmds[0])
	}
	out := make([]any, len(cmds))
	for i, c := range cmds {
		out[i] = f.sm.Apply(index, c)
	}
	return out
}

// applyBatch applies a decoded entry of several commands, in order. An
// entry that holds an op beside its batch, or a batch inside its batch,
// was written by a broken member: none of it applies.
func (f *fsm) applyBatch(index uint64, cmd *statepb.Command) any {
	if cmd.Op != nil || cmd.NowUnixNanos != 0 {
		return djinn.Errorf(djinn.Internal, "log entry %d: a batch with a command of its own", index)
	}
	for _, c := range cmd.Batch {
		if len(c.Batch) > 0 {
			return djinn.Errorf(djinn.Internal, "log entry %d: a batch inside a batch", index)
		}
	}
	return f.applyAll(index, cmd.Batch)
}

func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	if v, ok := f.sm.(Viewer); ok {
		write, release, err := v.View()
		if err != nil {
			return nil, err
		}
		return snapshot{write, release}, nil
	}
	write, err := f.sm.Snapshot()
	if err != nil {
		return nil, err
	}
	return snapshot{write: write}, nil
}

func (f *fsm) Restore(r io.ReadCloser) error {
	defer r.Close()
	err := f.sm.Restore(r)
	f.mu.Lock()
	f.restoreErr = err
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	// The state now is the snapshot's: applied up to its index, which
	// the snapshot store's reader knows (raft does not say).
	if ir, ok := r.(indexedReader); ok && f.applied != nil {
		f.applied(ir.index)
	}
	return nil
}

// lastRestoreErr returns the last error Restore returned.
func (f *fsm) lastRestoreErr() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restoreErr
}

// snapshot is a state machine's snapshot for raft, which persists it
// (streaming it to the snapshot store's file) and then releases it.
type snapshot struct {
	write   func(w io.Writer) error
	release func() // nil: nothing to let go
}

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if ss, ok := sink.(*stallingSink); ok {
		ss.kind = "persist"
	}
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s snapshot) Release() {
	if s.release != nil {
		s.release()
	}
}
