// Package statetest runs djinn's state machine without Raft, for tests: Log
// is an in-memory Proposer that applies each command at once, in order, to a
// state.Machine, exactly as a single-node replicated log would after commit.
package statetest

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Log applies proposed commands to a Machine.
type Log struct {
	M *state.Machine

	mu    sync.Mutex
	index uint64
	cmds  []*statepb.Command
	// Fail, when set, makes every Propose fail with it.
	Fail error
}

// New returns a Log over a fresh, initialised Machine.
func New() *Log {
	l := &Log{M: state.New()}
	id := djinn.NewID()
	if _, err := l.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: id[:]}}}); err != nil {
		panic(err)
	}
	return l
}

// Over returns a Log over m, an already initialised machine (a restored
// one, say).
func Over(m *state.Machine) *Log {
	return &Log{M: m}
}

// Propose applies cmd, stamping it with the current (possibly fake) time.
// Commands round-trip through their encoding, as on the real log.
func (l *Log) Propose(_ context.Context, cmd *statepb.Command) (any, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Fail != nil {
		return nil, l.Fail
	}
	if cmd.NowUnixNanos == 0 {
		cmd.NowUnixNanos = time.Now().UnixNano()
	}
	b, err := proto.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	var decoded statepb.Command
	if err := proto.Unmarshal(b, &decoded); err != nil {
		return nil, err
	}
	l.index++
	l.cmds = append(l.cmds, &decoded)
	res := l.M.Apply(l.index, &decoded)
	if err, ok := res.(error); ok {
		return nil, err
	}
	return res, nil
}

// VerifyLeader always succeeds: this log has one member.
func (l *Log) VerifyLeader() error { return nil }

// Commands returns the commands applied so far.
func (l *Log) Commands() []*statepb.Command {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*statepb.Command(nil), l.cmds...)
}
