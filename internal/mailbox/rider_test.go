package mailbox_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
)

const riderDelay = 5 * time.Millisecond

func newMailboxState(m *state.Machine) *mailbox.State {
	return mailbox.NewState(m.Leases, mailbox.DefaultMaxStored, m.ServiceID)
}

// TestDeliveriesRecordedAsRiders: a pushed delivery is recorded by a
// command riding in the log entry of the next command proposed (the next
// Notify), or alone once the log's rider delay has passed, never costing
// an entry of its own; until recorded the event stays stored, so a
// restart redelivers it (at least once, EV.2.3.2), and once recorded a
// restart no longer holds it.
func TestDeliveriesRecordedAsRiders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		f.log.RiderDelay = riderDelay
		r := f.register(time.Hour)
		tp, tr := target("t")
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		stored := func(s *mailbox.State) int { _, events := s.Len(); return events }

		f.notifyN(r, 1, 1)
		synctest.Wait()
		if got := f.sink.seqs(tr); len(got) != 1 {
			t.Fatalf("delivered %v, want event 1", got)
		}
		if n := stored(f.state); n != 1 || f.log.Rode() != 0 {
			t.Fatalf("delivered, no other command yet: %d stored, %d riders applied; want 1 stored, the record held", n, f.log.Rode())
		}

		f.notifyN(r, 2, 2) // its command takes event 1's record along
		synctest.Wait()
		if got := f.sink.seqs(tr); len(got) != 2 {
			t.Fatalf("delivered %v, want events 1 and 2", got)
		}
		if n := stored(f.state); n != 1 || f.log.Rode() != 1 {
			t.Fatalf("after the next notify: %d stored, %d riders applied; want event 2 stored alone, event 1's record applied as a rider", n, f.log.Rode())
		}
		again, err := statetest.Restart(f.log, newMailboxState)
		if err != nil {
			t.Fatal(err)
		}
		if n := stored(again.State); n != 1 {
			t.Fatalf("restarted with event 2's record held: %d stored, want 1 (event 2, delivered again)", n)
		}

		time.Sleep(riderDelay - time.Nanosecond)
		synctest.Wait()
		if n := stored(f.state); n != 1 {
			t.Fatalf("before the rider delay: %d stored, want 1", n)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n := stored(f.state); n != 0 || f.log.Rode() != 2 {
			t.Fatalf("after the rider delay: %d stored, %d riders applied; want none stored, 2 riders", n, f.log.Rode())
		}
		again, err = statetest.Restart(f.log, newMailboxState)
		if err != nil {
			t.Fatal(err)
		}
		if n := stored(again.State); n != 0 {
			t.Fatalf("restarted after every record: %d stored, want 0", n)
		}
	})
}

// TestStreamToldOnlyOnceRecorded: a delivery stream's acknowledgement,
// recorded as a rider, is told to its client only once applied: the
// recorded acknowledgement it reports means recorded.
func TestStreamToldOnlyOnceRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		f.log.RiderDelay = riderDelay
		r := f.register(time.Hour)
		f.notifyN(r, 1, 2)
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		defer s.stop()
		ix := s.indexes()
		if len(ix) != 2 {
			t.Fatalf("streamed %v, want 2 events", ix)
		}
		s.ack(ix[1])
		time.Sleep(riderDelay - time.Nanosecond)
		synctest.Wait()
		if got := s.told(); got != 0 || f.stored(r) != 2 {
			t.Fatalf("acknowledged, record held: told %d, %d stored; want nothing told, 2 stored", got, f.stored(r))
		}
		f.notifyN(r, 3, 3) // its command takes the record along
		synctest.Wait()
		if n := f.stored(r); n != 1 {
			t.Fatalf("after the next notify: %d stored, want 1 (the acknowledged ones recorded)", n)
		}
		time.Sleep(mailbox.TellDelay) // told with event 3, or alone after TellDelay
		synctest.Wait()
		if got := s.told(); got != ix[1] {
			t.Fatalf("recorded: told %d, want %d", got, ix[1])
		}
	})
}
