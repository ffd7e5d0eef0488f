package lock

import (
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The ABORTED votes (TX.2.6): a participant that voted ABORTED is
// ABORTED, and a prepare repeated for a transaction in a post-VOTING state
// gets that state again. A vote is state like a lock: the LockTxnEnd that
// rolls the transaction back as the service votes keeps it, snapshots
// carry it, so whichever member leads when the manager asks again — after
// a lost reply, its own restart or a failover of either side — answers
// ABORTED, and a lock request under the transaction is refused.
//
// A vote is kept until the manager can no longer ask: until it tells the
// outcome (an abort, which a manager need not send an ABORTED voter), or
// answers getState with a decided state or UnknownTransaction (the
// leader asks, VoteCheck after the vote and then every VoteCheck; see
// Service.checkVotes). The transaction's lease is no bound: the lock
// service does not know it, and a manager's vote goes on past it.
// maxAbortedVotes bounds the votes kept against managers that never
// answer: past it the oldest is forgotten, and a prepare repeated for it
// then finds a transaction unknown here.

// votesRules is the rules version (internal/state/rules.go) from which
// votes are kept: under an older one, a member of an older binary would
// not keep them, and would grant a lock request the others refuse. The
// leader asks for a vote to be kept only under it; before it (a rolling
// upgrade) only the leader that voted remembers the vote, in memory (as
// leaders did before), and a new leader finds none.
const votesRules = 2

// maxAbortedVotes bounds the ABORTED votes the state keeps (a vote costs
// about a hundred bytes).
const maxAbortedVotes = 1 << 16

// abortedVote is an ABORTED vote as the state keeps it.
type abortedVote struct {
	seq      uint64 // the order of keeping
	endpoint string // the manager's, to ask it getState
	secret   djinn.ID
	at       int64 // the vote's log time, unix nanoseconds
}

// abortedVotes are the votes kept, by transaction, oldest first in order
// (entries whose seq is not the vote's are stale: forgotten, or kept again
// since).
type abortedVotes struct {
	by    map[TxnKey]abortedVote
	order []voteSeq
	next  uint64
}

type voteSeq struct {
	k   TxnKey
	seq uint64
}

// snapVote is a kept vote as a snapshot holds it.
type snapVote struct {
	Txn      TxnKey
	Endpoint string    `json:",omitempty"`
	Secret   *djinn.ID `json:",omitempty"`
	At       int64
}

// Vote is a kept ABORTED vote, for the leader to ask its manager about.
type Vote struct {
	Manager *djinnpb.Ref
	Txn     uint64
	Secret  djinn.ID
	At      int64 // unix nanoseconds
}

// keep keeps transaction k's vote, the oldest going past the bound.
func (v *abortedVotes) keep(k TxnKey, endpoint string, secret djinn.ID, at int64) {
	if v.by == nil {
		v.by = map[TxnKey]abortedVote{}
	}
	if _, ok := v.by[k]; ok {
		return
	}
	for len(v.by) >= maxAbortedVotes {
		v.forget(v.oldest())
	}
	v.next++
	v.by[k] = abortedVote{seq: v.next, endpoint: endpoint, secret: secret, at: at}
	v.order = append(v.order, voteSeq{k: k, seq: v.next})
}

// oldest returns the oldest vote kept (there is one), dropping the stale
// entries before it.
func (v *abortedVotes) oldest() TxnKey {
	for {
		e := v.order[0]
		if a, ok := v.by[e.k]; ok && a.seq == e.seq {
			return e.k
		}
		v.order = v.order[1:]
	}
}

// forget forgets transaction k's vote; the order is compacted once most
// of it is stale.
func (v *abortedVotes) forget(k TxnKey) {
	if _, ok := v.by[k]; !ok {
		return
	}
	delete(v.by, k)
	if len(v.order) < 64 || len(v.order) < 2*len(v.by) {
		return
	}
	live := make([]voteSeq, 0, len(v.by))
	for _, e := range v.order {
		if a, ok := v.by[e.k]; ok && a.seq == e.seq {
			live = append(live, e)
		}
	}
	v.order = live
}

// export returns the votes kept, oldest first.
func (v *abortedVotes) export() []snapVote {
	var out []snapVote
	for _, e := range v.order {
		a, ok := v.by[e.k]
		if !ok || a.seq != e.seq {
			continue
		}
		sv := snapVote{Txn: e.k, Endpoint: a.endpoint, At: a.at}
		if !a.secret.IsZero() {
			sec := a.secret
			sv.Secret = &sec
		}
		out = append(out, sv)
	}
	return out
}

// add keeps a vote read from a snapshot, after those read before it.
func (v *abortedVotes) add(sv snapVote) error {
	if sv.Txn.ID == 0 {
		return snapErr("an ABORTED vote for transaction 0")
	}
	if _, dup := v.by[sv.Txn]; dup {
		return snapErr("the ABORTED vote for transaction %d appears twice", sv.Txn.ID)
	}
	if len(v.by) >= maxAbortedVotes {
		return snapErr("more than %d ABORTED votes", maxAbortedVotes)
	}
	var sec djinn.ID
	if sv.Secret != nil {
		sec = *sv.Secret
	}
	v.keep(sv.Txn, sv.Endpoint, sec, sv.At)
	return nil
}

// KeepsVotes reports whether the cluster's rules version keeps ABORTED
// votes.
func (s *State) KeepsVotes() bool { return s.rules() >= votesRules }

// VotedAborted reports whether the service voted transaction k ABORTED
// and keeps the vote.
func (s *State) VotedAborted(k TxnKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.votes.by[k]
	return ok
}

// VotesBefore returns the ABORTED votes kept that were cast before t
// (unix nanoseconds), oldest first.
func (s *State) VotesBefore(t int64) []Vote {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Vote
	for _, e := range s.votes.order {
		a, ok := s.votes.by[e.k]
		if !ok || a.seq != e.seq {
			continue
		}
		if a.at >= t {
			continue
		}
		m := e.k.Manager
		mgr := &djinnpb.Ref{Endpoint: a.endpoint, ServiceId: slices.Clone(m[:16]), ObjectId: slices.Clone(m[16:])}
		out = append(out, Vote{Manager: mgr, Txn: e.k.ID, Secret: a.secret, At: a.at})
	}
	return out
}

// Votes returns how many ABORTED votes the state keeps.
func (s *State) Votes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.votes.by)
}
