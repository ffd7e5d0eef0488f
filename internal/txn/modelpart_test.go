package txn_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Model participants for the crash-point sweep (sweep_test.go).

// modelPart is a participant as TX.2.6 and TX.2.8 want one: it votes as
// scripted; a PREPARED transaction is durable, everything else lives in
// memory and a crash loses it (and changes the crash count); repeated
// calls answer the state reached; after a crash it asks the manager about
// the transactions it holds prepared (TX.2.8.1). What it applied is kept
// apart, never forgotten, for the checks.
type modelPart struct {
	name  string
	crash int64
	mem   map[uint64]djinnpb.TransactionState
	// recovered holds the prepared transactions it found after a crash:
	// it asks the manager about them.
	recovered map[uint64]bool
	votes     map[uint64]djinnpb.TransactionState // the scripted votes

	applied  map[uint64]djinnpb.TransactionState // COMMITTED or ABORTED
	prepared map[uint64]bool                     // it answered PREPARED (or COMMITTED to prepareAndCommit)
	// onePhase holds the transactions it committed on prepareAndCommit:
	// it remembers them across a crash (see crashLocked).
	onePhase map[uint64]bool
	// beforePrepare, if set, runs (once, with the model locked) as its
	// next prepare arrives — of transaction beforePrepareID, if not 0.
	beforePrepare   func()
	beforePrepareID uint64
	// lose is how many of its next answers are lost on the way back;
	// lossy loses one in three.
	lose  int
	lossy bool
	// down is a period in which it answers nothing; if crash is set it
	// crashes when the period starts.
	down struct {
		from, until time.Time
		crash       bool
	}
}

// model holds the model participants, shared by every generation of the
// manager, and the violations they saw.
type model struct {
	mu    sync.Mutex
	parts map[string]*modelPart
	names []string
	bad   []string
	// trace holds, by transaction, the calls each participant got.
	trace map[uint64][]string
}

func newModel(names ...string) *model {
	m := &model{parts: map[string]*modelPart{}, names: names, trace: map[uint64][]string{}}
	for _, n := range names {
		m.parts[n] = &modelPart{name: n, crash: 1, mem: map[uint64]djinnpb.TransactionState{}, recovered: map[uint64]bool{},
			votes: map[uint64]djinnpb.TransactionState{}, applied: map[uint64]djinnpb.TransactionState{}, prepared: map[uint64]bool{}, onePhase: map[uint64]bool{}}
	}
	return m
}

func (m *model) violateLocked(format string, args ...any) {
	m.bad = append(m.bad, fmt.Sprintf(format, args...))
}

// upLocked reports whether p answers now; a crash planned for its down
// period happens as the period starts.
func (m *model) upLocked(p *modelPart, now time.Time) bool {
	if p.down.crash && !now.Before(p.down.from) {
		p.down.crash = false
		m.crashLocked(p)
	}
	return now.Before(p.down.from) || !now.Before(p.down.until)
}

// crashLocked loses what p holds in memory: its ACTIVE transactions and
// the outcomes it remembered. Prepared ones stay, to be asked about.
//
// So do the outcomes of prepareAndCommit: a participant that rolled forward
// on one and forgot it in a crash answers the manager's retried vote
// UnknownTransaction, which is also the answer of one that lost the
// transaction before the call arrived — and the manager cannot tell
// "committed" from "lost" (the one tells the client its changes committed
// when they are gone, the other that they did not when they did). Only the
// participant can keep them apart, by writing that it committed with the
// commit itself, so the model does. (participant.Participant does not:
// its COMMITTED is remembered in memory only.)
func (m *model) crashLocked(p *modelPart) {
	p.crash++
	for id, s := range p.mem {
		switch {
		case s == txn.Prepared:
			p.recovered[id] = true
		case s == txn.Committed && p.onePhase[id]:
		default:
			delete(p.mem, id)
		}
	}
}

// applyLocked rolls p's transaction id forward or back, once.
func (m *model) applyLocked(p *modelPart, id uint64, to djinnpb.TransactionState) {
	if was, ok := p.applied[id]; ok {
		m.violateLocked("participant %s, transaction %d: %s applied after %s", p.name, id, stateName(to), stateName(was))
		return
	}
	p.applied[id] = to
	p.mem[id] = to
	delete(p.recovered, id)
}

func stateName(s djinnpb.TransactionState) string {
	return strings.TrimPrefix(s.String(), "TRANSACTION_STATE_")
}

func (m *model) prepareLocked(p *modelPart, id uint64, andCommit bool) (djinnpb.TransactionState, error) {
	if f := p.beforePrepare; f != nil && (p.beforePrepareID == 0 || p.beforePrepareID == id) {
		p.beforePrepare, p.beforePrepareID = nil, 0
		f()
	}
	switch s, ok := p.mem[id]; {
	case !ok:
		return 0, djinn.Errorf(djinn.UnknownTransaction, "participant %s: transaction %d unknown", p.name, id)
	case s == txn.Active:
		switch v := p.votes[id]; v {
		case txn.Prepared:
			p.prepared[id] = true
			if andCommit {
				m.applyLocked(p, id, txn.Committed)
				p.onePhase[id] = true
				return txn.Committed, nil
			}
			p.mem[id] = txn.Prepared
			return txn.Prepared, nil
		case txn.Aborted:
			m.applyLocked(p, id, txn.Aborted)
			return txn.Aborted, nil
		default:
			p.mem[id] = txn.NotChanged
			return txn.NotChanged, nil
		}
	case s == txn.Prepared && andCommit:
		m.applyLocked(p, id, txn.Committed)
		p.onePhase[id] = true
		return txn.Committed, nil
	default:
		return s, nil // a repeated prepare answers the state reached
	}
}

func (m *model) commitLocked(p *modelPart, id uint64) error {
	switch s, ok := p.mem[id]; {
	case ok && s == txn.Prepared:
		m.applyLocked(p, id, txn.Committed)
		return nil
	case ok && s == txn.Committed:
		return nil
	case !ok && p.applied[id] == txn.Committed:
		return djinn.Errorf(djinn.UnknownTransaction, "participant %s: transaction %d done and forgotten", p.name, id)
	case !ok:
		m.violateLocked("participant %s, transaction %d: told to commit what it never prepared (it lost it, or never joined)", p.name, id)
		return djinn.Errorf(djinn.UnknownTransaction, "participant %s: transaction %d unknown", p.name, id)
	default:
		m.violateLocked("participant %s, transaction %d: told to commit in state %s", p.name, id, stateName(s))
		return djinn.Errorf(djinn.CannotCommit, "participant %s: transaction %d is %s", p.name, id, stateName(s))
	}
}

func (m *model) abortLocked(p *modelPart, id uint64) error {
	switch s, ok := p.mem[id]; {
	case ok && (s == txn.Active || s == txn.Prepared):
		m.applyLocked(p, id, txn.Aborted)
		return nil
	case ok && (s == txn.Aborted || s == txn.NotChanged):
		return nil
	case ok && s == txn.Committed, !ok && p.applied[id] == txn.Committed:
		m.violateLocked("participant %s, transaction %d: told to abort what it committed", p.name, id)
		return djinn.Errorf(djinn.CannotAbort, "participant %s: transaction %d committed", p.name, id)
	default:
		return djinn.Errorf(djinn.UnknownTransaction, "participant %s: transaction %d unknown", p.name, id)
	}
}

// recover has each participant that is up ask the manager about the
// prepared transactions it recovered (TX.2.8.1): COMMITTED rolls forward,
// ABORTED or an unknown transaction back (presumed abort); anything else
// is asked again later.
func (m *model) recover(svc *txn.Service) {
	type ask struct {
		p  *modelPart
		id uint64
	}
	var asks []ask
	m.mu.Lock()
	now := time.Now()
	for _, n := range m.names {
		p := m.parts[n]
		if !m.upLocked(p, now) {
			continue
		}
		for id := range p.recovered {
			asks = append(asks, ask{p, id})
		}
	}
	m.mu.Unlock()
	for _, a := range asks {
		st, err := svc.GetState(context.Background(), a.id, txn.SecretOf(svc, a.id))
		m.mu.Lock()
		if a.p.mem[a.id] == txn.Prepared && a.p.recovered[a.id] {
			switch {
			case err == nil && st == txn.Committed:
				m.applyLocked(a.p, a.id, txn.Committed)
			case err == nil && st == txn.Aborted, djinn.KindOf(err) == djinn.UnknownTransaction:
				m.applyLocked(a.p, a.id, txn.Aborted)
			}
		}
		m.mu.Unlock()
	}
}
