package state

import (
	"fmt"

	"github.com/djinn-go/djinn/proto/statepb"
)

// Rules versions. Apply decides outcomes — who gets a lock, how a
// transaction votes, which lease ends — and every member must decide each
// log entry alike. When a release changes what an apply decides, members
// running the older binary (a rolling upgrade) and entries written under
// it (replayed after a restart) would be decided the new way by some
// replicas and the old way by others. So the rules are versioned, and the
// version is part of the replicated state: the log says which rules each
// entry is applied by.
//
// To change what an apply decides:
//
//  1. Add a line to rulesVersions below: the next number and what it
//     changes.
//  2. Keep the old rule and branch on the version where the rule differs:
//     `if m.Rules() >= N { new } else { old }` (a part built outside this
//     package takes Machine.Rules as a func() uint32 when it is built).
//  3. A new command (or a field an older binary would ignore and so
//     decide otherwise) is such a change too: the leader proposes it only
//     once Rules() is N.
//  4. Add a test row that applies the entry under N-1 and under N, and
//     one that replays it after a restart (rules_test.go has the pattern).
//
// docs/DESIGN.md ("Rules versions") says the same for newcomers.
//
// A new cluster starts at the highest version its first leader supports;
// a cluster that runs older members stays at the lowest version they all
// support, and the leader raises it with one RulesRaise entry once every
// member's binary supports more. A binary never applies an entry by rules
// it does not know: it refuses (RulesError).
var rulesVersions = []string{
	1: "the rules of the first release",
	2: "the lock service keeps its ABORTED votes in the state (LockTxnEnd voted_aborted) and refuses lock requests under a transaction it voted ABORTED",
	3: "a lock request id names its own holder's request only: a retry (LockAcquire) under another holder is refused NoSuchObject, a LockCancel naming a holder skips other holders' requests",
}

// MaxRules is the highest rules version this binary supports.
func MaxRules() uint32 { return uint32(len(rulesVersions) - 1) }

// RulesError is the refusal of a binary to apply state decided by rules
// newer than it supports.
type RulesError struct {
	Version uint32 // the cluster's rules version met
	Max     uint32 // the highest this binary supports
	Where   string // where it was met: "log entry 57", "snapshot"
}

func (e *RulesError) Error() string {
	return fmt.Sprintf("%s: the cluster's rules version is %d but this binary supports rules up to version %d "+
		"(it would decide entries unlike the binaries that raised it): run a djinn binary that supports rules version %d",
		e.Where, e.Version, e.Max, e.Version)
}

// RefusesToApply marks the error as the state machine's refusal to go on,
// not damage: no repair of the data directory helps.
func (e *RulesError) RefusesToApply() bool { return true }

// Rules returns the cluster's rules version: the version the entry being
// applied is decided by. Apply code asks it wherever a rule differs by
// version.
func (m *Machine) Rules() uint32 { return max(m.rules.Load(), 1) }

// MaxRules returns the highest rules version this machine applies.
func (m *Machine) MaxRules() uint32 { return m.max.Load() }

// SetMaxRules lowers (or raises) the highest rules version this machine
// applies, for tests of the upgrade path, which run members of several
// binaries in one process. A server never calls it.
func (m *Machine) SetMaxRules(v uint32) { m.max.Store(v) }

// RulesChanged is closed once the cluster's rules version is set or
// replaced by each raise: wait on it for the version to change.
func (m *Machine) RulesChanged() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rulesChanged
}

// Stopped is closed once the machine refused to apply (Refusal says why).
func (m *Machine) Stopped() <-chan struct{} { return m.stopped }

// Refusal returns why the machine stopped applying, or nil.
func (m *Machine) Refusal() error {
	if e := m.refusal.Load(); e != nil {
		return e
	}
	return nil
}

// setRules sets the cluster's rules version from an Init (0: 1), refusing
// one above the machine's maximum.
func (m *Machine) setRules(v uint32, where string) error {
	v = max(v, 1)
	if v > m.MaxRules() {
		return &RulesError{Version: v, Max: m.MaxRules(), Where: where}
	}
	m.rules.Store(v)
	m.mu.Lock()
	close(m.rulesChanged)
	m.rulesChanged = make(chan struct{})
	m.mu.Unlock()
	return nil
}

// applyRaise applies a RulesRaise: a version at or below the current one
// changes nothing; one above the machine's maximum stops it.
func (m *Machine) applyRaise(index uint64, c *statepb.RulesRaise) any {
	if c.GetVersion() <= m.rules.Load() {
		return nil
	}
	if err := m.setRules(c.GetVersion(), fmt.Sprintf("log entry %d", index)); err != nil {
		m.stop(err.(*RulesError))
		return err
	}
	return nil
}

// stop makes the machine refuse every later apply and snapshot with err.
func (m *Machine) stop(err *RulesError) {
	if m.refusal.CompareAndSwap(nil, err) {
		close(m.stopped)
	}
}
