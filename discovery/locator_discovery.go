package discovery

import (
	"cmp"
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
)

// Locator discovery defaults.
const (
	// DefaultRetryMin is the wait before the second attempt at a locator;
	// it doubles after each failure, with jitter, up to DefaultRetryMax.
	DefaultRetryMin = time.Second
	// DefaultRetryMax caps the wait between attempts.
	DefaultRetryMax = 2 * time.Minute
)

// LookupLocatorDiscoveryConfig configures a LookupLocatorDiscovery. Zero
// fields take the defaults.
type LookupLocatorDiscoveryConfig struct {
	// Locators are the lookup services to discover.
	Locators []Locator
	// RetryMin and RetryMax bound the wait between attempts at a locator
	// not yet discovered (DefaultRetryMin, DefaultRetryMax).
	RetryMin, RetryMax time.Duration
	// Timeout bounds each unicast exchange (DefaultTimeout).
	Timeout time.Duration
	// MaxResponseSize bounds each unicast answer read
	// (DefaultMaxResponseSize).
	MaxResponseSize int
	// Listener, if set, receives the events as LookupDiscoveryConfig's
	// does; without one they go to the channel Events returns.
	Listener func(Event)
	// Logger gets what goes wrong; nil discards it.
	Logger *slog.Logger
}

// LookupLocatorDiscoveryStats are a LookupLocatorDiscovery's counters, for
// metrics. Each only grows.
type LookupLocatorDiscoveryStats struct {
	Attempts uint64 // unicast discoveries tried
	Failures uint64 // attempts that failed, to be retried
}

// LookupLocatorDiscovery discovers lookup services by locator with unicast
// discovery (Jini's net.jini.discovery.LookupLocatorDiscovery): it tries
// each locator, retrying with capped exponential backoff, until the
// registrar answers; then it reports it and stops trying, until the
// registrar is discarded (Discard), which starts the attempts over, or the
// locator removed. Each locator is discovered on its own: two locators that
// reach one registrar give two Discovered events (LookupDiscoveryManager
// merges them). Its methods are safe for concurrent use.
type LookupLocatorDiscovery struct {
	cfg    LookupLocatorDiscoveryConfig // normalized; read-only
	log    *slog.Logger
	events *notifier
	stats  counters[LookupLocatorDiscoveryStats]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	locs   map[Locator]*target // guarded by mu
	closed bool                // guarded by mu
}

// target is one locator being discovered or discovered.
type target struct {
	cancel context.CancelFunc
	found  *RegistrarInfo // guarded by LookupLocatorDiscovery.mu; nil until discovered
	rearm  chan struct{}  // a discard asks for discovery again
}

// NewLookupLocatorDiscovery starts discovering cfg.Locators. Close stops it.
func NewLookupLocatorDiscovery(cfg LookupLocatorDiscoveryConfig) (*LookupLocatorDiscovery, error) {
	cfg.RetryMin = orDefault(cfg.RetryMin, DefaultRetryMin)
	cfg.RetryMax = orDefault(cfg.RetryMax, DefaultRetryMax)
	cfg.Timeout = orDefault(cfg.Timeout, DefaultTimeout)
	cfg.MaxResponseSize = orDefault(cfg.MaxResponseSize, DefaultMaxResponseSize)
	if cfg.RetryMin < 0 || cfg.RetryMax < cfg.RetryMin || cfg.Timeout < 0 || cfg.MaxResponseSize < 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "locator discovery: retry %v to %v, timeout %v, max response size %d: want 0 <= min <= max and no negatives",
			cfg.RetryMin, cfg.RetryMax, cfg.Timeout, cfg.MaxResponseSize)
	}
	if err := checkLocators(cfg.Locators); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &LookupLocatorDiscovery{cfg: cfg, log: log, events: newNotifier(cfg.Listener), locs: make(map[Locator]*target)}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.wg.Add(1)
	go func() { defer d.wg.Done(); d.events.run(d.ctx) }()
	d.mu.Lock()
	d.addLocked(cfg.Locators)
	d.mu.Unlock()
	return d, nil
}

// checkLocators accepts only canonical locators (from ParseLocator or
// NewLocator), so that == on them means one address.
func checkLocators(locs []Locator) error {
	for _, l := range locs {
		c, err := NewLocator(l.Host, l.Port)
		if err != nil {
			return err
		}
		if c != l {
			return djinn.Errorf(djinn.InvalidArgument, "locator host %q: not canonical, want %q (use ParseLocator or NewLocator)", l.Host, c.Host)
		}
	}
	return nil
}

// Events returns the channel of events, which must be read; it is closed
// when Close returns, and nil with a Listener.
func (d *LookupLocatorDiscovery) Events() <-chan Event { return d.events.out }

// Stats returns the counters.
func (d *LookupLocatorDiscovery) Stats() LookupLocatorDiscoveryStats { return d.stats.get() }

// Locators returns the locators being discovered or discovered, sorted.
func (d *LookupLocatorDiscovery) Locators() []Locator {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Locator, 0, len(d.locs))
	for l := range d.locs {
		out = append(out, l)
	}
	sortLocators(out)
	return out
}

func sortLocators(ls []Locator) {
	slices.SortFunc(ls, func(a, b Locator) int {
		if c := cmp.Compare(a.Host, b.Host); c != 0 {
			return c
		}
		return cmp.Compare(a.Port, b.Port)
	})
}

// Registrars returns the registrars discovered, one per service id, sorted
// by it.
func (d *LookupLocatorDiscovery) Registrars() []RegistrarInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := make(map[djinn.ID]bool)
	var out []RegistrarInfo
	for _, l := range d.sortedLocked() {
		if f := d.locs[l].found; f != nil && !seen[f.ServiceID] {
			seen[f.ServiceID] = true
			out = append(out, f.clone())
		}
	}
	sortInfos(out)
	return out
}

func (d *LookupLocatorDiscovery) sortedLocked() []Locator {
	ls := make([]Locator, 0, len(d.locs))
	for l := range d.locs {
		ls = append(ls, l)
	}
	sortLocators(ls)
	return ls
}

// AddLocators adds locators to discover; those already there are left
// alone.
func (d *LookupLocatorDiscovery) AddLocators(locs ...Locator) error {
	if err := checkLocators(locs); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.addLocked(locs)
	return nil
}

// RemoveLocators stops discovering locators; the registrars discovered
// there are discarded (Removed).
func (d *LookupLocatorDiscovery) RemoveLocators(locs ...Locator) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	d.removeLocked(locs)
	return nil
}

// SetLocators replaces the locators to discover.
func (d *LookupLocatorDiscovery) SetLocators(locs ...Locator) error {
	if err := checkLocators(locs); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	var gone []Locator
	for _, l := range d.sortedLocked() {
		if !slices.Contains(locs, l) {
			gone = append(gone, l)
		}
	}
	d.removeLocked(gone)
	d.addLocked(locs)
	return nil
}

// Discard drops the registrar with this id, wherever it was discovered, and
// starts discovering its locators again.
func (d *LookupLocatorDiscovery) Discard(id djinn.ID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	for _, l := range d.sortedLocked() {
		t := d.locs[l]
		if t.found != nil && t.found.ServiceID == id {
			d.events.push(Event{Kind: Discarded, Registrar: t.found.clone(), Reason: ByUser})
			t.found = nil
			select {
			case t.rearm <- struct{}{}:
			default:
			}
		}
	}
}

func (d *LookupLocatorDiscovery) addLocked(locs []Locator) {
	for _, l := range locs {
		if _, ok := d.locs[l]; ok {
			continue
		}
		ctx, cancel := context.WithCancel(d.ctx)
		t := &target{cancel: cancel, rearm: make(chan struct{}, 1)}
		d.locs[l] = t
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.discover(ctx, l, t)
		}()
	}
}

func (d *LookupLocatorDiscovery) removeLocked(locs []Locator) {
	for _, l := range locs {
		t, ok := d.locs[l]
		if !ok {
			continue
		}
		delete(d.locs, l)
		t.cancel()
		if t.found != nil {
			d.events.push(Event{Kind: Discarded, Registrar: t.found.clone(), Reason: Removed})
		}
	}
}

// discover tries a locator until its registrar answers, reports it, and
// waits for a discard to start over.
func (d *LookupLocatorDiscovery) discover(ctx context.Context, loc Locator, t *target) {
	wait := time.Duration(0)
	for {
		if wait > 0 {
			timer := time.NewTimer(jitter(wait))
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-timer.C:
			}
		}
		info, err := unicast(ctx, loc, d.cfg.Timeout, d.cfg.MaxResponseSize)
		if ctx.Err() != nil {
			return
		}
		d.stats.add(func(s *LookupLocatorDiscoveryStats) {
			s.Attempts++
			if err != nil {
				s.Failures++
			}
		})
		if err != nil {
			d.log.Debug("djinn locator discovery: attempt failed", "locator", loc.String(), "retry in", wait, "err", err)
			wait = min(max(2*wait, d.cfg.RetryMin), d.cfg.RetryMax)
			continue
		}
		d.mu.Lock()
		if ctx.Err() != nil { // removed or closed meanwhile
			d.mu.Unlock()
			return
		}
		t.found = &info
		d.events.push(Event{Kind: Discovered, Registrar: info.clone()})
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.rearm:
		}
		wait = d.cfg.RetryMin
	}
}

// jitter spreads a wait over [0.8, 1.2) of itself, so that clients that
// lost one registrar together do not retry together.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// Close stops discovery and waits for its goroutines; the event channel is
// closed and undelivered events are dropped. Later calls return nil.
func (d *LookupLocatorDiscovery) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	return nil
}
