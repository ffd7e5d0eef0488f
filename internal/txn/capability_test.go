package txn_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestSecretIsTheCapability (DESIGN.md 7; issue 17, finding 4): a
// transaction's id names it; its secret, which Create returns, is the
// capability to join it, ask its state, nest in it and promote into it.
// Without the secret — none, or another transaction's — the transaction
// does not exist for the caller, and nothing changes: no join, no crash
// count, no abort. Holders of the secret keep TX.2.3: a participant back
// with another crash count aborts the transaction.
func TestSecretIsTheCapability(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		c := f.create(time.Minute)
		other := f.create(time.Minute)
		if c.Secret.IsZero() || c.Secret == other.Secret {
			t.Fatalf("secrets %s and %s: want random, distinct", c.Secret, other.Secret)
		}
		bg := context.Background()
		for _, wrong := range []struct {
			name   string
			secret djinn.ID
		}{{"no secret", djinn.ID{}}, {"another transaction's secret", other.Secret}, {"a guessed secret", djinn.NewID()}} {
			err := f.svc.Join(bg, c.ID, wrong.secret, part("a"), 1)
			wantKind(t, wrong.name+": join", err, djinn.UnknownTransaction)
			_, err = f.svc.GetState(bg, c.ID, wrong.secret)
			wantKind(t, wrong.name+": getState", err, djinn.UnknownTransaction)
			_, err = f.svc.CreateNested(bg, c.ID, wrong.secret, time.Minute)
			wantKind(t, wrong.name+": nest", err, djinn.UnknownTransaction)
			err = f.svc.Promote(bg, c.ID, wrong.secret, []*djinnpb.Ref{part("p")}, []int64{1}, nil)
			wantKind(t, wrong.name+": promote", err, djinn.UnknownTransaction)
		}
		if err := f.svc.Join(bg, c.ID, c.Secret, part("a"), 1); err != nil {
			t.Fatalf("join with the secret: %v", err)
		}
		// Issue 17, finding 4: a second join with another crash count
		// aborted the transaction for anyone who knew its id.
		err := f.svc.Join(bg, c.ID, djinn.ID{}, part("a"), 2)
		wantKind(t, "another crash count without the secret", err, djinn.UnknownTransaction)
		in, _ := f.log.State.Get(c.ID)
		if in.State != txn.Active || len(in.Parts) != 1 {
			t.Fatalf("after joins without the secret: %v with %d participants, want ACTIVE with 1", in.State, len(in.Parts))
		}
		if _, err := f.svc.CreateNested(bg, c.ID, c.Secret, time.Minute); err != nil {
			t.Fatalf("nest with the parent's secret: %v", err)
		}
		// TX.2.3 for holders of the capability.
		err = f.svc.Join(bg, c.ID, c.Secret, part("a"), 2)
		wantKind(t, "TX.2.3 another crash count, with the secret", err, djinn.CrashCount)
		if st, err := f.svc.GetState(bg, c.ID, c.Secret); err != nil || st != txn.Aborted {
			t.Fatalf("state after a crash count change: %v, %v; want ABORTED", st, err)
		}
	})
}

// TestParticipantsHearTheSecret: the manager passes a transaction's secret
// to every participant it calls, so a participant can tell its manager
// from anyone who learnt the transaction's id.
func TestParticipantsHearTheSecret(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		c := f.create(time.Minute)
		f.join(c.ID, "a")
		if err := f.svc.Commit(context.Background(), c.ID, dur(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got := f.parts.secrets(); len(got) == 0 || got[0] != c.Secret {
			t.Fatalf("the participant heard secrets %v, want %s", got, c.Secret)
		}
	})
}

// TestDeposedLeaderGivesNoState: a participant acts on a transaction's
// state (TX.2.7: it rolls back an unknown or aborted one), so a deposed
// leader that has not heard of its successor answers Unavailable instead
// of from its own state, for a transaction it knows and one it does not.
func TestDeposedLeaderGivesNoState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		c := f.create(time.Minute)
		bg := context.Background()
		if st, err := f.svc.GetState(bg, c.ID, c.Secret); err != nil || st != txn.Active {
			t.Fatalf("TX.2.7 state at the leader: %v, %v; want ACTIVE", st, err)
		}
		f.log.Deposed.Store(true)
		_, err := f.svc.GetState(bg, c.ID, c.Secret)
		wantKind(t, "TX.2.7 a known transaction at a deposed leader", err, djinn.Unavailable)
		_, err = f.svc.GetState(bg, c.ID+1000, djinn.NewID())
		wantKind(t, "TX.2.7 an unknown transaction at a deposed leader", err, djinn.Unavailable)
	})
}

// TestDeposedLeaderDescribesNoTransaction: a transaction's description
// (its state, participants and children, for its owner) is confirmed with
// the leader lease, or a quorum, after it is read: a deposed leader that
// has not heard of its successor (which may have committed or aborted it)
// answers Unavailable, not ACTIVE.
func TestDeposedLeaderDescribesNoTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		c := f.create(time.Minute)
		bg := context.Background()
		if d, err := f.svc.Describe(bg, c.ID); err != nil || d.GetState() != txn.Active {
			t.Fatalf("the transaction at the leader: %v, %v; want ACTIVE", d, err)
		}
		f.log.Deposed.Store(true)
		_, err := f.svc.Describe(bg, c.ID)
		wantKind(t, "the transaction described at a deposed leader", err, djinn.Unavailable)
	})
}

// TestDeposedLeaderDeniesNoTransaction: "unknown transaction" is an answer
// from this node's state too: a deposed leader that has not heard of its
// successor (which may have created the transaction) answers Unavailable.
func TestDeposedLeaderDeniesNoTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		c := f.create(time.Minute)
		bg := context.Background()
		_, err := f.svc.Describe(bg, c.ID+1000)
		wantKind(t, "an unknown transaction described at the leader", err, djinn.UnknownTransaction)
		f.log.Deposed.Store(true)
		_, err = f.svc.Describe(bg, c.ID+1000)
		wantKind(t, "an unknown transaction described at a deposed leader", err, djinn.Unavailable)
	})
}
