package client

import (
	"context"
	"sync"

	"github.com/djinn-go/djinn"
)

// maxStoppedEarly bounds the delivery ids a listener host remembers as
// stopped before their call arrived.
const maxStoppedEarly = 4096

// deliveries tracks the calls a listener host is handing to its listeners,
// by the delivery id their sender gave them, so that StopDelivery can stop
// one: the blocking disable and replacement of EM.4.1 need the sender to
// know when the listener has stopped, which cancelling its call cannot tell
// it (the cancellation reaches the listener later, on its own).
//
// The promise: once stop(id) returns, no event of that call is handed
// that had not begun to be handed. A handler already running for one of
// its events (the one that asked its mailbox to disable delivery, say)
// finishes, and sees its context end.
type deliveries struct {
	mu sync.Mutex
	// running holds the calls being handed, guarded by mu.
	running map[djinn.ID]*delivery
	// early holds the ids stopped before their call arrived (the stop
	// overtook it), oldest first in ring; guarded by mu.
	early  map[djinn.ID]bool
	ring   []djinn.ID
	oldest int
}

// delivery is one call being handed.
type delivery struct {
	id      djinn.ID
	cancel  context.CancelFunc
	stopped bool // guarded by deliveries.mu
}

// errStopped is what a stopped call answers: its sender gave up on it.
func errStopped(id djinn.ID) error {
	return djinn.Errorf(djinn.Unavailable, "delivery %s: stopped by its sender", id)
}

// deliveryID decodes a delivery id: 16 bytes, not all zero.
func deliveryID(b []byte) (djinn.ID, error) {
	id, err := djinn.IDFromBytes("delivery id", b)
	if err == nil && id.IsZero() {
		err = djinn.Errorf(djinn.InvalidArgument, "delivery id: all zero; draw 16 random bytes")
	}
	return id, err
}

// start begins tracking the call named by rawID (none: an untracked call,
// nil delivery) and returns the context its events are handed with. A call
// stopped before it arrived is refused.
func (ds *deliveries) start(ctx context.Context, rawID []byte) (context.Context, *delivery, error) {
	if len(rawID) == 0 {
		return ctx, nil, nil
	}
	id, err := deliveryID(rawID)
	if err != nil {
		return ctx, nil, err
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.early[id] {
		delete(ds.early, id)
		return ctx, nil, errStopped(id)
	}
	if _, dup := ds.running[id]; dup {
		return ctx, nil, djinn.Errorf(djinn.InvalidArgument, "delivery id %s: already in use by a call being handed", id)
	}
	if ds.running == nil {
		ds.running = map[djinn.ID]*delivery{}
	}
	var cancel context.CancelFunc
	if sc, ok := ctx.(*sessionCallContext); ok {
		cancel = sc.cancel // a session call's own context
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	d := &delivery{id: id, cancel: cancel}
	ds.running[id] = d
	return ctx, d, nil
}

// next reports whether the call's next event may be handed: not once it
// was stopped or its context ended. Deciding under the lock is what makes
// stop's promise hold.
func (ds *deliveries) next(ctx context.Context, d *delivery) error {
	if d == nil {
		return ctx.Err()
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d.stopped {
		return errStopped(d.id)
	}
	return ctx.Err()
}

// finish stops tracking a call.
func (ds *deliveries) finish(d *delivery) {
	if d == nil {
		return
	}
	d.cancel()
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.running[d.id] == d {
		delete(ds.running, d.id)
	}
}

// stop stops the call named id, or, if it has not arrived, refuses it
// when it does.
func (ds *deliveries) stop(id djinn.ID) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d, ok := ds.running[id]; ok {
		d.stopped = true
		d.cancel()
		return
	}
	if ds.early[id] {
		return
	}
	if ds.early == nil {
		ds.early = map[djinn.ID]bool{}
		ds.ring = make([]djinn.ID, maxStoppedEarly)
	}
	if old := ds.ring[ds.oldest]; !old.IsZero() {
		delete(ds.early, old)
	}
	ds.ring[ds.oldest] = id
	ds.oldest = (ds.oldest + 1) % len(ds.ring)
	ds.early[id] = true
}
