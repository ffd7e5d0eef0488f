package event

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// run is q's worker: it runs rounds until the queue is empty, dropped or the
// engine closed, then forgets the key and returns, its goroutine to the
// engine's idle workers.
func (e *Engine) run(q *queue) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for !q.dropped && !e.closed && len(q.items) > 0 {
		e.roundLocked(q)
	}
	e.removeLocked(q, 0, len(q.items))
	e.cancelLocked(q)
	if e.queues[q.key] == q {
		delete(e.queues, q.key)
	}
}

// roundLocked sends one batch from the head of q and deals with the answer:
// it reports what was accepted, asks what to do about a refused item and
// waits out the backoff of a retry. It is called and returns with e.mu
// held, and releases it around the Send, the callbacks and the wait.
func (e *Engine) roundLocked(q *queue) {
	gen := q.gen
	ctx, target, buf := e.startRoundLocked(q)
	n := len(buf)
	e.mu.Unlock()

	sent, called, err := e.send(ctx, target, buf)
	clear(buf)

	e.mu.Lock()
	if called {
		e.stats.Sends++
	}
	voided := q.gen != gen // retargeted, dropped or closed during the Send
	through := e.acceptLocked(q, sent, voided)
	failed := sent < n
	var head Item
	if failed {
		head = q.items[0]
	}
	e.mu.Unlock()

	if sent > 0 && e.cfg.OnDelivered != nil {
		e.cfg.OnDelivered(q.key, through)
	}
	action := Retry
	if failed && !voided {
		action = e.decide(q.key, head, err)
	}

	e.mu.Lock()
	q.inFlight = 0
	// An answer about a listener that was replaced meanwhile is ignored:
	// the next round goes to the new one at once.
	if failed && q.gen == gen {
		e.settleLocked(ctx, q, target, action)
	}
	q.busy = false
	e.idle.Broadcast()
}

// startRoundLocked marks q busy and gathers the events of its first
// MaxBatch items into q's buffer. It returns the round's context and
// target and the batch to send.
func (e *Engine) startRoundLocked(q *queue) (context.Context, djinn.Ref, []*djinnpb.RemoteEvent) {
	q.round++
	q.busy = true
	if q.ctx == nil {
		q.ctx, q.cancel = context.WithCancel(context.Background())
	}
	n := min(len(q.items), e.cfg.MaxBatch)
	q.inFlight = n
	buf := q.buf[:0]
	for _, it := range q.items[:n] {
		buf = append(buf, it.Event)
	}
	q.buf = buf
	return q.ctx, q.target, buf
}

// acceptLocked removes the sent items, accepted by the listener, from the
// head of q and counts them; it returns the cursor of the last one (0 when
// none was sent). A round that was not voided meanwhile starts q's retries
// afresh.
func (e *Engine) acceptLocked(q *queue, sent int, voided bool) (through uint64) {
	if sent == 0 {
		return 0
	}
	through = q.items[sent-1].Cursor
	e.removeLocked(q, 0, sent)
	q.inFlight -= sent
	e.stats.Delivered += uint64(sent)
	if !voided {
		q.attempt = 0
	}
	return through
}

// settleLocked does what action says about the item refused at the head of
// q: Skip drops it, Stop drops the whole queue, and Retry waits out the
// backoff (releasing e.mu meanwhile) — unless a Push replaced target by
// a new listener meanwhile, which is then tried at once.
func (e *Engine) settleLocked(ctx context.Context, q *queue, target djinn.Ref, action Action) {
	switch action {
	case Skip:
		e.removeLocked(q, 0, 1)
		e.stats.Failed++
		q.attempt = 0
	case Stop:
		e.stats.Failed += uint64(len(q.items))
		e.removeLocked(q, 0, len(q.items))
		q.attempt = 0
	default:
		e.stats.Retried++
		q.attempt++
		if q.target != target {
			return // a Push named a new listener meanwhile: try it now
		}
		q.waiting = true
		d := e.backoff(q.attempt)
		e.mu.Unlock()
		wait(ctx, d)
		e.mu.Lock()
		q.waiting = false
	}
}

// send sends events with the Sender, within the MaxInFlight bound, and
// normalises its answer: n in [0, len(events)], and err set when n is short.
// called reports whether the Sender was called at all: a cancelled wait for
// a MaxInFlight token does not call it.
func (e *Engine) send(ctx context.Context, target djinn.Ref, events []*djinnpb.RemoteEvent) (n int, called bool, err error) {
	if e.sem != nil {
		select {
		case e.sem <- struct{}{}:
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
		defer func() { <-e.sem }()
	}
	n, err = e.cfg.Sender.Send(ctx, target, events)
	if n >= len(events) {
		return len(events), true, nil
	}
	n = max(n, 0)
	if err == nil {
		err = djinn.Errorf(djinn.Internal, "event sender for %v accepted %d of %d events without an error", target, n, len(events))
	}
	return n, true, err
}

// decide returns what becomes of it after err.
func (e *Engine) decide(key djinn.ID, it Item, err error) Action {
	if e.cfg.OnFailure != nil {
		switch a := e.cfg.OnFailure(key, it, err); a {
		case Skip, Stop:
			return a
		}
		return Retry
	}
	if djinn.IsDefinite(err) {
		return Stop
	}
	return Retry
}

// backoff returns the wait before retry number attempt (from 1): a random
// duration in [d/2, d], d = MinBackoff·2^(attempt-1) capped at MaxBackoff.
func (e *Engine) backoff(attempt int) time.Duration {
	d, ceiling := e.cfg.MinBackoff, e.cfg.MaxBackoff
	for i := 1; i < attempt && d < ceiling; i++ {
		if d > ceiling/2 {
			d = ceiling
			break
		}
		d *= 2
	}
	d = min(d, ceiling)
	half := d / 2
	return half + rand.N(d-half+1)
}

// wait returns after d or when ctx is done, whichever is first.
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
