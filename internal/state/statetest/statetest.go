// Package statetest runs djinn's state machine without Raft, for tests: Log
// is an in-memory Proposer that applies each command at once, in order, to a
// state.Machine, exactly as a single-node replicated log would after commit.
package statetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Add adds a service's state to m, as the server does with every
// service's, and returns it:
//
//	st := statetest.Add(log.M, mailbox.NewState(log.M.Leases, 100, log.M.ServiceID))
//
// It panics when the state's part clashes with one m holds.
func Add[S interface{ Part() state.Part }](m *state.Machine, st S) S {
	if err := m.Add(st.Part()); err != nil {
		panic(err)
	}
	return st
}

// Service is a Log over a machine holding one service's state: what that
// service's tests drive.
type Service[S Stater] struct {
	*Log
	State S
}

// Stater is a service's replicated state.
type Stater interface{ Part() state.Part }

// For returns a Service over a fresh, initialised machine holding the
// state newState builds over it:
//
//	log := statetest.For(func(m *state.Machine) *lock.State { return lock.NewState(m.Leases, m.Rules) })
func For[S Stater](newState func(m *state.Machine) S) Service[S] {
	l := New()
	return Service[S]{l, Add(l.M, newState(l.M))}
}

// Restart snapshots l's machine and restores the snapshot into a new one
// holding a new state from newState: a restarted node, or a new leader.
func Restart[S Stater](l *Log, newState func(m *state.Machine) S) (Service[S], error) {
	write, err := l.M.Snapshot()
	if err != nil {
		return Service[S]{}, err
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return Service[S]{}, err
	}
	m := state.New()
	st := Add(m, newState(m))
	if err := m.Restore(&buf); err != nil {
		return Service[S]{}, err
	}
	return Service[S]{Over(m), st}, nil
}

// Log applies proposed commands to a Machine.
type Log struct {
	M *state.Machine

	mu    sync.Mutex
	index uint64
	cmds  []*statepb.Command
	// Fail, when set, makes every Propose fail with it.
	Fail error
	// Deposed, when set, makes this log's node a deposed leader that has
	// not heard of its successor: no leader lease, and VerifyLeader fails.
	Deposed atomic.Bool
	// RiderDelay, when set, makes ProposeRider hold its command, as the
	// replicated log does, until the next Propose (which applies it first,
	// in the same entry) or until it has waited RiderDelay; 0: a rider
	// applies at once.
	RiderDelay time.Duration

	riders     []*heldRider // guarded by mu: riders held
	riderTimer *time.Timer  // guarded by mu: runs while riders are held
	rode       int          // guarded by mu: commands applied as riders
}

// heldRider is a rider's command waiting for an entry.
type heldRider struct {
	cmd  *statepb.Command
	done chan riderOutcome // 1-buffered
}

type riderOutcome struct {
	res any
	err error
}

// New returns a Log over a fresh, initialised Machine, at the highest
// rules version it supports, as a new cluster starts. The machine holds
// no service's state: add the ones a test needs with Add.
func New() *Log {
	l := &Log{M: state.New()}
	id := djinn.NewID()
	init := &statepb.Init{ServiceId: id[:], RulesVersion: l.M.MaxRules()}
	if _, err := l.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_Init{Init: init}}); err != nil {
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
	l.applyRidersLocked()
	return l.applyLocked(cmd)
}

// ProposeRider applies cmd as a command that need not be written at once
// (replica's ProposeRider): at once, or, with RiderDelay set, with the
// next Propose or once it has waited RiderDelay. A caller that gives up
// while it is held gets a definite error, and it is never applied.
func (l *Log) ProposeRider(ctx context.Context, cmd *statepb.Command) (any, error) {
	l.mu.Lock()
	if l.Fail != nil {
		l.mu.Unlock()
		return nil, l.Fail
	}
	if cmd.NowUnixNanos == 0 {
		cmd.NowUnixNanos = time.Now().UnixNano()
	}
	if l.RiderDelay == 0 {
		defer l.mu.Unlock()
		l.rode++
		return l.applyLocked(cmd)
	}
	r := &heldRider{cmd: cmd, done: make(chan riderOutcome, 1)}
	l.riders = append(l.riders, r)
	if l.riderTimer == nil {
		l.riderTimer = time.AfterFunc(l.RiderDelay, l.riderDue)
	}
	l.mu.Unlock()
	select {
	case o := <-r.done:
		return o.res, o.err
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, held := range l.riders {
		if held == r {
			l.riders = append(l.riders[:i], l.riders[i+1:]...)
			return nil, errors.Join(ctx.Err(), djinn.Errorf(djinn.Unavailable, "gave up waiting for the log: the change was not made"))
		}
	}
	o := <-r.done
	return o.res, o.err
}

// Rode returns how many commands were applied as riders.
func (l *Log) Rode() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rode
}

func (l *Log) riderDue() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applyRidersLocked()
}

// applyRidersLocked applies the riders held, in order.
func (l *Log) applyRidersLocked() {
	if l.riderTimer != nil {
		l.riderTimer.Stop()
		l.riderTimer = nil
	}
	for _, r := range l.riders {
		res, err := l.applyLocked(r.cmd)
		l.rode++
		r.done <- riderOutcome{res, err}
	}
	l.riders = nil
}

// applyLocked applies cmd, stamped, round-tripped through its encoding.
func (l *Log) applyLocked(cmd *statepb.Command) (any, error) {
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

// VerifyLeader succeeds (this log has one member) unless Deposed.
func (l *Log) VerifyLeader() error {
	if l.Deposed.Load() {
		return djinn.Errorf(djinn.Unavailable, "not the leader: deposed by the test")
	}
	return nil
}

// LeaderLease holds (this log has one member) unless Deposed.
func (l *Log) LeaderLease() bool { return !l.Deposed.Load() }

// Commands returns the commands applied so far.
func (l *Log) Commands() []*statepb.Command {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*statepb.Command(nil), l.cmds...)
}
