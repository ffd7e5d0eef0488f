package server

import (
	"context"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// mailboxRPC serves the EventMailbox service.
type mailboxRPC struct {
	djinnpb.UnimplementedEventMailboxServer
	s *Server
}

func regProto(r mailbox.Registration) *djinnpb.MailboxRegistration {
	return &djinnpb.MailboxRegistration{
		RegistrationId: r.ID[:],
		Lease:          r.Lease,
		Listener:       &djinnpb.Ref{Endpoint: r.Listener.Endpoint, ServiceId: r.Listener.Service[:], ObjectId: r.Listener.Object[:]},
		Target:         r.Target,
		StoredEvents:   int64(r.Stored),
		UnknownEvents:  r.Unknown,
	}
}

func (m *mailboxRPC) Register(ctx context.Context, r *djinnpb.MailboxRegisterRequest) (*djinnpb.MailboxRegistration, error) {
	reg, err := m.s.mailbox.Register(ctx, time.Duration(r.GetLeaseDurationNanos()))
	if err != nil {
		return nil, err
	}
	return regProto(reg), nil
}

func regID(b []byte) (djinn.ID, error) { return djinn.IDFromBytes("registration id", b) }

func (m *mailboxRPC) GetRegistration(ctx context.Context, r *djinnpb.MailboxRegistrationRequest) (*djinnpb.MailboxRegistration, error) {
	id, err := regID(r.GetRegistrationId())
	if err != nil {
		return nil, err
	}
	reg, err := m.s.mailbox.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return regProto(reg), nil
}

func (m *mailboxRPC) EnableDelivery(ctx context.Context, r *djinnpb.EnableDeliveryRequest) (*djinnpb.EnableDeliveryResponse, error) {
	id, err := regID(r.GetRegistrationId())
	if err != nil {
		return nil, err
	}
	if err := m.s.mailbox.EnableDelivery(ctx, id, r.GetTarget()); err != nil {
		return nil, err
	}
	return &djinnpb.EnableDeliveryResponse{}, nil
}

func (m *mailboxRPC) DisableDelivery(ctx context.Context, r *djinnpb.MailboxRegistrationRequest) (*djinnpb.DisableDeliveryResponse, error) {
	id, err := regID(r.GetRegistrationId())
	if err != nil {
		return nil, err
	}
	if err := m.s.mailbox.DisableDelivery(ctx, id); err != nil {
		return nil, err
	}
	return &djinnpb.DisableDeliveryResponse{}, nil
}

func (m *mailboxRPC) Pull(r *djinnpb.PullRequest, stream djinnpb.EventMailbox_PullServer) error {
	id, err := regID(r.GetRegistrationId())
	if err != nil {
		return err
	}
	return m.s.mailbox.Pull(stream.Context(), id, r.GetAfterIndex(), int(r.GetMaxBatch()), func(events []mailbox.Stored) error {
		msg := &djinnpb.PullResponse{Events: make([]*djinnpb.StoredEvent, len(events))}
		for i, e := range events {
			msg.Events[i] = &djinnpb.StoredEvent{Index: e.Index, Event: e.Event}
		}
		return stream.Send(msg)
	})
}

func (m *mailboxRPC) Ack(ctx context.Context, r *djinnpb.AckRequest) (*djinnpb.AckResponse, error) {
	id, err := regID(r.GetRegistrationId())
	if err != nil {
		return nil, err
	}
	if err := m.s.mailbox.Ack(ctx, id, r.GetThroughIndex()); err != nil {
		return nil, err
	}
	return &djinnpb.AckResponse{}, nil
}

func (m *mailboxRPC) AddUnknownEvents(ctx context.Context, r *djinnpb.AddUnknownEventsRequest) (*djinnpb.AddUnknownEventsResponse, error) {
	id, err := regID(r.GetRegistrationId())
	if err != nil {
		return nil, err
	}
	if err := m.s.mailbox.AddUnknownEvents(ctx, id, r.GetEvents()); err != nil {
		return nil, err
	}
	return &djinnpb.AddUnknownEventsResponse{}, nil
}

// listenerRPC serves the mailbox listeners: every registration's listener
// is an object of this server's EventListener service.
type listenerRPC struct {
	djinnpb.UnimplementedEventListenerServer
	s *Server
}

func (l *listenerRPC) Notify(ctx context.Context, r *djinnpb.NotifyRequest) (*djinnpb.NotifyResponse, error) {
	id, err := djinn.IDFromBytes("listener id", r.GetListenerId())
	if err != nil {
		return nil, err
	}
	if err := l.s.mailbox.Notify(ctx, id, r.GetEvent()); err != nil {
		return nil, err
	}
	return &djinnpb.NotifyResponse{}, nil
}

func (l *listenerRPC) NotifyBatch(ctx context.Context, r *djinnpb.NotifyBatchRequest) (*djinnpb.NotifyBatchResponse, error) {
	id, err := djinn.IDFromBytes("listener id", r.GetListenerId())
	if err != nil {
		return nil, err
	}
	n, err := l.s.mailbox.NotifyBatch(ctx, id, r.GetEvents())
	if err != nil && n == 0 && len(r.GetEvents()) > 0 && djinn.KindOf(err) == djinn.Unavailable {
		return nil, err // nothing stored and worth retrying: a call error, so the leader hint travels
	}
	return &djinnpb.NotifyBatchResponse{Accepted: int32(n), Error: grpcerr.ToProto(err)}, nil
}
