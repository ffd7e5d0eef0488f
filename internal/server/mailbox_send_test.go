package server

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// sentStream keeps the last message a delivery stream sent.
type sentStream struct {
	grpc.BidiStreamingServer[djinnpb.DeliveriesRequest, djinnpb.DeliveriesResponse]
	last *djinnpb.DeliveriesResponse
}

func (s *sentStream) Send(m *djinnpb.DeliveriesResponse) error {
	s.last = m
	return nil
}

// A shared stream's message carries each part as it was queued: its
// registration, events in order, recorded acknowledgement, end and error;
// and it costs a fixed number of allocations, not some per part or event.
func TestSharedConnSendCarriesEveryPart(t *testing.T) {
	ev := func(seq int64) *djinnpb.RemoteEvent { return &djinnpb.RemoteEvent{EventId: 1, Sequence: seq} }
	failed := djinn.Errorf(djinn.NoSuchObject, "gone")
	parts := []mailbox.SharedPart{
		{ID: djinn.ID{1}, Events: []mailbox.Stored{{Index: 4, Event: ev(4)}, {Index: 5, Event: ev(5)}}},
		{ID: djinn.ID{2}, Recorded: 7},
		{ID: djinn.ID{3}, Events: []mailbox.Stored{{Index: 1, Event: ev(1)}}, Recorded: 9},
		{ID: djinn.ID{4}, Ended: true, Err: failed},
	}
	s := &sentStream{}
	c := &sharedConn{stream: s}
	if err := c.Send(parts); err != nil {
		t.Fatal(err)
	}
	want := &djinnpb.DeliveriesResponse{Registrations: []*djinnpb.RegistrationDeliveries{
		{RegistrationId: parts[0].ID[:], Events: []*djinnpb.StoredEvent{{Index: 4, Event: ev(4)}, {Index: 5, Event: ev(5)}}},
		{RegistrationId: parts[1].ID[:], AcknowledgedThrough: 7},
		{RegistrationId: parts[2].ID[:], Events: []*djinnpb.StoredEvent{{Index: 1, Event: ev(1)}}, AcknowledgedThrough: 9},
		{RegistrationId: parts[3].ID[:], Ended: true, Error: grpcerr.ToProto(failed)},
	}}
	if !proto.Equal(s.last, want) {
		t.Fatalf("sent %v\nwant %v", s.last, want)
	}
	if got := s.last.GetRegistrations()[3].GetError(); got == nil {
		t.Fatal("the ended part's error is missing")
	}
	many := make([]mailbox.SharedPart, 32)
	for i := range many {
		many[i] = mailbox.SharedPart{ID: djinn.ID{byte(i)}, Events: []mailbox.Stored{{Index: uint64(i), Event: ev(1)}}}
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = c.Send(many) }); allocs > 6 {
		t.Errorf("sending 32 parts of one event each: %v allocations, want at most 6", allocs)
	}
}

// A stream of its own sends its events in order with the recorded
// acknowledgement, the events in one allocation.
func TestDeliveryConnSendCarriesEveryEvent(t *testing.T) {
	s := &sentStream{}
	c := &deliveryConn{stream: s}
	events := []mailbox.Stored{{Index: 2, Event: &djinnpb.RemoteEvent{Sequence: 2}}, {Index: 3, Event: &djinnpb.RemoteEvent{Sequence: 3}}}
	if err := c.Send(events, 1); err != nil {
		t.Fatal(err)
	}
	want := &djinnpb.DeliveriesResponse{AcknowledgedThrough: 1, Events: []*djinnpb.StoredEvent{{Index: 2, Event: events[0].Event}, {Index: 3, Event: events[1].Event}}}
	if !proto.Equal(s.last, want) {
		t.Fatalf("sent %v, want %v", s.last, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = c.Send(events, 1) }); allocs > 3 {
		t.Errorf("sending 2 events: %v allocations, want at most 3", allocs)
	}
}

// A message of acknowledgements decodes to them, in order, with one
// allocation however many there are; a bad id still names its entry.
func TestSharedRequestAcknowledgements(t *testing.T) {
	r := &djinnpb.DeliveriesRequest{}
	var want []mailbox.SharedAck
	for i := range 32 {
		id := djinn.ID{byte(i + 1)}
		r.Acks = append(r.Acks, &djinnpb.DeliveryCursor{RegistrationId: id[:], AckThrough: uint64(i * 3)})
		want = append(want, mailbox.SharedAck{ID: id, Through: uint64(i * 3)})
	}
	got, err := sharedRequest(r, false)
	if err != nil || !slices.Equal(got.Acks, want) {
		t.Fatalf("sharedRequest = %v, %v; want %v", got.Acks, err, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _ = sharedRequest(r, false) }); allocs > 1 {
		t.Errorf("decoding 32 acknowledgements: %v allocations, want at most 1", allocs)
	}
	r.Acks[5].RegistrationId = []byte{1, 2, 3}
	if _, err := sharedRequest(r, false); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "acks[5] registration id: 3 bytes, want 16") {
		t.Fatalf("a short id in acks[5]: %v, want InvalidArgument naming acks[5]", err)
	}
}
