package client

import (
	"context"
	"math"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
	"google.golang.org/grpc"
)

// This file is the client of the lookup service (DESIGN.md 6): the
// Registrar that registers, finds, watches and browses service items
// (package service has their types and rules).

// lookedUp decodes the items of a lookup's answer, as the registrar sent
// them (service.DecodeItem); each must have an id.
func lookedUp(encoded [][]byte) ([]ServiceItem, error) {
	items := make([]ServiceItem, len(encoded))
	for i, b := range encoded {
		it, err := service.DecodeItem(b)
		if err == nil && it.ID.IsZero() {
			err = djinn.Errorf(djinn.InvalidArgument, "looked-up item: service id missing")
		}
		if err != nil {
			return nil, err
		}
		items[i] = it
	}
	return items, nil
}

// Registrar is a client of a lookup service (DESIGN.md 6): services
// register items there for a lease, and clients find, browse and watch
// them. It is safe for concurrent use and holds no connection of its own:
// calls go through its Connector.
type Registrar struct {
	c   Connector
	ref djinn.Ref
}

// NewRegistrar returns a client for the lookup service named by ref (the
// reference Status gives), reached at ref's endpoint.
func NewRegistrar(c Connector, ref djinn.Ref) *Registrar { return &Registrar{c: c, ref: ref} }

// Lookup returns a client for the lookup service of the server c is
// dialled to, as its Status names it, reached at the dialled address (a
// follower points calls at the leader). A server that does not run the
// lookup service gives djinn.ErrUnsupported; one still starting, with no
// cluster service id yet, djinn.ErrUnavailable.
func (c *Client) Lookup(ctx context.Context) (*Registrar, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	return st.Lookup()
}

// Ref returns the registrar's reference: the source of its service events.
func (r *Registrar) Ref() djinn.Ref { return r.ref }

// String names the registrar by its reference.
func (r *Registrar) String() string { return "lookup service " + r.ref.String() }

func (r *Registrar) conn() (*grpc.ClientConn, error) {
	if r == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup service: missing (nil)")
	}
	if r.c == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "connector: missing")
	}
	return ConnFor(r.c, r.ref)
}

func (r *Registrar) client() (djinnpb.LookupServiceClient, error) {
	cc, err := r.conn()
	if err != nil {
		return nil, err
	}
	return djinnpb.NewLookupServiceClient(cc), nil
}

// RegistrarInfo is what a lookup service says of itself.
type RegistrarInfo struct {
	ServiceID djinn.ID  // its service id (as discovery reports it)
	Groups    []string  // its member groups; "" is the public group
	Locator   string    // its unicast discovery address, jini://host:port/; empty without discovery
	Ref       djinn.Ref // its reference, the source of its events
	Items     int64     // the items registered
}

// Info describes the registrar (Jini's ServiceRegistrar getServiceID,
// getGroups and getLocator).
func (r *Registrar) Info(ctx context.Context) (*RegistrarInfo, error) {
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	pb, err := lc.GetRegistrar(ctx, &djinnpb.GetRegistrarRequest{})
	if err != nil {
		return nil, err
	}
	id, err := djinn.IDFromBytes("registrar service id", pb.GetServiceId())
	if err != nil {
		return nil, err
	}
	ref, err := RefFromProto("registrar reference", pb.GetRegistrar())
	if err != nil {
		return nil, err
	}
	return &RegistrarInfo{ServiceID: id, Groups: pb.GetGroups(), Locator: pb.GetLocator(), Ref: ref, Items: pb.GetItems()}, nil
}

// ServiceRegistration is a registered item: its service id and its lease.
// The lease's cookie names the registration in the attribute calls: whoever
// holds the lease (or its token) may change the item's attributes.
type ServiceRegistration struct {
	r     *Registrar
	ID    djinn.ID
	Lease *Lease
}

// Register registers item for a lease of about d (positive, djinn.Forever
// or djinn.Any; the registrar grants at most its maximum). An item with the
// zero ID gets a new one, which the registration holds; registering an id
// again replaces that item and ends its old registration.
func (r *Registrar) Register(ctx context.Context, item ServiceItem, d time.Duration) (*ServiceRegistration, error) {
	if err := djinn.CheckLeaseDuration("registration lease duration", d); err != nil {
		return nil, err
	}
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	pb, err := lc.Register(ctx, &djinnpb.RegisterRequest{Item: wire.Item(item), LeaseDurationNanos: int64(d)})
	if err != nil {
		return nil, err
	}
	id, err := djinn.IDFromBytes("registered service id", pb.GetServiceId())
	if err != nil {
		return nil, err
	}
	l, err := LeaseFromProto(pb.GetLease(), sent)
	if err != nil {
		return nil, err
	}
	return &ServiceRegistration{r: r, ID: id, Lease: l}, nil
}

// Registration returns the registration of service id whose lease is l
// (from a token a registering program handed on), for changing its
// attributes. id is informational: the lease's cookie alone names the
// registration.
func (r *Registrar) Registration(id djinn.ID, l *Lease) *ServiceRegistration {
	return &ServiceRegistration{r: r, ID: id, Lease: l}
}

// AddAttributes adds entries to the registered item; an entry equal to
// one it has already is dropped.
func (s *ServiceRegistration) AddAttributes(ctx context.Context, entries []Entry) error {
	return s.attributes(ctx, func(lc djinnpb.LookupServiceClient, req *djinnpb.AttributesRequest) error {
		req.Entries = wire.Entries(entries)
		_, err := lc.AddAttributes(ctx, req)
		return err
	})
}

// ModifyAttributes changes the item's entries: in each entry that
// templates[i] matches, the fields that changes[i] sets (non-null) take
// its values. changes[i] must be of templates[i]'s type.
func (s *ServiceRegistration) ModifyAttributes(ctx context.Context, templates []EntryTemplate, changes []Entry) error {
	if len(templates) != len(changes) {
		return djinn.Errorf(djinn.InvalidArgument, "modify attributes: %d templates but %d changes: want one change per template", len(templates), len(changes))
	}
	return s.attributes(ctx, func(lc djinnpb.LookupServiceClient, req *djinnpb.AttributesRequest) error {
		req.Templates, req.Entries = wire.EntryTemplates(templates), wire.Entries(changes)
		_, err := lc.ModifyAttributes(ctx, req)
		return err
	})
}

// SetAttributes replaces the item's entries with entries.
func (s *ServiceRegistration) SetAttributes(ctx context.Context, entries []Entry) error {
	return s.attributes(ctx, func(lc djinnpb.LookupServiceClient, req *djinnpb.AttributesRequest) error {
		req.Entries = wire.Entries(entries)
		_, err := lc.SetAttributes(ctx, req)
		return err
	})
}

func (s *ServiceRegistration) attributes(ctx context.Context, call func(djinnpb.LookupServiceClient, *djinnpb.AttributesRequest) error) error {
	if s == nil || s.Lease == nil {
		return djinn.Errorf(djinn.InvalidArgument, "service registration: missing (nil, or without its lease)")
	}
	lc, err := s.r.client()
	if err != nil {
		return err
	}
	c := s.Lease.Cookie()
	return call(lc, &djinnpb.AttributesRequest{LeaseCookie: c[:]})
}

// maxMatches bounds LookupN's max: the wire's int32.
const maxMatches = math.MaxInt32

// Lookup returns one item matching tmpl, chosen at random among the
// matches, or nil when none does.
func (r *Registrar) Lookup(ctx context.Context, tmpl ServiceTemplate) (*ServiceItem, error) {
	_, items, err := r.lookup(ctx, &djinnpb.LookupRequest{Template: wire.Template(tmpl), One: true})
	if err != nil || len(items) == 0 {
		return nil, err
	}
	return &items[0], nil
}

// LookupN returns the number of items matching tmpl and up to max of them
// (0 to math.MaxInt32; a negative max is djinn.ErrInvalidArgument), the
// first in service id order. An answer larger than a client receives by
// default (4 MiB less 64 KiB) is djinn.ErrResourceExhausted, naming its
// size and how many of the matches fit: ask for at most that many.
func (r *Registrar) LookupN(ctx context.Context, tmpl ServiceTemplate, max int) (total int, items []ServiceItem, err error) {
	if max < 0 || max > maxMatches {
		return 0, nil, djinn.Errorf(djinn.InvalidArgument, "max matches %d: must be 0 to %d", max, maxMatches)
	}
	return r.lookup(ctx, &djinnpb.LookupRequest{Template: wire.Template(tmpl), MaxMatches: int32(max)})
}

// lookup calls Lookup, reading the answer's items as the bytes they are on
// the wire (EncodedLookupResponse is LookupResponse so read).
func (r *Registrar) lookup(ctx context.Context, req *djinnpb.LookupRequest) (int, []ServiceItem, error) {
	cc, err := r.conn()
	if err != nil {
		return 0, nil, err
	}
	resp := &djinnpb.EncodedLookupResponse{}
	if err := cc.Invoke(ctx, djinnpb.LookupService_Lookup_FullMethodName, req, resp); err != nil {
		return 0, nil, err
	}
	items, err := lookedUp(resp.GetItems())
	if err != nil {
		return 0, nil, err
	}
	return int(resp.GetTotal()), items, nil
}

// Notify asks for service events (ServiceEventFrom reads them), sent to
// listener with handback in them, when an item's matching of tmpl changes
// as transitions selects, for a lease of about d. The registration's
// Source is the registrar; its lease covers the interest.
func (r *Registrar) Notify(ctx context.Context, tmpl ServiceTemplate, transitions Transition, listener djinn.Ref, handback []byte, d time.Duration) (*EventRegistration, error) {
	if err := transitions.Check(); err != nil {
		return nil, err
	}
	if listener.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "listener: missing")
	}
	if err := djinn.CheckLeaseDuration("notify lease duration", d); err != nil {
		return nil, err
	}
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	pb, err := lc.Notify(ctx, &djinnpb.LookupNotifyRequest{Template: wire.Template(tmpl), Transitions: uint32(transitions),
		Listener: RefToProto(listener), Handback: handback, LeaseDurationNanos: int64(d)})
	if err != nil {
		return nil, err
	}
	return EventRegistrationFromProto(pb, sent)
}

// EntryTypes returns the types of the entries of the items matching tmpl
// (Jini's getEntryClasses), each once.
func (r *Registrar) EntryTypes(ctx context.Context, tmpl ServiceTemplate) ([]EntryType, error) {
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	pb, err := lc.GetEntryTypes(ctx, &djinnpb.BrowseRequest{Template: wire.Template(tmpl)})
	if err != nil {
		return nil, err
	}
	out := make([]EntryType, len(pb.GetTypes()))
	for i, e := range pb.GetTypes() {
		out[i] = EntryType{Type: e.GetType(), Supertypes: e.GetSupertypes()}
	}
	return out, nil
}

// FieldValues returns the distinct values of the field named field in the
// entries, of the items matching tmpl, that tmpl.Entries[setIndex] matches
// (Jini's getFieldValues); null among them when some entry has the field
// without a value.
func (r *Registrar) FieldValues(ctx context.Context, tmpl ServiceTemplate, setIndex int, field string) ([]Value, error) {
	if setIndex < 0 || setIndex >= len(tmpl.Entries) {
		return nil, djinn.Errorf(djinn.InvalidArgument, "set index %d: the template has %d entry templates", setIndex, len(tmpl.Entries))
	}
	if field == "" {
		return nil, djinn.Errorf(djinn.InvalidArgument, "field name: missing")
	}
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	pb, err := lc.GetFieldValues(ctx, &djinnpb.BrowseRequest{Template: wire.Template(tmpl), SetIndex: int32(setIndex), Field: field})
	if err != nil {
		return nil, err
	}
	out := make([]Value, len(pb.GetValues()))
	for i, v := range pb.GetValues() {
		out[i] = wire.ValueFrom(v)
	}
	return out, nil
}

// ServiceTypes returns service type names of the items matching tmpl, as
// Jini's getServiceTypes: for each item, its most specific types that are
// neither one of tmpl's types nor a supertype of one, those starting with
// prefix — or, in the place of one that does not, its nearest supertypes
// that do — each name once, sorted. So a Laser that is a Printer, found by
// a template naming Printer, gives [Laser]. The supertypes are known from
// the hierarchy an item declares (service.Item.Supertypes); an item that
// lists its types flat has each of them most specific, and gives all but
// tmpl's.
func (r *Registrar) ServiceTypes(ctx context.Context, tmpl ServiceTemplate, prefix string) ([]string, error) {
	lc, err := r.client()
	if err != nil {
		return nil, err
	}
	pb, err := lc.GetServiceTypes(ctx, &djinnpb.BrowseRequest{Template: wire.Template(tmpl), Prefix: prefix})
	if err != nil {
		return nil, err
	}
	return pb.GetTypes(), nil
}

// ServiceEvent is a lookup service's remote event (Jini's ServiceEvent):
// an item's matching of a Notify template changed. The embedded event's
// Source is the registrar and its ID the registration's.
type ServiceEvent struct {
	*RemoteEvent
	// Transition is the one transition that happened.
	Transition Transition
	// ServiceID names the item.
	ServiceID djinn.ID
	// Item is the item after the change; nil when it was removed (a
	// MatchNoMatch whose lease ended or was cancelled).
	Item *ServiceItem
}

// ServiceEventFrom reads a service event from ev, as a listener registered
// with Notify receives it. An event without a well-formed
// djinn.v1.ServiceEvent payload is refused with djinn.ErrInvalidArgument:
// one transition, a 16-byte service id, and an item (with that id, or
// none) unless the transition is MatchNoMatch.
func ServiceEventFrom(ev *RemoteEvent) (*ServiceEvent, error) {
	switch {
	case ev == nil:
		return nil, djinn.Errorf(djinn.InvalidArgument, "service event: missing")
	case ev.Payload == nil:
		return nil, djinn.Errorf(djinn.InvalidArgument, "service event payload: missing")
	}
	var pb djinnpb.ServiceEvent
	if !ev.Payload.MessageIs(&pb) {
		return nil, djinn.Errorf(djinn.InvalidArgument, "service event payload %q: want djinn.v1.ServiceEvent", abbrev(ev.Payload.GetTypeUrl()))
	}
	if err := ev.Payload.UnmarshalTo(&pb); err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "service event payload: %v", err)
	}
	tr := Transition(pb.GetTransition())
	if tr != MatchNoMatch && tr != NoMatchMatch && tr != MatchMatch {
		return nil, djinn.Errorf(djinn.InvalidArgument, "service event transition %d: want one of match-nomatch (1), nomatch-match (2), match-match (4)", pb.GetTransition())
	}
	id, err := djinn.IDFromBytes("service event service id", pb.GetServiceId())
	if err != nil {
		return nil, err
	}
	se := &ServiceEvent{RemoteEvent: ev, Transition: tr, ServiceID: id}
	if pb.Item == nil {
		if tr != MatchNoMatch {
			return nil, djinn.Errorf(djinn.InvalidArgument, "service event %s of %s: item missing", tr, id)
		}
		return se, nil
	}
	it, err := wire.ItemFrom(pb.GetItem())
	if err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "service event %v", err)
	}
	switch {
	case it.ID.IsZero():
		it.ID = id
	case it.ID != id:
		return nil, djinn.Errorf(djinn.InvalidArgument, "service event of %s: item id %s differs", id, it.ID)
	}
	se.Item = &it
	return se, nil
}
