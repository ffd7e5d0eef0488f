package lds

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Discoverer is the discovery the leader runs for the registrations: a
// discovery.LookupDiscoveryManager, or an in-memory one in tests. Its
// methods are safe for concurrent use and do not block for long.
type Discoverer interface {
	// Events returns the channel of what discovery finds, changes and
	// drops; Discover reads it until its context ends.
	Events() <-chan discovery.Event
	// SetGroups and SetAllGroups set the groups group discovery looks
	// for; Discover calls them only with DiscoverConfig.Groups.
	SetGroups(groups ...string) error
	SetAllGroups() error
	// SetLocators sets the locators to discover (canonical ones).
	SetLocators(locs ...discovery.Locator) error
	// Discard drops a lookup service, to be found again; its Discarded
	// event has the reason discovery.ByUser.
	Discard(id djinn.ID)
}

var _ Discoverer = (*discovery.LookupDiscoveryManager)(nil)

// DiscoverConfig configures the leader's discovery. Zero values take the
// defaults.
type DiscoverConfig struct {
	// Groups: the Discoverer runs group discovery (multicast), and is
	// given the union of the registrations' groups. Without it lookup
	// services are found at locators only, and registrations that want
	// groups hear of those found there whose groups they want.
	Groups bool
	// Locators are looked for besides the registrations' own: this
	// server's lookup service, say.
	Locators []discovery.Locator
	// Grace is how long a lookup service of the table may stay unfound by
	// this leader's discovery, after it starts or after a client discarded
	// the lookup service, before it is logged lost (default 6 minutes,
	// three announcement intervals).
	Grace time.Duration
	// Coalesce is how long findings are gathered into one log entry
	// (default 10ms), so that the lookup services found together make one
	// event per registration (LD.4.2).
	Coalesce time.Duration
	// Retry is the wait before logging a finding again after the log
	// refused it (default 1s).
	Retry time.Duration
}

// Discover runs discovery for the registrations until ctx ends: only the
// leader runs it. It hands d the union of the registrations' managed sets,
// again whenever the union changes; it logs what d finds or hears changed
// (LDSFound, gathered for Coalesce) and what it loses (LDSLost); it has d
// drop the lookup services clients discard, so that they are found again;
// and it logs lost the lookup services of the table that d does not find
// within Grace: those a previous leader knew, those clients discarded, and
// those d dropped as no longer looked for while registrations still want
// them. Only d's communication discards (Unreachable, Left) are losses
// (LD.3.1): the discards it asks for (ByUser) are not logged, and those
// for lack of interest (NoInterest, Removed), which its own narrowing
// causes, are logged as such (LDSLost, unwanted), so that only the
// registrations that no longer want the lookup service discard it.
func (s *Service) Discover(ctx context.Context, d Discoverer, cfg DiscoverConfig) {
	if cfg.Grace <= 0 {
		cfg.Grace = 3 * discovery.DefaultAnnouncementInterval
	}
	if cfg.Coalesce <= 0 {
		cfg.Coalesce = 10 * time.Millisecond
	}
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	s.mu.Lock()
	s.discovering, s.discards = true, nil
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.discovering, s.discards = false, nil
		s.mu.Unlock()
	}()
	r := &runner{s: s, d: d, cfg: cfg, held: map[djinn.ID]bool{}, found: map[djinn.ID]*djinnpb.DiscoveredRegistrar{}, missing: map[djinn.ID]time.Time{},
		flush: stoppedTimer(), lost: stoppedTimer()}
	defer r.flush.Stop()
	defer r.lost.Stop()
	now := s.now()
	for _, k := range s.state.Known() {
		r.missing[k.ID] = now.Add(cfg.Grace)
	}
	r.resync()
	r.armLost()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.changed:
			r.resync()
		case <-s.kick:
			s.mu.Lock()
			ids := s.discards
			s.discards = nil
			s.mu.Unlock()
			for _, id := range ids {
				d.Discard(id)
				r.drop(id)
			}
			r.armLost()
		case ev, ok := <-d.Events():
			if !ok {
				return
			}
			r.heard(ctx, ev)
		case <-r.flush.C:
			r.logFound(ctx)
		case <-r.lost.C:
			r.logLost(ctx)
		}
	}
}

// runner is the state of one Discover run, owned by its loop.
type runner struct {
	s   *Service
	d   Discoverer
	cfg DiscoverConfig

	version uint64                                    // of the union last handed to d
	held    map[djinn.ID]bool                         // what d holds now
	found   map[djinn.ID]*djinnpb.DiscoveredRegistrar // findings not yet logged
	missing map[djinn.ID]time.Time                    // unheld lookup services of the table, lost at the time
	flush   *time.Timer                               // logs found
	lost    *time.Timer                               // logs the missing that are due
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// resync hands d the union of the managed sets, if it changed.
func (r *runner) resync() {
	w := r.s.state.Wanted()
	if w.Version == r.version {
		return
	}
	r.version = w.Version
	log := r.s.cfg.Logger
	if r.cfg.Groups {
		var err error
		if w.AllGroups {
			err = r.d.SetAllGroups()
		} else {
			err = r.d.SetGroups(w.Groups...)
		}
		if err != nil {
			log.Warn("lds: setting the groups to discover", "err", err)
		}
	}
	locs := slices.Clone(r.cfg.Locators)
	for _, s := range w.Locators {
		if l, err := discovery.ParseLocator(s); err == nil {
			locs = append(locs, l)
		}
	}
	if err := r.d.SetLocators(locs...); err != nil {
		log.Warn("lds: setting the locators to discover", "err", err)
	}
}

// heard takes one discovery event.
func (r *runner) heard(ctx context.Context, ev discovery.Event) {
	id := ev.Registrar.ServiceID
	info := ev.Registrar
	pb := &djinnpb.DiscoveredRegistrar{ServiceId: id[:], Endpoint: info.Endpoint, Locator: info.Locator.String(), Groups: info.Groups}
	switch ev.Kind {
	case discovery.Discovered, discovery.Changed:
		if _, err := RegistrarFromProto(pb); err != nil {
			r.s.cfg.Logger.Warn("lds: discovery found a lookup service the state cannot take; ignored", "registrar", id, "err", err)
			return
		}
		r.held[id] = true
		delete(r.missing, id)
		if len(r.found) == 0 {
			r.flush.Reset(r.cfg.Coalesce)
		}
		r.found[id] = pb
	case discovery.Discarded:
		switch ev.Reason {
		case discovery.ByUser:
			// Ours, for a client's discard: found again, or lost in Grace.
			r.drop(id)
			r.armLost()
		case discovery.NoInterest, discovery.Removed:
			// What discovery looks for no longer takes it: no loss if
			// it looks for it again (the state decides, in log order),
			// and then only registrations that no longer want it
			// discard it; found again, or lost in Grace.
			r.drop(id)
			r.armLost()
			r.proposeUnwanted(ctx, pb)
		default:
			delete(r.held, id)
			delete(r.found, id)
			delete(r.missing, id)
			r.proposeLost(ctx, []djinn.ID{id})
		}
	}
}

// proposeUnwanted logs a lookup service discovery no longer looks for
// (LDSLost, unwanted). Should the log refuse it, the lookup service stays
// missing, and is logged lost after Grace unless found again.
func (r *runner) proposeUnwanted(ctx context.Context, pb *djinnpb.DiscoveredRegistrar) {
	if _, err := storedRegistrar(pb); err != nil {
		return // never taken, so nothing to drop
	}
	c := &statepb.LDSLost{Unwanted: true, Registrars: []*djinnpb.DiscoveredRegistrar{pb}, GroupDiscovery: r.cfg.Groups}
	if _, err := r.s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LdsLost{LdsLost: c}}); err != nil && ctx.Err() == nil {
		r.s.cfg.Logger.Warn("lds: logging a lookup service no longer looked for failed; it is lost after the grace period unless found again", "err", err)
	}
}

// drop notes that d no longer holds id, which the table may know.
func (r *runner) drop(id djinn.ID) {
	delete(r.held, id)
	delete(r.found, id)
	if _, ok := r.missing[id]; !ok {
		r.missing[id] = r.s.now().Add(r.cfg.Grace)
	}
}

// logFound logs the findings gathered, in one LDSFound.
func (r *runner) logFound(ctx context.Context) {
	if len(r.found) == 0 {
		return
	}
	ids := slices.SortedFunc(maps.Keys(r.found), func(a, b djinn.ID) int { return bytes.Compare(a[:], b[:]) })
	c := &statepb.LDSFound{}
	for _, id := range ids {
		c.Registrars = append(c.Registrars, r.found[id])
	}
	if _, err := r.s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LdsFound{LdsFound: c}}); err != nil {
		if ctx.Err() == nil {
			r.s.cfg.Logger.Warn("lds: logging lookup services found failed; retrying", "err", err)
			r.flush.Reset(r.cfg.Retry)
		}
		return
	}
	clear(r.found)
}

// logLost logs lost the missing lookup services that are due.
func (r *runner) logLost(ctx context.Context) {
	now := r.s.now()
	var due []djinn.ID
	for id, at := range r.missing {
		if !at.After(now) {
			due = append(due, id)
			delete(r.missing, id)
		}
	}
	sortIDs(due)
	r.proposeLost(ctx, due)
	r.armLost()
}

// proposeLost logs lookup services lost; those the log refuses are tried
// again after Retry.
func (r *runner) proposeLost(ctx context.Context, ids []djinn.ID) {
	if len(ids) == 0 {
		return
	}
	c := &statepb.LDSLost{}
	for _, id := range ids {
		c.ServiceIds = append(c.ServiceIds, id[:])
	}
	if _, err := r.s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LdsLost{LdsLost: c}}); err != nil {
		if ctx.Err() == nil {
			r.s.cfg.Logger.Warn("lds: logging lookup services lost failed; retrying", "err", err)
			for _, id := range ids {
				r.missing[id] = r.s.now().Add(r.cfg.Retry)
			}
			r.armLost()
		}
	}
}

// armLost sets the lost timer for the earliest missing lookup service.
func (r *runner) armLost() {
	r.lost.Stop()
	if len(r.missing) == 0 {
		return
	}
	first := time.Time{}
	for _, at := range r.missing {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	r.lost.Reset(max(first.Sub(r.s.now()), 0))
}
