package discovery

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
)

// DefaultSRVInterval is how often a LookupDiscoveryManager resolves its SRV
// domain again.
const DefaultSRVInterval = 5 * time.Minute

// LookupDiscoveryManagerConfig configures a LookupDiscoveryManager.
type LookupDiscoveryManagerConfig struct {
	// Groups configures group discovery; its Listener must be nil (the
	// manager listens).
	Groups LookupDiscoveryConfig
	// DisableMulticast runs no group discovery at all (no multicast
	// socket), for networks without multicast; the group methods then
	// return ErrMulticastDisabled.
	DisableMulticast bool
	// Locators configures locator discovery; its Listener must be nil.
	// Static seeds go in Locators.Locators (see ParseSeeds).
	Locators LookupLocatorDiscoveryConfig

	// SRVDomain, if set, adds the locators of the SRV records of
	// _jini._tcp.<SRVDomain>, resolved at start and every SRVInterval
	// (DefaultSRVInterval) with Resolver (net.DefaultResolver when nil).
	// Locators that leave the records are removed, unless also set
	// directly.
	SRVDomain   string
	SRVInterval time.Duration
	Resolver    SRVResolver

	// Listener, if set, receives the events as LookupDiscoveryConfig's
	// does; without one they go to the channel Events returns.
	Listener func(Event)
	// Logger gets what goes wrong; nil discards it. It is also the
	// default logger of Groups and Locators.
	Logger *slog.Logger
}

// LookupDiscoveryManager discovers lookup services by group and by locator
// at once (Jini's net.jini.discovery.LookupDiscoveryManager), and reports
// each registrar once, by service id, however many ways found it: it is
// Discovered when the first finds it and Discarded when the last lets it
// go — or at once when group discovery finds it unreachable, which makes
// locator discovery let it go too and look for it again (River's
// manager does the same). Its methods are safe for concurrent use.
type LookupDiscoveryManager struct {
	cfg    LookupDiscoveryManagerConfig
	log    *slog.Logger
	group  *LookupDiscovery // nil with DisableMulticast
	loc    *LookupLocatorDiscovery
	events *notifier

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	regs   map[djinn.ID]*merged // guarded by mu
	static []Locator            // guarded by mu: locators set directly
	srv    []Locator            // guarded by mu: locators from SRV records
	closed bool                 // guarded by mu

	merges counters[uint64] // events of the two utilities merged, for tests
}

// merged is one registrar as the two utilities found it.
type merged struct {
	info     RegistrarInfo
	byGroup  bool // group discovery holds it
	byLoc    int  // how many locators of locator discovery hold it
	reported bool // a Discovered went out and no Discarded since
}

// NewLookupDiscoveryManager starts group discovery (unless disabled),
// locator discovery and the SRV resolution. Close stops them.
func NewLookupDiscoveryManager(cfg LookupDiscoveryManagerConfig) (*LookupDiscoveryManager, error) {
	if cfg.Groups.Listener != nil || cfg.Locators.Listener != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup discovery manager: set Listener on the manager, not on Groups or Locators")
	}
	cfg.SRVInterval = orDefault(cfg.SRVInterval, DefaultSRVInterval)
	if cfg.SRVInterval < 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup discovery manager srv interval %v: must be positive", cfg.SRVInterval)
	}
	if err := checkLocators(cfg.Locators.Locators); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &LookupDiscoveryManager{
		cfg: cfg, log: log, events: newNotifier(cfg.Listener),
		regs: make(map[djinn.ID]*merged), static: slices.Clone(cfg.Locators.Locators),
	}
	lcfg := cfg.Locators
	lcfg.Listener = func(e Event) { m.heard(false, e) }
	lcfg.Logger = cmpOr(lcfg.Logger, log)
	var err error
	if m.loc, err = NewLookupLocatorDiscovery(lcfg); err != nil {
		return nil, err
	}
	if !cfg.DisableMulticast {
		gcfg := cfg.Groups
		gcfg.Listener = func(e Event) { m.heard(true, e) }
		gcfg.Logger = cmpOr(gcfg.Logger, log)
		if m.group, err = NewLookupDiscovery(gcfg); err != nil {
			m.loc.Close()
			return nil, err
		}
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.events.run(m.ctx) }()
	if cfg.SRVDomain != "" {
		m.wg.Add(1)
		go m.resolveSRV()
	}
	return m, nil
}

func cmpOr(l, def *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return def
}

// heard merges an event of one of the two utilities. Each utility reports a
// registrar (or, for locator discovery, a registrar at one locator) as
// Discovered at most once before its Discarded, which the counts rely on.
func (m *LookupDiscoveryManager) heard(byGroup bool, e Event) {
	defer m.merges.add(func(n *uint64) { *n++ })
	if m.merge(byGroup, e) {
		// Unreachable for group discovery is unreachable: locator
		// discovery lets it go too, and looks for it again (DU.2.4.1).
		m.loc.Discard(e.Registrar.ServiceID)
	}
}

// merge applies an event of one of the two utilities and reports whether
// locator discovery must discard the registrar: group discovery found it
// unreachable (a communication discard) while locator discovery holds it
// too. Such a registrar is reported Discarded at once; the Discarded
// events locator discovery then sends find nothing left to change.
func (m *LookupDiscoveryManager) merge(byGroup bool, e Event) (dropLoc bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	id := e.Registrar.ServiceID
	r := m.regs[id]
	switch e.Kind {
	case Discovered:
		if r == nil {
			r = &merged{}
			m.regs[id] = r
		}
		if byGroup {
			r.byGroup = true
		} else {
			r.byLoc++
		}
		if !r.reported {
			r.info, r.reported = e.Registrar.clone(), true
			m.events.push(Event{Kind: Discovered, Registrar: e.Registrar.clone()})
		} else if !r.info.sameAs(e.Registrar) {
			r.info = e.Registrar.clone()
			m.events.push(Event{Kind: Changed, Registrar: e.Registrar.clone()})
		}
	case Changed:
		if r != nil && r.reported && !r.info.sameAs(e.Registrar) {
			r.info = e.Registrar.clone()
			m.events.push(Event{Kind: Changed, Registrar: e.Registrar.clone()})
		}
	case Discarded:
		if r == nil {
			return false
		}
		unreachable := byGroup && (e.Reason == Unreachable || e.Reason == Left)
		if byGroup {
			r.byGroup = false
		} else if r.byLoc > 0 {
			r.byLoc--
		}
		if !unreachable && (r.byGroup || r.byLoc > 0) {
			return false
		}
		delete(m.regs, id)
		if r.reported {
			info := r.info
			if e.Reason == NoInterest {
				info = e.Registrar // with the groups that made it unwanted
			}
			m.events.push(Event{Kind: Discarded, Registrar: info.clone(), Reason: e.Reason})
		}
		return unreachable && r.byLoc > 0
	}
	return false
}

// Events returns the channel of events, which must be read; it is closed
// when Close returns, and nil with a Listener.
func (m *LookupDiscoveryManager) Events() <-chan Event { return m.events.out }

// Stats returns the counters of group discovery (zero with
// DisableMulticast) and of locator discovery.
func (m *LookupDiscoveryManager) Stats() (LookupDiscoveryStats, LookupLocatorDiscoveryStats) {
	var g LookupDiscoveryStats
	if m.group != nil {
		g = m.group.Stats()
	}
	return g, m.loc.Stats()
}

// Registrars returns the registrars discovered, by service id.
func (m *LookupDiscoveryManager) Registrars() []RegistrarInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []RegistrarInfo
	for _, r := range m.regs {
		if r.reported {
			out = append(out, r.info.clone())
		}
	}
	sortInfos(out)
	return out
}

// Discard drops a registrar from both utilities; it is reported Discarded
// (ByUser) at once and can be discovered again, by either.
func (m *LookupDiscoveryManager) Discard(id djinn.ID) {
	m.mu.Lock()
	if r := m.regs[id]; r != nil && r.reported && !m.closed {
		r.reported = false
		m.events.push(Event{Kind: Discarded, Registrar: r.info.clone(), Reason: ByUser})
	}
	m.mu.Unlock()
	if m.group != nil {
		m.group.Discard(id)
	}
	m.loc.Discard(id)
}

// Groups returns the groups discovered, as LookupDiscovery.Groups does.
func (m *LookupDiscoveryManager) Groups() (groups []string, all bool, err error) {
	if m.group == nil {
		return nil, false, ErrMulticastDisabled
	}
	groups, all = m.group.Groups()
	return groups, all, nil
}

// SetGroups replaces the groups discovered (LookupDiscovery.SetGroups).
func (m *LookupDiscoveryManager) SetGroups(groups ...string) error {
	if m.group == nil {
		return ErrMulticastDisabled
	}
	return m.group.SetGroups(groups...)
}

// SetAllGroups discovers every group (LookupDiscovery.SetAllGroups).
func (m *LookupDiscoveryManager) SetAllGroups() error {
	if m.group == nil {
		return ErrMulticastDisabled
	}
	return m.group.SetAllGroups()
}

// AddGroups adds groups to discover (LookupDiscovery.AddGroups).
func (m *LookupDiscoveryManager) AddGroups(groups ...string) error {
	if m.group == nil {
		return ErrMulticastDisabled
	}
	return m.group.AddGroups(groups...)
}

// RemoveGroups stops discovering groups (LookupDiscovery.RemoveGroups).
func (m *LookupDiscoveryManager) RemoveGroups(groups ...string) error {
	if m.group == nil {
		return ErrMulticastDisabled
	}
	return m.group.RemoveGroups(groups...)
}

// Locators returns every locator discovered or being discovered, those of
// the SRV records included.
func (m *LookupDiscoveryManager) Locators() []Locator { return m.loc.Locators() }

// AddLocators adds locators to discover. AddLocators, RemoveLocators and
// SetLocators change the locators set directly; those of the SRV records
// come and go with the records.
func (m *LookupDiscoveryManager) AddLocators(locs ...Locator) error {
	return m.changeLocators(func(static []Locator) []Locator { return append(static, locs...) }, locs)
}

// RemoveLocators stops discovering locators set directly; registrars found
// only there are discarded (Removed).
func (m *LookupDiscoveryManager) RemoveLocators(locs ...Locator) error {
	return m.changeLocators(func(static []Locator) []Locator {
		return slices.DeleteFunc(static, func(l Locator) bool { return slices.Contains(locs, l) })
	}, nil)
}

// SetLocators replaces the locators set directly.
func (m *LookupDiscoveryManager) SetLocators(locs ...Locator) error {
	return m.changeLocators(func([]Locator) []Locator { return slices.Clone(locs) }, locs)
}

func (m *LookupDiscoveryManager) changeLocators(change func([]Locator) []Locator, added []Locator) error {
	if err := checkLocators(added); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.static = dedupLocators(change(slices.Clone(m.static)))
	return m.loc.SetLocators(m.unionLocked()...)
}

func (m *LookupDiscoveryManager) unionLocked() []Locator {
	return dedupLocators(append(slices.Clone(m.static), m.srv...))
}

func dedupLocators(ls []Locator) []Locator {
	sortLocators(ls)
	return slices.Compact(ls)
}

// resolveSRV resolves the SRV domain at start and every SRVInterval, and
// hands the union of its locators and the static ones to locator
// discovery. A failed resolution keeps the last locators.
func (m *LookupDiscoveryManager) resolveSRV() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.SRVInterval)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(m.ctx, DefaultTimeout)
		locs, err := LookupSRV(ctx, m.cfg.Resolver, m.cfg.SRVDomain)
		cancel()
		if err != nil {
			if m.ctx.Err() != nil {
				return
			}
			m.log.Warn("djinn lookup discovery manager: srv lookup failed", "domain", m.cfg.SRVDomain, "err", err)
		} else {
			m.mu.Lock()
			if !m.closed {
				m.srv = locs
				if err := m.loc.SetLocators(m.unionLocked()...); err != nil {
					m.log.Warn("djinn lookup discovery manager: srv locators", "err", err)
				}
			}
			m.mu.Unlock()
		}
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close stops both utilities and the SRV resolution and waits for their
// goroutines; the event channel is closed and undelivered events are
// dropped. Later calls return nil.
func (m *LookupDiscoveryManager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	if m.group != nil {
		m.group.Close()
	}
	m.loc.Close()
	return nil
}
