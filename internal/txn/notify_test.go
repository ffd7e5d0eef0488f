package txn_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn/internal/txn"
)

// TX.2.7: the manager tells every participant the outcome, however many
// outcome calls are due at once: thousands of committed transactions
// whose participants have not yet been told never stall phase 2.
func TestTX27EveryParticipantToldWithThousandsOutstanding(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil)
		hold := make(chan struct{})
		f.parts.mu.Lock()
		f.parts.hold = hold
		f.parts.mu.Unlock()
		const n = 2000
		ids := make([]uint64, n)
		for i := range ids {
			c := f.create(time.Hour)
			f.join(c.ID, "a", "b")
			if err := f.svc.Commit(context.Background(), c.ID, nil); err != nil {
				t.Fatalf("commit %d: %v", i, err)
			}
			ids[i] = c.ID
		}
		synctest.Wait() // the outcome calls pile up behind the held participants
		close(hold)
		for i, id := range ids {
			if err := f.svc.Commit(context.Background(), id, dur(time.Minute)); err != nil {
				t.Fatalf("transaction %d of %d: participants not all told the outcome: %v", i+1, n, err)
			}
		}
		told := map[string]bool{}
		for _, c := range f.parts.gotByID() {
			told[c] = true
		}
		for _, id := range ids {
			for _, p := range []string{"a", "b"} {
				if c := fmt.Sprintf("%s commit %d", p, id); !told[c] {
					t.Fatalf("TX.2.7: no %q", c)
				}
			}
		}
	})
}

// reelect ends f's run as leader and starts another on the same manager:
// what a node that loses and regains leadership does.
func (f *fixture) reelect() {
	f.stop()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); f.lessor.Run(ctx) }()
	go func() { defer wg.Done(); f.svc.Run(ctx) }()
	f.stop = func() { cancel(); wg.Wait() }
	synctest.Wait()
}

// TX.2.7: a node that loses leadership while outcome calls are in flight
// tells those participants again when it leads again.
func TestTX27OutcomeCallsInFlightResumeAfterLeadershipReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer func() { f.stop() }()
		f.parts.set("a", txn.Prepared, nil)
		f.parts.set("b", txn.Prepared, nil)
		hold := make(chan struct{})
		f.parts.mu.Lock()
		f.parts.hold = hold
		f.parts.mu.Unlock()
		c := f.create(time.Hour)
		f.join(c.ID, "a", "b")
		if err := f.svc.Commit(context.Background(), c.ID, nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // both outcome calls are held
		f.reelect()
		close(hold)
		if err := f.svc.Commit(context.Background(), c.ID, dur(time.Minute)); err != nil {
			t.Fatalf("participants not told after leadership returned: %v", err)
		}
	})
}
