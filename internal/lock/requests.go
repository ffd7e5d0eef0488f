package lock

import (
	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// A lock request is its holder's (spec 1.2.3: a lock is associated with a
// single client; 1.5: each transaction acquires locks on its own behalf).
// Its id, which its caller draws, names it to that holder alone: a retry
// with the id finds the request (still waiting, or granted and its grant
// still held) only when it comes from the holder that made it, and a
// cancel takes it out of its queue only for that holder. To any other
// holder the id names no request: its retry is refused NoSuchObject, as
// a request that is not there, and its cancel skips it, as one that is
// not waiting. Request ids are no capability: the set's owner sees them
// on the console, and they travel in the clear.
//
// Before requestRules ids alone matched: whoever knew a request's id and
// its set could take its answer (its fencing token among them) or, by
// leaving, cancel its wait — during a new leader's grace, for one, while
// the request's own caller had yet to come back. Entries applied by an
// older rules version are replayed as they were decided.

// requestRules is the rules version (internal/state/rules.go) from which
// a request id names a request to its own holder only.
const requestRules = 3

// holderKeyLocked returns the table's key of the holder h names, if the
// state knows it, creating nothing: a holder it does not know holds no
// lock and waits for none.
func (s *State) holderKeyLocked(h *statepb.LockHolderState) (partyKey, bool) {
	switch {
	case len(h.GetOwner()) > 0 && h.GetManager() != nil:
		return 0, false
	case len(h.GetOwner()) > 0:
		cookie, err := djinn.IDFromBytes("lock owner", h.GetOwner())
		if err != nil {
			return 0, false
		}
		id, ok := s.owners[cookie]
		return partyKey(id), ok
	case h.GetManager() != nil:
		id, ok := s.txns[TxnKeyOf(h.GetManager(), h.GetTxn())]
		return txnKey(id), ok
	}
	return 0, false
}

// grantedToLocked reports whether the grant that got fence in the set
// named b is still held by holder h: whether a retry of a recent grant
// is its holder's. A grant is known by its fence, which counts the set's
// grants: which holder holds it is replicated state, as the recent
// grants' holders are not.
func (s *State) grantedToLocked(b []byte, h *statepb.LockHolderState, fence uint64) bool {
	k, ok := s.holderKeyLocked(h)
	if !ok {
		return false
	}
	id, err := djinn.IDFromBytes("lock set id", b)
	if err != nil {
		return false
	}
	tid, ok := s.sets.Find(id)
	return ok && s.table.holdsFence(uint64(tid), k, fence)
}

// notHolders is the refusal of a request id that names another holder's
// request: said as of a request that is not there.
func notHolders(id uint64) error {
	return djinn.Errorf(djinn.NoSuchObject, "lock request %d: no request of this holder waits under that id, nor holds a grant it got (a request id names its own holder's request only): to ask for a lock, send a new request id (0 draws one)", id)
}

// holdsFence reports whether party k holds the grant that got fence in
// set id.
func (t *Table) holdsFence(id uint64, k partyKey, fence uint64) bool {
	s, ok := t.sets.get(id)
	if !ok {
		return false
	}
	i, ok := s.find(k)
	if !ok {
		return false
	}
	for _, g := range s.holders[i].grants {
		if f, _ := unpack(g); f == fence {
			return true
		}
	}
	return false
}

// waiterOf returns the key of the holder of waiting request id.
func (t *Table) waiterOf(id uint64) (partyKey, bool) {
	w, ok := t.waiting[id]
	if !ok {
		return 0, false
	}
	return w.p.key, true
}

// waitingCalls returns the waiting requests, each named as a Lock call of
// its holder under its id is while under way (waitKey), and whether a
// request id names its own holder's request alone (requestRules): before,
// a call of any holder under the id was the request's.
func (s *State) waitingCalls() (ws []waitKey, owned bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws = make([]waitKey, 0, len(s.table.waiting))
	for id, w := range s.table.waiting {
		k := waitKey{request: id}
		if n := s.holders[w.p.key.id()]; n.isTxn {
			k.txn = n.txn
		} else {
			k.owner = n.owner
		}
		ws = append(ws, k)
	}
	return ws, s.rules() >= requestRules
}
