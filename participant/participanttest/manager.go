// Package participanttest helps test transaction participants: Manager is
// a transaction manager in memory, enough for a participant's joins and
// roll decisions, whose answers a test sets.
package participanttest

import (
	"context"
	"strconv"
	"sync"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/participant"
)

// Manager is an in-memory transaction manager implementing
// participant.Managers. Joins follow TX.2.3: only while ACTIVE
// (CannotJoin), a repeated join with the same crash count is accepted, one
// with another aborts the transaction (CrashCount); a join answers the
// transactions the joined one is nested in (CreateNested). GetState
// returns the state the test set. It does not drive votes: tests call the
// participant's Prepare, Commit and Abort themselves. It is safe for
// concurrent use.
type Manager struct {
	ref djinn.Ref

	mu sync.Mutex
	// Guarded by mu.
	next    uint64
	txs     map[uint64]*txn
	joinErr error // when set, every Join fails with it
	getErr  error // when set, every GetState fails with it
	calls   []string
}

type txn struct {
	parent uint64 // 0: top-level
	state  participant.State
	parts  map[[32]byte]Joined
	order  []djinn.Ref
}

// Joined is a participant that joined a transaction.
type Joined struct {
	Ref   djinn.Ref
	Crash int64
}

var _ participant.Managers = (*Manager)(nil)

// NewManager returns a manager with no transactions. Its reference names an
// endpoint that is never dialled.
func NewManager() *Manager {
	return &Manager{
		ref: djinn.Ref{Endpoint: "127.0.0.1:9", Service: djinn.NewID(), Object: djinn.NewID()},
		txs: map[uint64]*txn{},
	}
}

// Ref returns the manager's reference.
func (m *Manager) Ref() djinn.Ref { return m.ref }

// Create starts an ACTIVE transaction.
func (m *Manager) Create() participant.Tx {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	m.txs[m.next] = &txn{state: participant.Active, parts: map[[32]byte]Joined{}}
	return participant.Tx{Manager: m.ref, ID: m.next}
}

// CreateNested starts an ACTIVE transaction nested in parent, which must
// be one of this manager's (TX.2.2). Only the nesting is kept: promotion
// and the parent's effect on its children are the test's to play, with
// SetState.
func (m *Manager) CreateNested(parent participant.Tx) participant.Tx {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next++
	m.txs[m.next] = &txn{parent: parent.ID, state: participant.Active, parts: map[[32]byte]Joined{}}
	return participant.Tx{Manager: m.ref, ID: m.next}
}

// Promote makes the participants joined to the nested tx participants of
// its parent too, as the manager does when tx commits (TX.2.7).
func (m *Manager) Promote(tx participant.Tx) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.txs[tx.ID]
	if !ok {
		return
	}
	p, ok := m.txs[t.parent]
	if !ok {
		return
	}
	for _, r := range t.order {
		if _, ok := p.parts[r.Key()]; !ok {
			p.parts[r.Key()] = t.parts[r.Key()]
			p.order = append(p.order, r)
		}
	}
}

// SetState sets tx's state at the manager.
func (m *Manager) SetState(tx participant.Tx, s participant.State) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.txs[tx.ID]; ok {
		t.state = s
	}
}

// Forget drops tx: later calls about it get UnknownTransaction.
func (m *Manager) Forget(tx participant.Tx) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.txs, tx.ID)
}

// FailJoins makes every Join fail with err (nil: answer again).
func (m *Manager) FailJoins(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.joinErr = err
}

// FailGetState makes every GetState fail with err (nil: answer again).
func (m *Manager) FailGetState(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.getErr = err
}

// Joins returns the participants joined to tx, in join order.
func (m *Manager) Joins(tx participant.Tx) []Joined {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.txs[tx.ID]
	if !ok {
		return nil
	}
	out := make([]Joined, 0, len(t.order))
	for _, r := range t.order {
		out = append(out, t.parts[r.Key()])
	}
	return out
}

// Calls returns the calls received so far ("join 3", "getState 3").
func (m *Manager) Calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.calls...)
}

func (m *Manager) note(op string, tx participant.Tx) {
	m.calls = append(m.calls, op+" "+strconv.FormatUint(tx.ID, 10))
}

func (m *Manager) check(tx participant.Tx) (*txn, error) {
	if !tx.Manager.Equal(m.ref) {
		return nil, djinn.Errorf(djinn.NoSuchObject, "manager %s: not this one", tx.Manager)
	}
	t, ok := m.txs[tx.ID]
	if !ok {
		return nil, djinn.Errorf(djinn.UnknownTransaction, "transaction %d: unknown", tx.ID)
	}
	return t, nil
}

// Join implements participant.Managers (TX.2.3).
func (m *Manager) Join(ctx context.Context, tx participant.Tx, self djinn.Ref, crash int64) ([]participant.Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.note("join", tx)
	if m.joinErr != nil {
		return nil, m.joinErr
	}
	t, err := m.check(tx)
	if err != nil {
		return nil, err
	}
	if j, ok := t.parts[self.Key()]; ok {
		if j.Crash != crash {
			if t.state == participant.Active || t.state == participant.Voting {
				t.state = participant.Aborted
			}
			return nil, djinn.Errorf(djinn.CrashCount, "transaction %d: joined with crash count %d, now %d", tx.ID, j.Crash, crash)
		}
		if t.state == participant.Active {
			return m.ancestorsLocked(t), nil
		}
	}
	if t.state != participant.Active {
		return nil, djinn.Errorf(djinn.CannotJoin, "transaction %d: %s, no longer active", tx.ID, t.state)
	}
	t.parts[self.Key()] = Joined{Ref: self, Crash: crash}
	t.order = append(t.order, self)
	return m.ancestorsLocked(t), nil
}

// ancestorsLocked returns the transactions t is nested in, parent first.
func (m *Manager) ancestorsLocked(t *txn) []participant.Tx {
	var out []participant.Tx
	for t.parent != 0 {
		out = append(out, participant.Tx{Manager: m.ref, ID: t.parent})
		if t = m.txs[t.parent]; t == nil {
			break
		}
	}
	return out
}

// GetState implements participant.Managers.
func (m *Manager) GetState(ctx context.Context, tx participant.Tx) (participant.State, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.note("getState", tx)
	if m.getErr != nil {
		return 0, m.getErr
	}
	t, err := m.check(tx)
	if err != nil {
		return 0, err
	}
	return t.state, nil
}
