package txn_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/txn"
)

// The manager counts the participants it has failed to tell an outcome
// for longer than the abandon time (the series
// djinn_txn_unreachable_participants, which the participant-unreachable
// alert reads): none before the abandon time, one after it while the
// participant still fails (none on a node that no longer leads), none
// again once it took the outcome.
func TestUnreachableParticipantsCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t) // Abandon: a minute
		defer func() { f.stop() }()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil) // two: a prepare, then a commit each
		f.parts.failOp("a commit", djinn.Errorf(djinn.Unavailable, "a: down"))
		c := f.create(time.Hour)
		f.join(c.ID, "a", "b")
		if err := f.svc.Commit(context.Background(), c.ID, nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := f.svc.Unreachable.Load(); n != 0 {
			t.Fatalf("a participant failing for less than the abandon time: %d unreachable, want 0", n)
		}
		time.Sleep(2 * time.Minute) // the retries go on past the abandon time
		synctest.Wait()
		if n := f.svc.Unreachable.Load(); n != 1 {
			t.Fatalf("a participant failing past the abandon time: %d unreachable, want 1", n)
		}
		f.stop()
		if n := f.svc.Unreachable.Load(); n != 0 {
			t.Fatalf("a node that no longer leads: %d unreachable, want 0 (it calls nobody)", n)
		}
		f.reelect()
		time.Sleep(time.Minute) // past the longest backoff (30s): it is asked again, and fails
		synctest.Wait()
		if n := f.svc.Unreachable.Load(); n != 1 {
			t.Fatalf("leading again, the participant still failing: %d unreachable, want 1", n)
		}
		f.parts.failOp("a commit", nil)
		time.Sleep(time.Minute) // past the longest backoff (30s): it is asked again
		synctest.Wait()
		if n := f.svc.Unreachable.Load(); n != 0 {
			t.Fatalf("once the participant took the outcome: %d unreachable, want 0", n)
		}
		if err := f.svc.Commit(context.Background(), c.ID, dur(time.Second)); err != nil {
			t.Errorf("the participant was told: %v", err)
		}
	})
}
