package client

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/backoff"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Mailbox is a client of an event mailbox service (EM.2): a store-and-forward
// agent that holds events for programs that are away.
type Mailbox struct {
	c   Connector
	ref djinn.Ref // where the mailbox is served (its endpoint)
}

// NewMailbox returns a client for the mailbox served at endpoint (and, when
// c follows the cluster endpoint is a member of, at any of its members).
func NewMailbox(c Connector, endpoint string) *Mailbox {
	return &Mailbox{c: c, ref: djinn.Ref{Endpoint: endpoint}}
}

// Mailbox returns a client for the mailbox of the cluster c is dialled to.
func (c *Client) Mailbox() *Mailbox {
	return &Mailbox{c: c, ref: djinn.Ref{Endpoint: c.addr, Service: c.ServiceID()}}
}

// client returns the mailbox's client at endpoint, in the cluster of
// service svc (zero: the cluster endpoint is a member of, if known).
func (m *Mailbox) client(endpoint string, svc djinn.ID) (djinnpb.EventMailboxClient, error) {
	if m.c == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "connector: missing")
	}
	if svc.IsZero() {
		svc = m.ref.Service
	}
	cc, err := ConnFor(m.c, djinn.Ref{Endpoint: endpoint, Service: svc})
	if err != nil {
		return nil, err
	}
	return djinnpb.NewEventMailboxClient(cc), nil
}

// MailboxRegistration is EM.4's registration: its lease, its mailbox
// listener (hand it to event generators), and delivery control.
type MailboxRegistration struct {
	m        *Mailbox
	endpoint string
	// ID names the registration at the mailbox; it is a capability.
	ID djinn.ID
	// Lease is the registration's lease: renew it, or the registration ends.
	Lease *Lease
	// Listener is the mailbox listener that stores events for this
	// registration. It is valid while the lease lives (EM.4.1).
	Listener djinn.Ref
	// Target is the delivery target when this was read (zero: disabled).
	Target djinn.Ref
	// Stored is how many events were stored when this was read.
	Stored int64
	// Unknown is the unknown-event list when this was read.
	Unknown []EventKey
}

// EventKey names a kind of event: a source and an event id.
type EventKey struct {
	Source djinn.Ref
	ID     int64
}

// Register creates a registration (EM.3). The duration must be positive or
// djinn.Any; the mailbox may grant less.
func (m *Mailbox) Register(ctx context.Context, d time.Duration) (*MailboxRegistration, error) {
	if d <= 0 && d != djinn.Any {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lease duration %s: must be positive or Any", djinn.FormatDuration(d))
	}
	mc, err := m.client(m.ref.Endpoint, m.ref.Service)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	pb, err := mc.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(d)})
	if err != nil {
		return nil, err
	}
	return m.fromProto(m.ref.Endpoint, pb, sent)
}

// Registration reads a registration by id: the way back to it after a
// restart, from its id alone.
func (m *Mailbox) Registration(ctx context.Context, id djinn.ID) (*MailboxRegistration, error) {
	mc, err := m.client(m.ref.Endpoint, m.ref.Service)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	pb, err := mc.GetRegistration(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: id[:]})
	if err != nil {
		return nil, err
	}
	return m.fromProto(m.ref.Endpoint, pb, sent)
}

func (m *Mailbox) fromProto(endpoint string, pb *djinnpb.MailboxRegistration, sent time.Time) (*MailboxRegistration, error) {
	id, err := djinn.IDFromBytes("registration id", pb.GetRegistrationId())
	if err != nil {
		return nil, err
	}
	l, err := LeaseFromProto(pb.GetLease(), sent)
	if err != nil {
		return nil, err
	}
	listener, err := RefFromProto("mailbox listener", pb.GetListener())
	if err != nil {
		return nil, err
	}
	r := &MailboxRegistration{m: m, endpoint: endpoint, ID: id, Lease: l, Listener: listener, Stored: pb.GetStoredEvents()}
	if pb.GetTarget() != nil {
		if r.Target, err = RefFromProto("target", pb.GetTarget()); err != nil {
			return nil, err
		}
	}
	for _, k := range pb.GetUnknownEvents() {
		src, err := RefFromProto("unknown event source", k.GetSource())
		if err != nil {
			return nil, err
		}
		r.Unknown = append(r.Unknown, EventKey{Source: src, ID: k.GetEventId()})
	}
	return r, nil
}

// EnableDelivery forwards stored and future events to target (EM.4.1),
// replacing any previous target, and supersedes a Pull of the registration
// (see Pull). It returns once delivery to the previous target has stopped:
// a listener hosted by this package is handed no event of the mailbox
// afterwards (one whose handler was running finishes; the others of its
// batch go to the new target). A mailbox listener of the same mailbox is
// refused. The zero Ref is no target: delivery stops, as with
// DisableDelivery (EM.4.1's null listener).
//
// Called from inside the old target's handler, pass a context that does not
// end with the handler's (context.WithoutCancel): the handler's context
// ends when the mailbox stops the batch in flight, before this returns.
func (r *MailboxRegistration) EnableDelivery(ctx context.Context, target djinn.Ref) error {
	mc, err := r.m.client(r.endpoint, r.Listener.Service)
	if err != nil {
		return err
	}
	var t *djinnpb.Ref
	if !target.IsZero() {
		t = RefToProto(target)
	}
	_, err = mc.EnableDelivery(ctx, &djinnpb.EnableDeliveryRequest{RegistrationId: r.ID[:], Target: t})
	return err
}

// DisableDelivery stops delivery (EM.4.1); events are stored meanwhile. It
// returns once delivery has stopped, as EnableDelivery does for the
// previous target: the target is handed nothing more afterwards, and is
// free to close.
func (r *MailboxRegistration) DisableDelivery(ctx context.Context) error {
	mc, err := r.m.client(r.endpoint, r.Listener.Service)
	if err != nil {
		return err
	}
	_, err = mc.DisableDelivery(ctx, &djinnpb.MailboxRegistrationRequest{RegistrationId: r.ID[:]})
	return err
}

// StoredEvent is an event held by the mailbox, with its arrival index.
type StoredEvent struct {
	Index uint64
	Event *RemoteEvent
}

// Pull streams stored events after index after, then new ones as they
// arrive, until ctx ends or the registration does; the sequence ends with
// the error that stopped it (nil when ctx ended; Unavailable, saying so,
// when the Client was closed). Pulled events stay stored until
// acknowledged with Ack, so a client can resume from the last index it
// processed.
//
// Pull follows the cluster as the other calls do: when its stream breaks
// Unavailable (the serving member went away, or the mailbox's leadership
// moved) it opens another, at the leader the member named or another
// member, after the last event it yielded, waiting longer between tries
// while none answers: nothing is lost, and no event comes twice within one
// Pull. Bound ctx to give up on a cluster that does not come back.
//
// Push and pull are exclusive, as in River's MailboxPullRegistration: one
// consumer takes a registration's events at a time, and a consumer that is
// superseded is told. Pull disables push delivery (it begins once the
// target is handed nothing more), and supersedes any earlier Pull of the
// registration; EnableDelivery to a target supersedes it too. A superseded
// Pull ends with an error matching djinn.ErrInvalidIterator; the events it
// received and did not acknowledge go to the new consumer. DisableDelivery
// leaves a Pull alone.
func (r *MailboxRegistration) Pull(ctx context.Context, after uint64) iter.Seq2[StoredEvent, error] {
	return func(yield func(StoredEvent, error) bool) {
		p := &puller{r: r, after: after, yield: yield}
		wait := backoff.New(50*time.Millisecond, 5*time.Second)
		for {
			err := p.stream(ctx, wait)
			if p.stopped || ended(ctx) {
				return
			}
			if !errors.Is(err, djinn.ErrUnavailable) || isClosed(err) {
				yield(StoredEvent{}, err)
				return
			}
			if !wait.Wait(ctx) {
				return
			}
		}
	}
}

// puller is one Pull's state.
type puller struct {
	r       *MailboxRegistration
	after   uint64 // the last index yielded
	yield   func(StoredEvent, error) bool
	stopped bool // the caller stopped, or an event did not decode
}

// stream runs one Pull stream, after the last event yielded, and yields
// what comes until the stream fails. A member that ends it for a leader
// elsewhere names the leader: the next stream goes there.
func (p *puller) stream(ctx context.Context, wait *backoff.Backoff) error {
	mc, err := p.r.m.client(p.r.endpoint, p.r.Listener.Service)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := mc.Pull(ctx, &djinnpb.PullRequest{RegistrationId: p.r.ID[:], AfterIndex: p.after})
	if err != nil {
		return err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			if leader := leaderOf(stream.Trailer()); leader != "" {
				noteLeader(p.r.m.c, djinn.Ref{Endpoint: p.r.endpoint, Service: p.r.Listener.Service}, leader)
			}
			return err
		}
		wait.Reset()
		for _, e := range msg.GetEvents() {
			if e.GetIndex() <= p.after {
				continue // sent before the stream broke
			}
			ev, err := RemoteEventFromProto(e.GetEvent())
			if err != nil {
				p.stopped = true
				p.yield(StoredEvent{}, err)
				return err
			}
			p.after = e.GetIndex()
			if !p.yield(StoredEvent{Index: e.GetIndex(), Event: ev}, nil) {
				p.stopped = true
				return nil
			}
		}
	}
}

// ended reports whether ctx has ended: done, or past its deadline. The
// second matters at the deadline itself: the server may end the call first,
// and gRPC then reports DEADLINE_EXCEEDED before ctx's own timer has fired.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// Ack forgets stored events through index.
func (r *MailboxRegistration) Ack(ctx context.Context, index uint64) error {
	mc, err := r.m.client(r.endpoint, r.Listener.Service)
	if err != nil {
		return err
	}
	_, err = mc.Ack(ctx, &djinnpb.AckRequest{RegistrationId: r.ID[:], ThroughIndex: index})
	return err
}

// AddUnknownEvents tells the mailbox this client wants no more of these
// kinds of events: generators get djinn.ErrUnknownEvent for them and stored
// ones are dropped (River's MailboxPullRegistration.addUnknownEvents).
func (r *MailboxRegistration) AddUnknownEvents(ctx context.Context, keys ...EventKey) error {
	mc, err := r.m.client(r.endpoint, r.Listener.Service)
	if err != nil {
		return err
	}
	req := &djinnpb.AddUnknownEventsRequest{RegistrationId: r.ID[:]}
	for _, k := range keys {
		req.Events = append(req.Events, &djinnpb.EventKey{Source: RefToProto(k.Source), EventId: k.ID})
	}
	_, err = mc.AddUnknownEvents(ctx, req)
	return err
}
