package client

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/backoff"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// DeliveryOption tunes a delivery stream (Deliveries, Receive). A nil
// DeliveryOption is ignored.
type DeliveryOption func(*deliveryConfig)

type deliveryConfig struct {
	after, ack    uint64
	window, batch int
	alone         bool
}

// DeliverAfter starts the stream after an index: events with a larger
// one are sent (default 0: every stored event, which is every event not
// acknowledged).
func DeliverAfter(index uint64) DeliveryOption {
	return func(c *deliveryConfig) { c.after = index }
}

// DeliveryWindow bounds the events sent and not yet acknowledged (default
// 1024, taken also for 0; at most 65536): a client that falls behind holds
// the mailbox back by no more than this.
func DeliveryWindow(events int) DeliveryOption {
	return func(c *deliveryConfig) { c.window = events }
}

// DeliveryBatch bounds the events of one message (default 256, taken also
// for 0; at most 4096). A stream with a batch of its own is not shared.
func DeliveryBatch(events int) DeliveryOption {
	return func(c *deliveryConfig) { c.batch = events }
}

// DeliveryOwnStream opens a gRPC stream for this registration alone,
// instead of sharing the connection's delivery stream with the client's
// other registrations. Sharing costs nothing in behaviour; a stream of
// its own is for a registration that should not wait behind the others'
// messages on the connection.
func DeliveryOwnStream() DeliveryOption {
	return func(c *deliveryConfig) { c.alone = true }
}

func deliveryOptions(opts []DeliveryOption) (deliveryConfig, error) {
	var c deliveryConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case c.window < 0 || c.window > 65536:
		return c, djinn.Errorf(djinn.InvalidArgument, "delivery window %d: must be between 1 and 65536 (0 for the default 1024)", c.window)
	case c.batch < 0 || c.batch > 4096:
		return c, djinn.Errorf(djinn.InvalidArgument, "delivery batch %d: must be between 1 and 4096 (0 for the default 256)", c.batch)
	}
	return c, nil
}

// DeliveryStream is one delivery stream of a registration (the mailbox's
// Deliveries): the mailbox sends the stored events in arrival order, then
// each new one as it is stored; the client acknowledges on the same stream,
// and the mailbox forgets what is acknowledged. Delivery is at least once:
// a new stream starts after the last acknowledgement the mailbox recorded,
// so events received and not acknowledged come again, with the same index
// (and the sequence number their generator gave them), which tells a
// duplicate.
//
// A stream is a consumer of the registration as Pull is: opening one
// disables push delivery and supersedes the registration's earlier stream
// or Pull, and EnableDelivery to a target supersedes it; a superseded
// stream fails with an error matching djinn.ErrInvalidIterator.
//
// The streams of a client's registrations at one mailbox share one gRPC
// stream per connection unless DeliveryOwnStream or DeliveryBatch says
// otherwise: the mailbox packs the events of several registrations into
// one message, and their acknowledgements go back together. Each
// DeliveryStream still behaves as a stream of its own.
//
// Recv and Ack may be called at the same time, from two goroutines; Close
// not while Recv runs.
type DeliveryStream struct {
	r *MailboxRegistration
	// stream is the gRPC stream of this registration alone; member its
	// place on the connection's shared stream instead.
	stream djinnpb.EventMailbox_DeliveriesClient
	member *sharedMember
	ctx    context.Context
	cancel context.CancelFunc
	sendMu sync.Mutex
	acked  atomic.Uint64
}

// Deliveries opens a delivery stream of the registration. It ends when ctx
// does, when Close is called, or with an error from Recv: Unavailable when
// the mailbox's leadership moved (open another: the connection follows the
// cluster's leader), NoSuchObject when the registration ended.
func (r *MailboxRegistration) Deliveries(ctx context.Context, opts ...DeliveryOption) (*DeliveryStream, error) {
	cfg, err := deliveryOptions(opts)
	if err != nil {
		return nil, err
	}
	ref := djinn.Ref{Endpoint: r.endpoint, Service: r.Listener.Service}
	if ref.Service.IsZero() {
		ref.Service = r.m.ref.Service
	}
	cc, err := ConnFor(r.m.c, ref)
	if err != nil {
		return nil, err
	}
	if !cfg.alone && cfg.batch == 0 {
		if m := joinShared(r.m.c, ref, cc, r.ID, cfg); m != nil {
			stop := context.AfterFunc(ctx, m.leave)
			return &DeliveryStream{r: r, member: m, ctx: ctx, cancel: func() { stop(); m.leave() }}, nil
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := djinnpb.NewEventMailboxClient(cc).Deliveries(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &DeliveryStream{r: r, stream: stream, ctx: ctx, cancel: cancel}
	err = stream.Send(&djinnpb.DeliveriesRequest{
		RegistrationId: r.ID[:], AfterIndex: cfg.after, AckThrough: cfg.ack,
		Window: int32(cfg.window), MaxBatch: int32(cfg.batch),
	})
	if err != nil && !errors.Is(err, io.EOF) { // at io.EOF, Recv has the stream's status
		cancel()
		return nil, err
	}
	return s, nil
}

// Recv returns the next events, in arrival order, waiting for them. It
// returns io.EOF after Close, and the stream's error when it failed.
func (s *DeliveryStream) Recv() ([]StoredEvent, error) {
	for {
		events, acked, err := s.recv()
		if err != nil {
			return nil, err
		}
		if acked > s.acked.Load() {
			s.acked.Store(acked)
		}
		if len(events) == 0 {
			continue
		}
		out := make([]StoredEvent, len(events))
		for i, e := range events {
			ev, err := RemoteEventFromProto(e.GetEvent())
			if err != nil {
				s.cancel()
				return nil, err
			}
			out[i] = StoredEvent{Index: e.GetIndex(), Event: ev}
		}
		return out, nil
	}
}

// recv returns the next message's events and recorded acknowledgement.
func (s *DeliveryStream) recv() ([]*djinnpb.StoredEvent, uint64, error) {
	if s.member != nil {
		rd, err := s.member.next(s.ctx)
		if err != nil {
			s.cancel()
			return nil, 0, err
		}
		return rd.GetEvents(), rd.GetAcknowledgedThrough(), nil
	}
	msg, err := s.stream.Recv()
	if err != nil {
		return nil, 0, s.ended(err)
	}
	return msg.GetEvents(), msg.GetAcknowledgedThrough(), nil
}

// ended is the error a failed Recv reports; a server that moved its
// leadership names the new leader, and the next stream goes there.
func (s *DeliveryStream) ended(err error) error {
	defer s.cancel()
	if errors.Is(err, io.EOF) {
		return io.EOF
	}
	if leader := leaderOf(s.stream.Trailer()); leader != "" {
		noteLeader(s.r.m.c, djinn.Ref{Endpoint: s.r.endpoint, Service: s.r.Listener.Service}, leader)
	}
	return err
}

// Ack acknowledges every event through index: they are processed, and
// the mailbox may forget them. It is at most the last index received; a
// smaller one than before changes nothing. The mailbox records
// acknowledgements as they come, several at once when they come fast.
func (s *DeliveryStream) Ack(index uint64) error {
	if s.member != nil {
		return s.member.x.ack(s.member, index, false)
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	err := s.stream.Send(&djinnpb.DeliveriesRequest{AckThrough: index})
	if errors.Is(err, io.EOF) {
		return djinn.Errorf(djinn.Unavailable, "delivery stream: ended; Recv tells why")
	}
	return err
}

// Acknowledged returns the index through which the mailbox has recorded
// acknowledgements: those events are forgotten, and no later stream sends
// them.
func (s *DeliveryStream) Acknowledged() uint64 { return s.acked.Load() }

// Close ends the stream once the mailbox has recorded the
// acknowledgements it received; events that arrive meanwhile are not
// returned (they come again on the next stream). It returns nil, or the
// stream's error.
func (s *DeliveryStream) Close() error {
	defer s.cancel()
	if s.member != nil {
		// When the member has already ended, drain says how.
		_ = s.member.x.ack(s.member, 0, true)
		return s.drain()
	}
	s.sendMu.Lock()
	err := s.stream.CloseSend()
	s.sendMu.Unlock()
	if err != nil {
		return err
	}
	return s.drain()
}

// drain receives until the stream ends: nil when it ended as closed.
func (s *DeliveryStream) drain() error {
	for {
		_, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Receive hands the registration's events to handle, in arrival order,
// one at a time, over a delivery stream it keeps open, and acknowledges
// each event once handle returns nil for it. When the stream breaks or the
// mailbox's leadership moves, it opens another, after the last event
// handled: nothing is lost, and no event handle took comes again within
// one Receive (a new Receive may see, once more, events handled just before
// the last one stopped, with the same index).
//
// handle returning ErrStopReceiving (or an error matching it) ends Receive
// once the event is acknowledged and the acknowledgement recorded; Receive
// then returns nil.
//
// handle returning an error matching djinn.ErrUnknownEvent adds the
// event's kind (source and event id) to the registration's unknown-event
// list, as a target's UnknownEvent would: the mailbox refuses further
// events of that kind, and Receive skips those it already holds. Any other
// error from handle stops Receive, which returns it; that event is not
// acknowledged.
//
// Receive returns nil when ctx ends, or the error that stopped it: that
// of handle, djinn.ErrInvalidIterator when another consumer took over the
// registration, djinn.ErrNoSuchObject when the registration ended,
// djinn.ErrUnavailable saying so when the Client was closed.
func (r *MailboxRegistration) Receive(ctx context.Context, handle func(context.Context, StoredEvent) error, opts ...DeliveryOption) error {
	if handle == nil {
		return djinn.Errorf(djinn.InvalidArgument, "receive handler: missing (nil)")
	}
	cfg, err := deliveryOptions(opts)
	if err != nil {
		return err
	}
	rc := &receiver{r: r, cfg: cfg, handle: handle, handled: cfg.after, unknown: map[unknownKind]bool{}}
	wait := backoff.New(50*time.Millisecond, 5*time.Second)
	for {
		err := rc.stream(ctx, wait)
		if errors.Is(err, ErrStopReceiving) {
			return rc.stopped(ctx)
		}
		if ended(ctx) {
			return nil
		}
		if !errors.Is(err, djinn.ErrUnavailable) || isClosed(err) {
			return err
		}
		if !wait.Wait(ctx) {
			return nil
		}
	}
}

// ErrStopReceiving, returned by Receive's handler, ends Receive after that
// event, acknowledged.
var ErrStopReceiving = errors.New("stop receiving")

// receiver is one Receive's state.
type receiver struct {
	r       *MailboxRegistration
	cfg     deliveryConfig
	handle  func(context.Context, StoredEvent) error
	handled uint64 // the last index handled
	unknown map[unknownKind]bool
	// closeErr is why the last stream did not close cleanly: its
	// acknowledgements may not be recorded.
	closeErr error
}

// stopped ends a Receive its handler stopped: the events handled are
// acknowledged, on the stream or, if it did not close cleanly, by a call.
func (rc *receiver) stopped(ctx context.Context) error {
	if rc.closeErr == nil {
		return nil
	}
	return rc.r.Ack(ctx, rc.handled)
}

type unknownKind struct {
	service, object djinn.ID
	id              int64
}

// stream runs one delivery stream: it opens after the last event handled,
// acknowledging it, and handles what comes until the stream fails.
func (rc *receiver) stream(ctx context.Context, wait *backoff.Backoff) error {
	cfg := rc.cfg
	cfg.after, cfg.ack = rc.handled, rc.handled
	s, err := rc.r.Deliveries(ctx, func(c *deliveryConfig) { *c = cfg })
	if err != nil {
		return err
	}
	defer s.cancel()
	for {
		events, err := s.Recv()
		if err != nil {
			return err
		}
		wait.Reset()
		for _, e := range events {
			if err := rc.take(ctx, e); err != nil {
				if rc.handled > 0 {
					_ = s.Ack(rc.handled)
				}
				rc.closeErr = s.Close()
				return err
			}
		}
		if err := s.Ack(rc.handled); err != nil {
			return err
		}
	}
}

// take hands one event to handle, unless it is of a kind handle refused.
func (rc *receiver) take(ctx context.Context, e StoredEvent) error {
	k := unknownKind{e.Event.Source.Service, e.Event.Source.Object, e.Event.ID}
	if e.Index <= rc.handled || rc.unknown[k] {
		rc.handled = max(rc.handled, e.Index)
		return nil
	}
	if err := rc.handle(ctx, e); err != nil {
		if errors.Is(err, ErrStopReceiving) {
			rc.handled = e.Index
			return err
		}
		if !errors.Is(err, djinn.ErrUnknownEvent) {
			return err
		}
		if err := rc.r.AddUnknownEvents(ctx, EventKey{Source: e.Event.Source, ID: e.Event.ID}); err != nil {
			return err
		}
		rc.unknown[k] = true
	}
	rc.handled = e.Index
	return nil
}
