package mailbox_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/principal"
)

// sharer is a shared delivery stream run by a test: the client's side.
type sharer struct {
	reqs chan mailbox.SharedRequest // closed: the client ends its side
	ctx  context.Context
	stop context.CancelFunc
	done chan error

	mu       sync.Mutex
	got      map[djinn.ID][]uint64 // indexes received, by registration
	ended    map[djinn.ID]error    // registrations told ended, with why
	recorded map[djinn.ID]uint64
	sends    int
	most     int // the most events of one message
}

func (s *sharer) Recv() (mailbox.SharedRequest, error) {
	select {
	case r, ok := <-s.reqs:
		if !ok {
			return r, io.EOF
		}
		return r, nil
	case <-s.ctx.Done():
		return mailbox.SharedRequest{}, s.ctx.Err()
	}
}

func (s *sharer) Send(parts []mailbox.SharedPart) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sends++
	n := 0
	for _, p := range parts {
		for _, e := range p.Events {
			s.got[p.ID] = append(s.got[p.ID], e.Index)
		}
		n += len(p.Events)
		s.recorded[p.ID] = max(s.recorded[p.ID], p.Recorded)
		if p.Ended {
			s.ended[p.ID] = p.Err
		}
	}
	s.most = max(s.most, n)
	return nil
}

func (f *fixture) shared(ctx context.Context, maxBatch int, first mailbox.SharedRequest) *sharer {
	ctx, cancel := context.WithCancel(ctx)
	s := &sharer{reqs: make(chan mailbox.SharedRequest, 1), ctx: ctx, stop: cancel, done: make(chan error, 1),
		got: map[djinn.ID][]uint64{}, ended: map[djinn.ID]error{}, recorded: map[djinn.ID]uint64{}}
	s.reqs <- first
	go func() {
		err := f.svc.SharedDeliveries(ctx, maxBatch, s)
		cancel()
		s.done <- err
	}()
	synctest.Wait()
	return s
}

func (s *sharer) send(r mailbox.SharedRequest) {
	s.reqs <- r
	synctest.Wait()
}

func (s *sharer) indexes(id djinn.ID) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got[id])
}

func (s *sharer) endedWith(id djinn.ID) (error, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	err, ok := s.ended[id]
	return err, ok
}

func joins(regs ...mailbox.Registration) []mailbox.SharedJoin {
	var out []mailbox.SharedJoin
	for _, r := range regs {
		out = append(out, mailbox.SharedJoin{ID: r.ID})
	}
	return out
}

// A shared stream carries the events of several registrations, each in
// arrival order, in messages of at most the stream's batch; each
// registration's window and acknowledgements are its own.
func TestSharedDeliveriesPerRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		a, b := f.register(time.Hour), f.register(time.Hour)
		f.notifyN(a, 1, 6)
		f.notifyN(b, 1, 6)
		s := f.shared(context.Background(), 4, mailbox.SharedRequest{Add: []mailbox.SharedJoin{{ID: a.ID}, {ID: b.ID, Window: 2}}})
		defer s.stop()
		if ga, gb := s.indexes(a.ID), s.indexes(b.ID); !slices.Equal(ga, span(1, 6)) || !slices.Equal(gb, span(1, 2)) {
			t.Fatalf("sent a %v, b %v; want a 1..6, b 1 2 (its window of 2)", ga, gb)
		}
		if s.most > 4 {
			t.Fatalf("a message of %d events, want at most the batch of 4", s.most)
		}
		s.send(mailbox.SharedRequest{Acks: []mailbox.SharedAck{{ID: b.ID, Through: 2}, {ID: a.ID, Through: 5}}})
		if gb := s.indexes(b.ID); !slices.Equal(gb, span(1, 4)) {
			t.Fatalf("b after acknowledging 2: %v, want 1..4", gb)
		}
		if na, nb := f.stored(a), f.stored(b); na != 1 || nb != 4 {
			t.Fatalf("stored a %d, b %d after acknowledging a 5, b 2; want 1 and 4", na, nb)
		}
		f.notifyN(a, 7, 7)
		synctest.Wait()
		if ga := s.indexes(a.ID); !slices.Equal(ga, span(1, 7)) {
			t.Fatalf("a after a new event: %v, want 1..7", ga)
		}
	})
}

// Removing a registration ends it once its acknowledgements are recorded
// (no error); ending the client's side does so for every registration,
// and then the stream ends cleanly.
func TestSharedDeliveriesRemoveAndClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		a, b := f.register(time.Hour), f.register(time.Hour)
		f.notifyN(a, 1, 3)
		f.notifyN(b, 1, 3)
		s := f.shared(context.Background(), 0, mailbox.SharedRequest{Add: joins(a, b)})
		s.send(mailbox.SharedRequest{Acks: []mailbox.SharedAck{{ID: a.ID, Through: 3}}, Remove: []djinn.ID{a.ID}})
		if err, ok := s.endedWith(a.ID); !ok || err != nil || f.stored(a) != 0 {
			t.Fatalf("a removed: ended %v with %v, %d stored; want ended, no error, 0 stored", ok, err, f.stored(a))
		}
		// An acknowledgement of a registration that left is ignored.
		s.send(mailbox.SharedRequest{Acks: []mailbox.SharedAck{{ID: a.ID, Through: 3}, {ID: b.ID, Through: 2}}})
		if _, ok := s.endedWith(b.ID); ok {
			t.Fatal("b ended with a")
		}
		close(s.reqs)
		if err := <-s.done; err != nil {
			t.Fatalf("closed stream ended with %v", err)
		}
		if err, ok := s.endedWith(b.ID); !ok || err != nil || f.stored(b) != 1 {
			t.Fatalf("b at close: ended %v with %v, %d stored; want ended, no error, 1 stored", ok, err, f.stored(b))
		}
	})
}

// A registration's own failure ends only it: another principal's
// registration is not found (DESIGN.md 7) and nothing of it is sent or
// recorded, not even an acknowledgement sent before it was refused; a
// registration taken over by another consumer is told InvalidIterator;
// an acknowledgement past what was sent is refused (InvalidArgument).
func TestSharedDeliveriesMemberFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		alice := principal.With(context.Background(), "cn:alice")
		bob := principal.With(context.Background(), "cn:bob")
		reg := func(ctx context.Context) mailbox.Registration {
			r, err := f.svc.Register(ctx, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		alices, bobs, bobs2, bobs3 := reg(alice), reg(bob), reg(bob), reg(bob)
		f.notifyN(alices, 1, 2)
		f.notifyN(bobs, 1, 2)
		s := f.shared(bob, 0, mailbox.SharedRequest{Add: []mailbox.SharedJoin{{ID: alices.ID, Ack: 2}, {ID: bobs.ID}, {ID: bobs2.ID}, {ID: bobs3.ID}}})
		defer s.stop()
		if err, ok := s.endedWith(alices.ID); !ok || !errors.Is(err, djinn.ErrNoSuchObject) || len(s.indexes(alices.ID)) > 0 {
			t.Fatalf("alice's registration on bob's stream: ended %v with %v, sent %v; want NoSuchObject, nothing sent", ok, err, s.indexes(alices.ID))
		}
		if g, err := f.svc.Get(alice, alices.ID); err != nil || g.Stored != 2 {
			t.Fatalf("alice's registration after bob acknowledged it: %+v, %v; want 2 stored", g, err)
		}
		s.send(mailbox.SharedRequest{Acks: []mailbox.SharedAck{{ID: bobs2.ID, Through: 1}}})
		if err, ok := s.endedWith(bobs2.ID); !ok || !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Fatalf("an acknowledgement past what was sent: ended %v with %v, want InvalidArgument", ok, err)
		}
		other := f.stream(bob, bobs3.ID, mailbox.StreamOpen{})
		defer other.stop()
		if err, ok := s.endedWith(bobs3.ID); !ok || !errors.Is(err, djinn.ErrInvalidIterator) {
			t.Fatalf("taken over: ended %v with %v, want InvalidIterator", ok, err)
		}
		f.notifyN(bobs, 3, 3)
		synctest.Wait()
		if got := s.indexes(bobs.ID); !slices.Equal(got, span(1, 3)) {
			t.Fatalf("bob's registration after the others failed: %v, want 1..3", got)
		}
	})
}

// Bad requests end the stream with InvalidArgument naming the value: a
// registration added twice, a window out of range, a batch out of range.
func TestSharedDeliveriesArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer f.stop()
		r := f.register(time.Hour)
		twice := f.shared(context.Background(), 0, mailbox.SharedRequest{Add: joins(r, r)})
		if err := <-twice.done; !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Fatalf("a registration added twice: %v, want InvalidArgument", err)
		}
		wide := f.shared(context.Background(), 0, mailbox.SharedRequest{Add: []mailbox.SharedJoin{{ID: r.ID, Window: mailbox.MaxWindow + 1}}})
		if err := <-wide.done; !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Fatalf("a window of %d: %v, want InvalidArgument", mailbox.MaxWindow+1, err)
		}
		if err := f.svc.SharedDeliveries(context.Background(), mailbox.MaxStreamBatch+1, nil); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Fatalf("a batch of %d: %v, want InvalidArgument", mailbox.MaxStreamBatch+1, err)
		}
	})
}

// When the node stops leading, the shared stream ends Unavailable (its
// client opens another at the next leader), and what was not
// acknowledged comes again on the next stream with the same indexes.
func TestSharedDeliveriesTermEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, 1000)
		defer func() { f.stop() }()
		a, b := f.register(time.Hour), f.register(time.Hour)
		f.notifyN(a, 1, 2)
		f.notifyN(b, 1, 2)
		s := f.shared(context.Background(), 0, mailbox.SharedRequest{Add: joins(a, b)})
		s.send(mailbox.SharedRequest{Acks: []mailbox.SharedAck{{ID: a.ID, Through: 2}}})
		f.reelect()
		if err := <-s.done; !errors.Is(err, djinn.ErrUnavailable) {
			t.Fatalf("stream of an ended term: %v, want Unavailable", err)
		}
		next := f.shared(context.Background(), 0, mailbox.SharedRequest{Add: joins(a, b)})
		defer next.stop()
		if ga, gb := next.indexes(a.ID), next.indexes(b.ID); len(ga) != 0 || !slices.Equal(gb, span(1, 2)) {
			t.Fatalf("next stream: a %v, b %v; want nothing of a (acknowledged), b 1 2 again", ga, gb)
		}
	})
}

// Many registrations, events stored concurrently and acknowledged as they
// come: every event reaches its registration once, in arrival order.
func TestSharedDeliveriesUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { sharedUnderLoad(t) })
}

func sharedUnderLoad(t *testing.T) {
	f := newFixture(t, 100000)
	defer f.stop()
	const regs, events = 16, 100
	var rs []mailbox.Registration
	for range regs {
		rs = append(rs, f.register(time.Hour))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := &sharer{reqs: make(chan mailbox.SharedRequest, 64), ctx: ctx, stop: cancel, done: make(chan error, 1),
		got: map[djinn.ID][]uint64{}, ended: map[djinn.ID]error{}, recorded: map[djinn.ID]uint64{}}
	s.reqs <- mailbox.SharedRequest{Add: joins(rs...)}
	go func() { s.done <- f.svc.SharedDeliveries(ctx, 8, s) }()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			for i := range int64(events) {
				if err := f.notify(r, ev(1, i+1)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, r := range rs {
		for {
			got := s.indexes(r.ID)
			if len(got) > 0 {
				s.reqs <- mailbox.SharedRequest{Acks: []mailbox.SharedAck{{ID: r.ID, Through: got[len(got)-1]}}}
			}
			if len(got) >= events {
				if !slices.Equal(got, span(1, events)) {
					t.Fatalf("registration %s: indexes %v, want 1..%d once each", r.ID, got, events)
				}
				break
			}
			select {
			case err := <-s.done:
				t.Fatalf("stream ended with %v", err)
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
				t.Fatalf("registration %s: %d of %d events", r.ID, len(got), events)
			}
		}
	}
}
