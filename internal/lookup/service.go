package lookup

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
	"github.com/djinn-go/djinn/service"
)

// Proposer appends commands to the replicated log and returns what
// applying them returned.
type Proposer interface {
	Propose(ctx context.Context, cmd *statepb.Command) (any, error)
}

// Config configures the service. Zero values take the defaults.
type Config struct {
	// Items is the registration lease policy (default: Reggie's, 5
	// minutes, the maximum growing with the registrations, see
	// LeasePolicy); Watches is the notification lease policy (default:
	// Any is 5 minutes, at most an hour).
	Items   LeasePolicy
	Watches lease.Policy
	// MaxItems and MaxWatches bound what the service holds (default
	// 1,000,000 and 100,000).
	MaxItems, MaxWatches int
	// Delivery configures the delivery of service events; Sender is
	// required.
	Delivery event.Config
	Logger   *slog.Logger
}

// Service is the lookup service on the leader.
type Service struct {
	state  *State
	lessor *lease.Lessor
	log    Proposer
	now    func() time.Time
	self   func() djinn.Ref
	cfg    Config
	engine *event.Engine

	// Lookups counts lookups served, Registered registrations made, for
	// metrics.
	Lookups, Registered atomic.Uint64
}

// DeliveryStats returns the counters of service event delivery.
func (s *Service) DeliveryStats() event.Stats { return s.engine.Stats() }

// NewService returns the service over s; self is the registrar's reference
// (the source of its events).
func NewService(s *State, l *lease.Lessor, log Proposer, now func() time.Time, self func() djinn.Ref, cfg Config) (*Service, error) {
	if cfg.Items == (LeasePolicy{}) {
		cfg.Items = DefaultLeasePolicy()
	}
	if err := cfg.Items.Validate(); err != nil {
		return nil, err
	}
	if cfg.Watches == (lease.Policy{}) {
		cfg.Watches = lease.Policy{Default: 5 * time.Minute, Max: time.Hour}
	}
	if cfg.MaxItems <= 0 {
		cfg.MaxItems = 1_000_000
	}
	if cfg.MaxWatches <= 0 {
		cfg.MaxWatches = 100_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Delivery.Sender == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup service: no event sender")
	}
	// Items' leases are granted by the item policy, which grows with the
	// registrations; the table only enforces the outer bound.
	if err := l.Table().SetPolicy(ItemLeaseKind, lease.Policy{Default: cfg.Items.Default, Max: djinn.Forever}); err != nil {
		return nil, err
	}
	if err := l.Table().SetPolicy(WatchLeaseKind, cfg.Watches); err != nil {
		return nil, err
	}
	svc := &Service{state: s, lessor: l, log: log, now: now, self: self, cfg: cfg}
	dc := cfg.Delivery
	dc.OnFailure = event.CancelOnDefinite(cfg.Logger, "notification", l.Cancel)
	svc.engine = event.New(dc)
	s.SetNotify(svc.deliver)
	if err := s.SetOwn(func() service.Item { return OwnItem(self()) }); err != nil {
		return nil, err
	}
	return svc, nil
}

// The registrar's own item's service types, and the type of its entry.
const (
	RegistrarType       = "net.jini.core.lookup.ServiceRegistrar"
	LookupServiceType   = "djinn.v1.LookupService"
	ServiceInfoType     = service.ServiceInfoType
	ownItemName         = "djinn lookup service"
	ownItemManufacturer = "djinn"
)

// OwnItem is the item the registrar registers for itself (DESIGN.md 6):
// its service id (filled in by the registry), its reference, the
// registrar's service types and a ServiceInfo entry.
func OwnItem(ref djinn.Ref) service.Item {
	name, maker := service.NewString(ownItemName), service.NewString(ownItemManufacturer)
	return service.Item{
		Service: []byte(ref.String()),
		Types:   []string{RegistrarType, LookupServiceType},
		Entries: []service.Entry{{Type: ServiceInfoType, Supertypes: []string{service.AbstractEntryType},
			Fields: []service.Field{{Name: "name", Value: name}, {Name: "manufacturer", Value: maker}, {Name: "vendor", Value: maker}}}},
	}
}

// Close stops delivering events.
func (s *Service) Close() { s.engine.Close() }

func (s *Service) leading() error { return s.lessor.Serving("lookup service") }

// deliver queues service events for their listeners; only the leader
// delivers.
func (s *Service) deliver(ds []Delivery) {
	if s.leading() != nil {
		return
	}
	evs := make([]event.Remote, len(ds))
	for i, d := range ds {
		evs[i] = event.Remote{Key: d.Watch, Listener: d.Listener, EventID: d.EventID, Seq: d.Seq, Handback: d.Handback, Payload: d.Event}
	}
	if err := s.engine.PushRemote(s.self(), evs...); err != nil {
		s.cfg.Logger.Warn("lookup: queueing service events failed", "err", err)
	}
}

// Registered is a registration: the item's service id and its lease.
type Registered struct {
	ID    djinn.ID
	Lease *djinnpb.Lease
}

// Register registers item (given a fresh service id when it has none) for
// a lease of about d: the lease policy's grant for that request.
func (s *Service) Register(ctx context.Context, item *djinnpb.ServiceItem, d time.Duration) (Registered, error) {
	if item == nil {
		return Registered{}, djinn.Errorf(djinn.InvalidArgument, "item: missing")
	}
	if err := s.leading(); err != nil {
		return Registered{}, err
	}
	n, _ := s.state.Len()
	granted, err := s.cfg.Items.Grant(d, n)
	if err != nil {
		return Registered{}, err
	}
	it, err := wire.ItemFrom(item)
	if err != nil {
		return Registered{}, err
	}
	if it.ID.IsZero() {
		it.ID = djinn.NewID()
	}
	if n >= s.cfg.MaxItems {
		if _, _, ok := s.registered(it.ID); !ok {
			return Registered{}, djinn.Errorf(djinn.ResourceExhausted, "lookup service holds %d registrations, the most allowed", n)
		}
	}
	now := s.now()
	exp := djinn.AddDuration(now, granted)
	cookie := djinn.NewID()
	_, err = s.log.Propose(ctx, &statepb.Command{NowUnixNanos: now.UnixNano(), Op: &statepb.Command_LookupRegister{LookupRegister: &statepb.LookupRegister{
		Item: wire.Item(it), Cookie: cookie[:], ExpiresUnixNanos: wire.Nanos(exp), HorizonUnixNanos: s.lessor.Horizon(exp),
		Principal: principal.From(ctx),
	}}})
	if err != nil {
		return Registered{}, err
	}
	s.Registered.Add(1)
	return Registered{ID: it.ID, Lease: lease.Proto(s.self(), cookie, granted)}, nil
}

// registered reports whether service id is registered.
func (s *Service) registered(id djinn.ID) (service.Item, int, bool) {
	total, items, err := s.state.Lookup(service.Template{ID: &id}, 1)
	if err != nil || total == 0 {
		return service.Item{}, 0, false
	}
	return items[0], total, true
}

// Attributes changes the attributes of the registration whose lease cookie
// is cookie: op is OpAdd, OpModify or OpSet.
func (s *Service) Attributes(ctx context.Context, cookie []byte, op int32, entries []*djinnpb.Entry, templates []*djinnpb.EntryTemplate) error {
	c, err := djinn.IDFromBytes("registration lease cookie", cookie)
	if err != nil {
		return err
	}
	if err := s.state.CheckAttributes(op, entries, templates); err != nil {
		return err
	}
	if err := s.leading(); err != nil {
		return err
	}
	if !s.lessor.Table().Alive(c, s.now()) {
		return djinn.Errorf(djinn.UnknownLease, "registration: its lease ended")
	}
	_, err = s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LookupAttributes{LookupAttributes: &statepb.LookupAttributes{
		Cookie: cookie, Op: op, Entries: entries, Templates: templates,
	}}})
	return err
}

// MayRead says whether this node may answer a read now, and if not why
// (the server decides by the caller's read mode: on the leader only, or on
// any member whose state is fresh enough). Nil means on the leader only.
type MayRead func() error

// may checks m, or leadership when m is nil.
func (s *Service) may(m MayRead) error {
	if m == nil {
		return s.leading()
	}
	return m()
}

// Lookup returns the number of items tmpl matches and up to max of them,
// or, when one is set, one chosen at random among them all; each item is
// in its wire form, the protobuf encoding of a djinnpb.ServiceItem
// (Registry.LookupEncoded). It answers from this node's state when may
// allows.
func (s *Service) Lookup(tmpl *djinnpb.ServiceTemplate, max int, one bool, may MayRead) (int, [][]byte, error) {
	t, err := wire.TemplateFrom(tmpl)
	if err != nil {
		return 0, nil, err
	}
	if err := s.may(may); err != nil {
		return 0, nil, err
	}
	s.Lookups.Add(1)
	if plantedDropsItems && len(tmpl.GetServiceId()) > 0 && tmpl.ServiceId[0]%4 == 0 {
		return 0, nil, nil
	}
	return s.state.LookupEncoded(t, max, one, rand.IntN)
}

// Notification is a watch as Notify returns it (an event registration).
type Notification struct {
	EventID int64
	Lease   *djinnpb.Lease
	Seq     int64
}

// Notify registers listener for service events of items matching tmpl on
// the transitions, with handback, for a lease of about d.
func (s *Service) Notify(ctx context.Context, tmpl *djinnpb.ServiceTemplate, transitions uint32, listener *djinnpb.Ref, handback []byte, d time.Duration) (Notification, error) {
	if _, err := wire.RefTo("listener", listener); err != nil {
		return Notification{}, err
	}
	if d <= 0 && d != djinn.Any {
		return Notification{}, djinn.Errorf(djinn.InvalidArgument, "lease duration %s: must be positive, Forever or Any", djinn.FormatDuration(d))
	}
	if err := event.CheckHandback(handback); err != nil {
		return Notification{}, err
	}
	if transitions == 0 || transitions&^uint32(service.AllTransitions) != 0 {
		return Notification{}, djinn.Errorf(djinn.InvalidArgument, "transitions %#x: want a non-empty set of MATCH_NOMATCH (1), NOMATCH_MATCH (2), MATCH_MATCH (4)", transitions)
	}
	if _, err := wire.TemplateFrom(tmpl); err != nil {
		return Notification{}, err
	}
	if err := s.leading(); err != nil {
		return Notification{}, err
	}
	if _, n := s.state.Len(); n >= s.cfg.MaxWatches {
		return Notification{}, djinn.Errorf(djinn.ResourceExhausted, "lookup service holds %d notifications, the most allowed", n)
	}
	granted := s.cfg.Watches.Grant(d)
	now := s.now()
	exp := djinn.AddDuration(now, granted)
	cookie := djinn.NewID()
	res, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: now.UnixNano(), Op: &statepb.Command_LookupNotify{LookupNotify: &statepb.LookupNotify{
		Template: tmpl, Transitions: transitions, Listener: listener, Handback: handback,
		Cookie: cookie[:], ExpiresUnixNanos: wire.Nanos(exp), HorizonUnixNanos: s.lessor.Horizon(exp), Principal: principal.From(ctx),
	}}})
	if err != nil {
		return Notification{}, err
	}
	return Notification{EventID: res.(int64), Lease: lease.Proto(s.self(), cookie, granted)}, nil
}

// Browse runs fn on the registry of this node's state, when may allows.
func (s *Service) Browse(may MayRead, fn func(*Registry) error) error {
	if err := s.may(may); err != nil {
		return err
	}
	return s.state.Browse(fn)
}
