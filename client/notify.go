package client

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Notify sends ev to the listener target (EV.2.3.1). The error carries the
// listener's kind: djinn.ErrUnknownEvent means it wants no more events of
// this kind, djinn.ErrNoSuchObject that it is gone, djinn.ErrUnavailable
// that it could not be reached (the event may or may not have arrived).
func Notify(ctx context.Context, c Connector, target djinn.Ref, ev *RemoteEvent) error {
	if ev == nil {
		return djinn.Errorf(djinn.InvalidArgument, "event: missing")
	}
	return notifyOne(ctx, c, target, ev.Proto())
}

func notifyOne(ctx context.Context, c Connector, target djinn.Ref, ev *djinnpb.RemoteEvent) error {
	cc, err := c.Conn(target.Endpoint)
	if err != nil {
		return err
	}
	_, err = djinnpb.NewEventListenerClient(cc).Notify(ctx, &djinnpb.NotifyRequest{ListenerId: target.Object[:], Event: ev})
	return fromRPC(err)
}

// NotifyBatch sends events to the listener target in one call, in order, and
// returns how many, from the first, the listener took; the error says why the
// next was refused. A listener that does not serve batches gets the events
// one Notify at a time.
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
// was refused or could not be sent. The events are not modified.
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
	cc, err := c.Conn(target.Endpoint)
	if err != nil {
		return 0, err
	}
	resp, err := djinnpb.NewEventListenerClient(cc).NotifyBatch(ctx,
		&djinnpb.NotifyBatchRequest{ListenerId: target.Object[:], Events: events})
	if err != nil {
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
