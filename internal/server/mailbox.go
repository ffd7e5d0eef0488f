package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// MailboxID is the object id of the event mailbox service.
var MailboxID = djinn.ID{'m', 'a', 'i', 'l', 'b', 'o', 'x'}

// MailboxConfig tunes the event mailbox.
type MailboxConfig struct {
	Enabled       bool     `toml:"enabled"`
	DefaultLease  Duration `toml:"default-lease"`
	MaxLease      Duration `toml:"max-lease"`
	MaxStored     int      `toml:"max-stored"`
	MaxEventBytes int      `toml:"max-event-bytes"`
	// MaxRegistrations bounds live registrations.
	MaxRegistrations int `toml:"max-registrations"`
}

func (c *MailboxConfig) check() error {
	if c.MaxStored <= 0 {
		return djinn.Errorf(djinn.InvalidArgument, "mailbox max-stored %d: must be positive", c.MaxStored)
	}
	if err := positive("mailbox max-event-bytes", c.MaxEventBytes); err != nil {
		return err
	}
	if err := positive("mailbox max-registrations", c.MaxRegistrations); err != nil {
		return err
	}
	return leasePolicy("mailbox default-lease", "max-lease", c.DefaultLease, c.MaxLease)
}

// mailboxPart is the event mailbox (EM): registrations, which their
// creator owns, and the mailbox listeners, whose references are
// capabilities handed to event generators.
func mailboxPart(s *Server) *part {
	c := s.cfg.Mailbox
	var (
		st  *mailbox.State
		svc *mailbox.Service
	)
	return &part{
		name:    "mailbox",
		joins:   &joinKind{typ: service.EventMailboxType, title: "djinn event mailbox"},
		enabled: c.Enabled,
		state: func(m *state.Machine) error {
			st = mailbox.NewState(m.Leases, mailbox.DefaultMaxStored, m.ServiceID)
			return m.Add(st.Part())
		},
		open: func() (err error) {
			svc, err = mailbox.New(st, s.lessor, s.node, s.now, s.ref(MailboxID), s.mailboxConfig())
			return err
		},
		serve:   func(r *registrar) error { return serveMailbox(r, svc) },
		run:     func(ctx context.Context) { svc.Run(ctx) },
		serving: func() bool { return svc.Serving() },
		ref:     s.ref(MailboxID),
		status: func(resp *djinnpb.StatusResponse) {
			regs, events := st.Len()
			resp.Counts["mailbox_registrations"], resp.Counts["mailbox_stored_events"] = int64(regs), int64(events)
			if c.Enabled {
				resp.Mailbox = refProto(s.ref(MailboxID)())
			}
		},
		metrics: func() []prometheus.Collector { return mailboxMetrics(st, svc) },
		list:    map[string]lister{"mailboxes": func(f map[string]string) ([]*djinnpb.Resource, error) { return s.listMailboxes(st)(f) }},
		page: &page{title: "Event mailboxes", actions: drop(s), view: func(ctx context.Context, _ url.Values) (any, error) {
			return s.mailboxView(ctx, st, svc), nil
		}},
	}
}

// mailboxConfig is the mailbox core's configuration: the [mailbox]
// section, and delivery through the server's own connections.
func (s *Server) mailboxConfig() mailbox.Config {
	c := s.cfg.Mailbox
	return mailbox.Config{
		Lease:            lease.Policy{Default: time.Duration(c.DefaultLease), Max: time.Duration(c.MaxLease)},
		MaxStored:        c.MaxStored,
		MaxEventBytes:    c.MaxEventBytes,
		MaxRegistrations: c.MaxRegistrations,
		Delivery: event.Config{
			Sender: client.NewEventSender(s.pool), MaxBatch: 256,
			MinBackoff: 100 * time.Millisecond, MaxBackoff: 30 * time.Second,
		},
		Logger: s.log,
	}
}

// serveMailbox registers the mailbox's gRPC services: a registration is
// its creator's, a mailbox listener's reference is a capability.
func serveMailbox(r *registrar, svc *mailbox.Service) error {
	owns := owner(func(ctx context.Context, req interface{ GetRegistrationId() []byte }) error {
		id, err := regID(req.GetRegistrationId())
		if err != nil {
			return nil // the handler names the bad id
		}
		return svc.CheckOwner(ctx, id)
	})
	err := r.serve(&djinnpb.EventMailbox_ServiceDesc, &mailboxRPC{svc: svc}, Rules{
		"Register": authenticated, "GetRegistration": owns, "DisableDelivery": owns, "Ack": owns, "Deliveries": owns,
		"EnableDelivery": checking(owns, func(req *djinnpb.EnableDeliveryRequest) error { return svc.CheckTarget(req.GetTarget()) }),
		"Pull":           checking(owns, func(req *djinnpb.PullRequest) error { return mailbox.CheckPullBatch(int(req.GetMaxBatch())) }),
		"AddUnknownEvents": checking(owns, func(req *djinnpb.AddUnknownEventsRequest) error {
			return mailbox.CheckUnknownEvents(req.GetEvents())
		}),
	})
	if err != nil {
		return err
	}
	return r.serve(&djinnpb.EventListener_ServiceDesc, &listenerRPC{svc: svc}, Rules{
		"Notify":       checking(capability, func(req *djinnpb.NotifyRequest) error { return svc.CheckEvent(req.GetEvent()) }),
		"NotifyBatch":  checking(capability, func(req *djinnpb.NotifyBatchRequest) error { return mailbox.CheckNotifyBatch(req.GetEvents()) }),
		"StopDelivery": capability,
	})
}

func mailboxMetrics(st *mailbox.State, svc *mailbox.Service) []prometheus.Collector {
	return []prometheus.Collector{
		gauge("djinn_mailbox_registrations", "Mailbox registrations.", func() float64 { r, _ := st.Len(); return float64(r) }),
		gauge("djinn_mailbox_stored_events", "Events stored in mailboxes.", func() float64 { _, e := st.Len(); return float64(e) }),
		gauge("djinn_mailbox_delivery_streams", "Delivery streams open on this node.", func() float64 { return float64(svc.Streams.Load()) }),
		counter("djinn_mailbox_streamed_events_total", "Events sent over delivery streams by this node.", func() float64 { return float64(svc.StreamedEvents.Load()) }),
		counter("djinn_mailbox_refused_full_total", "Events refused because their registration held its maximum of stored events.", func() float64 { return float64(svc.RefusedFull.Load()) }),
		gauge("djinn_mailbox_delivery_queued_events", "Events queued for delivery on this leader.", func() float64 { return float64(svc.DeliveryStats().Queued) }),
		gauge("djinn_mailbox_delivery_queues", "Registrations with events queued for delivery on this leader.", func() float64 { return float64(svc.DeliveryStats().Queues) }),
		counter("djinn_mailbox_delivery_sends_total", "Delivery calls made to listeners by this node as leader.", func() float64 { return float64(svc.DeliveryStats().Sends) }),
		counter("djinn_mailbox_delivered_events_total", "Events delivered by this node as leader.", func() float64 { return float64(svc.DeliveryStats().Delivered) }),
		counter("djinn_mailbox_delivery_failed_events_total", "Events dropped by a definite failure or UnknownEvent, by this node as leader.", func() float64 { return float64(svc.DeliveryStats().Failed) }),
		counter("djinn_mailbox_delivery_retried_total", "Delivery rounds that failed indefinitely and were retried, by this node as leader.", func() float64 { return float64(svc.DeliveryStats().Retried) }),
		counter("djinn_mailbox_delivery_overflowed_events_total", "Events refused by a full delivery queue, by this node as leader.", func() float64 { return float64(svc.DeliveryStats().Overflowed) }),
	}
}

// mailboxView is the console's mailbox page: every registration with its
// stored events, delivery target and unknown events: those the reader
// sees (sees); the totals count every registration's.
func (s *Server) mailboxView(ctx context.Context, st *mailbox.State, svc *mailbox.Service) any {
	type reg struct {
		ID        string   `json:"id"`
		Lease     string   `json:"lease"`
		Principal string   `json:"principal"`
		Stored    int      `json:"stored"`
		Target    string   `json:"target"`
		State     string   `json:"state"`
		Unknown   []string `json:"unknown"`
		Expires   *int64   `json:"expires"`
	}
	v := struct {
		Now           int64  `json:"now"`
		Stored        int    `json:"stored"`
		Delivered     uint64 `json:"delivered"`
		Failed        uint64 `json:"failed"`
		Registrations []reg  `json:"registrations"`
	}{Now: s.nowMs(), Registrations: []reg{}}
	d := svc.DeliveryStats()
	v.Delivered, v.Failed = d.Delivered, d.Failed
	for _, r := range st.List() {
		v.Stored += r.Stored
		if len(v.Registrations) == maxListed || !sees(ctx, r.Principal) {
			continue
		}
		g := reg{ID: fingerprint(r.ID), Lease: fingerprint(r.Cookie), Principal: r.Principal, Stored: r.Stored, State: "disabled: events kept until pulled", Unknown: []string{}, Expires: s.expiresMs(r.Cookie)}
		if t := r.Target; t != nil {
			obj, _ := djinn.IDFromBytes("target", t.GetObjectId())
			g.Target, g.State = refString(t.GetEndpoint(), obj), "delivering"
		}
		for _, k := range r.Unknown {
			src, _ := djinn.IDFromBytes("source", k.GetSource().GetServiceId())
			g.Unknown = append(g.Unknown, fmt.Sprintf("%s event %d", refString(k.GetSource().GetEndpoint(), src), k.GetEventId()))
		}
		v.Registrations = append(v.Registrations, g)
	}
	return v
}

// mailboxRPC serves the EventMailbox service.
type mailboxRPC struct {
	djinnpb.UnimplementedEventMailboxServer
	svc *mailbox.Service
}

func regProto(r mailbox.Registration) *djinnpb.MailboxRegistration {
	// The reply, its listener and the ids they hold in one allocation.
	p := &struct {
		reg               djinnpb.MailboxRegistration
		listener          djinnpb.Ref
		id, service, lsnr djinn.ID
	}{id: r.ID, service: r.Listener.Service, lsnr: r.Listener.Object}
	p.listener = djinnpb.Ref{Endpoint: r.Listener.Endpoint, ServiceId: p.service[:], ObjectId: p.lsnr[:]}
	p.reg = djinnpb.MailboxRegistration{
		RegistrationId: p.id[:],
		Lease:          r.Lease,
		Listener:       &p.listener,
		Target:         r.Target,
		StoredEvents:   int64(r.Stored),
		UnknownEvents:  r.Unknown,
	}
	return &p.reg
}

func (m *mailboxRPC) Register(ctx context.Context, r *djinnpb.MailboxRegisterRequest) (*djinnpb.MailboxRegistration, error) {
	reg, err := m.svc.Register(ctx, time.Duration(r.GetLeaseDurationNanos()))
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
	reg, err := m.svc.Get(ctx, id)
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
	if err := m.svc.EnableDelivery(ctx, id, r.GetTarget()); err != nil {
		return nil, err
	}
	return &djinnpb.EnableDeliveryResponse{}, nil
}

func (m *mailboxRPC) DisableDelivery(ctx context.Context, r *djinnpb.MailboxRegistrationRequest) (*djinnpb.DisableDeliveryResponse, error) {
	id, err := regID(r.GetRegistrationId())
	if err != nil {
		return nil, err
	}
	if err := m.svc.DisableDelivery(ctx, id); err != nil {
		return nil, err
	}
	return &djinnpb.DisableDeliveryResponse{}, nil
}

func (m *mailboxRPC) Pull(r *djinnpb.PullRequest, stream djinnpb.EventMailbox_PullServer) error {
	id, err := regID(r.GetRegistrationId())
	if err != nil {
		return err
	}
	return m.svc.Pull(stream.Context(), id, r.GetAfterIndex(), int(r.GetMaxBatch()), func(events []mailbox.Stored) error {
		for len(events) > 0 {
			k := eventChunk(events)
			msg := &djinnpb.PullResponse{Events: make([]*djinnpb.StoredEvent, k)}
			for i, e := range events[:k] {
				msg.Events[i] = &djinnpb.StoredEvent{Index: e.Index, Event: e.Event}
			}
			if err := stream.Send(msg); err != nil {
				return err
			}
			events = events[k:]
		}
		return nil
	})
}

// Deliveries serves a delivery stream: its first message names the
// registration and opens the stream, and every message may acknowledge.
func (m *mailboxRPC) Deliveries(stream grpc.BidiStreamingServer[djinnpb.DeliveriesRequest, djinnpb.DeliveriesResponse]) error {
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return djinn.Errorf(djinn.InvalidArgument, "delivery stream ended before its first message: send the registration id to open it")
		}
		return err
	}
	if len(first.GetRegistrationId()) == 0 {
		return m.sharedDeliveries(stream, first)
	}
	id, err := regID(first.GetRegistrationId())
	if err != nil {
		return err
	}
	if len(first.GetAdd()) > 0 || len(first.GetAcks()) > 0 || len(first.GetRemove()) > 0 {
		return djinn.Errorf(djinn.InvalidArgument, "delivery stream of registration %s: add, acks and remove belong to a shared stream, whose first message names no registration_id", id)
	}
	open := mailbox.StreamOpen{After: first.GetAfterIndex(), Window: int(first.GetWindow()), MaxBatch: int(first.GetMaxBatch())}
	return m.svc.Deliveries(stream.Context(), id, open, &deliveryConn{stream: stream, id: id, first: first.GetAckThrough(), pending: true})
}

// deliveryConn is a delivery stream's transport over gRPC.
type deliveryConn struct {
	stream  grpc.BidiStreamingServer[djinnpb.DeliveriesRequest, djinnpb.DeliveriesResponse]
	id      djinn.ID
	first   uint64 // the first message's acknowledgement, given by the first Recv
	pending bool
}

func (c *deliveryConn) Recv() (uint64, error) {
	if c.pending {
		c.pending = false
		return c.first, nil
	}
	r, err := c.stream.Recv()
	if err != nil {
		return 0, err
	}
	switch {
	case len(r.GetRegistrationId()) > 0 && !bytes.Equal(r.GetRegistrationId(), c.id[:]):
		return 0, djinn.Errorf(djinn.InvalidArgument, "delivery stream of registration %s: a later message names registration %x; open a stream per registration", c.id, r.GetRegistrationId())
	case r.GetAfterIndex() != 0 || r.GetWindow() != 0 || r.GetMaxBatch() != 0:
		return 0, djinn.Errorf(djinn.InvalidArgument, "delivery stream: after_index, window and max_batch belong in the stream's first message; later ones only acknowledge")
	case len(r.GetAdd()) > 0 || len(r.GetAcks()) > 0 || len(r.GetRemove()) > 0:
		return 0, djinn.Errorf(djinn.InvalidArgument, "delivery stream of registration %s: add, acks and remove belong to a shared stream, whose first message names no registration_id", c.id)
	}
	return r.GetAckThrough(), nil
}

// Send sends events in order, in as many messages as eventMessageBytes
// needs (one, as a rule), the recorded acknowledgement with the last.
func (c *deliveryConn) Send(events []mailbox.Stored, recorded uint64) error {
	for {
		k := eventChunk(events)
		if k == len(events) {
			return c.send(events, recorded)
		}
		if err := c.send(events[:k], 0); err != nil {
			return err
		}
		events = events[k:]
	}
}

func (c *deliveryConn) send(events []mailbox.Stored, recorded uint64) error {
	msg := &djinnpb.DeliveriesResponse{AcknowledgedThrough: recorded, Events: make([]*djinnpb.StoredEvent, len(events))}
	// The events in one allocation, not one each.
	stored := make([]djinnpb.StoredEvent, len(events))
	for i, e := range events {
		stored[i].Index, stored[i].Event = e.Index, e.Event
		msg.Events[i] = &stored[i]
	}
	return c.stream.Send(msg)
}

func (m *mailboxRPC) Ack(ctx context.Context, r *djinnpb.AckRequest) (*djinnpb.AckResponse, error) {
	id, err := regID(r.GetRegistrationId())
	if err != nil {
		return nil, err
	}
	if err := m.svc.Ack(ctx, id, r.GetThroughIndex()); err != nil {
		return nil, err
	}
	return &djinnpb.AckResponse{}, nil
}

func (m *mailboxRPC) AddUnknownEvents(ctx context.Context, r *djinnpb.AddUnknownEventsRequest) (*djinnpb.AddUnknownEventsResponse, error) {
	id, err := regID(r.GetRegistrationId())
	if err != nil {
		return nil, err
	}
	if err := m.svc.AddUnknownEvents(ctx, id, r.GetEvents()); err != nil {
		return nil, err
	}
	return &djinnpb.AddUnknownEventsResponse{}, nil
}

// listenerRPC serves the mailbox listeners: every registration's listener
// is an object of this server's EventListener service.
type listenerRPC struct {
	djinnpb.UnimplementedEventListenerServer
	svc *mailbox.Service
}

// StopDelivery: the mailbox stores each event it is sent at once, so no
// delivery to one of its listeners is ever under way to stop. A listener
// id that names no live registration is NoSuchObject, as for Notify.
func (l *listenerRPC) StopDelivery(ctx context.Context, r *djinnpb.StopDeliveryRequest) (*djinnpb.StopDeliveryResponse, error) {
	id, err := djinn.IDFromBytes("listener id", r.GetListenerId())
	if err != nil {
		return nil, err
	}
	if err := l.svc.Listens(id); err != nil {
		return nil, err
	}
	return &djinnpb.StopDeliveryResponse{}, nil
}

func (l *listenerRPC) Notify(ctx context.Context, r *djinnpb.NotifyRequest) (*djinnpb.NotifyResponse, error) {
	id, err := djinn.IDFromBytes("listener id", r.GetListenerId())
	if err != nil {
		return nil, err
	}
	if err := l.svc.Notify(ctx, id, r.GetEvent()); err != nil {
		return nil, err
	}
	return &djinnpb.NotifyResponse{}, nil
}

func (l *listenerRPC) NotifyBatch(ctx context.Context, r *djinnpb.NotifyBatchRequest) (*djinnpb.NotifyBatchResponse, error) {
	id, err := djinn.IDFromBytes("listener id", r.GetListenerId())
	if err != nil {
		return nil, err
	}
	n, err := l.svc.NotifyBatch(ctx, id, r.GetEvents())
	if err != nil && n == 0 && len(r.GetEvents()) > 0 && djinn.KindOf(err) == djinn.Unavailable {
		return nil, err // nothing stored and worth retrying: a call error, so the leader hint travels
	}
	return &djinnpb.NotifyBatchResponse{Accepted: int32(n), Error: grpcerr.ToProto(callerError(ctx, err))}, nil
}

// listMailboxes lists the event mailbox's registrations.
func (s *Server) listMailboxes(st *mailbox.State) lister {
	return func(map[string]string) ([]*djinnpb.Resource, error) {
		var out []*djinnpb.Resource
		for _, in := range st.List() {
			d := map[string]string{"stored_events": itoa(in.Stored), "target": refText(in.Target)}
			if res, ok := s.leaseResource(in.ID.String(), in.Cookie, d); ok {
				res.Principal = in.Principal
				out = append(out, res)
			}
		}
		return out, nil
	}
}
