package server

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// LDSID is the object id of the lookup discovery service.
var LDSID = djinn.ID{'l', 'd', 's'}

// LDSConfig tunes the lookup discovery service.
type LDSConfig struct {
	Enabled      bool     `toml:"enabled"`
	DefaultLease Duration `toml:"default-lease"` // registration lease granted for Any
	MaxLease     Duration `toml:"max-lease"`
	// MaxRegistrations bounds the registrations held.
	MaxRegistrations int `toml:"max-registrations"`
	// Multicast runs group discovery by multicast on Interfaces (all
	// multicast-capable ones when empty); without it lookup services are
	// found at the registrations' locators only.
	Multicast  bool     `toml:"multicast"`
	Interfaces []string `toml:"interfaces"`
	// Grace is how long a new leader waits for the lookup services known
	// before to be found again, and how long one a client discarded may
	// take to be found again, before they are discarded as lost (0: three
	// of the lookup service's announcement intervals).
	Grace Duration `toml:"grace"`
}

func (c *LDSConfig) check() error {
	if err := positive("lds max-registrations", c.MaxRegistrations); err != nil {
		return err
	}
	if err := leasePolicy("lds default-lease, max-lease", "", c.DefaultLease, c.MaxLease); err != nil {
		return err
	}
	if g := time.Duration(c.Grace); g < 0 {
		return djinn.Errorf(djinn.InvalidArgument, "lds grace %s: must not be negative", djinn.FormatDuration(g))
	}
	return nil
}

// ldsPart is the lookup discovery service (LD) and, while this node
// leads, the discovery it runs for its registrations. A registration's
// lease cookie is the capability for every call on it (LD.4.1.1).
func ldsPart(s *Server) *part {
	c := s.cfg.LDS
	rpc := &ldsRPC{s: s}
	return &part{
		name:    "lds",
		joins:   &joinKind{typ: service.LookupDiscoveryServiceType, title: "djinn lookup discovery service"},
		enabled: c.Enabled,
		state: func(m *state.Machine) error {
			rpc.st = lds.NewState(m.Leases)
			return m.Add(rpc.st.Part())
		},
		open: func() (err error) {
			rpc.svc, err = lds.NewService(rpc.st, s.lessor, s.node, s.now, s.ref(LDSID), lds.Config{
				Leases:           lease.Policy{Default: time.Duration(c.DefaultLease), Max: time.Duration(c.MaxLease)},
				MaxRegistrations: c.MaxRegistrations,
				Delivery:         event.Config{Sender: client.NewEventSender(s.pool), MaxBatch: 64},
				Logger:           s.log,
			})
			return err
		},
		serve: func(r *registrar) error {
			// A registration is its creator's: others may renew its lease
			// (its cookie), nothing more.
			noReg := func(djinn.ID) error { return lds.ErrNoRegistration }
			return r.serve(&djinnpb.LookupDiscoveryService_ServiceDesc, rpc, Rules{
				"Register":        authenticated,
				"GetRegistration": leaseOwner(s, (*djinnpb.LDSRegistrationRequest).GetLeaseCookie, noReg),
				"GetRegistrars":   leaseOwner(s, (*djinnpb.LDSRegistrationRequest).GetLeaseCookie, noReg),
				"ChangeGroups": checking(leaseOwner(s, (*djinnpb.LDSGroupsRequest).GetLeaseCookie, noReg), func(req *djinnpb.LDSGroupsRequest) error {
					_, err := lds.CheckGroupsChange(req.GetOp(), req.GetAllGroups(), req.GetGroups())
					return err
				}),
				"ChangeLocators": checking(leaseOwner(s, (*djinnpb.LDSLocatorsRequest).GetLeaseCookie, noReg), func(req *djinnpb.LDSLocatorsRequest) error {
					_, err := lds.CheckLocatorsChange(req.GetOp(), req.GetLocators())
					return err
				}),
				"Discard": checking(leaseOwner(s, (*djinnpb.LDSDiscardRequest).GetLeaseCookie, noReg), func(req *djinnpb.LDSDiscardRequest) error {
					_, err := lds.CheckDiscard(req)
					return err
				}),
			})
		},
		run:     func(ctx context.Context) { s.ldsDiscover(ctx, rpc.svc) },
		ref:     s.ref(LDSID),
		metrics: func() []prometheus.Collector { return ldsMetrics(rpc.st, rpc.svc) },
		list:    map[string]lister{"lds-registrations": func(f map[string]string) ([]*djinnpb.Resource, error) { return s.listLDSRegistrations(rpc.st)(f) }},
		page: &page{title: "Lookup discovery", actions: drop(s), view: func(ctx context.Context, _ url.Values) (any, error) {
			return s.ldsView(ctx, rpc.st, rpc.svc), nil
		}},
		status: func(resp *djinnpb.StatusResponse) {
			regs, registrars := rpc.st.Len()
			resp.Counts["lds_registrations"], resp.Counts["lds_registrars"] = int64(regs), int64(registrars)
			if c.Enabled {
				resp.Lds = refProto(s.ref(LDSID)())
			}
		},
		close: func() { rpc.svc.Close() },
	}
}

func ldsMetrics(st *lds.State, svc *lds.Service) []prometheus.Collector {
	return []prometheus.Collector{
		gauge("djinn_lds_registrations", "Lookup discovery registrations.", func() float64 { n, _ := st.Len(); return float64(n) }),
		gauge("djinn_lds_registrars", "Lookup services discovered for the registrations.", func() float64 { _, n := st.Len(); return float64(n) }),
		counter("djinn_lds_delivered_events_total", "Discovery events delivered to listeners.", func() float64 { return float64(svc.DeliveryStats().Delivered) }),
		counter("djinn_lds_delivery_failed_events_total", "Discovery events dropped by a definite failure.", func() float64 { return float64(svc.DeliveryStats().Failed) }),
		counter("djinn_lds_delivery_retried_total", "Discovery event deliveries that failed indefinitely and were retried.", func() float64 { return float64(svc.DeliveryStats().Retried) }),
	}
}

// ldsView is the console's lookup discovery page: every registration with
// its groups and locators and the registrars discovered for it: those the
// reader sees (sees); the totals count every one.
func (s *Server) ldsView(ctx context.Context, st *lds.State, svc *lds.Service) any {
	type reg struct {
		ID         string   `json:"id"`
		Lease      string   `json:"lease"`
		Principal  string   `json:"principal"`
		Groups     string   `json:"groups"`
		Locators   []string `json:"locators"`
		Registrars []string `json:"registrars"`
		EventID    int64    `json:"eventId"`
		Expires    *int64   `json:"expires"`
	}
	_, known := st.Len()
	v := struct {
		Now           int64  `json:"now"`
		Registrars    int    `json:"registrars"`
		Delivered     uint64 `json:"delivered"`
		Registrations []reg  `json:"registrations"`
	}{Now: s.nowMs(), Registrars: known, Delivered: svc.DeliveryStats().Delivered, Registrations: []reg{}}
	for _, l := range st.List() {
		if len(v.Registrations) == maxListed {
			break
		}
		if !sees(ctx, s.principalOf(l.Cookie)) {
			continue
		}
		groups := "all groups"
		if !l.Info.AllGroups {
			groups = client.GroupsOf(l.Info.Groups...).String()
		}
		g := reg{ID: fingerprint(l.Cookie), Lease: fingerprint(l.Cookie), Principal: s.principalOf(l.Cookie), Groups: groups, Locators: append([]string{}, l.Info.Locators...),
			Registrars: []string{}, EventID: l.Info.EventID, Expires: s.expiresMs(l.Cookie)}
		for _, r := range l.Registrars {
			g.Registrars = append(g.Registrars, fmt.Sprintf("%s at %s (groups %s)", r.ID, r.Endpoint, client.GroupsOf(r.Groups...)))
		}
		v.Registrations = append(v.Registrations, g)
	}
	return v
}

// ldsRPC serves the LookupDiscoveryService. A registration is named by its
// lease's cookie.
type ldsRPC struct {
	djinnpb.UnimplementedLookupDiscoveryServiceServer
	s   *Server
	st  *lds.State
	svc *lds.Service
}

func (r *ldsRPC) Register(ctx context.Context, req *djinnpb.LDSRegisterRequest) (*djinnpb.LDSRegistration, error) {
	reg, err := r.svc.Register(ctx, req)
	if err != nil {
		return nil, err
	}
	return &djinnpb.LDSRegistration{Registration: &djinnpb.EventRegistration{EventId: reg.EventID, Source: refProto(r.s.ref(LDSID)()), Lease: reg.Lease}}, nil
}

func (r *ldsRPC) GetRegistration(_ context.Context, req *djinnpb.LDSRegistrationRequest) (*djinnpb.LDSRegistrationState, error) {
	return r.svc.Get(req.GetLeaseCookie())
}

func (r *ldsRPC) GetRegistrars(_ context.Context, req *djinnpb.LDSRegistrationRequest) (*djinnpb.LDSRegistrarsResponse, error) {
	rs, err := r.svc.Registrars(req.GetLeaseCookie())
	if err != nil {
		return nil, err
	}
	return &djinnpb.LDSRegistrarsResponse{Registrars: rs}, nil
}

func (r *ldsRPC) ChangeGroups(ctx context.Context, req *djinnpb.LDSGroupsRequest) (*djinnpb.LDSRegistrationState, error) {
	return r.svc.ChangeGroups(ctx, req)
}

func (r *ldsRPC) ChangeLocators(ctx context.Context, req *djinnpb.LDSLocatorsRequest) (*djinnpb.LDSRegistrationState, error) {
	return r.svc.ChangeLocators(ctx, req)
}

func (r *ldsRPC) Discard(ctx context.Context, req *djinnpb.LDSDiscardRequest) (*djinnpb.LDSDiscardResponse, error) {
	discarded, err := r.svc.Discard(ctx, req)
	if err != nil {
		return nil, err
	}
	return &djinnpb.LDSDiscardResponse{Discarded: discarded}, nil
}

// ldsDiscover runs the lookup discovery service's discovery while this
// node leads: a LookupDiscoveryManager (group discovery only with
// [lds] multicast) that also finds this server's own lookup service, at
// its discovery locator.
func (s *Server) ldsDiscover(ctx context.Context, svc *lds.Service) {
	log := s.log.With("part", "lds discovery")
	dm, err := discovery.NewLookupDiscoveryManager(discovery.LookupDiscoveryManagerConfig{
		DisableMulticast: !s.cfg.LDS.Multicast,
		Groups:           discovery.LookupDiscoveryConfig{Interfaces: s.cfg.LDS.Interfaces, AnnouncementInterval: time.Duration(s.cfg.Lookup.Announce)},
		Logger:           log,
	})
	if err != nil {
		log.Error("lookup discovery service: discovery cannot start; registrations hear of no lookup service", "err", err)
		return
	}
	defer dm.Close()
	cfg := lds.DiscoverConfig{Groups: s.cfg.LDS.Multicast, Grace: time.Duration(s.cfg.LDS.Grace)}
	if cfg.Grace == 0 {
		cfg.Grace = 3 * time.Duration(s.cfg.Lookup.Announce)
	}
	if own, ok := s.ownLocator(ctx); ok {
		cfg.Locators = append(cfg.Locators, own)
	}
	log.Info("lookup discovery service: discovering", "multicast", s.cfg.LDS.Multicast, "own", cfg.Locators)
	svc.Discover(ctx, dm, cfg)
}

// ownLocator waits, a little, for this node's lookup service to serve
// discovery (discover) and returns its locator;
// false when it has none.
func (s *Server) ownLocator(ctx context.Context) (discovery.Locator, bool) {
	if !s.cfg.Lookup.Enabled || s.cfg.Lookup.Discovery == "" {
		return discovery.Locator{}, false
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		r := s.registrar
		s.mu.Unlock()
		if r != nil {
			return r.Locator(), true
		}
		select {
		case <-ctx.Done():
			return discovery.Locator{}, false
		case <-deadline.C:
			s.log.Warn("lookup discovery service: this server's lookup service does not serve discovery; not looking for it")
			return discovery.Locator{}, false
		case <-tick.C:
		}
	}
}

// listLDSRegistrations lists the lookup discovery service's
// registrations, named by their leases.
func (s *Server) listLDSRegistrations(st *lds.State) lister {
	return func(map[string]string) ([]*djinnpb.Resource, error) {
		var out []*djinnpb.Resource
		for _, l := range st.List() {
			groups := strings.Join(l.Info.Groups, ",")
			if l.Info.AllGroups {
				groups = "(all)"
			}
			d := map[string]string{"groups": groups, "locators": strings.Join(l.Info.Locators, ","), "registrars": itoa(len(l.Registrars))}
			if res, ok := s.leaseResource(l.Cookie.String(), l.Cookie, d); ok {
				out = append(out, res)
			}
		}
		return out, nil
	}
}
