package server

import (
	"context"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LDSID is the object id of the lookup discovery service.
var LDSID = djinn.ID{'l', 'd', 's'}

// ldsRPC serves the LookupDiscoveryService. A registration is named by its
// lease's cookie.
type ldsRPC struct {
	djinnpb.UnimplementedLookupDiscoveryServiceServer
	s *Server
}

func (r *ldsRPC) Register(ctx context.Context, req *djinnpb.LDSRegisterRequest) (*djinnpb.LDSRegistration, error) {
	reg, err := r.s.lds.Register(ctx, req)
	if err != nil {
		return nil, err
	}
	return &djinnpb.LDSRegistration{Registration: &djinnpb.EventRegistration{EventId: reg.EventID, Source: refProto(r.s.ref(LDSID)()), Lease: reg.Lease}}, nil
}

func (r *ldsRPC) GetRegistration(_ context.Context, req *djinnpb.LDSRegistrationRequest) (*djinnpb.LDSRegistrationState, error) {
	return r.s.lds.Get(req.GetLeaseCookie())
}

func (r *ldsRPC) GetRegistrars(_ context.Context, req *djinnpb.LDSRegistrationRequest) (*djinnpb.LDSRegistrarsResponse, error) {
	rs, err := r.s.lds.Registrars(req.GetLeaseCookie())
	if err != nil {
		return nil, err
	}
	return &djinnpb.LDSRegistrarsResponse{Registrars: rs}, nil
}

func (r *ldsRPC) ChangeGroups(ctx context.Context, req *djinnpb.LDSGroupsRequest) (*djinnpb.LDSRegistrationState, error) {
	return r.s.lds.ChangeGroups(ctx, req)
}

func (r *ldsRPC) ChangeLocators(ctx context.Context, req *djinnpb.LDSLocatorsRequest) (*djinnpb.LDSRegistrationState, error) {
	return r.s.lds.ChangeLocators(ctx, req)
}

func (r *ldsRPC) Discard(ctx context.Context, req *djinnpb.LDSDiscardRequest) (*djinnpb.LDSDiscardResponse, error) {
	discarded, err := r.s.lds.Discard(ctx, req)
	if err != nil {
		return nil, err
	}
	return &djinnpb.LDSDiscardResponse{Discarded: discarded}, nil
}

// ldsDiscover runs the lookup discovery service's discovery while this
// node leads: a LookupDiscoveryManager (group discovery only with
// [lds] multicast) that also finds this server's own lookup service, at
// its discovery locator.
func (s *Server) ldsDiscover(ctx context.Context) {
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
	s.lds.Discover(ctx, dm, cfg)
}

// ownLocator waits, a little, for this node's lookup service to serve
// discovery (s.discover, started with this term) and returns its locator;
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
