package client

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Notify sends ev to the listener target (EV.2.3.1). The error carries the
// listener's kind: djinn.ErrUnknownEvent means it wants no more events of
// this kind, djinn.ErrNoSuchObject that it is gone, djinn.ErrUnavailable
// that it could not be reached (the event may or may not have arrived).
//
// When ctx ends before the listener answers, Notify asks the listener to
// stop the call (EventListener.StopDelivery) and waits up to five seconds
// for its answer, so that on return a listener hosted by this package (or
// any that serves StopDelivery) will not hand the event to its code if it
// had not begun to.
func Notify(ctx context.Context, c Connector, target djinn.Ref, ev *RemoteEvent) error {
	if ev == nil {
		return djinn.Errorf(djinn.InvalidArgument, "event: missing")
	}
	return notifyOne(ctx, c, target, ev.Proto())
}

func notifyOne(ctx context.Context, c Connector, target djinn.Ref, ev *djinnpb.RemoteEvent) error {
	cc, err := listenerConn(c, target)
	if err != nil {
		return err
	}
	call := newListenerCall(target)
	call.notify.ListenerId, call.notify.Event, call.notify.DeliveryId = call.listener[:], ev, call.delivery[:]
	err = cc.Invoke(ctx, djinnpb.EventListener_Notify_FullMethodName, &call.notify, &call.notified, call.opts[:]...)
	if err != nil && ctx.Err() != nil {
		stopDelivery(ctx, djinnpb.NewEventListenerClient(cc), target, call.delivery)
	}
	return fromRPC(err)
}

// listenerCall is what one call to a listener sends and receives, made in
// one allocation: a server delivers every event with such a call.
type listenerCall struct {
	listener, delivery djinn.ID
	opts               [1]grpc.CallOption

	notify   djinnpb.NotifyRequest
	notified djinnpb.NotifyResponse
	batch    djinnpb.NotifyBatchRequest
	batched  djinnpb.NotifyBatchResponse
}

// newListenerCall returns a call to target's listener under a new
// delivery id.
func newListenerCall(target djinn.Ref) *listenerCall {
	return &listenerCall{listener: target.Object, delivery: djinn.NewID(), opts: [1]grpc.CallOption{grpc.StaticMethod()}}
}

// stopTimeout bounds how long a sender that gave up on a call waits for
// the listener to confirm it stopped handing the call's events.
const stopTimeout = 5 * time.Second

// stopDelivery tells the listener to hand no more events of the call id,
// which the sender gave up on when ctx ended, and waits for its answer
// (at most stopTimeout): when it returns, a listener that serves
// StopDelivery hands none of the call's events that it had not begun to.
// One that does not serve it, or cannot be reached in time, may still hand
// them.
func stopDelivery(ctx context.Context, lc djinnpb.EventListenerClient, target djinn.Ref, id djinn.ID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	_, _ = lc.StopDelivery(ctx, &djinnpb.StopDeliveryRequest{ListenerId: target.Object[:], DeliveryId: id[:]})
}

// NotifyBatch sends events to the listener target in one call, in order, and
// returns how many, from the first, the listener took; the error says why the
// next was refused. A listener that does not serve batches gets the events
// one Notify at a time. When ctx ends first, the listener is asked to stop
// as for Notify: on return it hands no event of the batch it had not begun
// to hand.
func NotifyBatch(ctx context.Context, c Connector, target djinn.Ref, events []*RemoteEvent) (int, error) {
	pbs := make([]*djinnpb.RemoteEvent, len(events))
	for i, ev := range events {
		if ev == nil {
			return 0, djinn.Errorf(djinn.InvalidArgument, "event %d: missing", i)
		}
		pbs[i] = ev.Proto()
	}
	return sendEvents(ctx, c, target, pbs, nil)
}

// EventSender sends events over a Connector; a server's event delivery
// uses it. It remembers which endpoints do not serve NotifyBatch so it does
// not ask them again. It is safe for concurrent use.
type EventSender struct {
	c       Connector
	mu      sync.Mutex
	noBatch map[string]bool // guarded by mu: endpoints without NotifyBatch
}

// maxNoBatch bounds the endpoints an EventSender remembers.
const maxNoBatch = 4096

// NewEventSender returns an EventSender that connects through c.
func NewEventSender(c Connector) *EventSender {
	return &EventSender{c: c, noBatch: map[string]bool{}}
}

// Send delivers events to target in order and returns how many, from the
// first, were taken; the error (with the listener's kind) says why the next
// was refused or could not be sent. The events are not modified. When ctx
// ends first, Send stops the call at the listener as NotifyBatch does
// before it returns: what the event mailbox's blocking disable and
// replacement of a target rest on (EM.4.1).
func (s *EventSender) Send(ctx context.Context, target djinn.Ref, events []*djinnpb.RemoteEvent) (int, error) {
	return sendEvents(ctx, s.c, target, events, s)
}

func (s *EventSender) batches(endpoint string) bool {
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.noBatch[endpoint]
}

func (s *EventSender) markNoBatch(endpoint string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.noBatch) >= maxNoBatch {
		clear(s.noBatch)
	}
	s.noBatch[endpoint] = true
}

// sendEvents sends in one NotifyBatch, falling back to Notify one at a
// time when the listener answers that it does not serve batches; s (which
// may be nil) remembers that answer.
func sendEvents(ctx context.Context, c Connector, target djinn.Ref, events []*djinnpb.RemoteEvent, s *EventSender) (int, error) {
	if c == nil {
		return 0, djinn.Errorf(djinn.InvalidArgument, "connector: missing")
	}
	for i, ev := range events {
		if ev == nil {
			return 0, djinn.Errorf(djinn.InvalidArgument, "event %d: missing", i)
		}
	}
	if len(events) == 0 {
		return 0, nil
	}
	if len(events) > 1 && s.batches(target.Endpoint) {
		n, err := notifyBatch(ctx, c, target, events)
		if !isUnimplemented(err) {
			return n, err
		}
		s.markNoBatch(target.Endpoint)
	}
	for i, ev := range events {
		if err := notifyOne(ctx, c, target, ev); err != nil {
			return i, err
		}
	}
	return len(events), nil
}

func notifyBatch(ctx context.Context, c Connector, target djinn.Ref, events []*djinnpb.RemoteEvent) (int, error) {
	cc, err := listenerConn(c, target)
	if err != nil {
		return 0, err
	}
	call := newListenerCall(target)
	call.batch.ListenerId, call.batch.Events, call.batch.DeliveryId = call.listener[:], events, call.delivery[:]
	resp := &call.batched
	err = cc.Invoke(ctx, djinnpb.EventListener_NotifyBatch_FullMethodName, &call.batch, resp, call.opts[:]...)
	if err != nil {
		if ctx.Err() != nil {
			stopDelivery(ctx, djinnpb.NewEventListenerClient(cc), target, call.delivery)
		}
		return 0, fromRPC(err)
	}
	n := int(resp.GetAccepted())
	err = errorFromProto(resp.GetError())
	switch {
	case n < 0 || n > len(events):
		return 0, djinn.Errorf(djinn.Internal, "listener %s accepted %d of %d events", target.Endpoint, n, len(events))
	case n < len(events) && err == nil:
		return n, djinn.Errorf(djinn.Internal, "listener %s accepted %d of %d events without saying why",
			target.Endpoint, n, len(events))
	case n == len(events) && err != nil:
		return n, nil // everything was taken; the stray error concerns nothing
	}
	return n, err
}

// isUnimplemented reports whether err is gRPC's answer for a method the
// server does not serve, as opposed to a djinn Unsupported error from a
// handler (which carries a djinn error detail).
func isUnimplemented(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unimplemented {
		return false
	}
	for _, d := range st.Details() {
		if _, ok := d.(*djinnpb.Error); ok {
			return false
		}
	}
	return true
}

// listenerConn returns c's connection to a listener: its cluster's when the
// listener is a service of a cluster c follows (a mailbox's listener), the
// connection to its endpoint otherwise (a client's listener, which stays
// where it is).
func listenerConn(c Connector, target djinn.Ref) (*grpc.ClientConn, error) {
	switch c := c.(type) {
	case *Pool:
		return c.knownConn(target)
	case *Client:
		return c.pool.knownConn(target)
	}
	return c.Conn(target.Endpoint)
}
