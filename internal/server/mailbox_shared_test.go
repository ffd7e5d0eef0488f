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
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// sharedStream is a raw shared delivery stream, read by the test.
type sharedStream struct {
	t *testing.T
	s djinnpb.EventMailbox_DeliveriesClient
}

func openShared(t *testing.T, cc grpc.ClientConnInterface, first *djinnpb.DeliveriesRequest) *sharedStream {
	t.Helper()
	s, err := djinnpb.NewEventMailboxClient(cc).Deliveries(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	ss := &sharedStream{t: t, s: s}
	ss.send(first)
	return ss
}

func (ss *sharedStream) send(m *djinnpb.DeliveriesRequest) {
	ss.t.Helper()
	if err := ss.s.Send(m); err != nil && !errors.Is(err, io.EOF) {
		ss.t.Fatal(err)
	}
}

// part is what the test reads of one registration from a shared stream.
type part struct {
	indexes []uint64
	acked   uint64
	ended   bool
	err     error
}

// until reads the stream until done holds of what it read, by
// registration; it returns what was read and how many messages.
func (ss *sharedStream) until(done func(map[djinn.ID]*part) bool) (map[djinn.ID]*part, int) {
	ss.t.Helper()
	got := map[djinn.ID]*part{}
	msgs := 0
	for !done(got) {
		msg, err := ss.s.Recv()
		if err != nil {
			ss.t.Fatalf("shared stream ended with %v; read so far %v", err, got)
		}
		msgs++
		for _, rd := range msg.GetRegistrations() {
			id, err := djinn.IDFromBytes("registration id", rd.GetRegistrationId())
			if err != nil {
				ss.t.Fatal(err)
			}
			p := got[id]
			if p == nil {
				p = &part{}
				got[id] = p
			}
			for _, e := range rd.GetEvents() {
				p.indexes = append(p.indexes, e.GetIndex())
			}
			p.acked = max(p.acked, rd.GetAcknowledgedThrough())
			if rd.GetEnded() {
				p.ended = true
				if e := rd.GetError(); e != nil {
					p.err = grpcerr.FromProto(e)
				}
			}
		}
	}
	return got, msgs
}

func cursor(id djinn.ID, ack uint64) *djinnpb.DeliveryCursor {
	return &djinnpb.DeliveryCursor{RegistrationId: idBytes(id), AckThrough: ack}
}

// TestMailboxSharedDeliveries: EM.4 pull mode over one shared stream —
// the stored events of several registrations come on one stream, each
// registration's in arrival order, tagged with it; acknowledgements per
// registration forget its events; a registration removed leaves once its
// acknowledgements are recorded, and the stream goes on with the others.
func TestMailboxSharedDeliveries(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	a, b := f.register(t), f.register(t)
	for range 3 {
		f.gen.mustNotify(t, a.Listener, 1)
		f.gen.mustNotify(t, b.Listener, 1)
	}
	ss := openShared(t, f.c.ClientConn(), &djinnpb.DeliveriesRequest{Add: []*djinnpb.DeliveryCursor{
		{RegistrationId: idBytes(a.ID)}, {RegistrationId: idBytes(b.ID), AfterIndex: 1},
	}})
	got, _ := ss.until(func(p map[djinn.ID]*part) bool {
		return p[a.ID] != nil && len(p[a.ID].indexes) == 3 && p[b.ID] != nil && len(p[b.ID].indexes) == 2
	})
	if g := got[a.ID].indexes; g[0] != 1 || g[2] != 3 {
		t.Fatalf("registration a: indexes %v, want 1 2 3", g)
	}
	if g := got[b.ID].indexes; g[0] != 2 || g[1] != 3 {
		t.Fatalf("registration b after index 1: indexes %v, want 2 3", g)
	}
	ss.send(&djinnpb.DeliveriesRequest{Acks: []*djinnpb.DeliveryCursor{cursor(a.ID, 2), cursor(b.ID, 3)}})
	ss.until(func(p map[djinn.ID]*part) bool {
		return p[a.ID] != nil && p[a.ID].acked == 2 && p[b.ID] != nil && p[b.ID].acked == 3
	})
	if r := f.read(t, a); r.Stored != 1 {
		t.Fatalf("a after acknowledging through 2: %d stored, want 1", r.Stored)
	}
	if r := f.read(t, b); r.Stored != 0 {
		t.Fatalf("b after acknowledging through 3: %d stored, want 0", r.Stored)
	}
	ss.send(&djinnpb.DeliveriesRequest{Remove: [][]byte{idBytes(b.ID)}})
	got, _ = ss.until(func(p map[djinn.ID]*part) bool { return p[b.ID] != nil && p[b.ID].ended })
	if got[b.ID].err != nil {
		t.Fatalf("b removed: ended with %v, want no error", got[b.ID].err)
	}
	f.gen.mustNotify(t, a.Listener, 1)
	got, _ = ss.until(func(p map[djinn.ID]*part) bool { return p[a.ID] != nil && len(p[a.ID].indexes) > 0 })
	if g := got[a.ID].indexes; g[0] != 4 {
		t.Fatalf("a after b left: indexes %v, want 4", g)
	}
	if err := ss.s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got, _ = ss.until(func(p map[djinn.ID]*part) bool { return p[a.ID] != nil && p[a.ID].ended })
	if _, err := ss.s.Recv(); !errors.Is(err, io.EOF) || got[a.ID].err != nil {
		t.Fatalf("client closed its side: a ended with %v, the stream with %v; want both clean", got[a.ID].err, err)
	}
}

// TestMailboxSharedDeliveriesResume: EM.4 (at least once) — events sent
// on a shared stream and not acknowledged come again, with the same
// indexes, on the next stream.
func TestMailboxSharedDeliveriesResume(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	a, b := f.register(t), f.register(t)
	for range 2 {
		f.gen.mustNotify(t, a.Listener, 1)
		f.gen.mustNotify(t, b.Listener, 1)
	}
	ctx, cancel := context.WithCancel(testContext(t))
	s, err := djinnpb.NewEventMailboxClient(f.c.ClientConn()).Deliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ss := &sharedStream{t: t, s: s}
	ss.send(&djinnpb.DeliveriesRequest{Add: []*djinnpb.DeliveryCursor{{RegistrationId: idBytes(a.ID)}, {RegistrationId: idBytes(b.ID)}}})
	ss.until(func(p map[djinn.ID]*part) bool {
		return p[a.ID] != nil && len(p[a.ID].indexes) == 2 && p[b.ID] != nil && len(p[b.ID].indexes) == 2
	})
	ss.send(&djinnpb.DeliveriesRequest{Acks: []*djinnpb.DeliveryCursor{cursor(a.ID, 1)}})
	ss.until(func(p map[djinn.ID]*part) bool { return p[a.ID] != nil && p[a.ID].acked == 1 })
	cancel() // the stream breaks with events sent and not acknowledged
	again := openShared(t, f.c.ClientConn(), &djinnpb.DeliveriesRequest{Add: []*djinnpb.DeliveryCursor{{RegistrationId: idBytes(a.ID)}, {RegistrationId: idBytes(b.ID)}}})
	got, _ := again.until(func(p map[djinn.ID]*part) bool {
		return p[a.ID] != nil && len(p[a.ID].indexes) == 1 && p[b.ID] != nil && len(p[b.ID].indexes) == 2
	})
	if got[a.ID].indexes[0] != 2 || got[b.ID].indexes[0] != 1 {
		t.Fatalf("new stream: a %v, b %v; want a 2 (1 acknowledged), b 1 2", got[a.ID].indexes, got[b.ID].indexes)
	}
}

// TestMailboxSharedDeliveriesMemberErrors: a registration's own failure
// ends only it — DESIGN.md 7: another principal's registration is not
// found (and nothing of it is sent or recorded); EM.4: an
// acknowledgement past what was sent is refused; a registration taken
// over by another consumer is told so — and the stream goes on with the
// caller's other registrations.
func TestMailboxSharedDeliveriesMemberErrors(t *testing.T) {
	t.Parallel()
	p := newPrincipals(t)
	register := func(cc *grpc.ClientConn) djinn.ID {
		r, err := djinnpb.NewEventMailboxClient(cc).Register(testContext(t), &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := djinn.IDFromBytes("registration id", r.GetRegistrationId())
		return id
	}
	alices, bobs, bobs2, bobs3 := register(p.alice), register(p.bob), register(p.bob), register(p.bob)
	ss := openShared(t, p.bob, &djinnpb.DeliveriesRequest{Add: []*djinnpb.DeliveryCursor{
		{RegistrationId: idBytes(alices), AckThrough: 0}, {RegistrationId: idBytes(bobs)}, {RegistrationId: idBytes(bobs2)}, {RegistrationId: idBytes(bobs3)},
	}})
	got, _ := ss.until(func(m map[djinn.ID]*part) bool { return m[alices] != nil && m[alices].ended })
	wantErr(t, "bob adds alice's registration", got[alices].err, djinn.ErrNoSuchObject, "registration")
	ss.send(&djinnpb.DeliveriesRequest{Acks: []*djinnpb.DeliveryCursor{cursor(bobs2, 9)}})
	got, _ = ss.until(func(m map[djinn.ID]*part) bool { return m[bobs2] != nil && m[bobs2].ended })
	wantErr(t, "an acknowledgement past the events sent", got[bobs2].err, djinn.ErrInvalidArgument, "ack_through 9")
	// Another consumer of bobs3 takes over: bob's own stream of it alone.
	openShared(t, p.bob, &djinnpb.DeliveriesRequest{Add: []*djinnpb.DeliveryCursor{{RegistrationId: idBytes(bobs3)}}})
	got, _ = ss.until(func(m map[djinn.ID]*part) bool { return m[bobs3] != nil && m[bobs3].ended })
	wantErr(t, "a registration taken over", got[bobs3].err, djinn.ErrInvalidIterator, "")
	ev := &djinnpb.RemoteEvent{Source: &djinnpb.Ref{Endpoint: "127.0.0.1:1", ServiceId: idBytes(djinn.NewID()), ObjectId: idBytes(djinn.NewID())}, EventId: 1, Sequence: 7}
	reg, err := djinnpb.NewEventMailboxClient(p.bob).GetRegistration(testContext(t), &djinnpb.MailboxRegistrationRequest{RegistrationId: idBytes(bobs)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := djinnpb.NewEventListenerClient(p.alice).Notify(testContext(t), &djinnpb.NotifyRequest{ListenerId: reg.GetListener().GetObjectId(), Event: ev}); err != nil {
		t.Fatal(err)
	}
	got, _ = ss.until(func(m map[djinn.ID]*part) bool { return m[bobs] != nil && len(m[bobs].indexes) == 1 })
	if got[bobs].ended || got[alices] != nil {
		t.Fatalf("after the others failed: bob's registration %+v, alice's %+v; want bob's open with its event, nothing of alice's", got[bobs], got[alices])
	}
}

// TestMailboxSharedDeliveriesArguments: bad messages of a shared stream
// end it with InvalidArgument naming the bad value.
func TestMailboxSharedDeliveriesArguments(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	reg := f.register(t)
	id := idBytes(reg.ID)
	add := []*djinnpb.DeliveryCursor{{RegistrationId: id}}
	tests := []struct {
		name string
		msgs []*djinnpb.DeliveriesRequest
		text string
	}{
		{"an add with a short registration id", []*djinnpb.DeliveriesRequest{{Add: []*djinnpb.DeliveryCursor{{RegistrationId: []byte{1, 2}}}}}, "add[0] registration id"},
		{"an acknowledgement with a short registration id", []*djinnpb.DeliveriesRequest{{Acks: []*djinnpb.DeliveryCursor{{RegistrationId: []byte{1}}}}}, "acks[0] registration id"},
		{"a removal with a short registration id", []*djinnpb.DeliveriesRequest{{Remove: [][]byte{{1}}}}, "remove[0] registration id"},
		{"an add with a window above 65536", []*djinnpb.DeliveriesRequest{{Add: []*djinnpb.DeliveryCursor{{RegistrationId: id, Window: 70000}}}}, "delivery window 70000"},
		{"a negative batch", []*djinnpb.DeliveriesRequest{{MaxBatch: -1}}, "delivery batch -1"},
		{"a registration added twice", []*djinnpb.DeliveriesRequest{{Add: add}, {Add: add}}, "already on this delivery stream"},
		{"an acknowledgement with an after_index", []*djinnpb.DeliveriesRequest{{Add: add}, {Acks: []*djinnpb.DeliveryCursor{{RegistrationId: id, AfterIndex: 3}}}}, "after_index 3"},
		{"a later message naming a registration", []*djinnpb.DeliveriesRequest{{Add: add}, {RegistrationId: id}}, "names registration"},
		{"a later message with a batch", []*djinnpb.DeliveriesRequest{{Add: add}, {MaxBatch: 8}}, "not taken after the first message"},
		{"a single stream with an add", []*djinnpb.DeliveriesRequest{{RegistrationId: id, Add: add}}, "belong to a shared stream"},
		{"a single stream's later add", []*djinnpb.DeliveriesRequest{{RegistrationId: id}, {Add: add}}, "belong to a shared stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErr(t, tt.name, deliveries(testContext(t), f.c.ClientConn(), tt.msgs...), djinn.ErrInvalidArgument, tt.text)
		})
	}
}

// TestMailboxReceiveShares: the client library's delivery streams of
// several registrations on one connection share one gRPC stream (the
// shared form), and each still gets its own events in order and
// acknowledges them; DeliveryOwnStream opens a stream of its own, and a
// second stream of a registration already on the shared one supersedes
// it as a stream of its own would.
func TestMailboxReceiveShares(t *testing.T) {
	t.Parallel()
	f := newMailboxFixture(t, nil)
	regs := []*client.MailboxRegistration{f.register(t), f.register(t), f.register(t)}
	streams := make([]*client.DeliveryStream, len(regs))
	for i, r := range regs {
		f.gen.mustNotify(t, r.Listener, 1)
		s, err := r.Deliveries(testContext(t))
		if err != nil {
			t.Fatal(err)
		}
		streams[i] = s
	}
	for i, s := range streams {
		events, err := s.Recv()
		if err != nil || len(events) != 1 || events[0].Index != 1 {
			t.Fatalf("registration %d: %d events, %v; want its event 1", i, len(events), err)
		}
	}
	if n := metricValue(t, f.srv, "djinn_mailbox_delivery_streams"); n != 1 {
		t.Fatalf("%v delivery streams open for 3 registrations of one client, want 1 shared", n)
	}
	own, err := regs[2].Deliveries(testContext(t), client.DeliveryOwnStream())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := streams[2].Recv(); !errors.Is(err, djinn.ErrInvalidIterator) {
		t.Fatalf("the shared stream's registration taken over by one of its own: %v, want InvalidIterator", err)
	}
	if events, err := own.Recv(); err != nil || len(events) != 1 || events[0].Index != 1 {
		t.Fatalf("the stream of its own: %d events, %v; want event 1 again (not acknowledged)", len(events), err)
	}
	if err := streams[0].Ack(1); err != nil {
		t.Fatal(err)
	}
	if err := streams[0].Close(); err != nil || streams[0].Acknowledged() != 1 {
		t.Fatalf("Close = %v, recorded through %d; want nil and 1", err, streams[0].Acknowledged())
	}
	if r := f.read(t, regs[0]); r.Stored != 0 {
		t.Fatalf("after acknowledging on the shared stream: %d stored, want 0", r.Stored)
	}
	f.gen.mustNotify(t, regs[1].Listener, 1)
	if events, err := streams[1].Recv(); err != nil || len(events) != 1 || events[0].Index != 2 {
		t.Fatalf("registration 1 after 0 left: %d events, %v; want event 2", len(events), err)
	}
}
