package lookup

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/backoff"
	"github.com/djinn-go/djinn/service"
)

// LookupCache holds the services matching a template that a filter accepts,
// as the lookup services a ServiceDiscoveryManager discovers have them, and
// follows their changes (Jini's LookupCache). See the package doc for how
// it keeps up. Its methods are safe for concurrent use.
//
// A service is one entry however many lookup services have it: it is added
// when the first has it (and the filter accepts it), changed when its item
// changes, removed when the last loses it (or the filter refuses it).
// Listeners hear of these changes one at a time, in order, from the cache's
// goroutine.
type LookupCache struct {
	sdm     *ServiceDiscoveryManager
	tmpl    service.Template
	filter  ItemFilter
	log     *slog.Logger
	lis     *client.Listener // this cache's event listener, on the manager's server
	renewer *client.Renewer  // keeps the event registrations' leases

	ctx      context.Context // cancelled by Terminate; owned, never a caller's
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the loop and the workers
	done     chan struct{}
	termOnce sync.Once

	in inbox // work for the loop, in order

	// Owned by the loop goroutine.
	regs     map[djinn.ID]*cacheReg // by registrar service id
	services map[djinn.ID]*cached   // by service id: every service some registrar has
	gen      uint64                 // the last generation given to a worker

	resyncs atomic.Int64 // lookups made again after events were lost (for tests)

	mu           sync.Mutex
	view         map[djinn.ID]service.Item  // guarded by mu: the services the filter accepts
	listeners    map[uint64]*listening      // guarded by mu
	nextListener uint64                     // guarded by mu
	gens         map[djinn.ID]genInfo       // guarded by mu: each registrar's event registration, for notify
	leases       map[djinn.ID]*client.Lease // guarded by mu: event registration leases held, by cookie
	changed      chan struct{}              // guarded by mu: closed and replaced when view changes; closed by Terminate
	terminated   bool                       // guarded by mu
}

// listening is a listener of the cache; it hears changes once active,
// after it heard of the services the cache held when it was added.
type listening struct {
	l      ServiceDiscoveryListener
	active bool
}

// genInfo is what notify checks an event against: the generation of the
// registrar's current event registration (in the handback) and, once
// Notify answered, its event id.
type genInfo struct {
	gen     uint64
	eventID int64
	haveID  bool
}

// cacheReg is one registrar as the cache follows it. The loop owns it; a
// worker goroutine per generation makes the registrar's calls and posts
// their results to the loop.
type cacheReg struct {
	reg     *registrar
	gen     uint64
	cancel  context.CancelFunc        // stops the worker
	resync  chan struct{}             // buffered 1: asks the worker to look up again
	er      *client.EventRegistration // nil until Notify answered
	lastSeq int64                     // the sequence number of the last event applied
	syncing bool                      // a lookup is under way: events wait in pending
	again   bool                      // look up once more when the lookup under way is applied
	pending []*client.ServiceEvent
	items   map[djinn.ID]service.Item // the matching items this registrar has, as far as is known
}

// cached is a service some registrar has.
type cached struct {
	item    service.Item
	visible bool // the filter accepts it: it is in view and listeners know of it
}

// inbox is an unbounded queue of work for the loop: pushing never blocks,
// so neither the event listener nor the manager waits for a slow cache.
type inbox struct {
	mu   sync.Mutex
	fs   []func() // guarded by mu
	wake chan struct{}
}

func (b *inbox) push(f func()) {
	b.mu.Lock()
	b.fs = append(b.fs, f)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *inbox) take() []func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	fs := b.fs
	b.fs = nil
	return fs
}

// newLookupCache makes a cache and starts its loop; m.mu is held.
func newLookupCache(m *ServiceDiscoveryManager, tmpl service.Template, filter ItemFilter, listener ServiceDiscoveryListener) (*LookupCache, error) {
	if err := checkTemplate(tmpl); err != nil {
		return nil, err
	}
	c := &LookupCache{
		sdm: m, tmpl: tmpl.Clone(), filter: filter, log: m.base.With("part", "lookup cache"),
		done: make(chan struct{}), in: inbox{wake: make(chan struct{}, 1)},
		regs: map[djinn.ID]*cacheReg{}, services: map[djinn.ID]*cached{},
		view: map[djinn.ID]service.Item{}, listeners: map[uint64]*listening{},
		gens: map[djinn.ID]genInfo{}, leases: map[djinn.ID]*client.Lease{}, changed: make(chan struct{}),
	}
	if listener != nil {
		c.nextListener++
		c.listeners[c.nextListener] = &listening{l: listener, active: true}
	}
	var err error
	if c.lis, err = m.host.AddListener(c.notify); err != nil {
		return nil, err
	}
	c.renewer, err = client.NewRenewer(m.pool, client.WithFailureHandler(c.renewalFailed),
		client.WithRenewDuration(m.cfg.LeaseDuration), client.WithRetryBackoff(m.cfg.RetryMin, m.cfg.RetryMax))
	if err != nil {
		c.lis.Close()
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(1)
	go c.run()
	return c, nil
}

// run is the loop: it does the cache's work in order, one thing at a time.
func (c *LookupCache) run() {
	defer c.wg.Done()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.in.wake:
		}
		for _, f := range c.in.take() {
			if c.ctx.Err() != nil {
				return
			}
			f()
		}
	}
}

// attach follows r (newly discovered, or at a new endpoint).
func (c *LookupCache) attach(r *registrar) { c.in.push(func() { c.attached(r) }) }

// detach stops following r (discarded).
func (c *LookupCache) detach(r *registrar) { c.in.push(func() { c.detached(r) }) }

func (c *LookupCache) attached(r *registrar) {
	id := r.info.ServiceID
	cr := c.regs[id]
	switch {
	case cr != nil && cr.reg == r:
		return
	case cr != nil:
		c.stop(cr) // the same registrar at another endpoint: its items stand until looked up there
	default:
		cr = &cacheReg{items: map[djinn.ID]service.Item{}}
		c.regs[id] = cr
	}
	cr.reg = r
	c.start(cr)
}

func (c *LookupCache) detached(r *registrar) {
	id := r.info.ServiceID
	cr := c.regs[id]
	if cr == nil || cr.reg != r {
		return
	}
	c.stop(cr)
	delete(c.regs, id)
	c.mu.Lock()
	delete(c.gens, id)
	c.mu.Unlock()
	for _, sid := range sortedIDs(cr.items) {
		c.update(sid, nil)
	}
}

// start starts a worker for cr under a new generation: a new event
// registration and a lookup. The items cr has stand until the lookup
// answers, so that a new registration reports only real changes.
func (c *LookupCache) start(cr *cacheReg) {
	c.gen++
	cr.gen, cr.er, cr.lastSeq, cr.syncing, cr.again, cr.pending = c.gen, nil, 0, true, false, nil
	cr.resync = make(chan struct{}, 1)
	c.mu.Lock()
	c.gens[cr.reg.info.ServiceID] = genInfo{gen: cr.gen}
	c.mu.Unlock()
	ctx, cancel := context.WithCancel(c.ctx)
	cr.cancel = cancel
	c.wg.Add(1) // the loop holds a count: Terminate's Wait cannot have seen zero
	go c.work(ctx, cr.reg, cr.gen, cr.resync)
}

// stop stops cr's worker and lets its event registration lapse (a
// registrar that still sends events hears djinn.ErrUnknownEvent and ends
// it).
func (c *LookupCache) stop(cr *cacheReg) {
	cr.cancel()
	if cr.er != nil {
		c.release(cr.er.Lease)
		cr.er = nil
	}
}

// current returns the registrar r is, if it is followed under generation
// gen; nil for work of a worker since stopped.
func (c *LookupCache) current(id djinn.ID, r *registrar, gen uint64) *cacheReg {
	cr := c.regs[id]
	if cr == nil || cr.gen != gen || (r != nil && cr.reg != r) {
		return nil
	}
	return cr
}

// work registers the cache's interest at r and looks up what r has, then
// looks up again each time the loop asks, until ctx ends. Results go to the
// loop.
func (c *LookupCache) work(ctx context.Context, r *registrar, gen uint64, resync <-chan struct{}) {
	defer c.wg.Done()
	select {
	case <-ctx.Done():
		return
	case <-r.ready:
	}
	id := r.info.ServiceID
	log := c.log.With("registrar", id, "endpoint", r.info.Endpoint)
	b := backoff.New(c.sdm.cfg.RetryMin, c.sdm.cfg.RetryMax)
	var er *client.EventRegistration
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		var err error
		er, err = r.r.Notify(cctx, c.tmpl, client.AllTransitions, c.lis.Ref(), handback(id, gen), c.sdm.cfg.LeaseDuration)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn("cannot register for service events; retrying", "err", err)
		if !b.Wait(ctx) {
			return
		}
	}
	if !c.hold(er.Lease) {
		_ = cancelLeases(c.sdm.pool, []*client.Lease{er.Lease})
		return
	}
	c.in.push(func() { c.notified(id, r, gen, er) })
	for {
		b.Reset()
		for {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			_, items, err := r.r.LookupN(cctx, c.tmpl, math.MaxInt32)
			cancel()
			if err == nil {
				c.in.push(func() { c.snapshot(id, r, gen, items) })
				break
			}
			if ctx.Err() != nil {
				return
			}
			log.Warn("lookup failed; retrying", "err", err)
			if !b.Wait(ctx) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-resync:
		}
	}
}

// hold records an event registration lease for Terminate to cancel; it
// reports false when the cache is terminated already.
func (c *LookupCache) hold(l *client.Lease) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.terminated {
		return false
	}
	c.leases[l.Cookie()] = l
	return true
}

// release forgets an event registration lease: it is not renewed any more.
func (c *LookupCache) release(l *client.Lease) {
	c.mu.Lock()
	delete(c.leases, l.Cookie())
	c.mu.Unlock()
	_ = c.renewer.Remove(l)
}

// notified takes the event registration a worker made.
func (c *LookupCache) notified(id djinn.ID, r *registrar, gen uint64, er *client.EventRegistration) {
	cr := c.current(id, r, gen)
	if cr == nil {
		c.release(er.Lease)
		return
	}
	cr.er, cr.lastSeq = er, er.Seq
	c.mu.Lock()
	c.gens[id] = genInfo{gen: gen, eventID: er.ID, haveID: true}
	c.mu.Unlock()
	_ = c.renewer.Renew(er.Lease, djinn.EndOfTime) // fails only when terminating
}

// snapshot applies what a lookup at a registrar returned, then the events
// that arrived meanwhile, in order. Events are applied after the lookup
// whatever its moment: each carries the item as it became, so the last
// word on every item is the registrar's latest.
func (c *LookupCache) snapshot(id djinn.ID, r *registrar, gen uint64, items []service.Item) {
	cr := c.current(id, r, gen)
	if cr == nil {
		return
	}
	old := cr.items
	cr.items = make(map[djinn.ID]service.Item, len(items))
	for _, it := range items {
		cr.items[it.ID] = it
	}
	ids := slices.Collect(maps.Keys(cr.items))
	for sid := range old {
		if _, ok := cr.items[sid]; !ok {
			ids = append(ids, sid)
		}
	}
	slices.SortFunc(ids, cmpID)
	for _, sid := range ids {
		o, had := old[sid]
		n, has := cr.items[sid]
		if had && has && itemsEqual(o, n) {
			continue
		}
		c.update(sid, cr)
	}
	cr.syncing = false
	pending := cr.pending
	cr.pending = nil
	for _, ev := range pending {
		c.deliver(cr, ev)
	}
	if cr.again && !cr.syncing {
		cr.again = false
		c.resync(cr)
	}
}

// resync asks cr's worker to look up again: events were lost.
func (c *LookupCache) resync(cr *cacheReg) {
	cr.syncing = true
	c.resyncs.Add(1)
	select {
	case cr.resync <- struct{}{}:
	default:
	}
}

// event takes a service event from the listener.
func (c *LookupCache) event(id djinn.ID, gen uint64, ev *client.ServiceEvent) {
	if cr := c.current(id, nil, gen); cr != nil {
		c.deliver(cr, ev)
	}
}

// malformed hears that a registrar sent an event the cache could not read:
// what it said is unknown, so the cache looks up again.
func (c *LookupCache) malformed(id djinn.ID, gen uint64) {
	cr := c.current(id, nil, gen)
	switch {
	case cr == nil:
	case cr.syncing:
		cr.again = true
	default:
		c.resync(cr)
	}
}

// deliver applies a registrar's event, in sequence: duplicates are
// dropped, and a gap (lost events) makes the cache look up again.
func (c *LookupCache) deliver(cr *cacheReg, ev *client.ServiceEvent) {
	if cr.syncing {
		cr.pending = append(cr.pending, ev)
		return
	}
	if cr.er != nil && ev.ID != cr.er.ID {
		return // a registration that failed to answer, ended by notify
	}
	switch {
	case ev.Seq <= cr.lastSeq:
		return
	case ev.Seq != cr.lastSeq+1:
		c.log.Info("service events lost; looking up again", "registrar", cr.reg.info.ServiceID, "after", cr.lastSeq, "got", ev.Seq)
		cr.lastSeq = ev.Seq
		c.resync(cr)
		return
	}
	cr.lastSeq = ev.Seq
	if ev.Transition == client.MatchNoMatch {
		if _, ok := cr.items[ev.ServiceID]; !ok {
			return
		}
		delete(cr.items, ev.ServiceID)
	} else {
		cr.items[ev.ServiceID] = *ev.Item
	}
	c.update(ev.ServiceID, cr)
}

// update brings service id up to what the registrars have, src having just
// changed, and tells the listeners.
func (c *LookupCache) update(id djinn.ID, src *cacheReg) {
	next, ok := c.pick(id, src)
	old := c.services[id]
	switch {
	case !ok && old == nil:
		return
	case !ok:
		delete(c.services, id)
		if old.visible {
			c.emit(id, &old.item, nil)
		}
		return
	}
	visible := c.filter == nil || c.filter(next.Clone())
	if old == nil {
		c.services[id] = &cached{item: next, visible: visible}
		if visible {
			c.emit(id, nil, &next)
		}
		return
	}
	pre := *old
	old.item, old.visible = next, visible
	switch {
	case !pre.visible && visible:
		c.emit(id, nil, &next)
	case pre.visible && !visible:
		c.emit(id, &pre.item, nil)
	case pre.visible && visible && !itemsEqual(pre.item, next):
		c.emit(id, &pre.item, &next)
	}
}

// pick chooses service id's item: src's when src has it (the latest word),
// else the one the cache holds if a registrar still has it, else that of
// the first registrar (by service id) that has it.
func (c *LookupCache) pick(id djinn.ID, src *cacheReg) (service.Item, bool) {
	if src != nil {
		if it, ok := src.items[id]; ok {
			return it, true
		}
	}
	old := c.services[id]
	var first *service.Item
	for _, rid := range sortedIDs(c.regs) {
		it, ok := c.regs[rid].items[id]
		if !ok {
			continue
		}
		if old != nil && itemsEqual(it, old.item) {
			return it, true
		}
		if first == nil {
			first = &it
		}
	}
	if first == nil {
		return service.Item{}, false
	}
	return *first, true
}

// emit records a change of the view and tells the active listeners: an
// addition (pre nil), a removal (post nil) or a change.
func (c *LookupCache) emit(id djinn.ID, pre, post *service.Item) {
	c.mu.Lock()
	if c.terminated {
		c.mu.Unlock()
		return
	}
	if post != nil {
		c.view[id] = *post
	} else {
		delete(c.view, id)
	}
	close(c.changed)
	c.changed = make(chan struct{})
	var ls []ServiceDiscoveryListener
	for _, k := range slices.Sorted(maps.Keys(c.listeners)) {
		if e := c.listeners[k]; e.active {
			ls = append(ls, e.l)
		}
	}
	c.mu.Unlock()
	for _, l := range ls {
		ev := ServiceDiscoveryEvent{Pre: cloneOf(pre), Post: cloneOf(post)}
		switch {
		case pre == nil:
			l.ServiceAdded(ev)
		case post == nil:
			l.ServiceRemoved(ev)
		default:
			l.ServiceChanged(ev)
		}
	}
}

func cloneOf(it *service.Item) *service.Item {
	if it == nil {
		return nil
	}
	c := it.Clone()
	return &c
}

// renewalFailed hears of an event registration lease the renewer could not
// keep: the registrar no longer knows it (its events could not be
// delivered, or it lost its state), or it expired while the registrar
// could not be reached.
func (c *LookupCache) renewalFailed(f client.Failure) {
	cookie := f.Lease.Cookie()
	c.in.push(func() {
		for _, cr := range c.regs {
			if cr.er != nil && cr.er.Lease.Cookie() == cookie {
				c.log.Info("event registration lost; registering again", "registrar", cr.reg.info.ServiceID, "err", f.Err)
				c.stop(cr)
				c.start(cr)
				return
			}
		}
	})
}

// notify is the cache's event listener. It checks that the event is for the
// registrar's current registration and hands it to the loop; events for
// anything else get djinn.ErrUnknownEvent, so their senders stop.
func (c *LookupCache) notify(_ context.Context, ev *client.RemoteEvent) error {
	id, gen, ok := parseHandback(ev.Handback)
	if ok && ev.Source.Service == id {
		c.mu.Lock()
		g, known := c.gens[id]
		c.mu.Unlock()
		ok = known && g.gen == gen && (!g.haveID || g.eventID == ev.ID)
	}
	if !ok {
		return djinn.Errorf(djinn.UnknownEvent, "lookup cache: event %d from %s: no registration of this cache", ev.ID, ev.Source)
	}
	se, err := client.ServiceEventFrom(ev)
	if err != nil {
		c.log.Warn("unreadable service event; looking up again", "registrar", id, "err", err)
		c.in.push(func() { c.malformed(id, gen) })
		return nil
	}
	c.in.push(func() { c.event(id, gen, se) })
	return nil
}

// handback names a registrar and the generation of the cache's event
// registration there: 16 bytes of service id, 8 of generation.
func handback(id djinn.ID, gen uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), id[:]...), gen)
}

func parseHandback(b []byte) (djinn.ID, uint64, bool) {
	var id djinn.ID
	if len(b) != len(id)+8 {
		return id, 0, false
	}
	copy(id[:], b)
	return id, binary.BigEndian.Uint64(b[len(id):]), true
}

func cmpID(a, b djinn.ID) int { return bytes.Compare(a[:], b[:]) }

func sortedIDs[V any](m map[djinn.ID]V) []djinn.ID {
	return slices.SortedFunc(maps.Keys(m), cmpID)
}

// items returns copies of the services in view that filter accepts, in
// service id order.
func (c *LookupCache) items(filter ItemFilter) []service.Item {
	c.mu.Lock()
	in := slices.Collect(maps.Values(c.view))
	c.mu.Unlock()
	slices.SortFunc(in, func(a, b service.Item) int { return cmpID(a.ID, b.ID) })
	out := in[:0]
	for _, it := range in {
		if filter == nil || filter(it.Clone()) {
			out = append(out, it.Clone())
		}
	}
	return out
}

// Lookup returns one of the services in the cache that filter (nil: every
// one) accepts, chosen at random, or nil when there is none (Jini's
// LookupCache.lookup). It asks no lookup service.
func (c *LookupCache) Lookup(filter ItemFilter) *service.Item {
	its := c.items(filter)
	if len(its) == 0 {
		return nil
	}
	return &its[rand.IntN(len(its))]
}

// LookupN returns up to maxMatches (all when negative) of the services in
// the cache that filter (nil: every one) accepts, in service id order. It
// asks no lookup service.
func (c *LookupCache) LookupN(filter ItemFilter, maxMatches int) []service.Item {
	its := c.items(filter)
	if maxMatches >= 0 && len(its) > maxMatches {
		its = its[:maxMatches]
	}
	return its
}

// Wait waits until the cache holds a service that filter (nil: every one)
// accepts and returns it (Jini's blocking ServiceDiscoveryManager.lookup,
// on a cache), or returns ctx's error, or ErrTerminated.
func (c *LookupCache) Wait(ctx context.Context, filter ItemFilter) (*service.Item, error) {
	for {
		c.mu.Lock()
		done, ch := c.terminated, c.changed
		c.mu.Unlock()
		if done {
			return nil, terminated("lookup cache")
		}
		if it := c.Lookup(filter); it != nil {
			return it, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// AddListener adds a listener (Jini's addListener). It first hears of every
// service the cache holds, as additions, then of the changes that follow,
// from the cache's goroutine. The function returned removes it: no call
// to it starts after that returns.
func (c *LookupCache) AddListener(l ServiceDiscoveryListener) (remove func()) {
	c.mu.Lock()
	if c.terminated || l == nil {
		c.mu.Unlock()
		return func() {}
	}
	c.nextListener++
	k := c.nextListener
	c.listeners[k] = &listening{l: l}
	c.mu.Unlock()
	c.in.push(func() {
		c.mu.Lock()
		e := c.listeners[k]
		var held []service.Item
		if e != nil {
			e.active = true
			for _, id := range sortedIDs(c.view) {
				held = append(held, c.view[id])
			}
		}
		c.mu.Unlock()
		for _, it := range held {
			l.ServiceAdded(ServiceDiscoveryEvent{Post: cloneOf(&it)})
		}
	})
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.listeners, k)
	}
}

// Done is closed when Terminate has finished.
func (c *LookupCache) Done() <-chan struct{} { return c.done }

// Terminate stops the cache (Jini's terminate): it cancels its event
// registrations, stops its goroutines and empties it; no listener call
// starts after it begins, and it waits for the one running, so it must not
// be called from a listener. The first call returns the cancellations'
// failures; later and concurrent calls wait for the first and return nil.
func (c *LookupCache) Terminate() error {
	first := false
	var err error
	c.termOnce.Do(func() {
		first = true
		c.sdm.forget(c)
		c.mu.Lock()
		c.terminated = true
		leases := slices.Collect(maps.Values(c.leases))
		c.leases, c.view, c.listeners = nil, map[djinn.ID]service.Item{}, nil
		close(c.changed)
		c.mu.Unlock()
		c.cancel()
		c.wg.Wait()
		c.lis.Close()
		c.renewer.Close()
		err = cancelLeases(c.sdm.pool, leases)
		close(c.done)
	})
	<-c.done
	if first {
		return err
	}
	return nil
}
