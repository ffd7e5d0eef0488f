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

// Parts whose events need more than one message are split in order: a
// part too large for one goes over several, its recorded acknowledgement,
// end and error with its last events; no message holds more than
// eventMessageBytes of events unless one event alone does.
func TestSplitPartsKeepsOrderAndEnds(t *testing.T) {
	big := func(seq int64) mailbox.Stored {
		return mailbox.Stored{Index: uint64(seq), Event: &djinnpb.RemoteEvent{Sequence: seq, Handback: make([]byte, 300<<10)}}
	}
	failed := djinn.Errorf(djinn.NoSuchObject, "gone")
	parts := []mailbox.SharedPart{
		{ID: djinn.ID{1}, Events: []mailbox.Stored{big(1), big(2)}, Recorded: 3},
		{ID: djinn.ID{2}, Events: []mailbox.Stored{big(1), big(2), big(3), big(4), big(5), big(6), big(7)}, Recorded: 9, Ended: true, Err: failed},
		{ID: djinn.ID{3}, Recorded: 4},
	}
	msgs := splitParts(parts)
	if len(msgs) < 3 {
		t.Fatalf("%d messages, want at least 3 for 2.7 MB of events", len(msgs))
	}
	type seen struct {
		seqs     []int64
		recorded uint64
		ended    bool
		err      error
	}
	got := map[djinn.ID]*seen{}
	var order []djinn.ID
	for i, m := range msgs {
		size := 0
		for _, p := range m {
			s := got[p.ID]
			if s == nil {
				s = &seen{}
				got[p.ID] = s
				order = append(order, p.ID)
			}
			if s.ended || s.recorded != 0 {
				t.Fatalf("message %d: part %x after its recorded acknowledgement or end", i, p.ID[:1])
			}
			for _, e := range p.Events {
				s.seqs = append(s.seqs, e.Event.GetSequence())
				size += proto.Size(e.Event)
			}
			s.recorded, s.ended, s.err = p.Recorded, p.Ended, p.Err
		}
		if size > eventMessageBytes {
			t.Errorf("message %d holds %d bytes of events, more than %d", i, size, eventMessageBytes)
		}
	}
	if !slices.Equal(order, []djinn.ID{{1}, {2}, {3}}) {
		t.Errorf("parts in order %x, want 1, 2, 3", order)
	}
	for _, p := range parts {
		s := got[p.ID]
		checkPart(t, p, s.seqs, s.recorded, s.ended, s.err)
	}
	if one := splitParts(parts[2:]); len(one) != 1 {
		t.Errorf("parts that fit one message: %d messages", len(one))
	}
}

// checkPart checks what the messages carried of part p: its events' sequence
// numbers in order, its recorded acknowledgement, end and error.
func checkPart(t *testing.T, p mailbox.SharedPart, seqs []int64, recorded uint64, ended bool, err error) {
	t.Helper()
	want := make([]int64, len(p.Events))
	for i, e := range p.Events {
		want[i] = e.Event.GetSequence()
	}
	if !slices.Equal(seqs, want) || recorded != p.Recorded || ended != p.Ended || !errors.Is(err, p.Err) {
		t.Errorf("part %x: events %v recorded %d ended %v err %v; want %v, %d, %v, %v", p.ID[:1], seqs, recorded, ended, err, want, p.Recorded, p.Ended, p.Err)
	}
}
