package client

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// stopHarness hosts a listener and calls it over gRPC directly, so a test
// controls the delivery ids and never cancels a call: the sender's
// cancellation, which reaches a real listener at some later time, is left
// out, and only StopDelivery can stop a call.
type stopHarness struct {
	l  *Listener
	lc djinnpb.EventListenerClient
}

func newStopHarness(t *testing.T, fn NotifyFunc) *stopHarness {
	t.Helper()
	l := startListener(t, fn)
	p := NewPool()
	t.Cleanup(func() { p.Close() })
	cc, err := p.Conn(l.Ref().Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return &stopHarness{l: l, lc: djinnpb.NewEventListenerClient(cc)}
}

func (h *stopHarness) stop(t *testing.T, id djinn.ID) {
	t.Helper()
	obj := h.l.Ref().Object
	if _, err := h.lc.StopDelivery(context.Background(), &djinnpb.StopDeliveryRequest{ListenerId: obj[:], DeliveryId: id[:]}); err != nil {
		t.Errorf("stop delivery: %v", err)
	}
}

func (h *stopHarness) batch(t *testing.T, id djinn.ID, events ...*RemoteEvent) *djinnpb.NotifyBatchResponse {
	t.Helper()
	obj := h.l.Ref().Object
	req := &djinnpb.NotifyBatchRequest{ListenerId: obj[:], DeliveryId: id[:]}
	for _, ev := range events {
		req.Events = append(req.Events, ev.Proto())
	}
	resp, err := h.lc.NotifyBatch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// stopSeen is what a stopInFirstHandler harness's handler saw.
type stopSeen struct {
	mu        sync.Mutex
	handed    []int64 // the events handed, by sequence number
	sawCancel bool    // event 1's context had ended once it stopped delivery
}

// stopInFirstHandler is a harness whose handler records each event handed
// and, in event 1's, stops delivery id and records whether that ended its
// own context.
func stopInFirstHandler(t *testing.T, id djinn.ID) (*stopHarness, *stopSeen) {
	t.Helper()
	seen := &stopSeen{}
	var h *stopHarness
	h = newStopHarness(t, func(ctx context.Context, ev *RemoteEvent) error {
		seen.mu.Lock()
		seen.handed = append(seen.handed, ev.Seq)
		seen.mu.Unlock()
		if ev.Seq == 1 {
			h.stop(t, id)
			seen.mu.Lock()
			seen.sawCancel = ctx.Err() != nil
			seen.mu.Unlock()
		}
		return nil
	})
	return h, seen
}

// EM.4.1: a mailbox's disable or replacement returns once its delivery in
// flight has stopped; the listener host's part is StopDelivery. Stopped
// from inside the handler of a batch's first event (a client that disables
// delivery there and waits for it), the batch's later events are never
// handed.
func TestEM41StopDeliveryInsideTheHandlerHandsNoMoreOfTheBatch(t *testing.T) {
	id := djinn.NewID()
	h, seen := stopInFirstHandler(t, id)
	resp := h.batch(t, id, testEvent(1, ""), testEvent(2, ""), testEvent(3, ""))
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.handed) != 1 || seen.handed[0] != 1 {
		t.Fatalf("EM.4.1: events seen.handed after the batch was stopped in event 1's handler: %v, want [1]", seen.handed)
	}
	if !seen.sawCancel {
		t.Error("the running handler's context did not end when its batch was stopped")
	}
	if resp.GetAccepted() != 1 || resp.GetError() == nil {
		t.Errorf("stopped batch answered accepted %d, error %v; want 1 and an error", resp.GetAccepted(), resp.GetError())
	}
}

// EM.4.1: a stop that overtakes its call (the call arrives later) makes
// the listener refuse the call.
func TestEM41StopDeliveryBeforeTheCallArrivesRefusesIt(t *testing.T) {
	var rec recorder
	h := newStopHarness(t, rec.notify)
	id := djinn.NewID()
	h.stop(t, id)
	resp := h.batch(t, id, testEvent(1, ""))
	if resp.GetAccepted() != 0 || djinn.KindOf(errorFromProto(resp.GetError())) != djinn.Unavailable {
		t.Fatalf("a stopped call answered accepted %d, error %v; want 0 and unavailable", resp.GetAccepted(), resp.GetError())
	}
	if got := rec.events(); len(got) != 0 {
		t.Fatalf("a call stopped before it arrived handed %d events", len(got))
	}
	// Its id is forgotten once refused; a later call with a new id is
	// handed.
	if resp := h.batch(t, djinn.NewID(), testEvent(2, "")); resp.GetAccepted() != 1 {
		t.Fatalf("next call: accepted %d, error %v", resp.GetAccepted(), resp.GetError())
	}
}

func TestStopDeliveryArguments(t *testing.T) {
	var rec recorder
	h := newStopHarness(t, rec.notify)
	obj := h.l.Ref().Object
	for _, c := range []struct {
		name string
		id   []byte
	}{
		{"a delivery id of 3 bytes", []byte{1, 2, 3}},
		{"an all-zero delivery id", make([]byte, 16)},
	} {
		_, err := h.lc.StopDelivery(context.Background(), &djinnpb.StopDeliveryRequest{ListenerId: obj[:], DeliveryId: c.id})
		if djinn.KindOf(fromRPC(err)) != djinn.InvalidArgument {
			t.Errorf("stop with %s: %v, want invalid argument", c.name, err)
		}
		resp, err := h.lc.NotifyBatch(context.Background(), &djinnpb.NotifyBatchRequest{ListenerId: obj[:], DeliveryId: c.id, Events: []*djinnpb.RemoteEvent{testEvent(1, "").Proto()}})
		if err != nil || djinn.KindOf(errorFromProto(resp.GetError())) != djinn.InvalidArgument {
			t.Errorf("batch with %s: %v %v, want invalid argument", c.name, resp, err)
		}
	}
	if got := rec.events(); len(got) != 0 {
		t.Fatalf("calls with bad delivery ids handed %d events", len(got))
	}
}

// EM.4.1 in a session (the way a mailbox's delivery reaches a listener):
// the call's delivery takes the session call's context as its own, and a
// stop from inside the handler of a batch's first event still ends that
// handler's context and hands no more of the batch, while the next call
// in the same session is handed.
func TestEM41StopDeliveryInASession(t *testing.T) {
	id := djinn.NewID()
	h, seen := stopInFirstHandler(t, id)
	s := rawSession(t, h.l)
	obj := h.l.Ref().Object
	call := func(callID uint64, delivery djinn.ID, events ...*RemoteEvent) *djinnpb.SessionCall {
		req := &djinnpb.NotifyBatchRequest{ListenerId: obj[:], DeliveryId: delivery[:]}
		for _, ev := range events {
			req.Events = append(req.Events, ev.Proto())
		}
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		return &djinnpb.SessionCall{Id: callID, Method: djinnpb.EventListener_NotifyBatch_FullMethodName, Request: b}
	}
	answer := func(callID uint64) *djinnpb.NotifyBatchResponse {
		r := replies(t, s, 1)[callID]
		if err := replyErr(r); err != nil {
			t.Fatalf("call %d: %v", callID, err)
		}
		var resp djinnpb.NotifyBatchResponse
		if err := proto.Unmarshal(r.GetResponse(), &resp); err != nil {
			t.Fatal(err)
		}
		return &resp
	}
	if err := s.Send(&djinnpb.SessionRequest{Calls: []*djinnpb.SessionCall{call(1, id, testEvent(1, ""), testEvent(2, ""), testEvent(3, ""))}}); err != nil {
		t.Fatal(err)
	}
	if resp := answer(1); resp.GetAccepted() != 1 || djinn.KindOf(errorFromProto(resp.GetError())) != djinn.Unavailable {
		t.Errorf("stopped batch answered accepted %d, error %v; want 1 and unavailable", resp.GetAccepted(), resp.GetError())
	}
	if err := s.Send(&djinnpb.SessionRequest{Calls: []*djinnpb.SessionCall{call(2, djinn.NewID(), testEvent(4, ""))}}); err != nil {
		t.Fatal(err)
	}
	if resp := answer(2); resp.GetAccepted() != 1 || resp.GetError() != nil {
		t.Errorf("next call in the session: accepted %d, error %v; want 1", resp.GetAccepted(), resp.GetError())
	}
	seen.mu.Lock()
	defer seen.mu.Unlock()
	if len(seen.handed) != 2 || seen.handed[0] != 1 || seen.handed[1] != 4 {
		t.Errorf("EM.4.1: events seen.handed %v, want [1 4] (none of the stopped batch after its first)", seen.handed)
	}
	if !seen.sawCancel {
		t.Error("the running handler's context did not end when its batch was stopped")
	}
}
