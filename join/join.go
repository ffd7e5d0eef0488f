// Package join keeps a service registered with every lookup service it
// discovers: djinn's counterpart of Jini's JoinManager. Give it a discovery
// source (a discovery.LookupDiscoveryManager, LookupDiscovery or
// LookupLocatorDiscovery) and the service's item; it registers the item at
// each lookup service discovered, renews each registration's lease,
// registers again when a lookup service lost the registration (its lease
// ended while the service was cut off, or the lookup service's state was
// reset), stops with a lookup service that is discarded, and applies
// attribute changes everywhere, to lookup services joined later too.
package join

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
)

// Source is what discovers lookup services: the discovery package's
// managers all are.
type Source interface {
	Events() <-chan discovery.Event
}

// Config configures a Manager.
type Config struct {
	// Discovery is the source of discovered and discarded lookup
	// services. Required.
	Discovery Source
	// Item is the service's item. An item without a service id is given
	// one, the same at every lookup service, reported to ServiceID.
	Item client.ServiceItem
	// LeaseDuration is the lease asked for at each lookup service
	// (default djinn.Any: the lookup service's default).
	LeaseDuration time.Duration
	// ServiceID, if set, hears the service id New assigned, once.
	ServiceID func(djinn.ID)
	// DialOptions are used to reach each lookup service (TLS, ...).
	DialOptions []client.Option
	// RetryMin and RetryMax bound the wait between attempts to reach a
	// lookup service that failed (default 100 ms and 30 s).
	RetryMin, RetryMax time.Duration
	Logger             *slog.Logger
}

// Manager keeps the item registered; see the package doc.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	item   client.ServiceItem    // the held item; its id never changes
	joined map[djinn.ID]*joining // by lookup service id
	done   bool
}

// joining is one lookup service the manager keeps the item registered with.
type joining struct {
	info   discovery.RegistrarInfo
	cancel context.CancelFunc
	done   chan struct{}
	// Guarded by Manager.mu: the registration, nil while not registered,
	// with its lookup service's client.
	reg *client.ServiceRegistration
	r   *client.Registrar
	c   *client.Client
}

// New starts a manager. It returns at once; registrations happen as
// lookup services are discovered.
func New(cfg Config) (*Manager, error) {
	if cfg.Discovery == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "join: discovery source: missing")
	}
	if len(cfg.Item.Service) == 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "join: item has no service reference (Service)")
	}
	if len(cfg.Item.Types) == 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "join: item has no service types")
	}
	if cfg.LeaseDuration == 0 {
		cfg.LeaseDuration = djinn.Any
	}
	if err := djinn.CheckLeaseDuration("join: lease duration", cfg.LeaseDuration); err != nil {
		return nil, err
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = 100 * time.Millisecond
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(30*time.Second, cfg.RetryMin)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{cfg: cfg, log: log, item: cloneItem(cfg.Item), joined: map[djinn.ID]*joining{}}
	if m.item.ID.IsZero() {
		m.item.ID = djinn.NewID()
		if cfg.ServiceID != nil {
			cfg.ServiceID(m.item.ID)
		}
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Add(1)
	go m.follow()
	return m, nil
}

func cloneItem(it client.ServiceItem) client.ServiceItem {
	it.Service = slices.Clone(it.Service)
	it.Types = slices.Clone(it.Types)
	it.Entries = slices.Clone(it.Entries)
	return it
}

// ServiceID returns the service's id, the same at every lookup service.
func (m *Manager) ServiceID() djinn.ID { return m.item.ID }

// Item returns the item as the manager holds it now.
func (m *Manager) Item() client.ServiceItem {
	m.mu.Lock()
	defer m.mu.Unlock()
	return cloneItem(m.item)
}

// Registrars returns the lookup services the item is registered with now,
// sorted by service id.
func (m *Manager) Registrars() []discovery.RegistrarInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []discovery.RegistrarInfo
	for _, j := range m.joined {
		if j.reg != nil {
			out = append(out, j.info)
		}
	}
	slices.SortFunc(out, func(a, b discovery.RegistrarInfo) int { return bytes.Compare(a.ServiceID[:], b.ServiceID[:]) })
	return out
}

// follow joins the lookup services the source discovers, and leaves the
// ones it discards.
func (m *Manager) follow() {
	defer m.wg.Done()
	for {
		select {
		case <-m.ctx.Done():
			return
		case ev, ok := <-m.cfg.Discovery.Events():
			if !ok {
				return
			}
			m.heard(ev)
		}
	}
}

func (m *Manager) heard(ev discovery.Event) {
	id := ev.Registrar.ServiceID
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	j := m.joined[id]
	switch ev.Kind {
	case discovery.Discovered, discovery.Changed:
		if j != nil {
			j.info = ev.Registrar
			return
		}
		ctx, cancel := context.WithCancel(m.ctx)
		j = &joining{info: ev.Registrar, cancel: cancel, done: make(chan struct{})}
		m.joined[id] = j
		m.wg.Add(1)
		go m.keep(ctx, j)
	case discovery.Discarded:
		if j != nil {
			// Jini's JoinManager forgets a discarded lookup service; the
			// registration's lease runs out there by itself.
			j.cancel()
			delete(m.joined, id)
		}
	}
}

// keep registers the item with one lookup service and renews the lease,
// registering again whenever the lookup service no longer knows it.
func (m *Manager) keep(ctx context.Context, j *joining) {
	defer m.wg.Done()
	defer close(j.done)
	c, err := client.Dial(ctx, j.info.Endpoint, m.cfg.DialOptions...)
	if err != nil {
		m.log.Warn("join: cannot dial the lookup service", "registrar", j.info.ServiceID, "endpoint", j.info.Endpoint, "err", err)
		return
	}
	defer c.Close()
	wait := m.cfg.RetryMin
	backoff := func() bool {
		t := time.NewTimer(wait)
		defer t.Stop()
		wait = min(2*wait, m.cfg.RetryMax)
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for ctx.Err() == nil {
		reg, err := m.register(ctx, c, j)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Warn("join: registering failed; retrying", "registrar", j.info.ServiceID, "err", err)
			}
			if !backoff() {
				return
			}
			continue
		}
		wait = m.cfg.RetryMin
		m.renew(ctx, c, j, reg, backoff)
		m.mu.Lock()
		if j.reg == reg {
			j.reg = nil
		}
		m.mu.Unlock()
	}
}

// register registers the held item and records the registration.
func (m *Manager) register(ctx context.Context, c *client.Client, j *joining) (*client.ServiceRegistration, error) {
	r, err := c.Lookup(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	item := cloneItem(m.item)
	m.mu.Unlock()
	reg, err := r.Register(ctx, item, m.cfg.LeaseDuration)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !entriesEqual(item.Entries, m.item.Entries) {
		// The attributes changed while registering: bring this one up to
		// date (the change was applied only to registrations it saw).
		if err := reg.SetAttributes(ctx, m.item.Entries); err != nil {
			return nil, err
		}
	}
	j.reg, j.r, j.c = reg, r, c
	m.log.Info("join: registered", "registrar", j.info.ServiceID, "service", item.ID)
	return reg, nil
}

func entriesEqual(a, b []client.Entry) bool {
	return slices.EqualFunc(a, b, func(x, y client.Entry) bool {
		return x.Type == y.Type && slices.Equal(x.Supertypes, y.Supertypes) && slices.Equal(x.Fields, y.Fields)
	})
}

// renew renews reg's lease at about half its remaining time until ctx
// ends or the lookup service no longer knows the lease (it returns then,
// to register again).
func (m *Manager) renew(ctx context.Context, c *client.Client, j *joining, reg *client.ServiceRegistration, backoff func() bool) {
	for {
		exp := reg.Lease.Expiration()
		left := time.Until(exp)
		if !exp.Before(djinn.EndOfTime) {
			<-ctx.Done()
			return
		}
		t := time.NewTimer(max(left/2, time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for {
			err := reg.Lease.Renew(ctx, c, m.cfg.LeaseDuration)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, djinn.ErrUnknownLease) || errors.Is(err, djinn.ErrNoSuchObject) || time.Now().After(reg.Lease.Expiration()) {
				m.log.Info("join: the lookup service lost the registration; registering again", "registrar", j.info.ServiceID, "err", err)
				return
			}
			if !backoff() {
				return
			}
		}
	}
}

// registrations returns the lookup services registered with now.
func (m *Manager) registrations() ([]*joining, error) {
	if m.done {
		return nil, djinn.Errorf(djinn.Unavailable, "join: terminated")
	}
	var js []*joining
	for _, j := range m.joined {
		if j.reg != nil {
			js = append(js, j)
		}
	}
	return js, nil
}

// change applies change to the held entries and call to every current
// registration; lookup services joined later get the new entries. It
// returns the first error of a registration (the held item changes
// anyway: the keepers register it again where a call failed because the
// registration was lost).
func (m *Manager) change(ctx context.Context, entries func([]client.Entry) []client.Entry, call func(*client.ServiceRegistration) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	regs, err := m.registrations()
	if err != nil {
		return err
	}
	m.item.Entries = entries(slices.Clone(m.item.Entries))
	var first error
	for _, j := range regs {
		if err := call(j.reg); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// AddAttributes adds entries to the item everywhere.
func (m *Manager) AddAttributes(ctx context.Context, entries []client.Entry) error {
	return m.change(ctx, func(es []client.Entry) []client.Entry {
		for _, e := range entries {
			if !slices.ContainsFunc(es, func(x client.Entry) bool { return entriesEqual([]client.Entry{x}, []client.Entry{e}) }) {
				es = append(es, e)
			}
		}
		return es
	}, func(reg *client.ServiceRegistration) error { return reg.AddAttributes(ctx, entries) })
}

// SetAttributes replaces the item's entries everywhere.
func (m *Manager) SetAttributes(ctx context.Context, entries []client.Entry) error {
	return m.change(ctx, func([]client.Entry) []client.Entry { return slices.Clone(entries) },
		func(reg *client.ServiceRegistration) error { return reg.SetAttributes(ctx, entries) })
}

// ModifyAttributes changes the entries matching templates everywhere (see
// client.ServiceRegistration.ModifyAttributes). The held item takes the
// entries the first lookup service computed; with no lookup service joined
// there is nothing to compute them, and it fails with FailedPrecondition
// (SetAttributes works offline).
func (m *Manager) ModifyAttributes(ctx context.Context, templates []client.EntryTemplate, changes []client.Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	regs, err := m.registrations()
	if err != nil {
		return err
	}
	var first error
	var computed []client.Entry
	ok := false
	for _, j := range regs {
		if err := j.reg.ModifyAttributes(ctx, templates, changes); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if !ok {
			id := m.item.ID
			if _, items, err := j.r.LookupN(ctx, client.ServiceTemplate{ID: &id}, 1); err == nil && len(items) == 1 {
				computed, ok = items[0].Entries, true
			}
		}
	}
	if !ok {
		if first == nil {
			first = djinn.Errorf(djinn.Unavailable, "join: modify attributes: no lookup service joined to compute the change (use SetAttributes)")
		}
		return first
	}
	m.item.Entries = computed
	return first
}

// Terminate stops the manager and cancels every registration's lease. It
// is safe to call more than once and concurrently.
func (m *Manager) Terminate() error {
	m.mu.Lock()
	if m.done {
		m.mu.Unlock()
		return nil
	}
	m.done = true
	type held struct {
		reg *client.ServiceRegistration
		c   *client.Client
	}
	var regs []held
	for _, j := range m.joined {
		if j.reg != nil {
			regs = append(regs, held{j.reg, j.c})
		}
	}
	m.mu.Unlock()
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, h := range regs {
		// The keepers still hold their clients open: they stop below.
		if err := h.reg.Lease.Cancel(ctx, h.c); err != nil && !errors.Is(err, djinn.ErrUnknownLease) {
			errs = append(errs, err)
		}
	}
	m.cancel()
	m.wg.Wait()
	return errors.Join(errs...)
}
