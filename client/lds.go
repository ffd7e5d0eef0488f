package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/discovery"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// This file is the client of the lookup discovery service
// (the Jini Lookup Discovery Service Specification, cited as LD n.n; docs/specs.md): registrations that
// have the service discover lookup services on their behalf, and the
// discovered and discarded events it sends their listeners.

// Groups is a managed set of groups (LD.3.1): every group (All, Jini's
// ALL_GROUPS, null), or the groups named in Names — none at all (Jini's
// NO_GROUPS, the empty array) when Names is empty. The public group is
// the empty name "". The zero Groups is no group.
type Groups struct {
	All   bool
	Names []string
}

// AllGroups is every group: lookup services of any group are discovered.
var AllGroups = Groups{All: true}

// GroupsOf returns the groups named; none is no group.
func GroupsOf(names ...string) Groups { return Groups{Names: names} }

// String writes the groups as a list: "all", "none", or the names quoted
// and comma-separated.
func (g Groups) String() string {
	switch {
	case g.All:
		return "all"
	case len(g.Names) == 0:
		return "none"
	}
	q := make([]string, len(g.Names))
	for i, n := range g.Names {
		q[i] = `"` + n + `"`
	}
	return strings.Join(q, ",")
}

func (g Groups) check(what string) error {
	if g.All && len(g.Names) > 0 {
		return djinn.Errorf(djinn.InvalidArgument, "%s: all groups and the groups %s: choose one", what, GroupsOf(g.Names...))
	}
	return nil
}

// canonicalLocators checks jini:// locators (jini://host, jini://host:port,
// with or without a final slash) and returns them canonical
// (jini://host:port/); what names them in errors.
func canonicalLocators(what string, locs []string) ([]string, error) {
	out := make([]string, len(locs))
	for i, s := range locs {
		l, err := discovery.ParseLocator(s)
		if err != nil {
			return nil, djinn.Errorf(djinn.InvalidArgument, "%s: %v", what, err)
		}
		out[i] = l.String()
	}
	return out, nil
}

// DiscoveredRegistrar is a lookup service as the lookup discovery service
// discovered it. Call it by dialling Endpoint (Dial, then Client.Lookup).
type DiscoveredRegistrar struct {
	ServiceID djinn.ID
	Endpoint  string   // its gRPC address, host:port
	Locator   string   // its unicast discovery address, jini://host:port/
	Groups    []string // its member groups, sorted
}

// discoveredFromProto converts and checks a lookup service the service
// sent: a non-zero service id, a host:port endpoint and a jini:// locator.
func discoveredFromProto(what string, pb *djinnpb.DiscoveredRegistrar) (DiscoveredRegistrar, error) {
	id, err := djinn.IDFromBytes(what+" service id", pb.GetServiceId())
	if err != nil {
		return DiscoveredRegistrar{}, err
	}
	if id.IsZero() {
		return DiscoveredRegistrar{}, djinn.Errorf(djinn.InvalidArgument, "%s service id: zero", what)
	}
	if err := djinn.CheckStoredEndpoint(pb.GetEndpoint()); err != nil {
		return DiscoveredRegistrar{}, djinn.Errorf(djinn.InvalidArgument, "%s %s: %v", what, id, err)
	}
	l, err := discovery.ParseLocator(pb.GetLocator())
	if err != nil {
		return DiscoveredRegistrar{}, djinn.Errorf(djinn.InvalidArgument, "%s %s: %v", what, id, err)
	}
	return DiscoveredRegistrar{ServiceID: id, Endpoint: pb.GetEndpoint(), Locator: l.String(), Groups: slices.Clone(pb.GetGroups())}, nil
}

// discoveredList converts a list of lookup services, which must not name
// one twice.
func discoveredList(what string, pbs []*djinnpb.DiscoveredRegistrar) ([]DiscoveredRegistrar, error) {
	out := make([]DiscoveredRegistrar, len(pbs))
	for i, pb := range pbs {
		r, err := discoveredFromProto(what, pb)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out[:i], func(o DiscoveredRegistrar) bool { return o.ServiceID == r.ServiceID }) {
			return nil, djinn.Errorf(djinn.InvalidArgument, "%s %s: twice", what, r.ServiceID)
		}
		out[i] = r
	}
	return out, nil
}

// LookupDiscoveryService is a client of a lookup discovery service (LD.2):
// it runs group and locator discovery for its registrations and sends each
// registration's listener discovered and discarded events
// (DiscoveryEventFrom reads them). Registrations are leased; renew their
// leases (Lease.Renew, or a Renewer) while they are needed. It is safe for
// concurrent use and holds no connection of its own: calls go through its
// Connector.
type LookupDiscoveryService struct {
	c   Connector
	ref djinn.Ref
}

// NewLookupDiscoveryService returns a client for the lookup discovery
// service named by ref (the reference Status gives), reached at ref's
// endpoint.
func NewLookupDiscoveryService(c Connector, ref djinn.Ref) *LookupDiscoveryService {
	return &LookupDiscoveryService{c: c, ref: ref}
}

// LookupDiscovery returns a client for the lookup discovery service of the
// server c is dialled to, as its Status names it, reached at the dialled
// address (a follower points calls at the leader). A server that does not
// run it gives djinn.ErrUnsupported; one still starting, with no cluster
// service id yet, djinn.ErrUnavailable.
func (c *Client) LookupDiscovery(ctx context.Context) (*LookupDiscoveryService, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	return st.LookupDiscovery()
}

// Ref returns the service's reference: the source of its events.
func (s *LookupDiscoveryService) Ref() djinn.Ref { return s.ref }

// String names the service by its reference.
func (s *LookupDiscoveryService) String() string {
	return "lookup discovery service " + s.ref.String()
}

func (s *LookupDiscoveryService) client() (djinnpb.LookupDiscoveryServiceClient, error) {
	if s == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup discovery service: missing (nil)")
	}
	if s.c == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "connector: missing")
	}
	cc, err := ConnFor(s.c, s.ref)
	if err != nil {
		return nil, err
	}
	return djinnpb.NewLookupDiscoveryServiceClient(cc), nil
}

// Register makes a registration (LD.3.1) for a lease of about d (positive,
// djinn.Forever or djinn.Any; the service may grant less): the service
// discovers the lookup services of groups and those at locators (jini://
// URLs) and sends listener discovered and discarded events with handback in
// them. Duplicates in groups and locators count once. Every call makes a
// new registration.
func (s *LookupDiscoveryService) Register(ctx context.Context, groups Groups, locators []string, listener djinn.Ref, handback []byte, d time.Duration) (*LDSRegistration, error) {
	if err := groups.check("groups"); err != nil {
		return nil, err
	}
	locs, err := canonicalLocators("locators", locators)
	if err != nil {
		return nil, err
	}
	if listener.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "listener: missing: a registration sends its events to a listener; give one")
	}
	if err := djinn.CheckLeaseDuration("registration lease duration", d); err != nil {
		return nil, err
	}
	lc, err := s.client()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	pb, err := lc.Register(ctx, &djinnpb.LDSRegisterRequest{AllGroups: groups.All, Groups: groups.Names, Locators: locs,
		Listener: RefToProto(listener), Handback: handback, LeaseDurationNanos: int64(d)})
	if err != nil {
		return nil, err
	}
	er, err := EventRegistrationFromProto(pb.GetRegistration(), sent)
	if err != nil {
		return nil, err
	}
	return &LDSRegistration{s: s, reg: er}, nil
}

// Registration returns the registration whose lease is l (from a token a
// registering program handed on), asking the service for its event id: a
// registration that is gone gives djinn.ErrNoSuchObject.
func (s *LookupDiscoveryService) Registration(ctx context.Context, l *Lease) (*LDSRegistration, error) {
	if l == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "registration lease: missing")
	}
	r := &LDSRegistration{s: s, reg: &EventRegistration{Source: s.ref, Lease: l}}
	st, err := r.State(ctx)
	if err != nil {
		return nil, err
	}
	r.reg.ID = st.EventID
	return r, nil
}

// LDSRegistration is a registration with a lookup discovery service (LD.4.1):
// its event registration and lease, and the calls that read and change its
// managed sets. Its lease's cookie names it: whoever holds the lease (or
// its token) may change it. Once its lease has ended, every call gives
// djinn.ErrNoSuchObject.
type LDSRegistration struct {
	s   *LookupDiscoveryService
	reg *EventRegistration
}

// EventRegistration returns what identifies the registration's events
// (LD.4.1.1 getEventRegistration): the service as source, the event id,
// the lease, and the sequence number when it was made.
func (r *LDSRegistration) EventRegistration() *EventRegistration { return r.reg }

// Lease returns the registration's lease (LD.4.1.1 getLease).
func (r *LDSRegistration) Lease() *Lease { return r.reg.Lease }

// LDSState is a registration's state as the service holds it.
type LDSState struct {
	EventID  int64
	Groups   Groups   // sorted
	Locators []string // canonical, sorted
	// Seq is the sequence number of the last event sent.
	Seq int64
	// Expires is when the registration's lease expires (djinn.EndOfTime
	// for never).
	Expires time.Time
}

func (r *LDSRegistration) call() (djinnpb.LookupDiscoveryServiceClient, []byte, error) {
	if r == nil || r.reg == nil || r.reg.Lease == nil {
		return nil, nil, djinn.Errorf(djinn.InvalidArgument, "lookup discovery registration: missing (nil, or without its lease)")
	}
	lc, err := r.s.client()
	if err != nil {
		return nil, nil, err
	}
	c := r.reg.Lease.Cookie()
	return lc, c[:], nil
}

func stateFromProto(pb *djinnpb.LDSRegistrationState) *LDSState {
	st := &LDSState{EventID: pb.GetEventId(), Groups: Groups{All: pb.GetAllGroups(), Names: pb.GetGroups()}, Locators: pb.GetLocators(), Seq: pb.GetSequence(),
		Expires: fromUnixNanos(pb.GetLeaseExpiresUnixNanos())}
	if st.Groups.All {
		st.Groups.Names = nil
	}
	return st
}

// State returns the registration's state: its event id, managed sets of
// groups and locators, last sequence number and expiration.
func (r *LDSRegistration) State(ctx context.Context) (*LDSState, error) {
	lc, cookie, err := r.call()
	if err != nil {
		return nil, err
	}
	pb, err := lc.GetRegistration(ctx, &djinnpb.LDSRegistrationRequest{LeaseCookie: cookie})
	if err != nil {
		return nil, err
	}
	return stateFromProto(pb), nil
}

// Groups returns the registration's managed set of groups (LD.4.1.1
// getGroups): AllGroups, or the names, sorted.
func (r *LDSRegistration) Groups(ctx context.Context) (Groups, error) {
	st, err := r.State(ctx)
	if err != nil {
		return Groups{}, err
	}
	return st.Groups, nil
}

// Locators returns the registration's managed set of locators (LD.4.1.1
// getLocators), canonical and sorted.
func (r *LDSRegistration) Locators(ctx context.Context) ([]string, error) {
	st, err := r.State(ctx)
	if err != nil {
		return nil, err
	}
	return st.Locators, nil
}

// Registrars returns the lookup services discovered for the registration
// (LD.4.1.1 getRegistrars), by service id. Partial results, never all or
// nothing: when some of the lookup services the service sent cannot be
// read, it returns the others with a *RegistrarsError that says why (as
// Jini's LookupUnmarshalException does).
func (r *LDSRegistration) Registrars(ctx context.Context) ([]DiscoveredRegistrar, error) {
	lc, cookie, err := r.call()
	if err != nil {
		return nil, err
	}
	pb, err := lc.GetRegistrars(ctx, &djinnpb.LDSRegistrationRequest{LeaseCookie: cookie})
	if err != nil {
		return nil, err
	}
	var (
		out []DiscoveredRegistrar
		bad []error
	)
	for i, p := range pb.GetRegistrars() {
		d, err := discoveredFromProto(fmt.Sprintf("registrar %d", i), p)
		if err == nil && slices.ContainsFunc(out, func(o DiscoveredRegistrar) bool { return o.ServiceID == d.ServiceID }) {
			err = djinn.Errorf(djinn.InvalidArgument, "registrar %d %s: twice", i, d.ServiceID)
		}
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, d)
	}
	if len(bad) > 0 {
		return out, &RegistrarsError{Unreadable: bad}
	}
	return out, nil
}

// RegistrarsError is the error Registrars returns beside the lookup
// services it could read when it could not read others. errors.Is finds
// djinn.ErrInvalidArgument in it.
type RegistrarsError struct {
	// Unreadable says, for each lookup service that could not be read,
	// why.
	Unreadable []error
}

func (e *RegistrarsError) Error() string {
	return fmt.Sprintf("%d discovered lookup services could not be read: %v", len(e.Unreadable), errors.Join(e.Unreadable...))
}

// Unwrap returns the reasons.
func (e *RegistrarsError) Unwrap() []error { return e.Unreadable }

func (r *LDSRegistration) groups(ctx context.Context, op djinnpb.SetOp, g Groups) error {
	lc, cookie, err := r.call()
	if err != nil {
		return err
	}
	_, err = lc.ChangeGroups(ctx, &djinnpb.LDSGroupsRequest{LeaseCookie: cookie, Op: op, AllGroups: g.All, Groups: g.Names})
	return err
}

// AddGroups adds groups to the managed set (LD.4.1.1 addGroups); lookup
// services of the groups not yet discovered are discovered. A registration
// of all groups has no set to add to: djinn.ErrUnsupported.
func (r *LDSRegistration) AddGroups(ctx context.Context, names ...string) error {
	return r.groups(ctx, djinnpb.SetOp_SET_OP_ADD, GroupsOf(names...))
}

// SetGroups replaces the managed set of groups with names (LD.4.1.1
// setGroups); none stops group discovery for the registration. Lookup
// services discovered that no group nor locator wants any more are
// discarded.
func (r *LDSRegistration) SetGroups(ctx context.Context, names ...string) error {
	return r.groups(ctx, djinnpb.SetOp_SET_OP_SET, GroupsOf(names...))
}

// SetAllGroups makes the registration discover lookup services of every
// group (LD.4.1.1 setGroups(null)).
func (r *LDSRegistration) SetAllGroups(ctx context.Context) error {
	return r.groups(ctx, djinnpb.SetOp_SET_OP_SET, AllGroups)
}

// RemoveGroups removes groups from the managed set (LD.4.1.1
// removeGroups). A registration of all groups has no set to remove from:
// djinn.ErrUnsupported.
func (r *LDSRegistration) RemoveGroups(ctx context.Context, names ...string) error {
	return r.groups(ctx, djinnpb.SetOp_SET_OP_REMOVE, GroupsOf(names...))
}

func (r *LDSRegistration) locators(ctx context.Context, what string, op djinnpb.SetOp, locators []string) error {
	locs, err := canonicalLocators(what, locators)
	if err != nil {
		return err
	}
	lc, cookie, err := r.call()
	if err != nil {
		return err
	}
	_, err = lc.ChangeLocators(ctx, &djinnpb.LDSLocatorsRequest{LeaseCookie: cookie, Op: op, Locators: locs})
	return err
}

// AddLocators adds jini:// locators to the managed set (LD.4.1.1
// addLocators).
func (r *LDSRegistration) AddLocators(ctx context.Context, locators ...string) error {
	return r.locators(ctx, "locators to add", djinnpb.SetOp_SET_OP_ADD, locators)
}

// SetLocators replaces the managed set of locators (LD.4.1.1
// setLocators); none stops locator discovery for the registration.
func (r *LDSRegistration) SetLocators(ctx context.Context, locators ...string) error {
	return r.locators(ctx, "locators to set", djinnpb.SetOp_SET_OP_SET, locators)
}

// RemoveLocators removes locators from the managed set (LD.4.1.1
// removeLocators).
func (r *LDSRegistration) RemoveLocators(ctx context.Context, locators ...string) error {
	return r.locators(ctx, "locators to remove", djinnpb.SetOp_SET_OP_REMOVE, locators)
}

// Discard tells the service that a discovered lookup service is
// unreachable (LD.4.1.1 discard): the registration gets a discarded event
// for it, and a discovered event when the service finds it again. It
// reports whether the registration had discovered it; if not, nothing
// happens.
func (r *LDSRegistration) Discard(ctx context.Context, registrar djinn.ID) (bool, error) {
	if registrar.IsZero() {
		return false, djinn.Errorf(djinn.InvalidArgument, "registrar service id: missing (zero)")
	}
	lc, cookie, err := r.call()
	if err != nil {
		return false, err
	}
	pb, err := lc.Discard(ctx, &djinnpb.LDSDiscardRequest{LeaseCookie: cookie, RegistrarServiceId: registrar[:]})
	if err != nil {
		return false, err
	}
	return pb.GetDiscarded(), nil
}

// RemoteDiscoveryEvent is a lookup discovery service's remote event
// (LD.4.2): lookup services discovered, or discarded, for a registration.
// The embedded event's Source is the service and its ID the
// registration's.
type RemoteDiscoveryEvent struct {
	*RemoteEvent
	// Discarded tells a discarded event from a discovered one (LD.4.2.1
	// isDiscarded).
	Discarded bool
	// Registrars are the lookup services, at least one, each once, by
	// service id (LD.4.2.1 getRegistrars).
	Registrars []DiscoveredRegistrar
}

// Groups returns each lookup service's member groups by service id
// (LD.4.2.1 getGroups).
func (e *RemoteDiscoveryEvent) Groups() map[djinn.ID][]string {
	out := make(map[djinn.ID][]string, len(e.Registrars))
	for _, r := range e.Registrars {
		out[r.ServiceID] = r.Groups
	}
	return out
}

// DiscoveryEventFrom reads a discovery event from ev, as a registration's
// listener receives it. An event without a well-formed
// djinn.v1.RemoteDiscoveryEvent payload is refused with
// djinn.ErrInvalidArgument: at least one lookup service, each with a
// non-zero 16-byte service id given once, a host:port endpoint and a
// jini:// locator.
func DiscoveryEventFrom(ev *RemoteEvent) (*RemoteDiscoveryEvent, error) {
	switch {
	case ev == nil:
		return nil, djinn.Errorf(djinn.InvalidArgument, "discovery event: missing")
	case ev.Payload == nil:
		return nil, djinn.Errorf(djinn.InvalidArgument, "discovery event payload: missing")
	}
	var pb djinnpb.RemoteDiscoveryEvent
	if !ev.Payload.MessageIs(&pb) {
		return nil, djinn.Errorf(djinn.InvalidArgument, "discovery event payload %q: want djinn.v1.RemoteDiscoveryEvent", abbrev(ev.Payload.GetTypeUrl()))
	}
	if err := ev.Payload.UnmarshalTo(&pb); err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "discovery event payload: %v", err)
	}
	if len(pb.GetRegistrars()) == 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "discovery event: names no lookup service, where one names at least one")
	}
	rs, err := discoveredList("discovery event registrar", pb.GetRegistrars())
	if err != nil {
		return nil, err
	}
	return &RemoteDiscoveryEvent{RemoteEvent: ev, Discarded: pb.GetDiscarded(), Registrars: rs}, nil
}
