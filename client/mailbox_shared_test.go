package client

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// singleFormMailbox serves delivery streams of one registration only, as
// a mailbox before the shared form did: a first message without a
// registration id is refused with InvalidArgument. Each stream sends one
// event (index 1) and waits for the client to go.
type singleFormMailbox struct {
	djinnpb.UnimplementedEventMailboxServer
	refused, served atomic.Int32
}

func (m *singleFormMailbox) Deliveries(s grpc.BidiStreamingServer[djinnpb.DeliveriesRequest, djinnpb.DeliveriesResponse]) error {
	first, err := s.Recv()
	if err != nil {
		return err
	}
	if len(first.GetRegistrationId()) == 0 {
		m.refused.Add(1)
		return status.Error(codes.InvalidArgument, "registration id: missing")
	}
	m.served.Add(1)
	ev := &djinnpb.RemoteEvent{Source: &djinnpb.Ref{Endpoint: "127.0.0.1:1", ServiceId: make([]byte, 16), ObjectId: []byte("generator-object")}, EventId: 1, Sequence: 1}
	if err := s.Send(&djinnpb.DeliveriesResponse{Events: []*djinnpb.StoredEvent{{Index: 1, Event: ev}}}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

// TestDeliveriesWithoutTheSharedForm: against a mailbox that refuses the
// shared form, the first stream fails Unavailable (open it again), and
// every stream of that connection from then on is a stream of its own;
// Receive does that by itself.
func TestDeliveriesWithoutTheSharedForm(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &singleFormMailbox{}
	g := grpc.NewServer()
	djinnpb.RegisterEventMailboxServer(g, m)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	p := NewPool()
	t.Cleanup(func() { p.Close() })
	mb := NewMailbox(p, ln.Addr().String())
	reg := &MailboxRegistration{m: mb, endpoint: ln.Addr().String(), ID: djinn.NewID()}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := reg.Deliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, djinn.ErrUnavailable) {
		t.Fatalf("the shared form refused: %v, want Unavailable", err)
	}
	got := make(chan StoredEvent, 1)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- reg.Receive(rctx, func(_ context.Context, e StoredEvent) error {
			got <- e
			return nil
		})
	}()
	select {
	case e := <-got:
		if e.Index != 1 {
			t.Fatalf("Receive got index %d, want 1", e.Index)
		}
	case err := <-done:
		t.Fatalf("Receive ended with %v", err)
	case <-ctx.Done():
		t.Fatal("Receive got nothing")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Receive ended by its context with %v", err)
	}
	if r, s := m.refused.Load(), m.served.Load(); r != 1 || s != 1 {
		t.Fatalf("%d shared streams refused, %d single streams served; want 1 and 1", r, s)
	}
}

// FuzzSharedDeliveriesResponse: any message of a shared delivery stream
// hands each registration only its own parts, ends only the registration
// it names, and never panics.
func FuzzSharedDeliveriesResponse(f *testing.F) {
	ours := djinn.ID{'o', 'u', 'r', 's'}
	for _, m := range []*djinnpb.DeliveriesResponse{
		{Registrations: []*djinnpb.RegistrationDeliveries{{RegistrationId: ours[:], Events: []*djinnpb.StoredEvent{{Index: 1}}, AcknowledgedThrough: 1}}},
		{Registrations: []*djinnpb.RegistrationDeliveries{{RegistrationId: ours[:], Ended: true, Error: &djinnpb.Error{Code: 5, Kind: "NO_SUCH_OBJECT"}}}},
		{Registrations: []*djinnpb.RegistrationDeliveries{{RegistrationId: []byte{1, 2}}, {RegistrationId: make([]byte, 16), Ended: true}}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var msg djinnpb.DeliveriesResponse
		if proto.Unmarshal(raw, &msg) != nil {
			return
		}
		x := &deliveryMux{members: map[djinn.ID]*sharedMember{}, acks: map[djinn.ID]uint64{}}
		m := &sharedMember{x: x, id: ours, ready: make(chan struct{}, 1)}
		x.members[ours] = m
		want, ends := 0, false
		for _, rd := range msg.GetRegistrations() {
			if string(rd.GetRegistrationId()) == string(ours[:]) && !ends {
				want++
				ends = rd.GetEnded()
			}
			x.hand(rd)
		}
		if len(m.queue) < want || m.ended != ends {
			t.Fatalf("%v: %d parts queued, ended %v; want at least %d, ended %v", &msg, len(m.queue), m.ended, want, ends)
		}
		for _, rd := range m.queue {
			if string(rd.GetRegistrationId()) != string(ours[:]) {
				t.Fatalf("%v: registration %x's part handed to ours", &msg, rd.GetRegistrationId())
			}
		}
	})
}
