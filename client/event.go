package client

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// RefToProto returns the wire form of a reference.
func RefToProto(r djinn.Ref) *djinnpb.Ref {
	return &djinnpb.Ref{Endpoint: r.Endpoint, ServiceId: r.Service[:], ObjectId: r.Object[:]}
}

// RefFromProto converts a wire reference; what names it in errors. Both ids
// must be 16 bytes; the endpoint, only a hint of where to reach the object,
// may be empty but must otherwise be host:port (djinn.CheckStoredEndpoint:
// answers carry endpoints stored before they were checked strictly).
func RefFromProto(what string, r *djinnpb.Ref) (djinn.Ref, error) {
	var out djinn.Ref
	if r == nil {
		return out, djinn.Errorf(djinn.InvalidArgument, "%s: missing", what)
	}
	if r.GetEndpoint() != "" {
		if err := djinn.CheckStoredEndpoint(r.GetEndpoint()); err != nil {
			return out, djinn.Errorf(djinn.InvalidArgument, "%s: %v", what, err)
		}
	}
	// The ids' names are built only for an error: a reference decodes
	// with every reply that carries one.
	if len(r.GetServiceId()) != len(out.Service) {
		_, err := djinn.IDFromBytes(what+" service id", r.GetServiceId())
		return out, err
	}
	if len(r.GetObjectId()) != len(out.Object) {
		_, err := djinn.IDFromBytes(what+" object id", r.GetObjectId())
		return out, err
	}
	out.Endpoint = r.GetEndpoint()
	copy(out.Service[:], r.GetServiceId())
	copy(out.Object[:], r.GetObjectId())
	return out, nil
}

// RemoteEvent is a notification that an event of a kind happened (EV.2.3.2):
// the event generator's reference and the event id name the kind, the
// sequence number the occurrence; the handback is what the registrant gave
// when it registered interest, returned untouched.
//
// Payload is the generator's typed description of the event, or nil. It
// stays a protobuf Any: nothing from the network is turned into a Go type
// until the receiver asks for one it knows (Payload.UnmarshalTo).
type RemoteEvent struct {
	Source   djinn.Ref
	ID       int64
	Seq      int64
	Handback []byte
	Payload  *anypb.Any
}

// Proto returns the wire form of e. It shares e's handback and payload.
func (e *RemoteEvent) Proto() *djinnpb.RemoteEvent {
	return &djinnpb.RemoteEvent{
		Source:   RefToProto(e.Source),
		EventId:  e.ID,
		Sequence: e.Seq,
		Handback: e.Handback,
		Payload:  e.Payload,
	}
}

// RemoteEventFromProto converts a wire event, checking its source reference
// (required: the source and event id name the kind of event).
// The event shares pb's handback and payload.
func RemoteEventFromProto(pb *djinnpb.RemoteEvent) (*RemoteEvent, error) {
	if pb == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "event: missing")
	}
	src, err := RefFromProto("event source", pb.GetSource())
	if err != nil {
		return nil, err
	}
	if src.Service.IsZero() && src.Object.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "event source: missing")
	}
	return &RemoteEvent{
		Source:   src,
		ID:       pb.GetEventId(),
		Seq:      pb.GetSequence(),
		Handback: pb.GetHandback(),
		Payload:  pb.GetPayload(),
	}, nil
}

// Equal reports whether e and o are the same occurrence with the same
// contents: an event delivered twice compares equal to itself (EV.2.3.2's
// sequence numbers make notify idempotent).
func (e *RemoteEvent) Equal(o *RemoteEvent) bool {
	if e == nil || o == nil {
		return e == o
	}
	return e.Source.Equal(o.Source) && e.ID == o.ID && e.Seq == o.Seq &&
		string(e.Handback) == string(o.Handback) && proto.Equal(e.Payload, o.Payload)
}

// EventRegistration is what a registration of interest returns (EV.2.3.5):
// the event id and source that name the kind of event, the lease of the
// registration and the sequence number current when it was granted.
type EventRegistration struct {
	ID     int64
	Source djinn.Ref
	Lease  *Lease
	Seq    int64
}

// EventRegistrationFromProto converts a wire registration; sent is when the
// request that returned it was sent (its lease expires sent + duration,
// LE.2.3).
func EventRegistrationFromProto(pb *djinnpb.EventRegistration, sent time.Time) (*EventRegistration, error) {
	if pb == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "event registration: missing")
	}
	src, err := RefFromProto("event registration source", pb.GetSource())
	if err != nil {
		return nil, err
	}
	l, err := LeaseFromProto(pb.GetLease(), sent)
	if err != nil {
		return nil, err
	}
	return &EventRegistration{ID: pb.GetEventId(), Source: src, Lease: l, Seq: pb.GetSequence()}, nil
}

// Proto returns the wire form of r at time now (its lease in the lease's
// serial format).
func (r *EventRegistration) Proto(now time.Time) *djinnpb.EventRegistration {
	pb := &djinnpb.EventRegistration{EventId: r.ID, Source: RefToProto(r.Source), Sequence: r.Seq}
	if r.Lease != nil {
		pb.Lease = r.Lease.Proto(now)
	}
	return pb
}

// statusRef decodes the reference Status gave for service what of the
// server c is dialled to, reached at the dialled address. A node that has
// not bootstrapped or joined a cluster yet has no service id: the service
// it names would name no object, so it is unavailable (ErrNotReady) until
// it has one.
func (c *Client) statusRef(what string, r *djinnpb.Ref) (djinn.Ref, error) {
	ref, err := RefFromProto(what, r)
	if err != nil {
		return ref, err
	}
	if ref.Service.IsZero() {
		return ref, notReady(c.addr, "server at %s is still starting: its cluster has no service id yet, so its %s has no reference; retry once its /readyz answers ready", c.addr, what)
	}
	ref.Endpoint = c.addr
	return ref, nil
}
