package lookup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/backoff"
	"github.com/djinn-go/djinn/service"
)

// JoinManagerConfig configures a JoinManager.
type JoinManagerConfig struct {
	// Item is the service's item: its reference and types are required.
	// An item without a service id is given a new one, the same at every
	// lookup service for the manager's life.
	Item service.Item
	// ServiceIDListener, if set, is told the service id NewJoinManager
	// generated for an item without one (Jini's ServiceIDListener), once,
	// before NewJoinManager returns: store it, and give it back in Item
	// when the service restarts, so that it keeps its identity.
	ServiceIDListener func(djinn.ID)
	// LeaseDuration is the registration lease asked of each lookup service
	// (default djinn.Any: the lookup service's choice); it is renewed
	// until Terminate.
	LeaseDuration time.Duration
	// DialOptions are used to reach lookup services (TLS, ...).
	DialOptions []client.Option
	// RetryMin and RetryMax bound the wait before retrying a lookup service
	// that could not be reached or refused a call (defaults DefaultRetryMin
	// and DefaultRetryMax).
	RetryMin, RetryMax time.Duration
	// Logger gets what goes wrong and the registrations made; nil
	// discards it.
	Logger *slog.Logger
}

// JoinManager keeps one service item registered at every lookup service a
// discovery source finds (Jini's net.jini.lookup.JoinManager); see the
// package doc. Its methods are safe for concurrent use.
type JoinManager struct {
	cfg     JoinManagerConfig
	log     *slog.Logger
	dm      DiscoveryManagement
	pool    *client.Pool // the renewer's connections, and Terminate's
	renewer *client.Renewer
	id      djinn.ID

	ctx      context.Context // cancelled by Terminate; owned, never a caller's
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the discovery follower and the keepers
	done     chan struct{}
	termOnce sync.Once
	termErr  error

	// op serializes the changes of the item and their application to the
	// registrations, so that every lookup service sees the same sequence
	// of items. It is held across calls to lookup services, and taken
	// before mu: a lock that holds its one token while taken (lockOp),
	// so that Terminate can wait a bounded time for the call under way
	// (settle).
	op chan struct{}

	mu         sync.Mutex
	item       service.Item       // guarded by mu, changed with op held too: the held item, canonical
	joins      map[djinn.ID]*join // guarded by mu: by registrar service id
	byCookie   map[djinn.ID]*join // guarded by mu: by registration lease cookie
	terminated bool               // guarded by mu
	abandoned  bool               // guarded by mu: stopped by Abandon, registrations left in place
}

// join is one lookup service the item is kept registered at. Its keeper
// goroutine owns it; the fields below cancel and wake are guarded by
// JoinManager.mu.
type join struct {
	cancel context.CancelFunc
	wake   chan struct{} // buffered 1: the registration is lost or behind the held item

	info    discovery.RegistrarInfo
	r       *client.Registrar           // nil until connected
	reg     *client.ServiceRegistration // nil while not registered
	applied service.Item                // the item reg holds, as far as is known
	lost    bool                        // reg's lease is gone: register again
	// leaving: the lookup service is no longer wanted; no call starts, and
	// its registration is cancelled once the call under way ends.
	leaving bool
}

func (j *join) poke() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// NewJoinManager starts keeping cfg.Item registered at the lookup services
// dm discovers. It returns at once: registrations happen in the background
// as lookup services are found. The manager is dm's only reader; it does
// not close dm.
func NewJoinManager(dm DiscoveryManagement, cfg JoinManagerConfig) (*JoinManager, error) {
	const what = "join manager"
	events, err := checkDiscovery(what, dm)
	if err != nil {
		return nil, err
	}
	if cfg.LeaseDuration, cfg.RetryMin, cfg.RetryMax, err = settings(what, cfg.LeaseDuration, cfg.RetryMin, cfg.RetryMax); err != nil {
		return nil, err
	}
	item := cfg.Item.Clone()
	generated := item.ID.IsZero()
	if generated {
		item.ID = djinn.NewID()
	}
	if item, err = change(item, nil); err != nil {
		return nil, err
	}
	m := &JoinManager{
		cfg: cfg, log: cfg.Logger, dm: dm, pool: client.NewPool(cfg.DialOptions...), id: item.ID,
		op: make(chan struct{}, 1), done: make(chan struct{}), item: item, joins: map[djinn.ID]*join{}, byCookie: map[djinn.ID]*join{},
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.log = m.log.With("part", what, "service", item.ID)
	m.renewer, err = client.NewRenewer(m.pool, client.WithFailureHandler(m.renewalFailed),
		client.WithRenewDuration(cfg.LeaseDuration), client.WithRetryBackoff(cfg.RetryMin, cfg.RetryMax))
	if err != nil {
		m.pool.Close()
		return nil, err
	}
	if generated && cfg.ServiceIDListener != nil {
		cfg.ServiceIDListener(item.ID)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		followDiscovery(m.ctx, events, m.heard)
	}()
	return m, nil
}

// ServiceID returns the service's id, the same at every lookup service.
func (m *JoinManager) ServiceID() djinn.ID { return m.id }

// Item returns the item as the manager holds it now (Jini's getAttributes,
// and more): what every registration has or is being brought to.
func (m *JoinManager) Item() service.Item {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.item.Clone()
}

// Registrars returns the lookup services the item is registered at now
// (Jini's getJoinSet), sorted by service id.
func (m *JoinManager) Registrars() []discovery.RegistrarInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []discovery.RegistrarInfo
	for _, j := range m.joins {
		if j.reg != nil {
			info := j.info
			info.Groups = slices.Clone(info.Groups)
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b discovery.RegistrarInfo) int { return bytes.Compare(a.ServiceID[:], b.ServiceID[:]) })
	return out
}

// Done is closed when Terminate (or Abandon) has finished.
func (m *JoinManager) Done() <-chan struct{} { return m.done }

func (m *JoinManager) heard(ev discovery.Event) {
	id := ev.Registrar.ServiceID
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.terminated {
		return
	}
	j := m.joins[id]
	switch ev.Kind {
	case discovery.Discovered, discovery.Changed:
		if j != nil && j.info.Endpoint == ev.Registrar.Endpoint {
			j.info = ev.Registrar
			return
		}
		if j != nil {
			// Another endpoint: start over there. Registering the same
			// service id again replaces the registration.
			j.cancel()
		}
		ctx, cancel := context.WithCancel(m.ctx)
		j = &join{cancel: cancel, wake: make(chan struct{}, 1), info: ev.Registrar}
		m.joins[id] = j
		m.wg.Add(1) // the follower holds a count: Terminate's Wait cannot have seen zero
		go m.keep(ctx, j)
	case discovery.Discarded:
		if j == nil {
			return
		}
		delete(m.joins, id)
		if ev.Reason != discovery.NoInterest && ev.Reason != discovery.Removed {
			// Jini's JoinManager forgets a discarded lookup service and
			// stops renewing there: the registration lapses by itself.
			j.cancel()
			return
		}
		// A lookup service the service no longer wants (its group or
		// locator was taken away) is left at once: the registration is
		// cancelled — one a call under way is making included, once the
		// call ends (settle): cut short, it could land unanswered and stay
		// there, unknown here, until its lease ran out.
		j.leaving = true
		m.wg.Add(1) // the follower holds a count, as for keep
		go func() {
			defer m.wg.Done()
			m.settle()
			m.mu.Lock()
			reg := j.reg
			m.mu.Unlock()
			j.cancel()
			if reg == nil {
				return
			}
			if err := cancelLeases(m.pool, []*client.Lease{reg.Lease}); err != nil {
				m.log.Warn("cannot cancel the registration at a lookup service no longer wanted; it lapses", "registrar", id, "err", err)
			}
		}()
	}
}

// keep connects to one lookup service, registers the item there, and keeps
// the registration as the held item, registering again whenever the lookup
// service loses it, until ctx ends.
func (m *JoinManager) keep(ctx context.Context, j *join) {
	defer m.wg.Done()
	m.mu.Lock()
	info := j.info
	m.mu.Unlock()
	log := m.log.With("registrar", info.ServiceID, "endpoint", info.Endpoint)
	b := backoff.New(m.cfg.RetryMin, m.cfg.RetryMax)
	c, r, err := dialRegistrar(ctx, info, m.cfg.DialOptions, b, log)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("discarding the registrar: discovery misnamed it", "err", err)
			m.dm.Discard(info.ServiceID)
		}
		return
	}
	defer c.Close()
	defer m.leave(j)
	m.mu.Lock()
	j.r = r
	m.mu.Unlock()
	b.Reset()
	for failures := 0; ; {
		err := m.sync(ctx, j)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			logRetry(log, err, failures)
			if !b.Wait(ctx) {
				return
			}
			continue
		}
		failures = 0
		b.Reset()
		select {
		case <-ctx.Done():
			return
		case <-j.wake:
		}
	}
}

// quietRetries is how many times in a row a registration may fail as
// unavailable before it is worth a warning: a lookup service that is
// electing a leader, or whose new leader is taking over its leases (as
// when a server starts again and registers its own services), refuses
// calls for a moment. Those first retries are logged at info level.
const quietRetries = 3

// logRetry logs the failures-th failure in a row to bring a registration
// up to date.
func logRetry(log *slog.Logger, err error, failures int) {
	if failures <= quietRetries && errors.Is(err, djinn.ErrUnavailable) {
		log.Info("the lookup service is not ready for the registration yet; retrying", "err", err, "attempt", failures)
		return
	}
	log.Warn("cannot bring the registration up to date; retrying", "err", err, "attempt", failures)
}

// leave stops keeping j's registration: its lease is no longer renewed.
func (m *JoinManager) leave(j *join) {
	m.mu.Lock()
	reg := j.reg
	if reg != nil {
		delete(m.byCookie, reg.Lease.Cookie())
		j.reg = nil
	}
	m.mu.Unlock()
	if reg != nil {
		_ = m.renewer.Remove(reg.Lease) // a lease that failed has left already
	}
}

// sync brings j's registration up to the held item with a call bounded by
// callTimeout.
func (m *JoinManager) sync(ctx context.Context, j *join) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	m.lockOp()
	defer m.unlockOp()
	return m.syncLocked(ctx, j)
}

// lockOp takes op; unlockOp lets it go.
func (m *JoinManager) lockOp()   { m.op <- struct{}{} }
func (m *JoinManager) unlockOp() { <-m.op }

// syncLocked brings j's registration up to the held item: nothing when it
// has it, SetAttributes when only the entries differ, Register otherwise
// (a new registration, or one replacing a lost or outdated one). m.op must
// be held.
func (m *JoinManager) syncLocked(ctx context.Context, j *join) error {
	m.mu.Lock()
	if m.terminated {
		m.mu.Unlock()
		return terminated("join manager")
	}
	item, r, reg, applied, lost, leaving := m.item.Clone(), j.r, j.reg, j.applied, j.lost, j.leaving
	m.mu.Unlock()
	if r == nil || leaving {
		return nil // not connected yet (the keeper registers the held item when it is), or no longer wanted
	}
	if reg != nil && !lost {
		if itemsEqual(applied, item) {
			return nil
		}
		if sameService(applied, item) {
			err := reg.SetAttributes(ctx, item.Entries)
			if err == nil {
				m.mu.Lock()
				if j.reg == reg {
					j.applied = item
				}
				m.mu.Unlock()
				return nil
			}
			if !lostRegistration(err) {
				return err
			}
		}
	}
	nreg, err := r.Register(ctx, item, m.cfg.LeaseDuration)
	if err != nil {
		return err
	}
	m.mu.Lock()
	if m.terminated {
		abandoned := m.abandoned
		m.mu.Unlock()
		if abandoned {
			return nil // left in place, as Abandon leaves the others
		}
		// Terminate, waiting for this call (settle), has collected the
		// leases to cancel already: this one is cancelled here.
		return cancelLeases(m.pool, []*client.Lease{nreg.Lease})
	}
	old := j.reg
	if old != nil {
		delete(m.byCookie, old.Lease.Cookie())
	}
	j.reg, j.applied, j.lost = nreg, item, false
	m.byCookie[nreg.Lease.Cookie()] = j
	m.mu.Unlock()
	if old != nil {
		// Registering the id again ended the old registration.
		_ = m.renewer.Remove(old.Lease)
	}
	if err := m.renewer.Renew(nreg.Lease, djinn.EndOfTime); err != nil {
		return err // the renewer is closed: the manager is terminating
	}
	// The lease names the member that granted it. Its renewals, and
	// Terminate's cancel, must reach the lookup service's cluster when
	// that member is gone: the pool learns the cluster from it now, and
	// waits for the answer. A member that cannot answer (it died right
	// after granting the lease) leaves a registration its renewals would
	// seek at it alone: it is made again, through the cluster the keeper
	// follows, and the new one replaces it.
	if err := m.pool.Learn(ctx, nreg.Lease.Landlord()); err != nil {
		m.mu.Lock()
		if j.reg == nreg {
			j.lost = true
		}
		m.mu.Unlock()
		return fmt.Errorf("registered, but cannot learn the lookup service's cluster from the member that granted the registration; registering again: %w", err)
	}
	m.log.Info("registered", "registrar", r.Ref().Service, "lease", nreg.Lease)
	return nil
}

// renewalFailed hears of a registration lease the renewer could not keep:
// the lookup service no longer knows it (it expired while the service was
// cut off, or the lookup service lost its state), or it expired while the
// lookup service could not be reached. Its keeper registers again.
func (m *JoinManager) renewalFailed(f client.Failure) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j := m.byCookie[f.Lease.Cookie()]
	if j == nil || j.reg == nil || j.reg.Lease.Cookie() != f.Lease.Cookie() {
		return
	}
	m.log.Info("registration lost; registering again", "registrar", j.info.ServiceID, "err", f.Err)
	j.lost = true
	j.poke()
}

// change changes the held item with f and brings every registration up to
// it. A registration that cannot be updated now (its lookup service is
// unreachable, or lost it) is updated by its keeper, which retries with
// backoff: the change is never lost while the lookup service stays
// discovered.
func (m *JoinManager) change(ctx context.Context, f func(service.Item) (service.Item, error)) error {
	m.lockOp()
	defer m.unlockOp()
	m.mu.Lock()
	if m.terminated {
		m.mu.Unlock()
		return terminated("join manager")
	}
	next, err := f(m.item.Clone())
	if err != nil {
		m.mu.Unlock()
		return err
	}
	m.item = next
	var js []*join
	for _, j := range m.joins {
		if j.reg != nil {
			js = append(js, j)
		}
	}
	m.mu.Unlock()
	for _, j := range js {
		if err := m.syncLocked(ctx, j); err != nil {
			m.log.Warn("cannot update a registration now; its keeper retries", "err", err)
			j.poke()
		}
	}
	return nil
}

// attributes returns a change applying op to the item's entries as a
// lookup service does.
func attributes(op func(r *service.Record) (service.Record, bool, error)) func(service.Item) (service.Item, error) {
	return func(it service.Item) (service.Item, error) { return change(it, op) }
}

// AddAttributes adds entries to the item (Jini's addAttributes): an entry
// equal to one the item has is dropped. The item held for lookup services
// joined later changes at once; the current registrations are updated
// before AddAttributes returns, or in the background when their lookup
// services cannot be reached. Errors: bad entries (djinn.ErrInvalidArgument,
// djinn.ErrResourceExhausted, naming the bad value; nothing changes) and
// ErrTerminated.
func (m *JoinManager) AddAttributes(ctx context.Context, entries []service.Entry) error {
	return m.change(ctx, attributes(func(r *service.Record) (service.Record, bool, error) {
		return r.AddAttributes(service.Limits{}, entries)
	}))
}

// SetAttributes replaces the item's entries (Jini's setAttributes), as
// AddAttributes changes them.
func (m *JoinManager) SetAttributes(ctx context.Context, entries []service.Entry) error {
	return m.change(ctx, attributes(func(r *service.Record) (service.Record, bool, error) {
		return r.SetAttributes(service.Limits{}, entries)
	}))
}

// ModifyAttributes changes the entries that templates match (Jini's
// modifyAttributes; client.ServiceRegistration.ModifyAttributes says how:
// a zero Entry among changes deletes the entries its template matches), as
// AddAttributes changes them. The change is computed here, by the lookup
// service's own rules, and every registration is given the result, so it
// works with no lookup service joined, and every lookup service ends with
// the same entries.
func (m *JoinManager) ModifyAttributes(ctx context.Context, templates []service.EntryTemplate, changes []service.Entry) error {
	return m.change(ctx, attributes(func(r *service.Record) (service.Record, bool, error) {
		return r.ModifyAttributes(service.Limits{}, templates, changes)
	}))
}

// Replace replaces the item's reference, types and entries (Jini's
// replaceRegistration) and registers it again at every lookup service.
// item's service id must be zero or the manager's; the manager's is kept.
func (m *JoinManager) Replace(ctx context.Context, item service.Item) error {
	if !item.ID.IsZero() && item.ID != m.id {
		return djinn.Errorf(djinn.InvalidArgument, "join manager: replacement item's service id %s: the service's is %s", item.ID, m.id)
	}
	return m.change(ctx, func(service.Item) (service.Item, error) {
		it := item.Clone()
		it.ID = m.id
		return change(it, nil)
	})
}

// Terminate stops the manager (Jini's terminate): it stops following
// discovery, and cancels every registration's lease, so the item leaves
// every lookup service — a registration under way included: its call is
// let finish first (for at most settleTimeout), since it may land
// whatever becomes of it. The discovery source is not closed. The first call
// (of Terminate or Abandon) returns the cancellations' failures (a lookup
// service that cannot be reached keeps the item until the lease ends);
// later and concurrent calls wait for the first and return nil.
func (m *JoinManager) Terminate() error { return m.stop(true) }

// Abandon stops the manager as Terminate does but leaves its
// registrations in place: their leases are no longer renewed, so the item
// stays at each lookup service until its lease ends — or until another
// manager registers the same service id there, which replaces it. This is
// how a service hands its registrations over: a djinn cluster's leader
// abandons them when its term ends, and the next leader takes them over
// under the same service ids, so that lookups never see the service gone
// (Jini has no counterpart: its JoinManager's service dies with it).
func (m *JoinManager) Abandon() error { return m.stop(false) }

// stop stops the manager, cancelling its registrations' leases if cancel.
func (m *JoinManager) stop(cancel bool) error {
	first := false
	m.termOnce.Do(func() {
		first = true
		m.mu.Lock()
		m.terminated, m.abandoned = true, !cancel
		var leases []*client.Lease
		for _, j := range m.joins {
			if j.reg != nil {
				leases = append(leases, j.reg.Lease)
			}
		}
		m.mu.Unlock()
		if cancel {
			m.settle()
		}
		m.cancel()
		m.wg.Wait()
		if cancel {
			m.termErr = cancelLeases(m.pool, leases)
		}
		m.renewer.Close()
		m.pool.Close()
		close(m.done)
	})
	<-m.done
	if first {
		return m.termErr
	}
	return nil
}

// settleTimeout bounds how long Terminate lets a call under way finish:
// long enough for a lookup service that answers, even slowly or through
// an election, short enough that a process stopping beside one that does
// not answer is not held for a whole call's bound (callTimeout).
const settleTimeout = 5 * time.Second

// settle waits for the call to a lookup service under way, if any, to end
// by itself — for at most settleTimeout — before Terminate cuts the calls
// short, or a lookup service no longer wanted is left. A Register under
// way may land whatever becomes of its caller: cut short, its lease would
// be unknown here and never cancelled, and the item would stay at the
// lookup service until the lease ran out (a server that stops would leave
// its item behind for minutes). Let finish, its registration is cancelled:
// by syncLocked, which sees the manager terminated, or by the leaving
// join's follower, which finds it in j.reg. Calls that start after
// terminated or leaving is set make none.
func (m *JoinManager) settle() {
	t := time.NewTimer(settleTimeout)
	defer t.Stop()
	select {
	case m.op <- struct{}{}:
		<-m.op
	case <-t.C:
		m.log.Warn("a call to a lookup service still under way; cutting it short: a registration it makes lapses with its lease", "after", settleTimeout)
	}
}

// Check asks each lookup service whether the manager's registration there
// still stands, by reading its lease (no change is made). A registration
// that another registration of the same service id has replaced — a
// deposed cluster leader's late Register landing after its successor's —
// or that the lookup service lost is registered again by its keeper at
// once, instead of when its next renewal fails. Lookup services that
// cannot be reached are left to the renewer.
func (m *JoinManager) Check(ctx context.Context) {
	m.mu.Lock()
	var js []*join
	var leases []*client.Lease
	for _, j := range m.joins {
		if j.reg != nil && !j.lost {
			js, leases = append(js, j), append(leases, j.reg.Lease)
		}
	}
	m.mu.Unlock()
	for i, j := range js {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := leases[i].Refresh(cctx, m.pool)
		cancel()
		if !lostRegistration(err) {
			continue
		}
		m.mu.Lock()
		if j.reg != nil && j.reg.Lease == leases[i] && !j.lost {
			m.log.Info("registration replaced or lost; registering again", "registrar", j.info.ServiceID, "err", err)
			j.lost = true
			j.poke()
		}
		m.mu.Unlock()
	}
}
