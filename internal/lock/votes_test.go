package lock

import (
	"testing"

	"github.com/djinn-go/djinn"
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
