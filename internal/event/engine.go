package event

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Item is one event to deliver. Cursor is an opaque, increasing position the
// caller uses to forget delivered items (for the mailbox, the stored event's
// index); the engine only compares cursors and hands them back.
type Item struct {
	Cursor uint64
	Event  *djinnpb.RemoteEvent
}

// Sender sends events, in order, to a listener.
//
// Send returns how many events from the front of events the listener
// accepted; when that is fewer than len(events), err explains why the next
// one was not. Send blocks until the listener answers or ctx is done, and it
// must return promptly once ctx is done: Retarget, Drop and Close wait for
// it. Send must not modify or keep the events slice after it returns (the
// engine reuses it) and must not modify the events, which the caller shares.
//
// Implementations must be safe for concurrent use with different targets.
// The engine never has two Sends in flight for the same key.
type Sender interface {
	Send(ctx context.Context, target djinn.Ref, events []*djinnpb.RemoteEvent) (int, error)
}

// Action is what becomes of an item whose delivery failed.
type Action int

const (
	// Retry sends the item again after a backoff.
	Retry Action = iota
	// Skip drops the item and goes on with the next one.
	Skip
	// Stop drops the key's whole queue; nothing more is sent for the key
	// until the next Push.
	Stop
)

func (a Action) String() string {
	switch a {
	case Retry:
		return "retry"
	case Skip:
		return "skip"
	case Stop:
		return "stop"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Config configures an Engine. Zero values get the defaults named below.
type Config struct {
	// Sender sends the events. Push fails while it is nil.
	Sender Sender
	// MaxQueue bounds the items queued per key (including those in flight).
	// A Push beyond it fails with an error of kind ResourceExhausted and
	// changes nothing. Zero or less means no bound.
	MaxQueue int
	// MaxBatch is the most events per Send. Zero or less means 64.
	MaxBatch int
	// MaxInFlight bounds the Sends in flight across all keys. Zero or less
	// means no bound.
	MaxInFlight int
	// MinBackoff and MaxBackoff bound the exponential backoff, with jitter,
	// between retries of a failing key. Zero or less means 100ms and 30s; a
	// MaxBackoff below MinBackoff is raised to MinBackoff.
	MinBackoff, MaxBackoff time.Duration
	// OnDelivered, if set, is called after each Send that the listener
	// accepted at least in part, with the cursor of the last accepted item.
	// It runs on the key's worker goroutine, so calls for one key are in
	// order; it must not block long, and must not call Retarget, Drop or
	// Close.
	OnDelivered func(key djinn.ID, through uint64)
	// OnFailure, if set, decides what a failed item does; it runs like
	// OnDelivered. When nil, indefinite failures (!djinn.IsDefinite(err))
	// are retried and definite ones stop the queue. An Action other than
	// Retry, Skip or Stop counts as Retry.
	OnFailure func(key djinn.ID, it Item, err error) Action
}

// Default configuration values.
const (
	DefaultMaxBatch   = 64
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// Stats are the engine's counters, for metrics. Counts of events are
// cumulative since New; Queues and Queued are current.
type Stats struct {
	Queues     int    // keys with items queued or in flight, one worker each
	Queued     int    // items queued or in flight
	Sends      uint64 // Send calls made
	Delivered  uint64 // items accepted by listeners
	Failed     uint64 // items given up by Skip or Stop
	Retried    uint64 // failed rounds that were retried after a backoff
	Overflowed uint64 // items refused by Push because their queue was full
}

// Engine delivers remote events. It is safe for concurrent use; see the
// package documentation for its design and invariants.
type Engine struct {
	cfg Config        // defaults applied; read-only after New
	sem chan struct{} // one token per Send in flight; nil without MaxInFlight

	mu sync.Mutex
	// The fields below are guarded by mu, as are the guarded fields of
	// every queue.
	queues map[djinn.ID]*queue
	closed bool
	stats  Stats     // Queues is computed by Stats
	idle   sync.Cond // broadcast (L is mu) whenever a round ends

	workers *pool[*queue] // runs each active queue's worker
}

// queue is one key's delivery state.
type queue struct {
	key djinn.ID

	// Guarded by Engine.mu.
	target   djinn.Ref
	items    []Item // head first; items[:inFlight] are being sent
	inFlight int
	busy     bool   // a round (Send, callbacks, backoff) is under way
	waiting  bool   // the round is in its backoff wait
	round    uint64 // rounds started, so waiters can tell rounds apart
	gen      uint64 // bumped by Retarget, Drop and Close to void a round
	dropped  bool   // Drop or Close: the worker must exit
	attempt  int    // consecutive failed rounds, for the backoff
	ctx      context.Context
	cancel   context.CancelFunc // cancels ctx; both nil until a round needs them

	// Owned by the worker.
	buf []*djinnpb.RemoteEvent
}

// New returns an engine that delivers with cfg.Sender. Close it to stop its
// goroutines.
func New(cfg Config) *Engine {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = cfg.MinBackoff
	}
	e := &Engine{cfg: cfg, queues: make(map[djinn.ID]*queue)}
	if cfg.MaxInFlight > 0 {
		e.sem = make(chan struct{}, cfg.MaxInFlight)
	}
	e.idle.L = &e.mu
	e.workers = newPool(e.run)
	return e
}

// Push appends items to key's queue and makes target the key's listener,
// starting the key's worker if it has none. A target that differs from the
// current one applies from the next Send on; unlike Retarget, Push does not
// cancel a Send in flight, but it does cut a backoff wait short.
//
// Push checks every item before it changes anything: the target must be
// set, every item must have an event, and cursors must increase, also with
// respect to the items already queued. A Push that would take the queue past
// MaxQueue fails with an error of kind ResourceExhausted. Pushing to a key
// whose queue was stopped starts it afresh.
func (e *Engine) Push(key djinn.ID, target djinn.Ref, items ...Item) error {
	if e.cfg.Sender == nil {
		return djinn.Errorf(djinn.Unsupported, "push for key %v: event engine has no sender", key)
	}
	if target.IsZero() {
		return djinn.Errorf(djinn.InvalidArgument, "push for key %v: target missing", key)
	}
	for i, it := range items {
		if it.Event == nil {
			return djinn.Errorf(djinn.InvalidArgument, "push for key %v: item %d (cursor %d): event missing", key, i, it.Cursor)
		}
		if i > 0 && it.Cursor <= items[i-1].Cursor {
			return djinn.Errorf(djinn.InvalidArgument, "push for key %v: cursor %d after %d: cursors must increase", key, it.Cursor, items[i-1].Cursor)
		}
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return djinn.Errorf(djinn.Unavailable, "push for key %v: event engine closed", key)
	}
	q := e.queues[key]
	if q != nil && len(items) > 0 && len(q.items) > 0 {
		if last := q.items[len(q.items)-1].Cursor; items[0].Cursor <= last {
			return djinn.Errorf(djinn.InvalidArgument, "push for key %v: cursor %d after queued %d: cursors must increase", key, items[0].Cursor, last)
		}
	}
	queued := 0
	if q != nil {
		queued = len(q.items)
	}
	if e.cfg.MaxQueue > 0 && queued+len(items) > e.cfg.MaxQueue {
		e.stats.Overflowed += uint64(len(items))
		return djinn.Errorf(djinn.ResourceExhausted, "event queue for key %v: %d queued and %d new events exceed the bound of %d", key, queued, len(items), e.cfg.MaxQueue)
	}
	if len(items) == 0 {
		if q != nil {
			e.setTargetLocked(q, target)
		}
		return nil
	}
	start := q == nil
	if start {
		q = &queue{key: key, target: target}
		e.queues[key] = q
	}
	e.setTargetLocked(q, target)
	q.items = append(q.items, items...)
	e.stats.Queued += len(items)
	if start {
		e.workers.start(q)
	}
	return nil
}

// setTargetLocked makes target q's listener for the next Send, waking the
// worker if it is waiting out a backoff meant for the old one.
func (e *Engine) setTargetLocked(q *queue, target djinn.Ref) {
	if q.target == target {
		return
	}
	q.target = target
	q.attempt = 0
	if q.waiting {
		e.cancelLocked(q)
	}
}

// Retarget makes target key's listener. If a Send to the old listener is in
// flight, Retarget cancels it and waits until it and the callbacks after it
// have returned (the blocking replacement of EM.4.1), so on return the old
// listener gets nothing more; the items it did not accept are then sent to
// the new target at once, without waiting out any backoff. Retarget does
// this even when target is the current listener.
//
// A zero target disables delivery: Retarget then does what Drop does.
// Retarget of a key with nothing queued does nothing, since the next Push
// names its target anyway.
func (e *Engine) Retarget(key djinn.ID, target djinn.Ref) {
	if target.IsZero() {
		e.Drop(key)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queues[key]
	if q == nil {
		return
	}
	q.target = target
	q.attempt = 0
	q.gen++
	e.cancelLocked(q)
	e.waitRoundLocked(q)
}

// Drop forgets key's queue. It cancels a Send in flight and waits until that
// Send and the callbacks after it have returned; once Drop returns, nothing
// more is sent and no callback is called for what was queued.
func (e *Engine) Drop(key djinn.ID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queues[key]
	if q == nil {
		return
	}
	delete(e.queues, key)
	q.dropped = true
	q.gen++
	e.removeLocked(q, q.inFlight, len(q.items))
	e.cancelLocked(q)
	e.waitRoundLocked(q)
}

// Discard removes the queued items of key for which match returns true.
// Items in flight are not offered to match. match runs with the engine's
// lock held and must not call the engine.
func (e *Engine) Discard(key djinn.ID, match func(Item) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queues[key]
	if q == nil {
		return
	}
	kept := q.inFlight
	for _, it := range q.items[q.inFlight:] {
		if !match(it) {
			q.items[kept] = it
			kept++
		}
	}
	e.removeLocked(q, kept, len(q.items))
	if len(q.items) == 0 && q.waiting {
		// Nothing left to retry: let the worker exit now.
		e.cancelLocked(q)
	}
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.Queues = len(e.queues)
	return s
}

// Close stops every worker, cancelling Sends in flight, and waits for them
// to exit. Queued items are forgotten. Push fails after Close; the other
// methods do nothing.
func (e *Engine) Close() {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		for _, q := range e.queues {
			q.dropped = true
			q.gen++
			e.cancelLocked(q)
		}
	}
	e.mu.Unlock()
	e.workers.stop()
}

// cancelLocked cancels q's context, ending a Send in flight or a backoff
// wait; the next round gets a fresh context.
func (e *Engine) cancelLocked(q *queue) {
	if q.cancel != nil {
		q.cancel()
		q.ctx, q.cancel = nil, nil
	}
}

// waitRoundLocked waits until the round under way, if any, has ended.
func (e *Engine) waitRoundLocked(q *queue) {
	r := q.round
	for q.busy && q.round == r {
		e.idle.Wait()
	}
}

// removeLocked removes q.items[i:j], keeping the order of the rest.
func (e *Engine) removeLocked(q *queue, i, j int) {
	if i >= j {
		return
	}
	n := len(q.items)
	if i == 0 && j == n {
		clear(q.items)
		q.items = nil
	} else if i == 0 {
		clear(q.items[:j])
		q.items = q.items[j:]
	} else {
		copy(q.items[i:], q.items[j:])
		clear(q.items[n-(j-i):])
		q.items = q.items[:n-(j-i)]
	}
	e.stats.Queued -= j - i
}
