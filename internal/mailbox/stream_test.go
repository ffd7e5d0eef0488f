package mailbox_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/statepb"
)

// streamer is a delivery stream run by a test: the client's side of it.
type streamer struct {
	acks chan uint64 // the client's acknowledgements; closed: it ends its side
	ctx  context.Context
	stop context.CancelFunc
	done chan error

	mu       sync.Mutex
	got      []mailbox.Stored
	sends    int    // messages received
	recorded uint64 // the highest recorded acknowledgement told
}

func (s *streamer) Recv() (uint64, error) {
	select {
	case a, ok := <-s.acks:
		if !ok {
			return 0, io.EOF
		}
		return a, nil
	case <-s.ctx.Done():
		return 0, s.ctx.Err()
	}
}

func (s *streamer) Send(events []mailbox.Stored, recorded uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, events...)
	s.sends++
	s.recorded = max(s.recorded, recorded)
	return nil
}

// stream opens a delivery stream as ctx's principal; it ends (as gRPC
// ends a stream) when Deliveries returns or stop is called.
func (f *fixture) stream(ctx context.Context, id djinn.ID, open mailbox.StreamOpen) *streamer {
	ctx, cancel := context.WithCancel(ctx)
	s := &streamer{acks: make(chan uint64), ctx: ctx, stop: cancel, done: make(chan error, 1)}
	go func() {
		err := f.svc.Deliveries(ctx, id, open, s)
		cancel()
		s.done <- err
	}()
	synctest.Wait()
	return s
}

func (s *streamer) ack(through uint64) {
	s.acks <- through
	synctest.Wait()
}

func (s *streamer) indexes() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint64
	for _, e := range s.got {
		out = append(out, e.Index)
	}
	return out
}

func (s *streamer) seqs() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, e := range s.got {
		out = append(out, e.Event.Sequence)
	}
	return out
}

func (s *streamer) messages() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends
}

func (s *streamer) told() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recorded
}

// ended returns how the stream ended, or nil and false if it is running.
func (s *streamer) ended() (error, bool) {
	select {
	case err := <-s.done:
		return err, true
	default:
		return nil, false
	}
}

func span(lo, hi uint64) []uint64 {
	var out []uint64
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

func (f *fixture) notifyN(r mailbox.Registration, from, to int64) {
	f.t.Helper()
	for i := from; i <= to; i++ {
		if err := f.notify(r, ev(1, i)); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *fixture) stored(r mailbox.Registration) int {
	f.t.Helper()
	g, err := f.svc.Get(context.Background(), r.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return g.Stored
}

// A delivery stream sends the stored events in arrival order, then each
// new one as it is stored, on the same stream.
func TestDeliveriesInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		f.notifyN(r, 1, 5)
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{MaxBatch: 2})
		defer s.stop()
		f.notifyN(r, 6, 10)
		synctest.Wait()
		if got := s.indexes(); !slices.Equal(got, span(1, 10)) {
			t.Fatalf("indexes %v, want 1..10", got)
		}
		if got := s.seqs(); !slices.Equal(got, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
			t.Fatalf("sequence numbers %v, want 1..10 in arrival order", got)
		}
		if open, sent := f.svc.Streams.Load(), f.svc.StreamedEvents.Load(); open != 1 || sent != 10 {
			t.Fatalf("counted %d streams open, %d events sent; want 1 and 10", open, sent)
		}
		if _, over := s.ended(); over {
			t.Fatal("the stream ended")
		}
	})
}

// Acknowledging on the stream forgets the events through the index, and
// the mailbox says when the forgetting is recorded.
func TestDeliveriesAcknowledgementForgets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		f.notifyN(r, 1, 5)
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		defer s.stop()
		s.ack(3)
		if n := f.stored(r); n != 2 {
			t.Fatalf("after acknowledging through 3: %d stored, want 2", n)
		}
		// No events to ride with: the recorded acknowledgement goes alone.
		time.Sleep(mailbox.TellDelay)
		synctest.Wait()
		if got := s.told(); got != 3 {
			t.Fatalf("told recorded through %d, want 3", got)
		}
		s.ack(2) // smaller than before: changes nothing
		s.ack(5)
		time.Sleep(mailbox.TellDelay)
		synctest.Wait()
		if n, got := f.stored(r), s.told(); n != 0 || got != 5 {
			t.Fatalf("after acknowledging through 5: %d stored, told %d; want 0 and 5", n, got)
		}
	})
}

// While events flow, the recorded acknowledgement rides with the next
// events sent: telling it costs no message of its own (the proto's
// acknowledged_through, on any message).
func TestDeliveriesToldWithTheNextEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		f.notifyN(r, 1, 2)
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		defer s.stop()
		s.ack(2)
		before := s.messages()
		f.notifyN(r, 3, 3)
		synctest.Wait()
		if got, sent := s.told(), s.messages()-before; got != 2 || sent != 1 {
			t.Fatalf("told %d in %d messages after event 3; want 2 in one (with the event)", got, sent)
		}
		time.Sleep(10 * mailbox.TellDelay)
		synctest.Wait()
		if sent := s.messages() - before; sent != 1 {
			t.Fatalf("%d messages with nothing new to tell, want 1", sent)
		}
	})
}

// At most a window of events is sent and not acknowledged; acknowledging
// opens it again.
func TestDeliveriesWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		f.notifyN(r, 1, 10)
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{Window: 3})
		defer s.stop()
		if got := s.indexes(); !slices.Equal(got, span(1, 3)) {
			t.Fatalf("sent %v with a window of 3, want 1..3", got)
		}
		s.ack(2)
		if got := s.indexes(); !slices.Equal(got, span(1, 5)) {
			t.Fatalf("sent %v after acknowledging 2, want 1..5", got)
		}
		after := f.stream(context.Background(), r.ID, mailbox.StreamOpen{After: 7, Window: 2})
		defer after.stop()
		if got := after.indexes(); !slices.Equal(got, span(8, 9)) {
			t.Fatalf("sent %v after 7 with a window of 2, want 8 9", got)
		}
	})
}

// A new stream resumes after the last recorded acknowledgement: nothing is
// lost, and what comes again comes with the index and sequence number it
// had, so the client can tell a duplicate.
func TestDeliveriesResumeAfterReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		f.notifyN(r, 1, 5)
		first := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		first.ack(2)
		first.stop() // the connection breaks
		if err := <-first.done; !errors.Is(err, context.Canceled) {
			t.Fatalf("broken stream ended with %v", err)
		}
		f.notifyN(r, 6, 6)
		second := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		defer second.stop()
		if got := second.indexes(); !slices.Equal(got, span(3, 6)) {
			t.Fatalf("resumed with %v, want 3..6", got)
		}
		seen := map[uint64]int64{}
		for _, e := range first.got {
			seen[e.Index] = e.Event.Sequence
		}
		for _, e := range second.got {
			if seq, dup := seen[e.Index]; dup && seq != e.Event.Sequence {
				t.Errorf("index %d came again with sequence number %d, first %d", e.Index, e.Event.Sequence, seq)
			}
		}
	})
}

// Ending its side, the client gets its acknowledgements recorded before
// the stream ends.
func TestDeliveriesCloseRecordsAcknowledgements(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		f.notifyN(r, 1, 4)
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		s.acks <- 4
		close(s.acks)
		if err := <-s.done; err != nil {
			t.Fatalf("closed stream ended with %v", err)
		}
		if n, got := f.stored(r), s.told(); n != 0 || got != 4 {
			t.Fatalf("after close: %d stored, told %d; want 0 and 4", n, got)
		}
	})
}

// Push and pull are exclusive: a stream disables push delivery and
// supersedes the earlier stream; enabling delivery to a target supersedes
// the stream (EM.4.1's single target, River's MailboxPullRegistration).
func TestDeliveriesExclusive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		tp, tref := target("t")
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		f.notifyN(r, 1, 2)
		synctest.Wait()
		if got := f.sink.seqs(tref); len(got) != 0 {
			t.Fatalf("the target got %v while a stream was open", got)
		}
		if g, _ := f.svc.Get(context.Background(), r.ID); g.Target != nil {
			t.Fatal("EM.4.1: a stream left delivery to the target enabled")
		}
		newer := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		if err, over := s.ended(); !over || !errors.Is(err, djinn.ErrInvalidIterator) {
			t.Fatalf("superseded stream: ended %v with %v, want InvalidIterator", over, err)
		}
		if err := f.svc.EnableDelivery(context.Background(), r.ID, tp); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err, over := newer.ended(); !over || !errors.Is(err, djinn.ErrInvalidIterator) {
			t.Fatalf("stream after enable: ended %v with %v, want InvalidIterator", over, err)
		}
		if got := f.sink.seqs(tref); !slices.Equal(got, []int64{1, 2}) {
			t.Fatalf("the target got %v, want the unacknowledged 1 2", got)
		}
	})
}

// A stream ends with NoSuchObject when its registration's lease ends.
func TestDeliveriesEndWithTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Minute)
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		time.Sleep(time.Minute)
		synctest.Wait()
		if err, over := s.ended(); !over || !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("EM.4: stream after the lease ended: ended %v with %v, want NoSuchObject", over, err)
		}
		if err := <-f.stream(context.Background(), r.ID, mailbox.StreamOpen{}).done; !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("EM.4: opening a stream after the lease ended = %v, want NoSuchObject", err)
		}
	})
}

// A stream ends with Unavailable when this node stops leading, so that
// its client opens one at the next leader.
func TestDeliveriesEndWithTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		r := f.register(time.Hour)
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		f.stop()
		if err := <-s.done; !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("stream after the term ended with %v, want Unavailable", err)
		}
	})
}

// An acknowledgement still being recorded when the term ends does not turn
// the stream's end into another error: it ends Unavailable, so that its
// client opens a stream at the next leader (the acknowledgement comes again
// with it).
func TestDeliveriesEndWithTheTermWhileRecording(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixtureWith(t, 1000, nil, func(l *statetest.Log) mailbox.Proposer { return stuckAcks{l} })
		r := f.register(time.Hour)
		f.notifyN(r, 1, 1)
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		s.ack(1)
		f.stop()
		if err := <-s.done; !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("stream after the term ended while recording: %v, want Unavailable", err)
		}
	})
}

// stuckAcks is a log whose recording of deliveries waits until its
// proposer gives up (a leader losing its quorum).
type stuckAcks struct{ *statetest.Log }

func (s stuckAcks) ProposeRider(ctx context.Context, c *statepb.Command) (any, error) {
	return s.Propose(ctx, c)
}

func (s stuckAcks) Propose(ctx context.Context, c *statepb.Command) (any, error) {
	if c.GetMailboxDelivered() != nil {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.Log.Propose(ctx, c)
}

// DESIGN.md 7: another principal's registration does not exist for the
// caller.
func TestDeliveriesOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		alice := principal.With(context.Background(), "cn:alice")
		bob := principal.With(context.Background(), "cn:bob")
		r, err := f.svc.Register(alice, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		f.notifyN(r, 1, 1)
		if err := <-f.stream(bob, r.ID, mailbox.StreamOpen{}).done; !errors.Is(err, djinn.ErrNoSuchObject) {
			t.Fatalf("stream by another principal = %v, want NoSuchObject", err)
		}
		s := f.stream(alice, r.ID, mailbox.StreamOpen{})
		defer s.stop()
		if got := s.indexes(); !slices.Equal(got, span(1, 1)) {
			t.Fatalf("owner's stream got %v, want 1", got)
		}
	})
}

// Bad input is refused with InvalidArgument naming the bad value.
func TestDeliveriesBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		for _, open := range []mailbox.StreamOpen{{Window: -1}, {Window: mailbox.MaxWindow + 1}, {MaxBatch: -1}, {MaxBatch: mailbox.MaxStreamBatch + 1}} {
			if err := <-f.stream(context.Background(), r.ID, open).done; !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Errorf("open %+v = %v, want InvalidArgument", open, err)
			}
		}
		f.notifyN(r, 1, 2)
		s := f.stream(context.Background(), r.ID, mailbox.StreamOpen{})
		s.acks <- 3
		// The error names the bad value and the last event sent, and says
		// what to do.
		const want = "ack_through 3: past the last event sent on this stream (index 2); the stream ends: open it again and acknowledge the index of the last event received (those not acknowledged come again)"
		if err := <-s.done; !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Fatalf("acknowledging 3 with 2 sent = %v, want InvalidArgument %q", err, want)
		}
		if n := f.stored(r); n != 2 {
			t.Fatalf("a refused acknowledgement forgot events: %d stored, want 2", n)
		}
	})
}

// TestAckPastTheLastEvent: EM.4 — a pull-mode acknowledgement past the
// last event stored acknowledges events the caller cannot have pulled: it
// is refused, naming the bad value and the last index, and nothing is
// forgotten.
func TestAckPastTheLastEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		err := f.svc.Ack(context.Background(), r.ID, 1)
		if want := "acknowledge through index 1: past the last event stored for mailbox registration " + r.ID.String() + " (index 0: none stored yet); acknowledge the index of the last event you pulled: nothing was acknowledged"; !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Fatalf("ack with no event stored = %v, want InvalidArgument %q", err, want)
		}
		f.notifyN(r, 1, 2)
		if err := f.svc.Ack(context.Background(), r.ID, 2); err != nil {
			t.Fatalf("ack through the last event: %v", err)
		}
		f.notifyN(r, 3, 4)
		err = f.svc.Ack(context.Background(), r.ID, 9)
		if want := "acknowledge through index 9: past the last event stored for mailbox registration " + r.ID.String() + " (index 4)"; !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Fatalf("ack past the last event = %v, want InvalidArgument %q", err, want)
		}
		if n := f.stored(r); n != 2 {
			t.Fatalf("a refused acknowledgement forgot events: %d stored, want 2", n)
		}
	})
}
