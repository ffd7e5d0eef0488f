package participant

import (
	"context"
)

// Prepare is TX.2.6's prepare: the participant votes PREPARED (its record
// durable), NOTCHANGED or ABORTED, after the operations under way end. A
// transaction past voting gets its state again; an unknown one
// djinn.ErrUnknownTransaction. A context error leaves the vote open.
func (p *Participant) Prepare(ctx context.Context, tx Tx) (State, error) {
	return p.vote(ctx, tx, false)
}

// PrepareAndCommit is TX.2.6's prepareAndCommit, equivalent to
//
//	result := Prepare(tx)
//	if result == PREPARED { Commit(tx); result = COMMITTED }
//
// but it rolls an ACTIVE transaction forward with one write to the Store
// instead of two (the prepared record is never written): a crash before
// that write leaves the transaction unknown here, as a crash before
// Prepare's write would; after it, committed, as a crash after Commit's
// write would. That write also keeps a marker of the outcome, so a manager
// that asks again — after its own crash or this participant's — hears
// COMMITTED, not UnknownTransaction (which it would take for a lost
// vote); the marker is dropped once the manager says it decided.
//
// A manager never sends it for a nested transaction (TX.2.7); if one does,
// it is Prepare then Commit: the changes roll forward into the parent.
func (p *Participant) PrepareAndCommit(ctx context.Context, tx Tx) (State, error) {
	if len(p.Ancestors(tx)) > 0 {
		st, err := p.vote(ctx, tx, false)
		if err != nil || st != Prepared {
			return st, err
		}
		if err := p.Commit(ctx, tx); err != nil {
			return 0, err
		}
		return Committed, nil
	}
	return p.vote(ctx, tx, true)
}

func (p *Participant) vote(ctx context.Context, tx Tx, andCommit bool) (State, error) {
	e, err := p.begin(tx)
	if err != nil {
		return 0, err
	}
	defer p.calls.Done()
	if err := take(ctx, e); err != nil {
		return 0, err
	}
	defer release(e)
	p.mu.Lock()
	st := e.state
	if st == Active {
		e.state = Voting // no operation starts from here on
	}
	tx = e.tx
	nested := len(e.anc) > 0
	p.mu.Unlock()
	switch st {
	case Prepared:
		if !andCommit {
			return Prepared, nil
		}
		if err := p.rollForward(ctx, e); err != nil {
			return 0, err
		}
		return Committed, nil
	case NotChanged, Committed, Aborted:
		// Past voting: the same answer again (TX.2.6).
		return st, nil
	}
	if err := p.waitDrained(ctx, e); err != nil {
		return 0, err
	}
	if err := p.completeKids(ctx, e); err != nil {
		return 0, err // the vote stays open for the manager's retry
	}
	rec, changed, err := p.cfg.Resource.Prepare(ctx, tx)
	if err != nil && ctx.Err() != nil {
		return 0, err
	}
	if err != nil {
		p.cfg.Logger.Warn("participant: the resource cannot prepare; voting ABORTED", "tx", tx, "err", err)
		p.rollBack(ctx, e, tx)
		return Aborted, nil
	}
	if !changed {
		p.cfg.Resource.Abort(context.WithoutCancel(ctx), tx)
		p.settle(e, NotChanged)
		return NotChanged, nil
	}
	if andCommit {
		return p.commitAtOnce(ctx, e, tx), nil
	}
	return p.holdPrepared(ctx, e, tx, rec, nested), nil
}

// commitAtOnce rolls a changed transaction forward with the resource in
// the same write as its committed mark (prepareAndCommit). It answers
// Committed once that write is made, whatever the resource says after,
// and Aborted, rolled back, when it could not be.
func (p *Participant) commitAtOnce(ctx context.Context, e *entry, tx Tx) State {
	wrote := false
	err := p.cfg.Resource.Commit(ctx, tx, func(b *Batch) error {
		if err := b.checkApp(); err != nil {
			return err
		}
		b.Put(committedKey(tx), encodeRecord(tx, nil))
		err := p.cfg.Store.Apply(ctx, b)
		wrote = wrote || err == nil
		return err
	})
	if wrote {
		if err != nil {
			p.cfg.Logger.Error("participant: the resource failed after its commit was written; it is committed", "tx", tx, "err", err)
		}
		p.mu.Lock()
		e.marked = true
		p.mu.Unlock()
		p.settle(e, Committed)
		return Committed
	}
	// Not rolled forward, and no record: as if the prepared record could
	// not be written.
	p.cfg.Logger.Warn("participant: prepareAndCommit could not write; voting ABORTED", "tx", tx, "err", err)
	p.rollBack(ctx, e, tx)
	return Aborted
}

// holdPrepared makes a changed transaction PREPARED: a nested one in
// memory, a top-level one once its prepared record rec is durable. It
// answers Aborted, rolled back, when the record cannot be stored.
func (p *Participant) holdPrepared(ctx context.Context, e *entry, tx Tx, rec []byte, nested bool) State {
	if nested {
		// Ready to roll forward into the parent (TX.2.6), whose changes
		// live in memory while ACTIVE: no record to write.
		p.mu.Lock()
		e.state = Prepared
		p.mu.Unlock()
		return Prepared
	}
	var b Batch
	b.Put(preparedKey(tx), encodeRecord(tx, rec))
	if err := p.cfg.Store.Apply(ctx, &b); err != nil {
		// The record may or may not be on disk: if it is, the roll decision
		// after a restart rolls it back (this vote aborts the transaction).
		p.cfg.Logger.Warn("participant: storing the prepared record failed; voting ABORTED", "tx", tx, "err", err)
		p.rollBack(ctx, e, tx)
		return Aborted
	}
	p.mu.Lock()
	e.state, e.durable = Prepared, true
	p.mu.Unlock()
	return Prepared
}

// rollBack aborts e, which has no prepared record, with the resource.
func (p *Participant) rollBack(ctx context.Context, e *entry, tx Tx) {
	p.cfg.Resource.Abort(context.WithoutCancel(ctx), tx)
	p.settle(e, Aborted)
	p.mu.Lock()
	e.undone = true
	p.mu.Unlock()
}
