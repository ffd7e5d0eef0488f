package participant

import (
	"context"
	"slices"
	"sync"

	"github.com/djinn-go/djinn"
)

// Join is called by the application at the start of every operation under
// tx, and done when the operation ends. The first time, it joins tx at its
// manager with the participant's reference and crash count (TX.2.3);
// concurrent first operations share that one join. A failed join fails the
// operation with the manager's error (djinn.ErrUnknownTransaction,
// ErrCannotJoin, ErrCrashCount, ErrNoSuchObject, ErrUnavailable, ...), which
// the application should return to its client as it is. An operation is
// valid only while tx is ACTIVE here (TX.2.6): otherwise Join fails with
// djinn.ErrCannotJoin. A vote or an abort waits until the operations under
// way have called done.
func (p *Participant) Join(ctx context.Context, tx Tx) (done func(), err error) {
	if err := tx.check(); err != nil {
		return nil, err
	}
	k := tx.Key()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, p.errClosed()
	}
	e := p.txs[k]
	if e == nil {
		if len(p.txs) >= p.cfg.MaxTransactions {
			p.mu.Unlock()
			return nil, djinn.Errorf(djinn.ResourceExhausted, "participant holds %d transactions, the most allowed", len(p.txs))
		}
		e = &entry{turn: make(chan struct{}, 1), tx: tx, state: Active, joined: make(chan struct{}), last: p.cfg.Now()}
		p.txs[k] = e
		e.ops++
		p.calls.Add(1)
		p.mu.Unlock()
		anc, err := p.cfg.Managers.Join(ctx, tx, p.ref, p.crash)
		p.mu.Lock()
		e.joinErr = err
		if err == nil && len(anc) > 0 {
			e.anc = slices.Clone(anc)
			p.addKidLocked(e)
		}
		close(e.joined)
		if err != nil {
			p.leaveLocked(e)
			if e.state == Active && e.ops == 0 && p.txs[k] == e {
				delete(p.txs, k)
			}
			p.mu.Unlock()
			return nil, err
		}
	} else {
		if !e.tx.admits(tx) {
			p.mu.Unlock()
			return nil, unknownTx(tx)
		}
		joined := e.joined
		p.mu.Unlock()
		select {
		case <-joined:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
		if e.joinErr != nil && (p.txs[k] != e || e.state == Active) {
			// The join this operation waited for failed. (An entry kept
			// after a failed join is one the manager aborted meanwhile: the
			// state check below answers for it.)
			p.mu.Unlock()
			return nil, e.joinErr
		}
		if p.closed {
			p.mu.Unlock()
			return nil, p.errClosed()
		}
		e.ops++
		p.calls.Add(1)
	}
	if e.state != Active {
		st := e.state
		p.leaveLocked(e)
		p.mu.Unlock()
		return nil, djinn.Errorf(djinn.CannotJoin, "transaction %d: %s at this participant; work under it needs it ACTIVE: start a new transaction", tx.ID, st)
	}
	if err := p.enclosingLocked(e); err != nil {
		p.leaveLocked(e)
		p.mu.Unlock()
		return nil, err
	}
	e.last = p.cfg.Now()
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.leaveLocked(e)
			p.mu.Unlock()
		})
	}, nil
}

// enclosingLocked checks that the transactions e is nested in are ACTIVE
// here, or unknown here: an enclosing transaction being prepared completes
// the nested ones (TX.2.6), and one that ended ended them.
func (p *Participant) enclosingLocked(e *entry) error {
	for _, at := range e.anc {
		if a := p.txs[at.Key()]; a != nil && a.state != Active {
			return djinn.Errorf(djinn.CannotJoin, "transaction %d: the enclosing transaction %d is %s at this participant; work under it needs it ACTIVE: start a new transaction", e.tx.ID, at.ID, a.state)
		}
	}
	return nil
}

// Ancestors returns the transactions tx is nested in, parent first, as
// its manager answered tx's join here (of tx's manager, or of another when
// tx is nested in another manager's transaction): none for a top-level
// transaction or one unknown here. A Resource calls it, during
// an operation under tx, to let tx see its ancestors' changes and pass
// their locks (TX.3).
func (p *Participant) Ancestors(tx Tx) []Tx {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.txs[tx.Key()]
	if e == nil {
		return nil
	}
	return slices.Clone(e.anc)
}

// parentKey returns the key of e's parent; false for a top-level e.
func (e *entry) parentKey() (TxKey, bool) {
	if len(e.anc) == 0 {
		return TxKey{}, false
	}
	return e.anc[0].Key(), true
}

// addKidLocked records the nested e under its parent.
func (p *Participant) addKidLocked(e *entry) {
	if pk, ok := e.parentKey(); ok {
		m := p.kids[pk]
		if m == nil {
			m = map[*entry]struct{}{}
			p.kids[pk] = m
		}
		m[e] = struct{}{}
	}
}

// forgetLocked drops e, held under k.
func (p *Participant) forgetLocked(k TxKey, e *entry) {
	delete(p.txs, k)
	if pk, ok := e.parentKey(); ok {
		delete(p.kids[pk], e)
		if len(p.kids[pk]) == 0 {
			delete(p.kids, pk)
		}
	}
}

// kidsOf returns the transactions nested in e (directly) that are not
// final here.
func (p *Participant) kidsOf(e *entry) []*entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*entry
	for c := range p.kids[e.tx.Key()] {
		if !c.state.final() {
			out = append(out, c)
		}
	}
	return out
}

// parentLocked returns the entry of the nested e's parent, making it
// ACTIVE when unknown here: the manager promoted this participant into the
// parent when it committed e (TX.2.7), with the same crash count, so
// operations under the parent need no join.
func (p *Participant) parentLocked(e *entry) *entry {
	k, _ := e.parentKey()
	if pe := p.txs[k]; pe != nil {
		return pe
	}
	pe := &entry{turn: make(chan struct{}, 1), tx: e.anc[0], state: Active,
		joined: closedChan, anc: e.anc[1:], last: p.cfg.Now()}
	p.txs[k] = pe
	p.addKidLocked(pe)
	return pe
}

// leaveLocked ends an operation under e.
func (p *Participant) leaveLocked(e *entry) {
	e.ops--
	if e.ops == 0 && e.drained != nil {
		close(e.drained)
		e.drained = nil
	}
	p.calls.Done()
}

// waitDrained waits until no operation runs under e. Only the holder of
// e's turn waits.
func (p *Participant) waitDrained(ctx context.Context, e *entry) error {
	p.mu.Lock()
	for e.ops > 0 {
		if e.drained == nil {
			e.drained = make(chan struct{})
		}
		ch := e.drained
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}
