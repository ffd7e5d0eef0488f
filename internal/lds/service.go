package lds

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Proposer appends commands to the replicated log and returns what
// applying them returned.
type Proposer interface {
	Propose(ctx context.Context, cmd *statepb.Command) (any, error)
}

// Config configures the service. Zero values take the defaults.
type Config struct {
	// Leases is the registration lease policy (default: Any is 10
	// minutes, at most an hour).
	Leases lease.Policy
	// MaxRegistrations bounds the registrations held (default 100,000).
	MaxRegistrations int
	// MaxLocators bounds the distinct locators the registrations want
	// discovered, together (default DefaultMaxLocators): each is a lookup
	// service the node keeps dialling until it answers.
	MaxLocators int
	// Delivery configures event delivery; Sender is required.
	Delivery event.Config
	Logger   *slog.Logger
}

// DeliveryStats returns the counters of discovery event delivery.
func (s *Service) DeliveryStats() event.Stats { return s.engine.Stats() }

// Service is the lookup discovery service on the leader: it checks calls,
// logs their commands, delivers the events applying them produces, and
// runs discovery for the registrations (Discover).
type Service struct {
	state  *State
	lessor *lease.Lessor
	log    Proposer
	now    func() time.Time
	self   func() djinn.Ref
	cfg    Config
	engine *event.Engine

	// changed wakes the discovery runner: the managed sets' union changed.
	changed chan struct{}

	mu sync.Mutex
	// discovering is set while Discover runs; discards queues the lookup
	// services clients discarded, for it to look for again. Guarded by mu.
	discovering bool
	discards    []djinn.ID
	kick        chan struct{} // discards has some
}

// NewService returns the service over s; self is the service's reference
// (the source of its events).
func NewService(s *State, l *lease.Lessor, log Proposer, now func() time.Time, self func() djinn.Ref, cfg Config) (*Service, error) {
	if cfg.Leases == (lease.Policy{}) {
		cfg.Leases = lease.Policy{Default: 10 * time.Minute, Max: time.Hour}
	}
	if err := cfg.Leases.Check(); err != nil {
		return nil, err
	}
	if cfg.MaxRegistrations <= 0 {
		cfg.MaxRegistrations = 100_000
	}
	if cfg.MaxLocators <= 0 {
		cfg.MaxLocators = DefaultMaxLocators
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Delivery.Sender == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup discovery service: no event sender")
	}
	if err := l.Table().SetPolicy(LeaseKind, cfg.Leases); err != nil {
		return nil, err
	}
	svc := &Service{state: s, lessor: l, log: log, now: now, self: self, cfg: cfg,
		changed: make(chan struct{}, 1), kick: make(chan struct{}, 1)}
	dc := cfg.Delivery
	dc.OnFailure = event.CancelOnDefinite(cfg.Logger, "registration", l.Cancel)
	svc.engine = event.New(dc)
	s.SetHooks(Hooks{Deliver: svc.deliver, Changed: svc.setsChanged, Ended: svc.engine.Drop})
	return svc, nil
}

// Close stops delivering events.
func (s *Service) Close() { s.engine.Close() }

func (s *Service) leading() error { return s.lessor.Serving("lookup discovery service") }

// confirm confirms, after a read that answered err, that this node still
// leads: a deposed leader must not answer with a registration its
// successor may have changed, nor with lookup services it found or lost
// since (a client resynchronises with them after a gap, LD.3.2), nor deny
// a registration its successor made.
func (s *Service) confirm(err error) error {
	return s.lessor.ConfirmRead("lookup discovery service", err)
}

func (s *Service) setsChanged() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// deliver queues events for their listeners; only the leader delivers.
func (s *Service) deliver(ds []Delivery) {
	if s.leading() != nil {
		return
	}
	evs := make([]event.Remote, len(ds))
	for i, d := range ds {
		evs[i] = event.Remote{Key: d.Registration, Listener: d.Listener, EventID: d.EventID, Seq: d.Seq, Handback: d.Handback, Payload: d.Payload()}
	}
	if err := s.engine.PushRemote(s.self(), evs...); err != nil {
		s.cfg.Logger.Warn("lds: queueing events failed", "err", err)
	}
}

// Registered is a new registration: its event id and lease.
type Registered struct {
	EventID int64
	Lease   *djinnpb.Lease
}

// Register makes a registration (LD.3.1) for a lease of about d: a new
// one on every call.
func (s *Service) Register(ctx context.Context, req *djinnpb.LDSRegisterRequest) (Registered, error) {
	if req.GetListener() == nil {
		return Registered{}, djinn.Errorf(djinn.InvalidArgument, "listener: missing: a registration sends its events to a listener; give one")
	}
	if _, err := wire.RefTo("listener", req.GetListener()); err != nil {
		return Registered{}, err
	}
	d := time.Duration(req.GetLeaseDurationNanos())
	if err := djinn.CheckLeaseDuration("registration lease duration", d); err != nil {
		return Registered{}, err
	}
	if err := event.CheckHandback(req.GetHandback()); err != nil {
		return Registered{}, err
	}
	groups, err := CheckGroups("groups", req.GetGroups(), MaxGroups)
	if err != nil {
		return Registered{}, err
	}
	if req.GetAllGroups() && len(groups) > 0 {
		return Registered{}, djinn.Errorf(djinn.InvalidArgument, "groups %q with all groups: choose one", clip(groups[0]))
	}
	locators, err := CheckLocators("locators", req.GetLocators())
	if err != nil {
		return Registered{}, err
	}
	if err := s.leading(); err != nil {
		return Registered{}, err
	}
	if n, _ := s.state.Len(); n >= s.cfg.MaxRegistrations {
		return Registered{}, djinn.Errorf(djinn.ResourceExhausted, "lookup discovery service holds %d registrations, the most allowed", n)
	}
	if err := s.roomForLocators(locators); err != nil {
		return Registered{}, err
	}
	granted := s.cfg.Leases.Grant(d)
	now := s.now()
	exp := djinn.AddDuration(now, granted)
	cookie := djinn.NewID()
	res, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: now.UnixNano(), Op: &statepb.Command_LdsRegister{LdsRegister: &statepb.LDSRegister{
		AllGroups: req.GetAllGroups(), Groups: groups, Locators: locators, Listener: req.GetListener(), Handback: req.GetHandback(),
		Cookie: cookie[:], ExpiresUnixNanos: wire.Nanos(exp), HorizonUnixNanos: s.lessor.Horizon(exp), Principal: principal.From(ctx),
	}}})
	if err != nil {
		return Registered{}, err
	}
	return Registered{EventID: res.(int64), Lease: lease.Proto(s.self(), cookie, granted)}, nil
}

// registration reads the cookie that names a registration and checks, on
// the leader, that its lease lives: otherwise the registration is gone
// (LD.4.1: NoSuchObjectException). The cookie of another service's lease
// names no registration either.
func (s *Service) registration(cookie []byte) (djinn.ID, error) {
	c, err := djinn.IDFromBytes("registration lease cookie", cookie)
	if err != nil {
		return djinn.ID{}, err
	}
	if err := s.leading(); err != nil {
		return djinn.ID{}, err
	}
	if li, ok := s.lessor.Table().Lookup(c, s.now()); !ok || li.Owner.Kind != LeaseKind {
		return djinn.ID{}, ErrNoRegistration
	}
	return c, nil
}

// Get returns a registration's state.
func (s *Service) Get(cookie []byte) (*djinnpb.LDSRegistrationState, error) {
	c, err := s.registration(cookie)
	var info Info
	if err == nil {
		info, err = s.state.Registration(c)
	}
	if err = s.confirm(err); err != nil {
		return nil, err
	}
	return s.stateProto(c, info), nil
}

func (s *Service) stateProto(c djinn.ID, info Info) *djinnpb.LDSRegistrationState {
	st := &djinnpb.LDSRegistrationState{EventId: info.EventID, AllGroups: info.AllGroups, Groups: info.Groups, Locators: info.Locators, Sequence: info.Seq}
	if li, ok := s.lessor.Table().Lookup(c, s.now()); ok {
		st.LeaseExpiresUnixNanos = wire.Nanos(li.Expires)
	}
	return st
}

// Registrars returns the lookup services discovered for a registration
// (LD.4.1.1 getRegistrars), by service id.
func (s *Service) Registrars(cookie []byte) ([]*djinnpb.DiscoveredRegistrar, error) {
	c, err := s.registration(cookie)
	var rs []Registrar
	if err == nil {
		rs, err = s.state.Registrars(c)
	}
	if err = s.confirm(err); err != nil {
		return nil, err
	}
	out := make([]*djinnpb.DiscoveredRegistrar, len(rs))
	for i, r := range rs {
		out[i] = r.Proto()
	}
	return out, nil
}

// ChangeGroups adds, sets or removes groups of a registration's managed
// set (LD.4.1.1) and returns its new state.
func (s *Service) ChangeGroups(ctx context.Context, req *djinnpb.LDSGroupsRequest) (*djinnpb.LDSRegistrationState, error) {
	c, err := s.registration(req.GetLeaseCookie())
	if err != nil {
		return nil, err
	}
	groups, err := CheckGroupsChange(req.GetOp(), req.GetAllGroups(), req.GetGroups())
	if err != nil {
		return nil, err
	}
	res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LdsGroups{LdsGroups: &statepb.LDSGroups{
		Cookie: c[:], Op: req.GetOp(), AllGroups: req.GetAllGroups(), Groups: groups}}})
	if err != nil {
		return nil, err
	}
	return s.stateProto(c, res.(Info)), nil
}

// ChangeLocators adds, sets or removes locators of a registration's
// managed set (LD.4.1.1) and returns its new state.
func (s *Service) ChangeLocators(ctx context.Context, req *djinnpb.LDSLocatorsRequest) (*djinnpb.LDSRegistrationState, error) {
	c, err := s.registration(req.GetLeaseCookie())
	if err != nil {
		return nil, err
	}
	locators, err := CheckLocatorsChange(req.GetOp(), req.GetLocators())
	if err != nil {
		return nil, err
	}
	if req.GetOp() != djinnpb.SetOp_SET_OP_REMOVE {
		if err := s.roomForLocators(locators); err != nil {
			return nil, err
		}
	}
	res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LdsLocators{LdsLocators: &statepb.LDSLocators{
		Cookie: c[:], Op: req.GetOp(), Locators: locators}}})
	if err != nil {
		return nil, err
	}
	return s.stateProto(c, res.(Info)), nil
}

// DefaultMaxLocators is Config.MaxLocators's default.
const DefaultMaxLocators = 4096

// roomForLocators refuses locators when the registrations would then want
// more than MaxLocators distinct ones discovered: without a bound, a
// client's registrations, each with MaxLocators locators of its own, would
// have the node dial millions of addresses, a goroutine each. Locators
// already wanted cost nothing. Like MaxRegistrations, a bound on the
// whole service, checked before the change is logged.
func (s *Service) roomForLocators(locators []string) error {
	wanted, fresh := s.state.LocatorsWanted(locators)
	if fresh > 0 && wanted+fresh > s.cfg.MaxLocators {
		return djinn.Errorf(djinn.ResourceExhausted, "locators: the lookup discovery service would look for %d distinct locators, over its limit of %d (%d new here, e.g. %q); name lookup services already looked for, or fewer",
			wanted+fresh, s.cfg.MaxLocators, fresh, clip(s.state.firstFresh(locators)))
	}
	return nil
}

// Discard discards a lookup service for a registration (LD.4.1.1
// discard) and reports whether the registration had discovered it. If it
// had, discovery drops the lookup service and looks for it again.
func (s *Service) Discard(ctx context.Context, req *djinnpb.LDSDiscardRequest) (bool, error) {
	c, err := s.registration(req.GetLeaseCookie())
	if err != nil {
		return false, err
	}
	id, err := CheckDiscard(req)
	if err != nil {
		return false, err
	}
	res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LdsDiscard{LdsDiscard: &statepb.LDSDiscard{
		Cookie: c[:], RegistrarServiceId: id[:]}}})
	if err != nil {
		return false, err
	}
	discarded := res.(bool)
	if discarded {
		s.rediscover(id)
	}
	return discarded, nil
}

// CheckDiscard checks a discard's argument, which does not depend on the
// registration: the registrar's service id, which it returns.
func CheckDiscard(req *djinnpb.LDSDiscardRequest) (djinn.ID, error) {
	return djinn.IDFromBytes("registrar service id", req.GetRegistrarServiceId())
}

// rediscover asks the discovery runner, if one runs, to look for a lookup
// service again.
func (s *Service) rediscover(id djinn.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.discovering {
		return
	}
	s.discards = append(s.discards, id)
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
