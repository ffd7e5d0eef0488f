package server

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// sharedDeliveries serves the shared form of a delivery stream: its first
// message names no registration and may set max_batch; every message may
// add, acknowledge and remove registrations. Each registration added is
// authorized as a stream of its own is: one not the caller's leaves the
// stream at once with NotFound.
func (m *mailboxRPC) sharedDeliveries(stream grpc.BidiStreamingServer[djinnpb.DeliveriesRequest, djinnpb.DeliveriesResponse], first *djinnpb.DeliveriesRequest) error {
	if first.GetAfterIndex() != 0 || first.GetWindow() != 0 || first.GetAckThrough() != 0 {
		return djinn.Errorf(djinn.InvalidArgument, "shared delivery stream: after_index %d, window %d, ack_through %d: a stream whose first message names no registration_id takes them per registration, in add and acks", first.GetAfterIndex(), first.GetWindow(), first.GetAckThrough())
	}
	return m.svc.SharedDeliveries(stream.Context(), int(first.GetMaxBatch()), &sharedConn{stream: stream, first: first})
}

// sharedConn is a shared delivery stream's transport over gRPC.
type sharedConn struct {
	stream grpc.BidiStreamingServer[djinnpb.DeliveriesRequest, djinnpb.DeliveriesResponse]
	first  *djinnpb.DeliveriesRequest // given by the first Recv
}

func (c *sharedConn) Recv() (mailbox.SharedRequest, error) {
	r, isFirst := c.first, c.first != nil
	c.first = nil
	if !isFirst {
		var err error
		if r, err = c.stream.Recv(); err != nil {
			return mailbox.SharedRequest{}, err
		}
	}
	return sharedRequest(r, isFirst)
}

// sharedRequest decodes a message of a shared delivery stream (the
// stream's first one when first is set).
func sharedRequest(r *djinnpb.DeliveriesRequest, first bool) (mailbox.SharedRequest, error) {
	var out mailbox.SharedRequest
	switch {
	case len(r.GetRegistrationId()) > 0:
		return out, djinn.Errorf(djinn.InvalidArgument, "shared delivery stream: a later message names registration %x; name registrations in add, acks and remove", r.GetRegistrationId())
	case !first && (r.GetAfterIndex() != 0 || r.GetWindow() != 0 || r.GetMaxBatch() != 0 || r.GetAckThrough() != 0):
		return out, djinn.Errorf(djinn.InvalidArgument, "shared delivery stream: after_index, window, max_batch and ack_through are not taken after the first message; use add and acks")
	}
	for i, a := range r.GetAdd() {
		id, err := listedID("add", i, a.GetRegistrationId())
		if err != nil {
			return out, err
		}
		out.Add = append(out.Add, mailbox.SharedJoin{ID: id, After: a.GetAfterIndex(), Window: int(a.GetWindow()), Ack: a.GetAckThrough()})
	}
	if n := len(r.GetAcks()); n > 0 {
		out.Acks = make([]mailbox.SharedAck, 0, n)
	}
	for i, a := range r.GetAcks() {
		id, err := listedID("acks", i, a.GetRegistrationId())
		if err != nil {
			return out, err
		}
		if a.GetAfterIndex() != 0 || a.GetWindow() != 0 {
			return out, djinn.Errorf(djinn.InvalidArgument, "acks[%d] of registration %s: after_index %d, window %d: only add takes them", i, id, a.GetAfterIndex(), a.GetWindow())
		}
		out.Acks = append(out.Acks, mailbox.SharedAck{ID: id, Through: a.GetAckThrough()})
	}
	for i, b := range r.GetRemove() {
		id, err := listedID("remove", i, b)
		if err != nil {
			return out, err
		}
		out.Remove = append(out.Remove, id)
	}
	return out, nil
}

// Send sends parts in order: in one message, unless their events need more
// (splitParts).
func (c *sharedConn) Send(parts []mailbox.SharedPart) error {
	if !overBudget(parts) {
		return c.send(parts)
	}
	for _, msg := range splitParts(parts) {
		if err := c.send(msg); err != nil {
			return err
		}
	}
	return nil
}

// send sends one message of parts. Its registrations, their ids and their
// events are each made in one allocation, not one per part or event.
func (c *sharedConn) send(parts []mailbox.SharedPart) error {
	n := 0
	for i := range parts {
		n += len(parts[i].Events)
	}
	regs := make([]djinnpb.RegistrationDeliveries, len(parts))
	ids := make([]djinn.ID, len(parts))
	events := make([]djinnpb.StoredEvent, n)
	slots := make([]*djinnpb.StoredEvent, n)
	msg := &djinnpb.DeliveriesResponse{Registrations: make([]*djinnpb.RegistrationDeliveries, len(parts))}
	for i := range parts {
		p, rd := &parts[i], &regs[i]
		ids[i] = p.ID
		rd.RegistrationId, rd.AcknowledgedThrough, rd.Ended, rd.Error = ids[i][:], p.Recorded, p.Ended, grpcerr.ToProto(p.Err)
		if k := len(p.Events); k > 0 {
			rd.Events, slots = slots[:k:k], slots[k:]
			for j, e := range p.Events {
				ev := &events[0]
				events = events[1:]
				ev.Index, ev.Event = e.Index, e.Event
				rd.Events[j] = ev
			}
		}
		msg.Registrations[i] = rd
	}
	return c.stream.Send(msg)
}

// listedID decodes the registration id of entry i of a message's list,
// naming the entry only when the id is bad: acknowledgements come by the
// thousand.
func listedID(list string, i int, b []byte) (djinn.ID, error) {
	if id, err := djinn.IDFromBytes("", b); err == nil {
		return id, nil
	}
	return djinn.IDFromBytes(fmt.Sprintf("%s[%d] registration id", list, i), b)
}
