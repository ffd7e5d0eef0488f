package kv

import (
	"context"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/participant"
)

// resource is the DB as its participant's Resource.
type resource struct{ d *DB }

var _ participant.Resource = resource{}

// Prepare implements participant.Resource: a transaction that wrote
// nothing is NOTCHANGED; one that wrote gives its changes as the record,
// and releases its read locks (it reads no more: strict two-phase locking
// keeps only the write locks until the outcome). A nested transaction
// keeps its read locks, for its parent to inherit at Merge, and needs no
// record (the participant stores none).
func (r resource) Prepare(_ context.Context, tx participant.Tx) ([]byte, bool, error) {
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.txs[tx.Key()]
	if t == nil || len(t.changes) == 0 || plantedOneWriteUnchanged && len(t.changes) == 1 {
		return nil, false, nil
	}
	if len(t.anc) > 0 {
		return nil, true, nil
	}
	d.unlockReadsLocked(t)
	return encodeChanges(t.changes), true, nil
}

// Merge implements participant.Resource: the nested child's changes
// become its parent's (overriding the parent's own for the same keys),
// and its locks, read and write, pass to the parent (TX.3). Nothing
// becomes visible outside the parent.
func (r resource) Merge(_ context.Context, child, parent participant.Tx) {
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.txs[child.Key()]
	if c == nil || len(c.anc) == 0 {
		return
	}
	delete(d.txs, child.Key())
	p := d.txs[parent.Key()]
	if p == nil {
		p = newTxn()
		p.anc = c.anc[1:]
		d.txs[parent.Key()] = p
	}
	for k, ch := range c.changes {
		if old, ok := p.changes[k]; ok {
			d.held -= size(k, old) // the child's replaces it; the child's bytes pass to p
		}
		p.changes[k] = ch
		if l := d.locks[k]; l != nil && l.writer == c {
			l.writer = p
		}
	}
	for k := range c.reads {
		if l := d.locks[k]; l != nil {
			delete(l.readers, c)
			l.readers[p] = struct{}{} // not nil: c was one
		}
		if p.reads == nil {
			p.reads = map[string]struct{}{}
		}
		p.reads[k] = struct{}{}
	}
	for pre := range c.prefixes {
		if h := d.prefixes[pre]; h != nil {
			delete(h, c)
			h[p] = struct{}{}
		}
		if p.prefixes == nil {
			p.prefixes = map[string]struct{}{}
		}
		p.prefixes[pre] = struct{}{}
	}
}

// Commit implements participant.Resource: the changes go to the Store with
// the removal of the prepared record, then become visible and the locks
// are released.
func (r resource) Commit(_ context.Context, tx participant.Tx, write func(*participant.Batch) error) error {
	d := r.d
	d.mu.Lock()
	t := d.txs[tx.Key()]
	var b participant.Batch
	if t != nil {
		keys := make([]string, 0, len(t.changes))
		for k := range t.changes {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if c := t.changes[k]; c.deleted {
				b.Delete(storeKey(k))
			} else {
				b.Put(storeKey(k), c.value)
			}
		}
	}
	d.mu.Unlock()
	if t == nil {
		return djinn.Errorf(djinn.Internal, "key/value store: %s is prepared but holds no changes here", tx)
	}
	if err := write(&b); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dropLocked(t)
	for k, c := range t.changes {
		d.applyLocked(k, c)
	}
	d.unlockLocked(t)
	delete(d.txs, tx.Key())
	return nil
}

// Abort implements participant.Resource: the changes are dropped and the
// locks released.
func (r resource) Abort(_ context.Context, tx participant.Tx) {
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.txs[tx.Key()]; t != nil {
		d.dropLocked(t)
		d.unlockLocked(t)
		delete(d.txs, tx.Key())
	}
}

// Recover implements participant.Resource: a prepared transaction holds
// its write locks again.
func (r resource) Recover(tx participant.Tx, record []byte) error {
	d := r.d
	cs, err := decodeChanges(record)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t := newTxn()
	for k := range cs {
		if err := d.lockWriteLocked(t, k); err != nil {
			return djinn.Errorf(djinn.Internal, "key/value store: two prepared transactions change key %q (namespace %q)", userKey(k), nsOf(k))
		}
	}
	t.changes = cs
	for k, c := range cs {
		d.countLocked(k, c, 1)
	}
	d.txs[tx.Key()] = t
	return nil
}
