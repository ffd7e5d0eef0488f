package client

import (
	"bytes"
	"context"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The event ids of a renewal set's events (LR.2's
// LeaseRenewalSet.RENEWAL_FAILURE_EVENT_ID and EXPIRATION_WARNING_EVENT_ID).
const (
	RenewalFailureEventID    = int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_RENEWAL_FAILURE)
	ExpirationWarningEventID = int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_EXPIRATION_WARNING)
)

// RenewalService is a client of a lease renewal service (LR.2): a service
// that renews other services' leases, kept in renewal sets, on behalf of
// clients that are away. Every set is itself leased from the service; keep
// its lease alive (renew it, or let an expiration warning wake you in time)
// or the set and everything in it is dropped.
type RenewalService struct {
	c   Connector
	ref djinn.Ref // where the service is served (its endpoint)
}

// NewRenewalService returns a client for the lease renewal service served
// at endpoint.
func NewRenewalService(c Connector, endpoint string) *RenewalService {
	return &RenewalService{c: c, ref: djinn.Ref{Endpoint: endpoint}}
}

// RenewalService returns a client for the lease renewal service of the
// cluster c is dialled to.
func (c *Client) RenewalService() *RenewalService {
	return &RenewalService{c: c, ref: djinn.Ref{Endpoint: c.addr, Service: c.ServiceID()}}
}

// client returns the service's client at endpoint, in the cluster of
// service svc (zero: the cluster endpoint is a member of, if known).
func (s *RenewalService) client(endpoint string, svc djinn.ID) (djinnpb.LeaseRenewalServiceClient, error) {
	if s.c == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "connector: missing")
	}
	if svc.IsZero() {
		svc = s.ref.Service
	}
	cc, err := ConnFor(s.c, djinn.Ref{Endpoint: endpoint, Service: svc})
	if err != nil {
		return nil, err
	}
	return djinnpb.NewLeaseRenewalServiceClient(cc), nil
}

// CreateSet creates a renewal set leased for d (LR.2's
// createLeaseRenewalSet): d must be positive, djinn.Forever or djinn.Any,
// and the service may grant less. Two calls never return equal sets.
func (s *RenewalService) CreateSet(ctx context.Context, d time.Duration) (*RenewalSet, error) {
	if err := djinn.CheckLeaseDuration("lease duration", d); err != nil {
		return nil, err
	}
	rc, err := s.client(s.ref.Endpoint, s.ref.Service)
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	pb, err := rc.CreateSet(ctx, &djinnpb.CreateSetRequest{LeaseDurationNanos: int64(d)})
	if err != nil {
		return nil, err
	}
	set, _, err := s.fromProto(s.ref.Endpoint, pb, sent)
	return set, err
}

// Set reads a set by id: the way back to it, from its id alone, after a
// restart. A set whose lease ended fails with djinn.ErrNoSuchObject.
func (s *RenewalService) Set(ctx context.Context, id djinn.ID) (*RenewalSet, error) {
	set, _, err := s.getSet(ctx, s.ref.Endpoint, id)
	return set, err
}

func (s *RenewalService) getSet(ctx context.Context, endpoint string, id djinn.ID) (*RenewalSet, *RenewalSetInfo, error) {
	rc, err := s.client(endpoint, djinn.ID{})
	if err != nil {
		return nil, nil, err
	}
	sent := time.Now()
	pb, err := rc.GetSet(ctx, &djinnpb.SetRequest{SetId: id[:]})
	if err != nil {
		return nil, nil, err
	}
	return s.fromProto(endpoint, pb, sent)
}

// fromProto converts a set read at endpoint by a request sent at sent.
func (s *RenewalService) fromProto(endpoint string, pb *djinnpb.RenewalSet, sent time.Time) (*RenewalSet, *RenewalSetInfo, error) {
	if pb == nil {
		return nil, nil, djinn.Errorf(djinn.InvalidArgument, "renewal set: missing")
	}
	ref, err := RefFromProto("renewal set", pb.GetSet())
	if err != nil {
		return nil, nil, err
	}
	if ref.Object.IsZero() {
		return nil, nil, djinn.Errorf(djinn.InvalidArgument, "renewal set id: missing")
	}
	l, err := LeaseFromProto(pb.GetLease(), sent)
	if err != nil {
		return nil, nil, err
	}
	info := &RenewalSetInfo{Lease: l, Leases: pb.GetLeases()}
	if info.ExpirationWarning, err = renewalListenerFromProto("expiration warning listener", pb.GetExpirationWarning()); err != nil {
		return nil, nil, err
	}
	if info.RenewalFailure, err = renewalListenerFromProto("renewal failure listener", pb.GetRenewalFailure()); err != nil {
		return nil, nil, err
	}
	return &RenewalSet{s: s, endpoint: endpoint, ref: ref, lease: l}, info, nil
}

func renewalListenerFromProto(what string, pb *djinnpb.RenewalListener) (*RenewalListener, error) {
	if pb == nil {
		return nil, nil
	}
	ref, err := RefFromProto(what, pb.GetListener())
	if err != nil {
		return nil, err
	}
	return &RenewalListener{
		Listener:   ref,
		Handback:   pb.GetHandback(),
		MinWarning: time.Duration(pb.GetMinWarningNanos()),
		NextSeq:    pb.GetNextSequence(),
		Pending:    pb.GetPendingEvents(),
	}, nil
}

// RenewalSet is a lease renewal set (LR.2's LeaseRenewalSet): client leases
// that the service renews until their desired expirations, under one lease
// of the set's own. It is a handle: every method but ID, Ref, Lease and
// Equal calls the service, and any of them fails with djinn.ErrNoSuchObject
// once the set is gone (its lease expired or was cancelled), which says
// nothing about the service itself. It is safe for concurrent use.
type RenewalSet struct {
	s        *RenewalService
	endpoint string    // where the set was created or read
	ref      djinn.Ref // the set's reference: the source of its events
	lease    *Lease
}

// RenewalSetInfo is what the service holds for a set, read by Info.
type RenewalSetInfo struct {
	// Lease is the set's lease as read: equal to RenewalSet.Lease, with the
	// expiration the service knew.
	Lease *Lease
	// Leases is the number of client leases in the set.
	Leases int64
	// ExpirationWarning and RenewalFailure are the set's event
	// registrations, nil when none is set.
	ExpirationWarning, RenewalFailure *RenewalListener
}

// RenewalListener is a set's registration for one kind of event (LR.2.1).
type RenewalListener struct {
	Listener djinn.Ref
	Handback []byte
	// MinWarning is how long before the set's lease expires the warning
	// is sent (expiration warnings only).
	MinWarning time.Duration
	// NextSeq is the sequence number the next event of this kind will
	// get; Pending is how many are not delivered yet.
	NextSeq, Pending int64
}

// ID returns the set's id: what Set takes to read it back.
func (s *RenewalSet) ID() djinn.ID { return s.ref.Object }

// Ref returns the set's reference: the source of the events it sends.
func (s *RenewalSet) Ref() djinn.Ref { return s.ref }

// Lease returns the set's lease as it was last returned (LR.2's
// getRenewalSetLease); it makes no remote call. Renew and cancel it as any
// lease: renewing it keeps the set, cancelling it destroys the set.
func (s *RenewalSet) Lease() *Lease { return s.lease }

// Equal reports whether s and o are the same set of the same service, as
// LR.2's equals: an event's source compares equal to the set it names.
func (s *RenewalSet) Equal(o *RenewalSet) bool {
	if s == nil || o == nil {
		return s == o
	}
	return s.ref.Equal(o.ref)
}

// String names the set by its reference.
func (s *RenewalSet) String() string { return "renewal set " + s.ref.String() }

// Info reads what the service holds for the set now: its lease, its number
// of client leases and its event registrations. The set's own Lease is not
// changed.
func (s *RenewalSet) Info(ctx context.Context) (*RenewalSetInfo, error) {
	_, info, err := s.s.getSet(ctx, s.endpoint, s.ID())
	return info, err
}

// RenewFor puts l in the set, or changes the durations of an equal lease
// already in it (LR.2's three-argument renewFor). The service renews l for
// renew at a time until desired has passed from now by its clock: desired
// is any duration (djinn.Forever keeps l until something else ends it, a
// negative one drops l at once), renew is positive, or djinn.Any when
// desired is djinn.Forever. A lease in another set of the same service, or
// a live lease the service granted itself, is refused with
// djinn.ErrInvalidArgument.
func (s *RenewalSet) RenewFor(ctx context.Context, l *Lease, desired, renew time.Duration) error {
	if l == nil {
		return djinn.Errorf(djinn.InvalidArgument, "lease: missing")
	}
	if err := checkRenewalDuration(desired, renew); err != nil {
		return err
	}
	rc, err := s.s.client(s.endpoint, s.ref.Service)
	if err != nil {
		return err
	}
	id := s.ID()
	_, err = rc.RenewFor(ctx, &djinnpb.RenewForRequest{
		SetId:                id[:],
		Lease:                l.Proto(time.Now()),
		DesiredDurationNanos: int64(desired),
		RenewDurationNanos:   int64(renew),
	})
	return err
}

// RenewForDesired is LR.2's two-argument renewFor: RenewFor with the
// renewal duration djinn.Forever.
func (s *RenewalSet) RenewForDesired(ctx context.Context, l *Lease, desired time.Duration) error {
	return s.RenewFor(ctx, l, desired, djinn.Forever)
}

// checkRenewalDuration enforces renewFor's rule on the renewal duration
// (LR.2).
func checkRenewalDuration(desired, renew time.Duration) error {
	switch {
	case renew > 0:
		return nil
	case renew == djinn.Any && desired == djinn.Forever:
		return nil
	case renew == djinn.Any:
		return djinn.Errorf(djinn.InvalidArgument, "renew duration Any: allowed only when the desired duration is Forever, not %s: give a positive renew duration",
			djinn.FormatDuration(desired))
	}
	return djinn.Errorf(djinn.InvalidArgument, "renew duration %s: must be positive", djinn.FormatDuration(renew))
}

// Remove takes l out of the set without cancelling it (LR.2). It returns
// the lease as the set held it, its expiration the last one the service
// recorded, or nil and no error when l was not in the set. A renewal in
// progress may still renew l after Remove returns.
func (s *RenewalSet) Remove(ctx context.Context, l *Lease) (*Lease, error) {
	if l == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lease: missing")
	}
	rc, err := s.s.client(s.endpoint, s.ref.Service)
	if err != nil {
		return nil, err
	}
	id := s.ID()
	sent := time.Now()
	resp, err := rc.Remove(ctx, &djinnpb.RemoveRequest{SetId: id[:], Lease: l.Proto(sent)})
	if err != nil {
		return nil, err
	}
	if resp.GetLease() == nil {
		return nil, nil
	}
	return LeaseFromProto(resp.GetLease(), sent)
}

// ClientLease is a lease in a renewal set (LR.2), as Leases reads it.
type ClientLease struct {
	// Lease is the client lease; its expiration is the last recorded
	// successful renewal, or the one it had when added.
	Lease *Lease
	// Desired is when the set drops the lease: djinn.EndOfTime for
	// Forever.
	Desired time.Time
	// RenewDuration is what each renewal asks for (less near Desired);
	// djinn.Any is possible when Desired is the end of time.
	RenewDuration time.Duration
	// LastError is the last renewal failure since the last success, nil
	// when there was none; the service keeps retrying indefinite ones.
	LastError error
}

// Leases returns the client leases in the set (LR.2's getLeases), in no
// particular order. It reads them a page at a time (a set may hold more
// than one message carries): a lease in the set throughout the call is
// returned once; one added or removed meanwhile may or may not be.
func (s *RenewalSet) Leases(ctx context.Context) ([]ClientLease, error) {
	rc, err := s.s.client(s.endpoint, s.ref.Service)
	if err != nil {
		return nil, err
	}
	id := s.ID()
	var (
		out   []ClientLease
		after []byte
	)
	for {
		sent := time.Now()
		resp, err := rc.GetLeases(ctx, &djinnpb.GetLeasesRequest{SetId: id[:], Max: leasesPage, After: after})
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = make([]ClientLease, 0, max(len(resp.GetLeases()), int(min(resp.GetTotal(), leasesPage))))
		}
		for _, cl := range resp.GetLeases() {
			c, err := clientLeaseFrom(cl, sent)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
		next := resp.GetNext()
		if len(next) == 0 {
			return out, nil
		}
		// Pages come in key order: a next not past the page's after would
		// list leases again, or loop.
		if len(resp.GetLeases()) == 0 || bytes.Compare(next, after) <= 0 {
			return nil, djinn.Errorf(djinn.Internal, "renewal set %s: a page of %d leases after %x named %x next: the service does not move on", id, len(resp.GetLeases()), after, next)
		}
		after = next
	}
}

// leasesPage is the most leases Leases asks for in a page: the most a
// page holds (it ends sooner, by bytes, for leases of long endpoints).
const leasesPage = 100_000

// clientLeaseFrom converts a client lease of an answer to a request sent
// at sent.
func clientLeaseFrom(cl *djinnpb.ClientLease, sent time.Time) (ClientLease, error) {
	l, err := LeaseFromProto(cl.GetLease(), sent)
	if err != nil {
		return ClientLease{}, err
	}
	if n := cl.GetDesiredExpirationUnixNanos(); n < 0 {
		return ClientLease{}, djinn.Errorf(djinn.InvalidArgument, "client lease desired expiration %d: before 1970", n)
	}
	return ClientLease{
		Lease:         l,
		Desired:       fromUnixNanos(cl.GetDesiredExpirationUnixNanos()),
		RenewDuration: time.Duration(cl.GetRenewDurationNanos()),
		LastError:     errorFromProto(cl.GetLastError()),
	}, nil
}

// SetExpirationWarningListener asks for an ExpirationWarningEventID event
// to be sent to listener minWarning (zero or more) before the set's lease
// expires, at once if that is sooner (LR.2.1), with handback in it. It
// replaces any earlier registration for the warning; the sequence numbers
// go on from the old one. The registration is covered by the set's lease:
// clear it with ClearExpirationWarningListener, not by cancelling that
// lease, which destroys the set.
func (s *RenewalSet) SetExpirationWarningListener(ctx context.Context, listener djinn.Ref, minWarning time.Duration, handback []byte) (*EventRegistration, error) {
	if listener.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "listener: missing")
	}
	if minWarning < 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "minimum warning %s: must be zero or positive", djinn.FormatDuration(minWarning))
	}
	rc, err := s.s.client(s.endpoint, s.ref.Service)
	if err != nil {
		return nil, err
	}
	id := s.ID()
	sent := time.Now()
	pb, err := rc.SetExpirationWarningListener(ctx, &djinnpb.SetExpirationWarningListenerRequest{
		SetId: id[:], Listener: RefToProto(listener), MinWarningNanos: int64(minWarning), Handback: handback,
	})
	if err != nil {
		return nil, err
	}
	return EventRegistrationFromProto(pb, sent)
}

// ClearExpirationWarningListener removes the expiration warning
// registration, if there is one (LR.2.1).
func (s *RenewalSet) ClearExpirationWarningListener(ctx context.Context) error {
	rc, err := s.s.client(s.endpoint, s.ref.Service)
	if err != nil {
		return err
	}
	id := s.ID()
	_, err = rc.ClearExpirationWarningListener(ctx, &djinnpb.SetRequest{SetId: id[:]})
	return err
}

// SetRenewalFailureListener asks for a RenewalFailureEventID event to be
// sent to listener, with handback in it, whenever a client lease leaves the
// set because it could not be renewed (LR.2.1): it expired before its
// desired expiration, or a renewal failed definitely. It replaces any
// earlier registration for failures; the sequence numbers go on from the
// old one. The registration is covered by the set's lease.
func (s *RenewalSet) SetRenewalFailureListener(ctx context.Context, listener djinn.Ref, handback []byte) (*EventRegistration, error) {
	if listener.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "listener: missing")
	}
	rc, err := s.s.client(s.endpoint, s.ref.Service)
	if err != nil {
		return nil, err
	}
	id := s.ID()
	sent := time.Now()
	pb, err := rc.SetRenewalFailureListener(ctx, &djinnpb.SetRenewalFailureListenerRequest{
		SetId: id[:], Listener: RefToProto(listener), Handback: handback,
	})
	if err != nil {
		return nil, err
	}
	return EventRegistrationFromProto(pb, sent)
}

// ClearRenewalFailureListener removes the renewal failure registration, if
// there is one (LR.2.1).
func (s *RenewalSet) ClearRenewalFailureListener(ctx context.Context) error {
	rc, err := s.s.client(s.endpoint, s.ref.Service)
	if err != nil {
		return err
	}
	id := s.ID()
	_, err = rc.ClearRenewalFailureListener(ctx, &djinnpb.SetRequest{SetId: id[:]})
	return err
}

// RenewalFailureEvent is LR.2.1's renewal failure event: a client lease
// left the set, removed by the service, because it could not be renewed.
// The embedded event's Source is the set.
type RenewalFailureEvent struct {
	*RemoteEvent
	// Lease is the client lease, its expiration the last recorded one.
	Lease *Lease
	// Err is the error of the last recorded renewal attempt; nil when there
	// was none (the lease expired before the service could renew it, or
	// the result of the attempt was not recorded).
	Err error
}

// RenewalFailureEventFrom reads a renewal failure event from ev, received
// at received (the time a duration-format lease in it is counted from).
// An event of another id or without a well-formed djinn.v1.RenewalFailure
// payload is refused with djinn.ErrInvalidArgument.
func RenewalFailureEventFrom(ev *RemoteEvent, received time.Time) (*RenewalFailureEvent, error) {
	if err := checkRenewalEvent(ev, RenewalFailureEventID, "renewal failure"); err != nil {
		return nil, err
	}
	var pb djinnpb.RenewalFailure
	if !ev.Payload.MessageIs(&pb) {
		return nil, djinn.Errorf(djinn.InvalidArgument, "renewal failure event payload %q: want djinn.v1.RenewalFailure", abbrev(ev.Payload.GetTypeUrl()))
	}
	if err := ev.Payload.UnmarshalTo(&pb); err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "renewal failure event payload: %v", err)
	}
	l, err := LeaseFromProto(pb.GetLease(), received)
	if err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "renewal failure event client %v", err)
	}
	return &RenewalFailureEvent{RemoteEvent: ev, Lease: l, Err: errorFromProto(pb.GetError())}, nil
}

// ExpirationWarningEvent is LR.2.1's expiration warning event: the set's
// lease will soon expire. The embedded event's Source is the set.
type ExpirationWarningEvent struct {
	*RemoteEvent
	// SetLease is the set's lease (equal to its RenewalSet.Lease) with the
	// expiration it had when the event occurred; a renewal since may have
	// moved it (LR.2.1's getRenewalSetLease).
	SetLease *Lease
}

// ExpirationWarningEventFrom reads an expiration warning event from ev,
// received at received (the time a duration-format lease in it is counted
// from). An event of another id or without a well-formed
// djinn.v1.ExpirationWarning payload is refused with
// djinn.ErrInvalidArgument.
func ExpirationWarningEventFrom(ev *RemoteEvent, received time.Time) (*ExpirationWarningEvent, error) {
	if err := checkRenewalEvent(ev, ExpirationWarningEventID, "expiration warning"); err != nil {
		return nil, err
	}
	var pb djinnpb.ExpirationWarning
	if !ev.Payload.MessageIs(&pb) {
		return nil, djinn.Errorf(djinn.InvalidArgument, "expiration warning event payload %q: want djinn.v1.ExpirationWarning", abbrev(ev.Payload.GetTypeUrl()))
	}
	if err := ev.Payload.UnmarshalTo(&pb); err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "expiration warning event payload: %v", err)
	}
	l, err := LeaseFromProto(pb.GetSetLease(), received)
	if err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "expiration warning event set %v", err)
	}
	return &ExpirationWarningEvent{RemoteEvent: ev, SetLease: l}, nil
}

func checkRenewalEvent(ev *RemoteEvent, id int64, what string) error {
	switch {
	case ev == nil:
		return djinn.Errorf(djinn.InvalidArgument, "%s event: missing", what)
	case ev.ID != id:
		return djinn.Errorf(djinn.InvalidArgument, "event id %d: not a %s event (id %d)", ev.ID, what, id)
	case ev.Payload == nil:
		return djinn.Errorf(djinn.InvalidArgument, "%s event payload: missing", what)
	}
	return nil
}
