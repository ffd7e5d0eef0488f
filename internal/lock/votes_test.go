package lock

import (
	"bytes"
	"errors"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

func voteKey(i int) TxnKey {
	return TxnKey{Manager: [32]byte{byte(i >> 8), byte(i)}, ID: uint64(i) + 1}
}

// TestAbortedVotesBound: past maxAbortedVotes the oldest vote is forgotten
// (and only it); forgetting votes out of order keeps the order of the
// rest, through a snapshot too.
func TestAbortedVotesBound(t *testing.T) {
	var v abortedVotes
	for i := range maxAbortedVotes {
		v.keep(voteKey(i), "m", djinn.ID{}, int64(i))
	}
	v.keep(voteKey(0), "m", djinn.ID{}, 0) // kept already: nothing changes
	v.keep(voteKey(maxAbortedVotes), "m", djinn.ID{}, maxAbortedVotes)
	if len(v.by) != maxAbortedVotes {
		t.Fatalf("%d votes kept, want %d", len(v.by), maxAbortedVotes)
	}
	if _, ok := v.by[voteKey(0)]; ok {
		t.Fatal("the oldest vote is kept past the bound")
	}
	if _, ok := v.by[voteKey(1)]; !ok {
		t.Fatal("the second oldest vote went too")
	}
	// Forget all but every 1000th: the order is compacted, and kept.
	for i := 1; i <= maxAbortedVotes; i++ {
		if i%1000 != 0 {
			v.forget(voteKey(i))
		}
	}
	if len(v.order) > 2*len(v.by)+64 {
		t.Fatalf("the order holds %d entries for %d votes: never compacted", len(v.order), len(v.by))
	}
	var again abortedVotes
	for _, sv := range v.export() {
		if err := again.add(sv); err != nil {
			t.Fatal(err)
		}
	}
	got := again.export()
	if len(got) != maxAbortedVotes/1000 {
		t.Fatalf("%d votes after a snapshot, want %d", len(got), maxAbortedVotes/1000)
	}
	for i, sv := range got {
		if want := voteKey(1000 * (i + 1)); sv.Txn != want || sv.At != int64(1000*(i+1)) {
			t.Fatalf("vote %d after a snapshot: %+v, want transaction %d, oldest first", i, sv, want.ID)
		}
	}
}

// TestAbortedVotesRestoreChecks: a snapshot's votes are checked as they
// are read: transaction 0 and a transaction named twice are refused.
func TestAbortedVotesRestoreChecks(t *testing.T) {
	var v abortedVotes
	if err := v.add(snapVote{Txn: TxnKey{}}); err == nil {
		t.Fatal("a vote for transaction 0 was accepted")
	}
	if err := v.add(snapVote{Txn: voteKey(1)}); err != nil {
		t.Fatal(err)
	}
	if err := v.add(snapVote{Txn: voteKey(1)}); err == nil {
		t.Fatal("a vote named twice was accepted")
	}
}

// TestAbortedVotesByRulesVersion: rules versions (internal/state/rules.go)
// — the service's rollback as it votes ABORTED keeps the vote, and the
// vote refuses a lock request under the transaction, from rules version
// 2; under version 1 (a cluster with a member of an older binary) the
// same entries keep nothing and grant the request, as that binary does.
func TestAbortedVotesByRulesVersion(t *testing.T) {
	m := &djinnpb.Ref{Endpoint: "m:1", ServiceId: []byte{1}, ObjectId: []byte{2}}
	for _, rules := range []uint32{1, 2} {
		s := NewState(lease.NewTable(), func() uint32 { return rules })
		set := djinn.NewID()
		if err := s.ApplyCreateSet(&statepb.LockCreateSet{SetId: set[:], Cookie: set[:], ExpiresUnixNanos: 1, Transactional: true, Principal: "p"}); err != nil {
			t.Fatal(err)
		}
		s.ApplyTxnEnd(5, &statepb.LockTxnEnd{Manager: m, Txn: 7, VotedAborted: true, Secret: bytes.Repeat([]byte{3}, 16)})
		kept := s.VotedAborted(TxnKeyOf(m, 7))
		_, err := s.ApplyAcquire(&statepb.LockAcquire{SetId: set[:], Holder: &statepb.LockHolderState{Manager: m, Txn: 7}, Mode: int32(R), RequestId: 1, Principal: "p"})
		switch {
		case rules == 1 && (kept || err != nil):
			t.Errorf("rules 1: vote kept %v, lock request %v; want nothing kept and the lock granted", kept, err)
		case rules == 2 && (!kept || !errors.Is(err, djinn.ErrTransactionRolledBack)):
			t.Errorf("rules 2: vote kept %v, lock request %v; want the vote kept and the request refused TransactionRolledBack", kept, err)
		}
	}
}
