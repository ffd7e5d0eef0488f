package txn

// Settling, compacting and forgetting: what a decided transaction keeps
// once every participant was told, and when it is forgotten.

import (
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// refKey is a participant's reference as a map key: one with ids of
// another length than an ID's is not shared.
type refKey struct {
	endpoint        string
	service, object djinn.ID
}

type sharedRef struct {
	ref *djinnpb.Ref
	n   int // participants holding it
}

// refKeyOf returns r's key; false for a reference that is not shared (ids
// not of an ID's length, or fields this binary does not know).
func refKeyOf(r *djinnpb.Ref) (refKey, bool) {
	if len(r.GetServiceId()) != len(djinn.ID{}) || len(r.GetObjectId()) != len(djinn.ID{}) || len(r.ProtoReflect().GetUnknown()) > 0 {
		return refKey{}, false
	}
	return refKey{endpoint: r.GetEndpoint(), service: djinn.ID(r.GetServiceId()), object: djinn.ID(r.GetObjectId())}, true
}

// shareRefLocked returns the shared reference equal to r (r itself the
// first time), held once more.
func (s *State) shareRefLocked(r *djinnpb.Ref) *djinnpb.Ref {
	k, ok := refKeyOf(r)
	if !ok {
		return r
	}
	sr := s.refs[k]
	if sr == nil {
		sr = &sharedRef{ref: r}
		s.refs[k] = sr
	}
	sr.n++
	return sr.ref
}

// releaseRefLocked lets a participant's shared reference go.
func (s *State) releaseRefLocked(r *djinnpb.Ref) {
	k, ok := refKeyOf(r)
	if !ok {
		return
	}
	if sr := s.refs[k]; sr != nil && sr.ref == r {
		if sr.n--; sr.n == 0 {
			delete(s.refs, k)
		}
	}
}

// settleLocked closes settled once every participant is told, and keeps t
// among the unsettled until then. A settled transaction is compacted: it
// keeps only what is read of it until it is forgotten (its outcome, who
// may ask, its participants' votes for a describe), and the rest goes.
func (s *State) settleLocked(t *transaction) {
	for _, p := range t.parts {
		if !p.notified {
			if _, ok := s.unsettled[t.id]; !ok {
				s.unsettled[t.id] = t
				select {
				case s.wake <- struct{}{}:
				default:
				}
			}
			return
		}
	}
	delete(s.unsettled, t.id)
	select {
	case <-t.settled:
	default:
		close(t.settled)
		s.compactLocked(t)
		if t.parent == 0 {
			s.settled = append(s.settled, t)
			s.remembered++
		}
	}
}

// compactLocked drops what settled t no longer needs: its channels (both
// closed: the one shared closed channel stands for them, so a waiter that
// holds t's own still sees them closed) and the spare capacity of its
// participant list. Nothing Apply decides changes: every field keeps its
// value.
func (s *State) compactLocked(t *transaction) {
	t.decided, t.settled = closedChan, closedChan
	if cap(t.parts) > len(t.parts) {
		t.parts = slices.Clone(t.parts)
	}
	if len(t.parts) == 0 {
		t.parts = nil
	}
	if n := t.nest; n != nil && cap(n.children) > len(n.children) {
		n.children = slices.Clone(n.children)
	}
}

// ApplyNotified records participants told the outcome.
func (s *State) ApplyNotified(c *statepb.TxnNotified) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range c.GetEntries() {
		t, ok := s.txns[e.GetId()]
		if !ok || int(e.GetParticipant()) >= len(t.parts) || (t.state != Committed && t.state != Aborted) {
			continue
		}
		t.parts[e.GetParticipant()].notified = true
		s.settleLocked(t)
	}
}

// ApplyForget drops settled top-level transactions, with their nested
// ones (whose outcome participants may ask until then), and ends their
// leases.
func (s *State) ApplyForget(c *statepb.TxnForget) {
	var cookies [][]byte
	var forget func(t *transaction)
	forget = func(t *transaction) {
		s.table.Quotas().Release(t.principal.Value(), quota.Participants, int64(len(t.parts)))
		for _, p := range t.parts {
			s.releaseRefLocked(p.ref)
		}
		s.removeLocked(t)
		delete(s.unsettled, t.id)
		if remote, remoteID := t.remote(); remote != nil {
			k := remoteKeyOf(remote.GetManager(), remoteID)
			delete(s.remoteKids[k], t.id)
			if len(s.remoteKids[k]) == 0 {
				delete(s.remoteKids, k)
			}
		}
		cookies = append(cookies, t.cookie[:])
		for _, cid := range t.kids() {
			if ct, ok := s.txns[cid]; ok {
				forget(ct)
			}
		}
	}
	s.mu.Lock()
	for _, id := range c.GetIds() {
		t, ok := s.txns[id]
		if !ok || t.parent != 0 || (t.state != Committed && t.state != Aborted) {
			continue
		}
		if _, unsettled := s.unsettled[id]; unsettled {
			continue
		}
		forget(t)
		s.remembered--
	}
	s.popForgottenLocked()
	s.mu.Unlock()
	if len(cookies) > 0 {
		s.table.ApplyRelease(cookies...)
	}
}

// UnsettledLen returns the number of decided transactions with
// participants still to tell.
func (s *State) UnsettledLen() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.unsettled)
}

// Untold is a participant of a decided transaction still to be told the
// outcome.
type Untold struct {
	ID     uint64
	Part   int // its index, in join order
	Ref    *djinnpb.Ref
	Commit bool     // the outcome: COMMITTED, or else ABORTED
	Secret djinn.ID // the transaction's, which its participants check
}

// Untold appends to dst the participants of decided transactions still
// to be told, and returns it.
func (s *State) Untold(dst []Untold) []Untold {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.unsettled {
		for i, p := range t.parts {
			if !p.notified {
				dst = append(dst, Untold{ID: t.id, Part: i, Ref: p.ref, Commit: t.state == Committed, Secret: t.secret})
			}
		}
	}
	return dst
}

// Settled returns the ids of settled top-level transactions to forget,
// oldest settled first, at most max: those beyond the newest keep (keep
// <= 0: no bound), then those decided before cutoff (unix nanos). It
// stops at the first within both: those behind it wait their turn (after
// a restore, for up to the retention time).
func (s *State) Settled(cutoff int64, keep, max int) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	over := 0
	if keep > 0 {
		over = s.remembered - keep
	}
	var out []uint64
	for _, t := range s.settled {
		if len(out) == max {
			break
		}
		if s.txns[t.id] != t {
			continue // forgotten
		}
		if len(out) >= over && t.ended >= cutoff {
			break
		}
		out = append(out, t.id)
	}
	return out
}

// Remembered returns the number of settled top-level transactions
// remembered: not yet forgotten.
func (s *State) Remembered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remembered
}

// popForgottenLocked drops the forgotten transactions from the head of
// settled.
func (s *State) popForgottenLocked() {
	i := 0
	for i < len(s.settled) && s.txns[s.settled[i].id] != s.settled[i] {
		s.settled[i] = nil
		i++
	}
	s.settled = s.settled[i:]
	if len(s.settled) == 0 {
		s.settled = nil // let the drained array go
	}
}

func insertSorted(ids []uint64, id uint64) []uint64 {
	i, found := slices.BinarySearch(ids, id)
	if found {
		return ids
	}
	return slices.Insert(ids, i, id)
}
