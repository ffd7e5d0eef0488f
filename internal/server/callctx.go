package server

import (
	"container/heap"
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callCtx is a session call's context: the session's values, the call's
// deadline, and its end — when the call is answered or the client cancels
// it, when its session's stream ends, or at its deadline. It behaves as
// context.WithDeadline of the stream's context would (Err is Canceled or
// DeadlineExceeded, Deadline is the earlier of the call's and the
// stream's, Cause is Err, contexts made from it end with it), without a
// runtime timer per call and a child in the stream context's list: a
// session's deadlines share one timer (callDeadlines), and the stream's
// end reaches its calls through the session's list of calls in flight.
type callCtx struct {
	values   context.Context // the stream's context without its end: for Value only
	deadline time.Time       // zero: none
	at       int             // its index in its session's deadlines; -1: not there
	// held is its place under its principal's calls in flight (nil: not
	// counted), given back when it ends or as its handler starts to wait.
	held *heldSlot

	done  atomic.Value // chan struct{}: made by Done (under mu), closed at the end
	ended atomic.Bool  // set with err, at the end

	mu     sync.Mutex
	err    error                // guarded by mu: set at the end
	afters map[*func()]struct{} // guarded by mu: functions to run at the end
}

// closedDone is the Done channel of a context that ended before Done was
// asked for.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }
func (c *callCtx) Value(key any) any           { return c.values.Value(key) }

func (c *callCtx) Done() <-chan struct{} {
	if d := c.done.Load(); d != nil {
		return d.(chan struct{})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.done.Load()
	if d == nil {
		d = make(chan struct{})
		c.done.Store(d)
	}
	return d.(chan struct{})
}

func (c *callCtx) Err() error {
	if !c.ended.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc runs f in a goroutine of its own once c ends (at once if it
// has); stop keeps it from running, and reports whether it did. The
// context package uses it for contexts made from c.
func (c *callCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	if c.afters == nil {
		c.afters = map[*func()]struct{}{}
	}
	key := &f
	c.afters[key] = struct{}{}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, waiting := c.afters[key]
		delete(c.afters, key)
		return waiting
	}
}

// end ends c with err, unless it has ended.
func (c *callCtx) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	c.ended.Store(true)
	if d := c.done.Load(); d == nil {
		c.done.Store(closedDone)
	} else {
		close(d.(chan struct{}))
	}
	for f := range c.afters {
		go (*f)()
	}
	c.afters = nil
}

// callDeadlines are a session's calls with a deadline, earliest first, and
// the one timer that ends them.
type callDeadlines struct {
	mu      sync.Mutex
	calls   deadlineHeap // guarded by mu
	timer   *time.Timer  // guarded by mu: runs expire; nil until a deadline comes
	timerAt time.Time    // guarded by mu: when timer fires; zero: not armed
	stopped bool         // guarded by mu: the session is over
}

// add bounds c by its deadline.
func (d *callDeadlines) add(c *callCtx) {
	d.mu.Lock()
	defer d.mu.Unlock()
	heap.Push(&d.calls, c)
	if d.timerAt.IsZero() || c.deadline.Before(d.timerAt) {
		d.arm(c.deadline)
	}
}

// remove drops c, answered, from the deadlines.
func (d *callDeadlines) remove(c *callCtx) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c.at >= 0 {
		heap.Remove(&d.calls, c.at)
	}
}

// arm sets the timer for at; d.mu held.
func (d *callDeadlines) arm(at time.Time) {
	if d.stopped {
		return
	}
	d.timerAt = at
	if d.timer == nil {
		d.timer = time.AfterFunc(time.Until(at), d.expire)
		return
	}
	d.timer.Reset(time.Until(at))
}

// expire ends the calls whose deadline has come, and arms the timer for
// the next.
func (d *callDeadlines) expire() {
	d.mu.Lock()
	now := time.Now()
	var due []*callCtx
	for len(d.calls) > 0 && !d.calls[0].deadline.After(now) {
		due = append(due, heap.Pop(&d.calls).(*callCtx))
	}
	d.timerAt = time.Time{}
	if len(d.calls) > 0 {
		d.arm(d.calls[0].deadline)
	}
	d.mu.Unlock()
	for _, c := range due {
		c.end(context.DeadlineExceeded)
	}
}

// stop stops the timer: the session's calls are all answered.
func (d *callDeadlines) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if d.timer != nil {
		d.timer.Stop()
	}
}

// deadlineHeap orders calls by deadline (container/heap).
type deadlineHeap []*callCtx

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}
func (h *deadlineHeap) Push(x any) {
	c := x.(*callCtx)
	c.at = len(*h)
	*h = append(*h, c)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	c.at = -1
	return c
}
