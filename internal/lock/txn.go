package lock

import (
	"slices"

	"github.com/djinn-go/djinn"
)

// CommitTxn records that transaction id committed (spec 1.5, 2.2). A
// nested transaction's locks pass to its parent, fences and all: the
// parent holds them as if granted to it, with their counts added to its
// own. A top-level transaction's locks are dropped (drop_locks, once per
// family). Either way the transaction's waiting requests are cancelled,
// and so are the locks and requests of transactions nested in it that are
// still known: they did not commit into it, so they aborted (TX.2.7: a
// parent's vote aborts its undecided nested transactions). An unknown
// transaction has nothing to commit.
func (t *Table) CommitTxn(id uint64) (Effects, error) {
	return t.endTxn(id, true)
}

// AbortTxn records that transaction id aborted: its locks and those of
// every transaction nested in it are dropped and their waiting requests
// cancelled (the caller answers those with TransactionRolledBack).
func (t *Table) AbortTxn(id uint64) (Effects, error) {
	return t.endTxn(id, false)
}

func (t *Table) endTxn(id uint64, commit bool) (Effects, error) {
	if id == 0 {
		return Effects{}, djinn.Errorf(djinn.InvalidArgument, "transaction 0: a transaction id must be non-zero")
	}
	p, ok := t.parties[txnKey(id)]
	if !ok {
		return Effects{}, nil
	}
	var e Effects
	var touched []uint64
	nested := descendants(p)
	for _, d := range nested {
		touched = append(touched, t.clear(d, nil, &e)...)
	}
	if parent := p.up; !commit || parent == nil {
		touched = append(touched, t.clear(p, nil, &e)...)
	} else {
		for _, w := range slices.Clone(p.waits()) {
			e.Cancelled = append(e.Cancelled, w.id)
			touched = append(touched, w.set)
			t.unqueue(t.sets.at(w.set), w)
		}
		sets := slices.Clone(p.sets)
		slices.Sort(sets)
		for _, sid := range sets {
			t.inherit(sid, p, p.up)
		}
		touched = append(touched, sets...)
	}
	for i := len(nested) - 1; i >= 0; i-- {
		t.forget(nested[i])
	}
	t.forget(p)
	slices.Sort(e.Cancelled)
	e.Grants = t.wakeSets(touched)
	return e, nil
}

// descendants returns the known transactions nested in p, parents before
// their children.
func descendants(p *party) []*party {
	var out []*party
	for q := []*party{p}; len(q) > 0; q = q[1:] {
		for _, k := range q[0].kids() {
			out = append(out, k)
			q = append(q, k)
		}
	}
	return out
}

// inherit passes child's locks in set sid to parent.
func (t *Table) inherit(sid uint64, child, parent *party) {
	s := t.sets.at(sid)
	i, _ := s.find(child.key)
	grants := s.holders[i].grants
	t.dropHolding(sid, s, i)
	j, ok := s.find(parent.key)
	if !ok {
		s.holders = slices.Insert(s.holders, j, holding{p: parent, idx: len(parent.sets), grants: grants})
		parent.sets = append(parent.sets, sid)
		return
	}
	h := &s.holders[j]
	merged := make([]uint64, 0, len(h.grants)+len(grants))
	a, b := h.grants, grants
	for len(a) > 0 && len(b) > 0 {
		if a[0] < b[0] {
			merged, a = append(merged, a[0]), a[1:]
		} else {
			merged, b = append(merged, b[0]), b[1:]
		}
	}
	h.grants = append(append(merged, a...), b...)
}
