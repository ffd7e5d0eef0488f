package server_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestMailboxDeliveriesStream: a client holds one delivery stream open
// (client Receive) and gets the stored events and then the new ones, in
// arrival order; what it handled is acknowledged and forgotten, and a new
// Receive resumes after it, so the event its handler refused comes again
// with the same index and sequence number.
func TestMailboxDeliveriesStream(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	reg := f.register(t)
	var sent []*client.RemoteEvent
	for range 3 {
		sent = append(sent, f.gen.mustNotify(t, reg.Listener, 1))
	}
	got := make(chan client.StoredEvent, 16)
	stop := errors.New("the handler stops at the sixth event")
	done := make(chan error, 1)
	go func() {
		done <- reg.Receive(testContext(t), func(_ context.Context, e client.StoredEvent) error {
			if e.Index == 6 {
				return stop
			}
			got <- e
			return nil
		})
	}()
	take := func(n int) []client.StoredEvent {
		var out []client.StoredEvent
		for range n {
			select {
			case e := <-got:
				out = append(out, e)
			case <-testContext(t).Done():
				t.Fatalf("received %d events, want %d", len(out), n)
			}
		}
		return out
	}
	first := take(3)
	for range 3 {
		sent = append(sent, f.gen.mustNotify(t, reg.Listener, 1))
	}
	all := append(first, take(2)...)
	if err := <-done; !errors.Is(err, stop) {
		t.Fatalf("Receive ended with %v, want the handler's error", err)
	}
	for i, e := range all {
		if e.Index != uint64(i+1) || e.Event.Seq != sent[i].Seq {
			t.Fatalf("event %d: index %d seq %d, want index %d seq %d (arrival order)", i, e.Index, e.Event.Seq, i+1, sent[i].Seq)
		}
	}
	if r := f.read(t, reg); r.Stored != 1 {
		t.Fatalf("after handling five: %d stored, want 1 (the refused sixth)", r.Stored)
	}
	ctx, cancel := context.WithCancel(testContext(t))
	again := make(chan client.StoredEvent, 1)
	go func() {
		done <- reg.Receive(ctx, func(_ context.Context, e client.StoredEvent) error {
			again <- e
			return nil
		})
	}()
	e := <-again
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Receive ended by its context = %v, want nil", err)
	}
	if e.Index != 6 || e.Event.Seq != sent[5].Seq {
		t.Fatalf("resumed with index %d seq %d, want the unacknowledged index 6 seq %d", e.Index, e.Event.Seq, sent[5].Seq)
	}
}

// TestMailboxDeliveriesAcknowledged: acknowledging on the stream forgets
// the events, and the stream says once it is recorded; Close waits for
// that.
func TestMailboxDeliveriesAcknowledged(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	reg := f.register(t)
	for range 4 {
		f.gen.mustNotify(t, reg.Listener, 1)
	}
	s, err := reg.Deliveries(testContext(t), client.DeliveryWindow(2))
	if err != nil {
		t.Fatal(err)
	}
	events, err := s.Recv()
	if err != nil || len(events) != 2 || events[1].Index != 2 {
		t.Fatalf("first message: %d events, %v; want 1 2 (a window of 2)", len(events), err)
	}
	if err := s.Ack(2); err != nil {
		t.Fatal(err)
	}
	if events, err = s.Recv(); err != nil || len(events) != 2 || events[0].Index != 3 {
		t.Fatalf("after acknowledging 2: %d events, %v; want 3 4", len(events), err)
	}
	if err := s.Ack(3); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if a := s.Acknowledged(); a != 3 {
		t.Fatalf("closed stream: recorded through %d, want 3", a)
	}
	if r := f.read(t, reg); r.Stored != 1 {
		t.Fatalf("after acknowledging through 3: %d stored, want 1", r.Stored)
	}
}

// deliveries opens a raw delivery stream, sends msgs (none: it closes its
// side at once) and reads until the stream ends; it returns why.
func deliveries(ctx context.Context, cc grpc.ClientConnInterface, msgs ...*djinnpb.DeliveriesRequest) error {
	s, err := djinnpb.NewEventMailboxClient(cc).Deliveries(ctx)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			break // Recv has the status
		}
	}
	if len(msgs) == 0 {
		if err := s.CloseSend(); err != nil {
			return err
		}
	}
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// TestMailboxDeliveriesArguments: bad stream messages are refused with
// InvalidArgument naming the bad value.
func TestMailboxDeliveriesArguments(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	reg, other := f.register(t), f.register(t)
	f.gen.mustNotify(t, reg.Listener, 1)
	id := idBytes(reg.ID)
	tests := []struct {
		name string
		msgs []*djinnpb.DeliveriesRequest
		text string
	}{
		{"a stream ended before its first message", nil, "before its first message"},
		{"a shared first message with a window", []*djinnpb.DeliveriesRequest{{Window: 4}}, "window 4"},
		{"a window above 65536", []*djinnpb.DeliveriesRequest{{RegistrationId: id, Window: 70000}}, "delivery window 70000"},
		{"a negative batch", []*djinnpb.DeliveriesRequest{{RegistrationId: id, MaxBatch: -1}}, "delivery batch -1"},
		{"an acknowledgement past the events sent", []*djinnpb.DeliveriesRequest{{RegistrationId: id, AckThrough: 5}}, "ack_through 5"},
		{"a later message naming another registration", []*djinnpb.DeliveriesRequest{{RegistrationId: id}, {RegistrationId: idBytes(other.ID), AckThrough: 1}}, "names registration"},
		{"a later message reopening the stream", []*djinnpb.DeliveriesRequest{{RegistrationId: id}, {Window: 8}}, "first message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, tt.name, deliveries(testContext(t), f.c.ClientConn(), tt.msgs...), djinn.ErrInvalidArgument, tt.text)
		})
	}
	if r := f.read(t, reg); r.Stored != 1 {
		t.Errorf("refused streams changed the registration: %d stored, want 1", r.Stored)
	}
	if _, err := reg.Deliveries(testContext(t), client.DeliveryWindow(-1)); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("client: a negative window = %v, want InvalidArgument", err)
	}
}

// TestMailboxDeliveriesOwner: DESIGN.md 7 — a delivery stream of another
// principal's registration, or a message of one's own stream naming it,
// finds no such registration.
func TestMailboxDeliveriesOwner(t *testing.T) {
	t.Parallel()
	p := newPrincipals(t)
	register := func(cc *grpc.ClientConn) *djinnpb.MailboxRegistration {
		r, err := djinnpb.NewEventMailboxClient(cc).Register(testContext(t), &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	alicesReg := register(p.alice)
	alices, bobs := alicesReg.GetRegistrationId(), register(p.bob).GetRegistrationId()
	err := deliveries(testContext(t), p.bob, &djinnpb.DeliveriesRequest{RegistrationId: alices})
	wantErr(t, "bob opens alice's stream", err, djinn.ErrNoSuchObject, "registration")
	err = deliveries(testContext(t), p.bob, &djinnpb.DeliveriesRequest{RegistrationId: bobs}, &djinnpb.DeliveriesRequest{RegistrationId: alices})
	wantErr(t, "bob's stream names alice's registration", err, djinn.ErrNoSuchObject, "registration")
	// Any generator may notify alice's mailbox listener; her stream gets it.
	ev := &djinnpb.RemoteEvent{Source: &djinnpb.Ref{Endpoint: "127.0.0.1:1", ServiceId: idBytes(djinn.NewID()), ObjectId: idBytes(djinn.NewID())}, EventId: 1, Sequence: 7}
	if _, err := djinnpb.NewEventListenerClient(p.bob).Notify(testContext(t), &djinnpb.NotifyRequest{ListenerId: alicesReg.GetListener().GetObjectId(), Event: ev}); err != nil {
		t.Fatal(err)
	}
	s, err := djinnpb.NewEventMailboxClient(p.alice).Deliveries(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&djinnpb.DeliveriesRequest{RegistrationId: alices}); err != nil {
		t.Fatal(err)
	}
	msg, err := s.Recv()
	if err != nil || len(msg.GetEvents()) != 1 || msg.GetEvents()[0].GetEvent().GetSequence() != 7 {
		t.Fatalf("alice's own stream: %v, %v; want the event notified", msg, err)
	}
}

// TestMailboxReceiveStop: a handler that returns ErrStopReceiving ends
// Receive with its event acknowledged and forgotten.
func TestMailboxReceiveStop(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	reg := f.register(t)
	for range 3 {
		f.gen.mustNotify(t, reg.Listener, 1)
	}
	var got []uint64
	err := reg.Receive(testContext(t), func(_ context.Context, e client.StoredEvent) error {
		got = append(got, e.Index)
		if e.Index == 2 {
			return client.ErrStopReceiving
		}
		return nil
	})
	if err != nil || len(got) != 2 {
		t.Fatalf("Receive = %v after %v, want nil after 1 2", err, got)
	}
	if r := f.read(t, reg); r.Stored != 1 {
		t.Fatalf("after stopping at 2: %d stored, want 1", r.Stored)
	}
}

// TestMailboxReceiveAcrossRestart: Receive keeps taking a registration's
// events across a restart of the server: it opens a new stream after the
// last event it handled, so every event comes once, in order — over the
// connection's shared delivery stream and over a stream of its own.
func TestMailboxReceiveAcrossRestart(t *testing.T) {
	t.Parallel()
	t.Run("shared stream", func(t *testing.T) { receiveAcrossRestart(t) })
	t.Run("stream of its own", func(t *testing.T) { receiveAcrossRestart(t, client.DeliveryOwnStream()) })
}

func receiveAcrossRestart(t *testing.T, opts ...client.DeliveryOption) {
	t.Parallel()
	cfg := servertest.Config(t)
	cfg.Listen, cfg.Raft = freeAddr(t), freeAddr(t)
	cfg.LookupJoin.Enabled = false
	srv := servertest.Start(t, cfg)
	c := servertest.Dial(t, srv.Addr())
	gen := newGenerator(c)
	reg, err := c.Mailbox().Register(testContext(t), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan client.StoredEvent, 16)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	go func() {
		done <- reg.Receive(ctx, func(_ context.Context, e client.StoredEvent) error {
			got <- e
			return nil
		}, opts...)
	}()
	var sent []*client.RemoteEvent
	notify := func() {
		t.Helper()
		for {
			ev, err := gen.notify(testContext(t), reg.Listener, 1)
			if err == nil {
				sent = append(sent, ev)
				return
			}
			if !errors.Is(err, djinn.ErrUnavailable) {
				t.Fatalf("notify: %v", err)
			}
			gen.seq[1]-- // not stored: the same sequence number again
			select {
			case <-time.After(20 * time.Millisecond):
			case <-testContext(t).Done():
				t.Fatalf("notify after the restart: %v", err)
			}
		}
	}
	take := func(index uint64) {
		t.Helper()
		select {
		case e := <-got:
			if e.Index != index || e.Event.Seq != sent[index-1].Seq {
				t.Fatalf("received index %d seq %d, want index %d seq %d", e.Index, e.Event.Seq, index, sent[index-1].Seq)
			}
		case err := <-done:
			t.Fatalf("Receive ended with %v waiting for index %d", err, index)
		case <-testContext(t).Done():
			t.Fatalf("index %d never came", index)
		}
	}
	for i := range uint64(3) {
		notify()
		take(i + 1)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	servertest.Start(t, cfg)
	for i := range uint64(3) {
		notify()
		take(i + 4)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Receive ended by its context = %v, want nil", err)
	}
}
