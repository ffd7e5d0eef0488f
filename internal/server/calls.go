package server

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/quota"
)

// callSlots bound the calls each principal has in flight on this server
// ([quota] calls-in-flight, DESIGN.md 7): its unary calls and the calls of
// all its sessions together, each counted from the moment it starts until
// its handler returns. Quotas bound what a principal holds; this bounds
// what it makes the server do at once, so that one principal's calls
// cannot keep tens of thousands of handlers runnable and proposals queued
// ahead of everyone else's (the scheduler and the proposer serve in
// arrival order).
//
// Past its bound, a principal's unary call is refused ResourceExhausted
// naming the quota (take), and a session stops reading the principal's
// calls until one of them ends (wait): the session's stream, which HTTP/2
// flow control bounds, is the queue, as it is for the session's own bound.
//
// It binds as [quota] does, under mutual TLS, and not for the peers (the
// cluster's own servers, whose calls carry every principal's work: one
// bound for all of them would let one principal starve the others
// through it). The operator role is not exempt: an operator is a
// principal like any other here, and may be given its own bound.
//
// The accounting is one map lookup and two atomic read-modify-writes a
// call (a compare-and-swap as it starts, an add as it ends, each beside
// an atomic load): a principal's count is an atomic in its entry, no lock
// is taken unless a session waits, and an entry is dropped as its last
// call ends (stored again by its next first one), so the map holds only
// the principals with calls in flight.
type callSlots struct {
	on    bool             // some principal has a bound
	limit int64            // each principal's, but for those in own; 0: none
	own   map[string]int64 // principals' own bounds ([quota.principals."cn:NAME"] calls-in-flight)

	held sync.Map // principal → *callCount: the principals with calls in flight

	waited  atomic.Uint64 // session calls that waited for a slot
	refused atomic.Uint64 // unary calls refused
}

// goneCount marks a callCount dropped from the map: it counts nothing
// more, and its principal's next call makes a new one.
const goneCount = math.MinInt64

// callCount is one principal's calls in flight, while it has some.
type callCount struct {
	principal string
	limit     int64
	n         atomic.Int64 // calls in flight; goneCount once dropped
	// waiting counts the session calls waiting for a slot, registered
	// before they look at n a last time, so that a call that ends (which
	// looks at waiting after lowering n) either leaves its slot to be
	// taken or hands it to a waiter: none waits while a slot is free.
	waiting atomic.Int64

	mu      sync.Mutex
	waiters []chan struct{} // guarded by mu: closed when given a slot, first come first
}

// configure sets the bounds of cfg.
func (cs *callSlots) configure(cfg Config) {
	cs.limit, cs.own = cfg.Quota.CallsInFlight, map[string]int64{}
	if !cfg.TLS.ClientAuth {
		return // every caller is the one local principal: no bound
	}
	cs.on = cs.limit > 0
	for p, qs := range cfg.Quota.Principals {
		if v, ok := qs[string(quota.CallsInFlight)]; ok {
			cs.own[p] = v
			cs.on = cs.on || v > 0
		}
	}
}

// count returns p's entry, made if p has none; nil when p has no bound.
func (cs *callSlots) count(p string) *callCount {
	if c, ok := cs.held.Load(p); ok {
		return c.(*callCount)
	}
	limit, ok := cs.own[p]
	if !ok {
		limit = cs.limit
	}
	if limit <= 0 || p == principal.Peer {
		return nil
	}
	c, _ := cs.held.LoadOrStore(p, &callCount{principal: p, limit: limit})
	return c.(*callCount)
}

// tryTake counts a call more, unless that passes the bound (full) or c
// was dropped (gone).
func (c *callCount) tryTake() (ok, gone bool) {
	for {
		n := c.n.Load()
		switch {
		case n < 0:
			return false, true
		case n >= c.limit:
			return false, false
		case c.n.CompareAndSwap(n, n+1):
			return true, false
		}
	}
}

// take counts a unary call of principal p, or refuses it past p's bound.
// The caller ends it with done (nil: p has no bound).
func (cs *callSlots) take(p string) (*callCount, error) {
	return cs.acquire(context.Background(), p, false)
}

// wait counts a session call of principal p, once p has a slot free; it
// gives up (taking nothing) when ctx ends. The caller ends the call with
// done (nil: p has no bound).
func (cs *callSlots) wait(ctx context.Context, p string) (*callCount, error) {
	return cs.acquire(ctx, p, true)
}

// acquire counts a call of principal p: past p's bound it waits for a
// slot until ctx ends (a session's call), or else refuses it (a unary
// call). nil: p has no bound.
func (cs *callSlots) acquire(ctx context.Context, p string, wait bool) (*callCount, error) {
	if !cs.on {
		return nil, nil
	}
	for {
		c := cs.count(p)
		if c == nil {
			return nil, nil
		}
		ok, gone := c.tryTake()
		if !ok && !gone {
			if !wait {
				cs.refused.Add(1)
				return nil, djinn.Errorf(djinn.ResourceExhausted, "quota %s: principal %q has %d calls in flight on this server, its limit; wait for some to end before making more (a session's calls wait instead), or ask an operator to raise [quota] %s",
					quota.CallsInFlight, p, c.limit, quota.CallsInFlight)
			}
			ok, gone = c.enqueue(ctx, cs)
		}
		if ok {
			return c, nil
		}
		if gone {
			cs.held.CompareAndDelete(p, c)
			continue
		}
		return nil, ctx.Err()
	}
}

// enqueue waits for a slot of c's: ok once it has one; gone when c was
// dropped before it waited (wait again on p's new entry); neither when
// ctx ended first.
func (c *callCount) enqueue(ctx context.Context, cs *callSlots) (ok, gone bool) {
	ready := make(chan struct{})
	c.mu.Lock()
	c.waiting.Add(1)
	if ok, gone = c.tryTake(); ok || gone {
		c.waiting.Add(-1)
		c.mu.Unlock()
		return ok, gone
	}
	c.waiters = append(c.waiters, ready)
	c.mu.Unlock()
	cs.waited.Add(1)
	select {
	case <-ready:
		return true, false
	case <-ctx.Done():
	}
	c.mu.Lock()
	if i := slices.Index(c.waiters, ready); i >= 0 {
		c.waiters = slices.Delete(c.waiters, i, i+1)
		c.waiting.Add(-1)
		c.mu.Unlock()
		return false, false
	}
	c.mu.Unlock()
	cs.done(c) // given a slot as ctx ended: not ours to keep
	return false, false
}

// done ends a call counted by take or wait (nil: not counted): its slot
// goes to a waiting session call, if any; the last call of a principal
// drops its entry.
func (cs *callSlots) done(c *callCount) {
	if c == nil {
		return
	}
	n := c.n.Add(-1)
	if c.waiting.Load() > 0 {
		c.handOn()
		n = c.n.Load()
	}
	if n == 0 && c.waiting.Load() == 0 && c.n.CompareAndSwap(0, goneCount) {
		cs.held.CompareAndDelete(c.principal, c)
	}
}

// handOn gives the slots free to waiting calls, first come first.
func (c *callCount) handOn() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.waiters) > 0 {
		if ok, _ := c.tryTake(); !ok {
			return // taken at once by another call, whose end hands it on
		}
		close(c.waiters[0])
		c.waiters = slices.Delete(c.waiters, 0, 1)
		c.waiting.Add(-1)
	}
}

// heldSlot is a call's place under its principal's bound, given back by
// its end or, earlier, by the handler (quota.Release) as it starts a wait
// that may last.
type heldSlot struct {
	cs *callSlots
	c  atomic.Pointer[callCount] // nil once given back
}

// hold returns the holder of slot c (nil when c is: not counted).
func (cs *callSlots) hold(c *callCount) *heldSlot {
	if c == nil {
		return nil
	}
	h := &heldSlot{cs: cs}
	h.c.Store(c)
	return h
}

// Release gives the place back, once.
func (h *heldSlot) Release() {
	if h == nil {
		return
	}
	if c := h.c.Swap(nil); c != nil {
		h.cs.done(c)
	}
}

// inFlight returns the calls in flight of the principals with a bound.
func (cs *callSlots) inFlight() int64 {
	var sum int64
	cs.held.Range(func(_, c any) bool {
		sum += max(c.(*callCount).n.Load(), 0)
		return true
	})
	return sum
}

// metrics are the bound's series.
func (cs *callSlots) metrics() []prometheus.Collector {
	return []prometheus.Collector{
		gauge("djinn_calls_in_flight", "Calls in flight on this node of the principals with a calls-in-flight quota, unary and in sessions.", func() float64 { return float64(cs.inFlight()) }),
		counter("djinn_calls_in_flight_waits_total", "Session calls that waited for a slot under their principal's calls-in-flight quota, their session not read meanwhile.", func() float64 { return float64(cs.waited.Load()) }),
		counter("djinn_calls_in_flight_refused_total", "Unary calls refused RESOURCE_EXHAUSTED over their principal's calls-in-flight quota (also in grpc_server_handled_total).", func() float64 { return float64(cs.refused.Load()) }),
	}
}
