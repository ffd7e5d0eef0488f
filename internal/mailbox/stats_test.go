package mailbox_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// reelect ends f's run as leader and starts another on the same service:
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

// The delivery counters (djinn_mailbox_delivered_events_total,
// djinn_mailbox_delivery_sends_total) are counters: when a node loses and
// regains leadership they go on from where they were, counting nothing
// twice and losing nothing.
func TestDeliveryCountsAddUpOverTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer func() { f.stop() }()
		r := f.register(time.Hour)
		tp, tr := target("t")
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		notify := func(from, to int64) {
			for i := from; i <= to; i++ {
				if err := f.notify(r, ev(1, i)); err != nil {
					t.Fatal(err)
				}
			}
			synctest.Wait()
		}
		notify(1, 5)
		first := f.svc.DeliveryStats()
		if first.Delivered != 5 || first.Sends == 0 {
			t.Fatalf("first term: %+v, want 5 delivered", first)
		}
		f.reelect()
		if st := f.svc.DeliveryStats(); st.Delivered != 5 || st.Sends != first.Sends {
			t.Fatalf("after the term ended: %+v, want the first term's %+v", st, first)
		}
		notify(6, 8)
		st := f.svc.DeliveryStats()
		if got := len(f.sink.seqs(tr)); st.Delivered != 8 || got != 8 || st.Sends <= first.Sends {
			t.Fatalf("second term: %+v (the listener got %d), want 8 delivered over both terms", st, got)
		}
	})
}
