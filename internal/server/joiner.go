package server

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/join"
	"github.com/djinn-go/djinn/lookup"
	"github.com/djinn-go/djinn/service"
)

// How the services stay registered in lookup services. Every service that
// declares a joinKind gets a joiner: a discovery source for its groups and
// locators (joinDiscovery, with the cluster's own lookup service) and a
// lookup.JoinManager keeping its item registered at whatever that finds.
// The leader runs the joiners of the cluster's services, one term at a
// time, under the service ids the join settings keep; every node runs the
// joiner of its own key/value store. A joiner follows the join settings as
// the log changes them (State.OnChange wakes it) and the cluster's members
// (its item names them).
//
// When a joiner stops it leaves its registrations in place (Abandon) for
// the next leader to take over under the same ids — unless the server is
// closing and no other member will: the last member of a cluster, and
// every node for its own key/value store, cancel them (Terminate) while
// the server still serves, so that lookup services drop the items at once.
// A cancel the lookup service cannot take within its bound (its cluster
// electing a leader all that time) is given up: the server says so, and
// the item lapses with its lease.

// joinTick is how often a running joiner looks at the cluster's members,
// which its item names.
const joinTick = 5 * time.Second

// joins is this node's side of joining lookup services.
type joins struct {
	s  *Server
	st *join.State

	// closed ends when stop is called: the server is closing.
	closed   context.Context
	closeAll context.CancelFunc
	wg       sync.WaitGroup

	mu      sync.Mutex
	running map[string]*joiner // guarded by mu: by service name
	closing bool               // guarded by mu
	// lapsing names the services whose registrations could not all be
	// cancelled when the server closed: they lapse with their leases.
	lapsing []string // guarded by mu
}

// joiner keeps one service registered.
type joiner struct {
	j    *joins
	p    *part
	wake chan struct{} // buffered 1: its settings changed
	done chan struct{} // closed when it has stopped

	mu sync.Mutex
	jm *lookup.JoinManager // guarded by mu: nil until started
}

// poke wakes the joiner of the service name, if one runs here.
func (j *joins) poke(name string) {
	j.mu.Lock()
	jr := j.running[name]
	j.mu.Unlock()
	if jr != nil {
		select {
		case jr.wake <- struct{}{}:
		default:
		}
	}
}

// start runs a joiner for p until ctx ends or the server closes, unless
// the server is closing; it returns once the joiner runs. A joiner of p
// still stopping (the last term's) is waited for first, so that the new
// one takes its registrations over.
func (j *joins) start(ctx context.Context, p *part) {
	for {
		j.mu.Lock()
		if j.closing {
			j.mu.Unlock()
			return
		}
		old := j.running[p.name]
		if old == nil {
			jr := &joiner{j: j, p: p, wake: make(chan struct{}, 1), done: make(chan struct{})}
			j.running[p.name] = jr
			j.wg.Go(func() {
				defer func() {
					j.mu.Lock()
					delete(j.running, p.name)
					j.mu.Unlock()
					close(jr.done)
				}()
				jr.run(ctx)
			})
			j.mu.Unlock()
			return
		}
		j.mu.Unlock()
		select {
		case <-old.done:
		case <-ctx.Done():
			return
		}
	}
}

// lead is the leader's work: configure every service's join, then keep
// the cluster's services registered until the term ends.
func (j *joins) lead(ctx context.Context) {
	if !j.s.cfg.LookupJoin.Enabled {
		return
	}
	if err := j.configure(ctx); err != nil {
		if ctx.Err() == nil {
			j.s.log.Error("join: cannot record the join settings; the services are not registered in lookup services this term", "err", err)
		}
		return
	}
	for _, p := range j.s.joining() {
		if p.enabled && p.joins.nodeID == nil {
			j.start(ctx, p)
		}
	}
	<-ctx.Done()
}

// startNode starts the joiners of this node's own services.
func (j *joins) startNode() {
	if !j.s.cfg.LookupJoin.Enabled {
		return
	}
	for _, p := range j.s.joining() {
		if p.enabled && p.joins.nodeID != nil {
			j.start(context.Background(), p)
		}
	}
}

// stop stops every joiner and waits for them, before the server stops
// serving.
func (j *joins) stop() {
	j.mu.Lock()
	j.closing = true
	j.mu.Unlock()
	j.closeAll()
	j.wg.Wait()
}

// joiner returns the joiner of the service name running here, or nil.
func (j *joins) joiner(name string) *joiner {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.running[name]
}

// registrars returns the lookup services the service name is registered
// at, as this node's joiner knows them.
func (j *joins) registrars(name string) []discovery.RegistrarInfo {
	if jr := j.joiner(name); jr != nil {
		if jm := jr.manager(); jm != nil {
			return jm.Registrars()
		}
	}
	return nil
}

// registrations counts the registrations this node keeps.
func (j *joins) registrations() int {
	n := 0
	for _, p := range j.s.joining() {
		n += len(j.registrars(p.name))
	}
	return n
}

func (j *joins) metrics() []prometheus.Collector {
	return []prometheus.Collector{gauge("djinn_join_registrations", "Registrations of this node's services (and, on the leader, the cluster's) kept in lookup services.",
		func() float64 { return float64(j.registrations()) })}
}

func (jr *joiner) manager() *lookup.JoinManager {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	return jr.jm
}

// run keeps the service registered until ctx ends or the server closes.
func (jr *joiner) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(jr.j.closed, cancel)()
	cur, ok := jr.settings(ctx)
	if !ok {
		return
	}
	s := jr.j.s
	// The join manager names itself (part) and the item (service): its
	// logger gets the service's name under a key of its own.
	joined := s.log.With("joined", jr.p.name)
	log := joined.With("part", "join")
	d, err := newJoinDiscovery(s, cur)
	if err != nil {
		log.Error("join: cannot start discovery; the service is not registered in lookup services", "err", err)
		return
	}
	defer d.Close()
	jm, err := lookup.NewJoinManager(d, lookup.JoinManagerConfig{Item: s.joinItem(jr.p, jr.id(cur), cur.Attributes), DialOptions: s.outOpts, Logger: joined})
	if err != nil {
		log.Error("join: cannot start; the service is not registered in lookup services", "err", err)
		return
	}
	jr.mu.Lock()
	jr.jm = jm
	jr.mu.Unlock()
	defer jr.leave(jm)
	t := time.NewTicker(joinTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-jr.wake:
		case <-t.C:
			jm.Check(ctx)
		}
		cur = jr.follow(ctx, d, jm, cur)
	}
}

// id returns the service id of the joiner's item.
func (jr *joiner) id(st join.Join) djinn.ID {
	if jr.p.joins.nodeID != nil {
		return jr.p.joins.nodeID()
	}
	return st.ID
}

// settings waits until the service can be registered — the cluster has
// its service id, and the join settings exist, with the service's id for a
// cluster service — and returns them; false when ctx ended first.
func (jr *joiner) settings(ctx context.Context) (join.Join, bool) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		st, ok := jr.j.st.Get(jr.p.name)
		if ok && !jr.j.s.machine.ServiceID().IsZero() && !jr.id(st).IsZero() {
			return st, true
		}
		select {
		case <-ctx.Done():
			return join.Join{}, false
		case <-jr.wake:
		case <-t.C:
		}
	}
}

// follow brings discovery and the item up to the join settings and the
// cluster's members, and returns the settings followed.
func (jr *joiner) follow(ctx context.Context, d *joinDiscovery, jm *lookup.JoinManager, cur join.Join) join.Join {
	s := jr.j.s
	next, ok := jr.j.st.Get(jr.p.name)
	if !ok {
		return cur
	}
	if err := d.set(cur, next); err != nil {
		s.log.Warn("join: cannot change discovery", "part", "join", "joined", jr.p.name, "err", err)
	}
	want := s.joinItem(jr.p, jr.id(next), next.Attributes)
	if have := jm.Item(); !entriesEqual(have.Entries, canonicalEntries(want)) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := jm.SetAttributes(ctx, want.Entries); err != nil && ctx.Err() == nil {
			s.log.Warn("join: cannot change the item's attributes", "part", "join", "joined", jr.p.name, "err", err)
		}
	}
	return next
}

// canonicalEntries returns it's entries as the JoinManager holds them.
func canonicalEntries(it service.Item) []service.Entry {
	c, err := service.Limits{}.Canonical(it)
	if err != nil {
		return it.Entries
	}
	return c.Entries
}

// leave stops the JoinManager: its registrations are cancelled when the
// server closes and nobody takes them over, and left in place otherwise.
func (jr *joiner) leave(jm *lookup.JoinManager) {
	s := jr.j.s
	if jr.j.closed.Err() != nil && (jr.p.joins.nodeID != nil || s.soleMember()) {
		if err := jm.Terminate(); err != nil {
			s.log.Warn("join: cannot cancel every registration; they lapse", "part", "join", "joined", jr.p.name, "err", err)
			jr.j.mu.Lock()
			jr.j.lapsing = append(jr.j.lapsing, jr.p.name)
			jr.j.mu.Unlock()
		}
	} else {
		_ = jm.Abandon()
	}
	jr.mu.Lock()
	jr.jm = nil
	jr.mu.Unlock()
}

// soleMember reports whether this node is its cluster's only member.
func (s *Server) soleMember() bool {
	members, err := s.node.Members()
	return err == nil && len(members) <= 1
}

// joinDiscovery is a joiner's discovery source: a LookupDiscoveryManager
// for the service's groups (by multicast, when [lookup-join] multicast is on) and
// locators, and the cluster's own lookup service, reported discovered from
// the start whatever they say when [lookup-join] own is on and the lookup service
// runs. Its methods are safe for concurrent use.
type joinDiscovery struct {
	dm         *discovery.LookupDiscoveryManager
	multicast  bool
	own        discovery.RegistrarInfo // zero ServiceID: none
	out        chan discovery.Event
	rediscover chan struct{} // buffered 1: the own lookup service was discarded

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var _ lookup.DiscoveryManagement = (*joinDiscovery)(nil)

func newJoinDiscovery(s *Server, st join.Join) (*joinDiscovery, error) {
	locs, err := parseLocators(st.Locators)
	if err != nil {
		return nil, err
	}
	c := s.cfg.LookupJoin
	dm, err := discovery.NewLookupDiscoveryManager(discovery.LookupDiscoveryManagerConfig{
		Groups:           discovery.LookupDiscoveryConfig{Groups: st.Groups, Interfaces: c.Interfaces},
		DisableMulticast: !c.Multicast,
		Locators:         discovery.LookupLocatorDiscoveryConfig{Locators: locs},
		Logger:           s.log.With("part", "join discovery", "joined", st.Service),
	})
	if err != nil {
		return nil, err
	}
	d := &joinDiscovery{dm: dm, multicast: c.Multicast, out: make(chan discovery.Event), rediscover: make(chan struct{}, 1)}
	if c.Own && s.cfg.Lookup.Enabled {
		d.own = discovery.RegistrarInfo{ServiceID: s.machine.ServiceID(), Groups: s.cfg.Lookup.Groups, Endpoint: s.advertise}
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.wg.Go(d.run)
	return d, nil
}

func parseLocators(ss []string) ([]discovery.Locator, error) {
	out := make([]discovery.Locator, len(ss))
	for i, s := range ss {
		l, err := discovery.ParseLocator(s)
		if err != nil {
			return nil, err
		}
		out[i] = l
	}
	return out, nil
}

func (d *joinDiscovery) Events() <-chan discovery.Event { return d.out }

// Discard drops a lookup service from discovery, which finds it again if
// it is still wanted; the own lookup service is reported again a moment
// later.
func (d *joinDiscovery) Discard(id djinn.ID) {
	if !d.own.ServiceID.IsZero() && id == d.own.ServiceID {
		select {
		case d.rediscover <- struct{}{}:
		default:
		}
		return
	}
	d.dm.Discard(id)
}

// run reports the own lookup service, then what discovery finds but for
// the own lookup service, which it holds whatever discovery says.
func (d *joinDiscovery) run() {
	own := !d.own.ServiceID.IsZero()
	if own && !d.send(discovery.Event{Kind: discovery.Discovered, Registrar: d.own}) {
		return
	}
	events := d.dm.Events()
	for {
		select {
		case <-d.ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if own && ev.Registrar.ServiceID == d.own.ServiceID {
				continue
			}
			if !d.send(ev) {
				return
			}
		case <-d.rediscover:
			if !d.send(discovery.Event{Kind: discovery.Discarded, Registrar: d.own, Reason: discovery.ByUser}) || !d.again() ||
				!d.send(discovery.Event{Kind: discovery.Discovered, Registrar: d.own}) {
				return
			}
		}
	}
}

// again waits a moment before the own lookup service is reported again.
func (d *joinDiscovery) again() bool {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-d.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (d *joinDiscovery) send(ev discovery.Event) bool {
	select {
	case d.out <- ev:
		return true
	case <-d.ctx.Done():
		return false
	}
}

// set changes discovery from the settings cur to next.
func (d *joinDiscovery) set(cur, next join.Join) error {
	if d.multicast && !slices.Equal(cur.Groups, next.Groups) {
		if err := d.dm.SetGroups(next.Groups...); err != nil {
			return err
		}
	}
	if !slices.Equal(cur.Locators, next.Locators) {
		locs, err := parseLocators(next.Locators)
		if err != nil {
			return err
		}
		return d.dm.SetLocators(locs...)
	}
	return nil
}

// Close stops discovery and waits for its goroutines.
func (d *joinDiscovery) Close() {
	d.cancel()
	d.wg.Wait()
	d.dm.Close()
}
