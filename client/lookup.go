package client

import (
	"context"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Registrar is a client of a lookup service (DESIGN.md 6): services
// register items there for a lease, and clients find and watch them. It is
// safe for concurrent use and holds no connection of its own.
type Registrar struct {
	c   Connector
	ref djinn.Ref
}

// NewRegistrar returns a client for the lookup service named by ref.
func NewRegistrar(c Connector, ref djinn.Ref) *Registrar { return &Registrar{c: c, ref: ref} }

// Lookup returns a client for the lookup service of the server c is
// dialled to, as its Status names it; djinn.ErrUnsupported when the server
// runs none.
func (c *Client) Lookup(ctx context.Context) (*Registrar, error) {
	st, err := djinnpb.NewAdminClient(c.cc).Status(ctx, &djinnpb.StatusRequest{})
	if err != nil {
		return nil, err
	}
	if st.GetLookup() == nil {
		return nil, djinn.Errorf(djinn.Unsupported, "server at %s does not run the lookup service (services %v)", c.addr, st.GetServices())
	}
	ref, err := RefFromProto("lookup service", st.GetLookup())
	if err != nil {
		return nil, err
	}
	ref.Endpoint = c.addr
	return NewRegistrar(c, ref), nil
}

// Ref returns the registrar's reference: the source of its events.
func (r *Registrar) Ref() djinn.Ref { return r.ref }

func (r *Registrar) client() (djinnpb.LookupServiceClient, error) {
	conn, err := r.c.Conn(r.ref.Endpoint)
	if err != nil {
		return nil, err
	}
	return djinnpb.NewLookupServiceClient(conn), nil
}

// Service event transitions (the bits Notify takes).
const (
	MatchNoMatch = uint32(djinnpb.Transition_TRANSITION_MATCH_NOMATCH)
	NoMatchMatch = uint32(djinnpb.Transition_TRANSITION_NOMATCH_MATCH)
	MatchMatch   = uint32(djinnpb.Transition_TRANSITION_MATCH_MATCH)
)

// ServiceRegistration is a registered item: its service id and lease. The
// lease's cookie authorizes changing the item's attributes.
type ServiceRegistration struct {
	r     *Registrar
	ID    djinn.ID
	Lease *Lease
}

// Register registers item for a lease of about d (positive, djinn.Forever
// or djinn.Any); an item without a service id gets one. Registering an id
// again replaces that item.
func (r *Registrar) Register(ctx context.Context, item *djinnpb.ServiceItem, d time.Duration) (*ServiceRegistration, error) {
	if item == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "item: missing (nil)")
	}
	if err := djinn.CheckLeaseDuration("lease duration", d); err != nil {
		return nil, err
	}
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	resp, err := lc.Register(ctx, &djinnpb.RegisterRequest{Item: item, LeaseDurationNanos: int64(d)})
	if err != nil {
		return nil, err
	}
	id, err := djinn.IDFromBytes("registered service id", resp.GetServiceId())
	if err != nil {
		return nil, err
	}
	l, err := LeaseFromProto(resp.GetLease(), sent)
	if err != nil {
		return nil, err
	}
	return &ServiceRegistration{r: r, ID: id, Lease: l}, nil
}

// AddAttributes adds entries to the registered item.
func (s *ServiceRegistration) AddAttributes(ctx context.Context, entries []*djinnpb.Entry) error {
	return s.attributes(ctx, func(lc djinnpb.LookupServiceClient, req *djinnpb.AttributesRequest) error {
		req.Entries = entries
		_, err := lc.AddAttributes(ctx, req)
		return err
	})
}

// ModifyAttributes sets, in each entry matching templates[i], the fields
// changes[i] sets.
func (s *ServiceRegistration) ModifyAttributes(ctx context.Context, templates []*djinnpb.EntryTemplate, changes []*djinnpb.Entry) error {
	if len(templates) != len(changes) {
		return djinn.Errorf(djinn.InvalidArgument, "modify attributes: %d templates but %d changes", len(templates), len(changes))
	}
	return s.attributes(ctx, func(lc djinnpb.LookupServiceClient, req *djinnpb.AttributesRequest) error {
		req.Templates, req.Entries = templates, changes
		_, err := lc.ModifyAttributes(ctx, req)
		return err
	})
}

// SetAttributes replaces the item's entries.
func (s *ServiceRegistration) SetAttributes(ctx context.Context, entries []*djinnpb.Entry) error {
	return s.attributes(ctx, func(lc djinnpb.LookupServiceClient, req *djinnpb.AttributesRequest) error {
		req.Entries = entries
		_, err := lc.SetAttributes(ctx, req)
		return err
	})
}

func (s *ServiceRegistration) attributes(ctx context.Context, call func(djinnpb.LookupServiceClient, *djinnpb.AttributesRequest) error) error {
	if s == nil || s.Lease == nil {
		return djinn.Errorf(djinn.InvalidArgument, "registration: missing (nil)")
	}
	lc, err := s.r.client()
	if err != nil {
		return err
	}
	c := s.Lease.Cookie()
	return call(lc, &djinnpb.AttributesRequest{LeaseCookie: c[:]})
}

// RegistrationFromLease returns the registration whose lease is l, for
// changing its attributes (the lease, printed as a token, is what a
// registering program hands on).
func (r *Registrar) RegistrationFromLease(id djinn.ID, l *Lease) *ServiceRegistration {
	return &ServiceRegistration{r: r, ID: id, Lease: l}
}

// LookupOne returns one item matching tmpl, chosen at random among the
// matches, or nil when none does.
func (r *Registrar) LookupOne(ctx context.Context, tmpl *djinnpb.ServiceTemplate) (*djinnpb.ServiceItem, error) {
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	resp, err := lc.Lookup(ctx, &djinnpb.LookupRequest{Template: tmpl, One: true})
	if err != nil || len(resp.GetItems()) == 0 {
		return nil, err
	}
	return resp.GetItems()[0], nil
}

// LookupN returns the number of items matching tmpl and up to max of
// them, by service id.
func (r *Registrar) LookupN(ctx context.Context, tmpl *djinnpb.ServiceTemplate, max int) (total int, items []*djinnpb.ServiceItem, err error) {
	if max < 0 || max > 1<<30 {
		return 0, nil, djinn.Errorf(djinn.InvalidArgument, "max matches %d: must be 0 to %d", max, 1<<30)
	}
	lc, err := r.client()
	if err != nil {
		return 0, nil, err
	}
	resp, err := lc.Lookup(ctx, &djinnpb.LookupRequest{Template: tmpl, MaxMatches: int32(max)})
	if err != nil {
		return 0, nil, err
	}
	return int(resp.GetTotal()), resp.GetItems(), nil
}

// ServiceTypes returns the service type names, starting with prefix, of the
// items matching tmpl.
func (r *Registrar) ServiceTypes(ctx context.Context, tmpl *djinnpb.ServiceTemplate, prefix string) ([]string, error) {
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	resp, err := lc.GetServiceTypes(ctx, &djinnpb.BrowseRequest{Template: tmpl, Prefix: prefix})
	if err != nil {
		return nil, err
	}
	return resp.GetTypes(), nil
}

// Watch is a notify registration: its event id, lease, and the sequence
// number its events start after.
type Watch struct {
	EventID int64
	Source  djinn.Ref
	Lease   *Lease
}

// Notify asks for service events, sent to listener with handback, when
// items start or stop matching tmpl or change while matching, as
// transitions (MatchNoMatch | NoMatchMatch | MatchMatch) selects, for a
// lease of about d.
func (r *Registrar) Notify(ctx context.Context, tmpl *djinnpb.ServiceTemplate, transitions uint32, listener djinn.Ref, handback []byte, d time.Duration) (*Watch, error) {
	if transitions == 0 || transitions&^(MatchNoMatch|NoMatchMatch|MatchMatch) != 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "transitions %#x: want a non-empty set of MatchNoMatch, NoMatchMatch, MatchMatch", transitions)
	}
	if err := djinn.CheckLeaseDuration("lease duration", d); err != nil {
		return nil, err
	}
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	resp, err := lc.Notify(ctx, &djinnpb.LookupNotifyRequest{Template: tmpl, Transitions: transitions, Listener: RefToProto(listener),
		Handback: handback, LeaseDurationNanos: int64(d)})
	if err != nil {
		return nil, err
	}
	src, err := RefFromProto("event source", resp.GetSource())
	if err != nil {
		return nil, err
	}
	l, err := LeaseFromProto(resp.GetLease(), sent)
	if err != nil {
		return nil, err
	}
	return &Watch{EventID: resp.GetEventId(), Source: src, Lease: l}, nil
}

// ServiceEventFrom reads a lookup service's event payload: the transition,
// the service id, and the item (nil when it was removed).
func ServiceEventFrom(ev *RemoteEvent) (*djinnpb.ServiceEvent, error) {
	if ev == nil || ev.Payload == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "service event: no payload")
	}
	var se djinnpb.ServiceEvent
	if err := ev.Payload.UnmarshalTo(&se); err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "service event payload %s: %v", ev.Payload.GetTypeUrl(), err)
	}
	switch se.GetTransition() {
	case djinnpb.Transition_TRANSITION_MATCH_NOMATCH, djinnpb.Transition_TRANSITION_NOMATCH_MATCH, djinnpb.Transition_TRANSITION_MATCH_MATCH:
	default:
		return nil, djinn.Errorf(djinn.InvalidArgument, "service event transition %d: unknown", se.GetTransition())
	}
	if _, err := djinn.IDFromBytes("service event service id", se.GetServiceId()); err != nil {
		return nil, err
	}
	return &se, nil
}
