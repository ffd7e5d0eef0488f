package txn

import (
	"cmp"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The state's snapshot: one record per transaction, and the id counter.

// Records returns the state for a snapshot.
func (s *State) Records() (*statepb.TxnCounter, []*statepb.TxnRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*statepb.TxnRecord, 0, len(s.txns))
	for _, t := range s.txns {
		r := &statepb.TxnRecord{Id: t.id, Cookie: t.cookie[:], Principal: t.principal.Value(), State: int32(t.state), EndedUnixNanos: t.ended, ParentId: t.parent,
			Version: t.version, PrepareOnly: t.prepareOnly}
		if !t.secret.IsZero() {
			r.Secret = t.secret[:]
		}
		if remote, remoteID := t.remote(); remote != nil {
			r.ParentId, r.Remote = remoteID, remote
		}
		if len(t.parts) > 0 {
			r.Participants = make([]*statepb.TxnParticipantRecord, 0, len(t.parts))
		}
		for _, p := range t.parts {
			r.Participants = append(r.Participants, &statepb.TxnParticipantRecord{Participant: p.ref, CrashCount: p.crash, Vote: int32(p.vote), Notified: p.notified})
		}
		out = append(out, r)
	}
	return &statepb.TxnCounter{NextId: s.next}, out
}

// Reset empties the state before a restore.
func (s *State) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.txns = map[uint64]*transaction{}
	s.owned.reset()
	s.unsettled = map[uint64]*transaction{}
	s.settled, s.remembered = nil, 0
	s.refs = map[refKey]*sharedRef{}
	s.next = 0
	s.undecided = 0
	s.orphans, s.remoteKids = nil, nil
}

// RestoreCounter restores the id counter.
func (s *State) RestoreCounter(c *statepb.TxnCounter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = max(s.next, c.GetNextId())
}

// Restore adds one snapshot record (its lease is restored separately).
func (s *State) Restore(r *statepb.TxnRecord) error {
	cookie, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
	if err != nil {
		return err
	}
	st := djinnpb.TransactionState(r.GetState())
	if st != Active && st != Voting && st != Committed && st != Aborted {
		return djinn.Errorf(djinn.Internal, "transaction %d: state %d", r.GetId(), r.GetState())
	}
	t := newTransaction(r.GetId(), cookie, r.GetPrincipal())
	copy(t.secret[:], r.GetSecret())
	t.state, t.ended, t.parent = st, r.GetEndedUnixNanos(), r.GetParentId()
	t.version, t.prepareOnly = r.GetVersion(), r.GetPrepareOnly()
	if r.GetRemote() != nil {
		n := t.nested()
		t.parent, n.remote, n.remoteID = 0, r.GetRemote(), r.GetParentId()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps := r.GetParticipants(); len(ps) > 0 {
		t.parts = make([]participant, 0, len(ps))
	}
	for _, p := range r.GetParticipants() {
		t.parts = append(t.parts, participant{ref: s.shareRefLocked(p.GetParticipant()), crash: p.GetCrashCount(), vote: djinnpb.TransactionState(p.GetVote()), notified: p.GetNotified()})
	}
	s.addLocked(t)
	s.table.Quotas().Add(t.principal.Value(), quota.Participants, int64(len(t.parts)))
	s.next = max(s.next, t.id)
	if t.hasRemote() {
		s.indexRemoteLocked(t)
	}
	// Records come in any order: link t to its parent and its children.
	if t.parent != 0 {
		if p, ok := s.txns[t.parent]; ok {
			p.nested().children = insertSorted(p.kids(), t.id)
		} else {
			if s.orphans == nil {
				s.orphans = map[uint64][]uint64{}
			}
			s.orphans[t.parent] = append(s.orphans[t.parent], t.id)
		}
	}
	for _, cid := range s.orphans[t.id] {
		t.nested().children = insertSorted(t.kids(), cid)
	}
	delete(s.orphans, t.id)
	if st == Committed || st == Aborted {
		close(t.decided)
		s.settleLocked(t)
	} else {
		s.undecided++
	}
	return nil
}

// Restored orders the settled transactions restored, which came in any
// order, by when they were decided: the oldest are forgotten first.
func (s *State) Restored() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	slices.SortFunc(s.settled, func(a, b *transaction) int {
		return cmp.Or(cmp.Compare(a.ended, b.ended), cmp.Compare(a.id, b.id))
	})
	return nil
}
