package lookup

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/backoff"
	"github.com/djinn-go/djinn/service"
)

// ServiceDiscoveryManagerConfig configures a ServiceDiscoveryManager.
type ServiceDiscoveryManagerConfig struct {
	// LeaseDuration is the lease asked for each cache's event registration
	// at each lookup service (default djinn.Any); they are renewed until
	// the cache is terminated.
	LeaseDuration time.Duration
	// ListenAddr is where the manager's event listener listens (default
	// DefaultListenAddr, loopback): lookup services must be able to reach
	// it. ListenOptions configure it (TLS, an advertised address).
	ListenAddr    string
	ListenOptions []client.ListenOption
	// DialOptions are used to reach lookup services (TLS, ...).
	DialOptions []client.Option
	// RetryMin and RetryMax bound the wait before retrying a lookup service
	// that could not be reached (defaults DefaultRetryMin and
	// DefaultRetryMax).
	RetryMin, RetryMax time.Duration
	// Logger gets what goes wrong; nil discards it.
	Logger *slog.Logger
}

// ServiceDiscoveryManager finds services at the lookup services a
// discovery source finds (Jini's net.jini.lookup.ServiceDiscoveryManager):
// one-off lookups across all of them, and LookupCaches that follow their
// changes. See the package doc. Its methods are safe for concurrent use.
type ServiceDiscoveryManager struct {
	cfg  ServiceDiscoveryManagerConfig
	log  *slog.Logger // the manager's: part is the manager
	base *slog.Logger // the configured one, for the caches' (each key once)
	dm   DiscoveryManagement
	pool *client.Pool // for the caches' renewers and lease cancellations

	ctx      context.Context // cancelled by Terminate; owned, never a caller's
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the discovery follower and the registrar connections
	done     chan struct{}
	termOnce sync.Once

	mu         sync.Mutex
	regs       map[djinn.ID]*registrar   // guarded by mu: the registrars discovered, by service id
	caches     map[*LookupCache]struct{} // guarded by mu
	host       *client.Listener          // guarded by mu: the event listener's server, started by the first cache
	terminated bool                      // guarded by mu
}

// registrar is one discovered lookup service and the manager's connection
// to it, made in the background. c and r are set before ready is closed
// and never change; the connection closes when ctx ends (the registrar
// was discarded, or moved to another endpoint).
type registrar struct {
	info   discovery.RegistrarInfo
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{}
	c      *client.Client
	r      *client.Registrar
}

// connected returns the registrar's client, or nil while not connected.
func (r *registrar) connected() *client.Registrar {
	select {
	case <-r.ready:
		return r.r
	default:
		return nil
	}
}

// NewServiceDiscoveryManager starts following the lookup services dm
// discovers. The manager is dm's only reader; it does not close dm.
func NewServiceDiscoveryManager(dm DiscoveryManagement, cfg ServiceDiscoveryManagerConfig) (*ServiceDiscoveryManager, error) {
	const what = "service discovery manager"
	events, err := checkDiscovery(what, dm)
	if err != nil {
		return nil, err
	}
	if cfg.LeaseDuration, cfg.RetryMin, cfg.RetryMax, err = settings(what, cfg.LeaseDuration, cfg.RetryMin, cfg.RetryMax); err != nil {
		return nil, err
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = DefaultListenAddr
	}
	m := &ServiceDiscoveryManager{
		cfg: cfg, log: cfg.Logger, dm: dm, pool: client.NewPool(cfg.DialOptions...), done: make(chan struct{}),
		regs: map[djinn.ID]*registrar{}, caches: map[*LookupCache]struct{}{},
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.base = m.log
	m.log = m.log.With("part", what)
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		followDiscovery(m.ctx, events, m.heard)
	}()
	return m, nil
}

// Done is closed when Terminate has finished.
func (m *ServiceDiscoveryManager) Done() <-chan struct{} { return m.done }

// Registrars returns the lookup services discovered and connected to,
// sorted by service id.
func (m *ServiceDiscoveryManager) Registrars() []discovery.RegistrarInfo {
	var out []discovery.RegistrarInfo
	for _, r := range m.connected() {
		info := r.info
		info.Groups = slices.Clone(info.Groups)
		out = append(out, info)
	}
	return out
}

// connected returns the registrars connected to, sorted by service id.
func (m *ServiceDiscoveryManager) connected() []*registrar {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*registrar
	for _, r := range m.regs {
		if r.connected() != nil {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *registrar) int { return bytes.Compare(a.info.ServiceID[:], b.info.ServiceID[:]) })
	return out
}

func (m *ServiceDiscoveryManager) heard(ev discovery.Event) {
	id := ev.Registrar.ServiceID
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.terminated {
		return
	}
	old := m.regs[id]
	switch ev.Kind {
	case discovery.Discovered, discovery.Changed:
		if old != nil && old.info.Endpoint == ev.Registrar.Endpoint {
			return // new groups change nothing here
		}
		if old != nil {
			old.cancel()
		}
		ctx, cancel := context.WithCancel(m.ctx)
		r := &registrar{info: ev.Registrar, ctx: ctx, cancel: cancel, ready: make(chan struct{})}
		r.info.Groups = slices.Clone(r.info.Groups)
		m.regs[id] = r
		m.wg.Add(1) // the follower holds a count: Terminate's Wait cannot have seen zero
		go m.connect(r)
		for c := range m.caches {
			c.attach(r)
		}
	case discovery.Discarded:
		if old == nil {
			return
		}
		old.cancel()
		delete(m.regs, id)
		for c := range m.caches {
			c.detach(old)
		}
	}
}

// connect connects to r, retrying while it cannot be reached, and closes
// the connection when r is dropped. An endpoint that proves to be no
// lookup service, or another one, is discarded.
func (m *ServiceDiscoveryManager) connect(r *registrar) {
	defer m.wg.Done()
	log := m.log.With("registrar", r.info.ServiceID, "endpoint", r.info.Endpoint)
	c, reg, err := dialRegistrar(r.ctx, r.info, m.cfg.DialOptions, backoff.New(m.cfg.RetryMin, m.cfg.RetryMax), log)
	if err != nil {
		if r.ctx.Err() == nil {
			log.Warn("discarding the registrar: discovery misnamed it", "err", err)
			m.dm.Discard(r.info.ServiceID)
		}
		return
	}
	r.c, r.r = c, reg
	close(r.ready)
	<-r.ctx.Done()
	c.Close()
}

// Lookup asks every lookup service connected to now for the services
// matching tmpl that filter (nil: every one) accepts, and returns up to
// maxMatches of them (Jini's lookup(tmpl, maxMatches, filter)), each
// service once however many lookup services have it. It asks the lookup
// services at once and waits for them all (bound the wait with ctx); one
// that fails is left out, and the call fails only when all fail. With a
// filter every lookup service returns all its matches, since the filter
// may refuse any of them. It does not wait for lookup services to be
// discovered: use a LookupCache and its Wait for that.
func (m *ServiceDiscoveryManager) Lookup(ctx context.Context, tmpl service.Template, filter ItemFilter, maxMatches int) ([]service.Item, error) {
	if maxMatches < 0 || maxMatches > math.MaxInt32 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "max matches %d: must be 0 to %d", maxMatches, math.MaxInt32)
	}
	m.mu.Lock()
	done := m.terminated
	m.mu.Unlock()
	if done {
		return nil, terminated("service discovery manager")
	}
	regs := m.connected()
	if maxMatches == 0 || len(regs) == 0 {
		return nil, nil
	}
	ask := maxMatches
	if filter != nil {
		ask = math.MaxInt32
	}
	found := make([][]service.Item, len(regs))
	errs := make([]error, len(regs))
	var wg sync.WaitGroup
	for i, r := range regs {
		wg.Go(func() {
			_, found[i], errs[i] = r.r.LookupN(ctx, tmpl, ask)
			if errs[i] != nil {
				m.log.Warn("lookup failed", "registrar", r.info.ServiceID, "err", errs[i])
			}
		})
	}
	wg.Wait()
	var out []service.Item
	seen := map[djinn.ID]bool{}
	failed := 0
	for i := range regs {
		if errs[i] != nil {
			failed++
			continue
		}
		for _, it := range found[i] {
			if len(out) == maxMatches {
				return out, nil
			}
			if seen[it.ID] {
				continue
			}
			seen[it.ID] = true
			if filter == nil || filter(it.Clone()) {
				out = append(out, it)
			}
		}
	}
	if failed == len(regs) {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// CreateLookupCache starts a cache of the services matching tmpl that
// filter (nil: every one) accepts, at every lookup service discovered now
// or later (Jini's createLookupCache). listener, if not nil, hears of the
// cache's changes (see LookupCache). It returns at once; the cache fills in
// the background. ctx bounds only the setup: the cache lives until
// Terminate.
func (m *ServiceDiscoveryManager) CreateLookupCache(ctx context.Context, tmpl service.Template, filter ItemFilter, listener ServiceDiscoveryListener) (*LookupCache, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.terminated {
		return nil, terminated("service discovery manager")
	}
	if m.host == nil {
		h, err := client.Listen(m.ctx, m.cfg.ListenAddr, func(context.Context, *client.RemoteEvent) error {
			return djinn.Errorf(djinn.UnknownEvent, "service discovery manager: no cache listens here")
		}, m.cfg.ListenOptions...)
		if err != nil {
			return nil, err
		}
		m.host = h
	}
	c, err := newLookupCache(m, tmpl, filter, listener)
	if err != nil {
		return nil, err
	}
	m.caches[c] = struct{}{}
	for _, r := range m.regs {
		c.attach(r)
	}
	return c, nil
}

// forget drops a terminated cache.
func (m *ServiceDiscoveryManager) forget(c *LookupCache) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.caches, c)
}

// Terminate stops the manager (Jini's terminate): it terminates every
// cache (cancelling their event registrations), stops following discovery
// and closes its connections and its event listener. The discovery source
// is not closed. The first call returns the caches' termination failures;
// later and concurrent calls wait for the first and return nil. It must not
// be called from a cache's listener.
func (m *ServiceDiscoveryManager) Terminate() error {
	first := false
	var err error
	m.termOnce.Do(func() {
		first = true
		m.mu.Lock()
		m.terminated = true
		var caches []*LookupCache
		for c := range m.caches {
			caches = append(caches, c)
		}
		host := m.host
		m.mu.Unlock()
		var errs []error
		for _, c := range caches {
			errs = append(errs, c.Terminate())
		}
		m.cancel()
		m.wg.Wait()
		if host != nil {
			host.Close()
		}
		m.pool.Close()
		err = errors.Join(errs...)
		close(m.done)
	})
	<-m.done
	if first {
		return err
	}
	return nil
}
