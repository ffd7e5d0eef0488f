package participant

import (
	"context"
	"errors"

	"github.com/djinn-go/djinn"
)

// Commit is TX.2.6's commit: a PREPARED transaction rolls forward (once;
// a repeated commit returns nil). An unknown one gives
// djinn.ErrUnknownTransaction, which tells a manager it rolled forward
// already; one that is not PREPARED here, djinn.ErrCannotCommit.
func (p *Participant) Commit(ctx context.Context, tx Tx) error {
	e, err := p.begin(tx)
	if err != nil {
		return err
	}
	defer p.calls.Done()
	return p.commitEntry(ctx, e)
}

func (p *Participant) commitEntry(ctx context.Context, e *entry) error {
	p.mu.Lock()
	nested := len(e.anc) > 0
	p.mu.Unlock()
	if nested {
		return p.commitNested(ctx, e)
	}
	if err := take(ctx, e); err != nil {
		return err
	}
	defer release(e)
	st, tx := p.look(e)
	switch st {
	case Committed, NotChanged:
		return nil
	case Prepared:
		return p.rollForward(ctx, e)
	case Aborted:
		return djinn.Errorf(djinn.CannotCommit, "transaction %d: aborted at this participant", tx.ID)
	}
	return djinn.Errorf(djinn.CannotCommit, "transaction %d: %s at this participant, not PREPARED: it can commit only after voting PREPARED", tx.ID, st)
}

// commitNested is commit for the nested e: PREPARED, it rolls forward
// into its parent (TX.2.6). Turns are taken parent first, as everywhere.
func (p *Participant) commitNested(ctx context.Context, e *entry) error {
	for waited := false; ; waited = true {
		p.mu.Lock()
		st, tx := e.state, e.tx
		var pe *entry
		if st == Prepared {
			pe = p.parentLocked(e)
		}
		p.mu.Unlock()
		switch {
		case st == Committed || st == NotChanged:
			return nil
		case st == Aborted && p.enclosingAborted(e):
			// Aborted with an enclosing transaction: committing into it
			// would have dropped the changes just the same (TX.2.7).
			return nil
		case st == Aborted:
			return djinn.Errorf(djinn.CannotCommit, "transaction %d: aborted at this participant", tx.ID)
		case pe == nil && waited:
			return djinn.Errorf(djinn.CannotCommit, "transaction %d: %s at this participant, not PREPARED: it can commit only after voting PREPARED", tx.ID, st)
		case pe == nil:
			// A vote may be under way: wait for it, and look again.
			if err := take(ctx, e); err != nil {
				return err
			}
			release(e)
			continue
		}
		if err := take(ctx, pe); err != nil {
			return err
		}
		if err := take(ctx, e); err != nil {
			release(pe)
			return err
		}
		st, _ = p.look(e)
		if st == Prepared {
			p.merge(ctx, e, pe)
		}
		release(e)
		release(pe)
		if st == Prepared {
			return nil
		}
	}
}

// enclosingAborted reports whether a transaction e is nested in has
// aborted here.
func (p *Participant) enclosingAborted(e *entry) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, at := range e.anc {
		if a := p.txs[at.Key()]; a != nil && a.state == Aborted {
			return true
		}
	}
	return false
}

// merge rolls the nested c forward into its parent pe; the caller holds
// both turns, and no operation runs under c. If pe is past voting here
// (aborted), c's changes are dropped instead: they went with it (TX.2.7).
func (p *Participant) merge(ctx context.Context, c, pe *entry) {
	p.mu.Lock()
	pst, ptx, tx := pe.state, pe.tx, c.tx
	p.mu.Unlock()
	if pst == Active || pst == Voting {
		p.cfg.Resource.Merge(context.WithoutCancel(ctx), tx, ptx)
	} else {
		p.cfg.Logger.Debug("participant: a nested transaction committed into an ended parent; its changes are dropped", "tx", tx, "parent", ptx, "parentState", pst)
		p.cfg.Resource.Abort(context.WithoutCancel(ctx), tx)
	}
	p.settle(c, Committed)
}

// completeKids completes the transactions nested in e that are not final
// here, as their manager decided (TX.2.6: a participant asked to prepare
// an enclosing transaction completes the nested ones, using getState):
// COMMITTED (or NOTCHANGED) rolls a nested transaction forward into e;
// any other state, or a manager that does not know it, rolls it back (it
// can no longer commit into e, which is voting). A failed getState fails
// the call, so that the manager asks again. The caller holds e's turn, and
// e is not ACTIVE here: no operation starts under e's descendants.
func (p *Participant) completeKids(ctx context.Context, e *entry) error {
	for _, c := range p.kidsOf(e) {
		if err := take(ctx, c); err != nil {
			return err
		}
		err := p.completeKid(ctx, c, e)
		release(c)
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *Participant) completeKid(ctx context.Context, c, e *entry) error {
	st, tx := p.look(c)
	if st.final() {
		return nil
	}
	if err := p.waitDrained(ctx, c); err != nil {
		return err
	}
	if err := p.completeKids(ctx, c); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	ms, err := p.cfg.Managers.GetState(cctx, tx)
	cancel()
	switch {
	case err == nil && (ms == Committed || ms == NotChanged):
		p.merge(ctx, c, e)
	case err == nil || isGone(err):
		p.rollBack(ctx, c, tx)
	default:
		return err
	}
	return nil
}

// rollForward commits the PREPARED e with the resource; the caller holds
// e's turn.
func (p *Participant) rollForward(ctx context.Context, e *entry) error {
	_, tx := p.look(e)
	key := preparedKey(tx)
	wrote := false
	write := func(b *Batch) error {
		if err := b.checkApp(); err != nil {
			return err
		}
		b.Delete(key)
		err := p.cfg.Store.Apply(ctx, b)
		wrote = wrote || err == nil
		return err
	}
	err := p.cfg.Resource.Commit(ctx, tx, write)
	switch {
	case wrote && err != nil:
		p.cfg.Logger.Error("participant: the resource failed after its commit was written; it is committed", "tx", tx, "err", err)
	case !wrote && err == nil:
		// The resource made its changes durable itself: drop the record.
		err = write(&Batch{})
	}
	if !wrote {
		return err
	}
	p.settle(e, Committed)
	return nil
}

// Abort is TX.2.6's abort: an ACTIVE, VOTING or PREPARED transaction rolls
// back (after the operations under way end); a repeated abort returns nil.
// An unknown one gives djinn.ErrUnknownTransaction; a committed one
// djinn.ErrCannotAbort.
func (p *Participant) Abort(ctx context.Context, tx Tx) error {
	e, err := p.begin(tx)
	if err != nil {
		if e = p.abortedParent(tx); e == nil {
			return err
		}
	}
	defer p.calls.Done()
	return p.abortEntry(ctx, e)
}

// abortedParent returns, counted as a call under way, an ABORTED entry for
// tx, unknown here, when transactions nested in it are known here: they
// abort with it (TX.2.7), and a late commit of one of them must not make
// tx ACTIVE here again. Otherwise nil.
func (p *Participant) abortedParent(tx Tx) *entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := tx.Key()
	if p.closed || p.txs[k] != nil || len(p.kids[k]) == 0 {
		return nil
	}
	now := p.cfg.Now()
	e := &entry{turn: make(chan struct{}, 1), tx: tx, state: Aborted, joined: closedChan, undone: true, last: now, ended: now}
	p.txs[k] = e
	p.calls.Add(1)
	return e
}

func (p *Participant) abortEntry(ctx context.Context, e *entry) error {
	if err := take(ctx, e); err != nil {
		return err
	}
	defer release(e)
	p.mu.Lock()
	st, tx, durable, undone := e.state, e.tx, e.durable, e.undone
	p.mu.Unlock()
	if st != Committed {
		// Aborting a transaction aborts those nested in it (TX.2.7); turns
		// are taken parent first (this deferred call runs before release).
		defer p.abortKids(ctx, e)
	}
	switch {
	case st == Committed:
		return djinn.Errorf(djinn.CannotAbort, "transaction %d: committed at this participant", tx.ID)
	case st == NotChanged || (st == Aborted && undone):
		return nil
	}
	if durable {
		var b Batch
		b.Delete(preparedKey(tx))
		if err := p.cfg.Store.Apply(ctx, &b); err != nil {
			return err // still PREPARED: the manager asks again
		}
	}
	p.mu.Lock()
	if e.state != Aborted {
		e.state, e.ended = Aborted, p.cfg.Now() // no operation starts from here on
	}
	e.durable = false
	p.mu.Unlock()
	if err := p.waitDrained(ctx, e); err != nil {
		return err // the next abort, or the sweep, finishes the roll back
	}
	p.cfg.Resource.Abort(context.WithoutCancel(ctx), tx)
	p.mu.Lock()
	e.undone = true
	p.mu.Unlock()
	return nil
}

// abortKids aborts the transactions nested in e that are not final here.
// The caller holds e's turn. A failure is left to the manager's abort of
// the nested transaction, or to the sweep.
func (p *Participant) abortKids(ctx context.Context, e *entry) {
	for _, c := range p.kidsOf(e) {
		if err := p.abortEntry(ctx, c); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn("participant: aborting a nested transaction with its parent failed", "tx", c.tx, "err", err)
		}
	}
}

// isGone reports whether err says the manager does not know the
// transaction (or is not there): the transaction aborted (TX.2.6,
// TX.2.8.1).
func isGone(err error) bool {
	return errors.Is(err, djinn.ErrUnknownTransaction) || errors.Is(err, djinn.ErrNoSuchObject)
}
