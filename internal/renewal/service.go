package renewal

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Proposer appends a command to the replicated log and returns its result
// once applied here (an error result comes back as the error).
type Proposer interface {
	Propose(ctx context.Context, cmd *statepb.Command) (any, error)
}

// Landlords renews client leases at their landlords.
//
// RenewAll asks landlord to renew cookies[i] for durations[i] and returns
// each lease's granted duration or its error. A non-nil call error means no
// lease was renewed. Errors are wire errors so that they can be recorded
// and sent in events as they are.
type Landlords interface {
	RenewAll(ctx context.Context, landlord djinn.Ref, cookies []djinn.ID, durations []time.Duration) ([]time.Duration, []*djinnpb.Error, *djinnpb.Error)
}

// Config configures the service. Zero values take the defaults.
type Config struct {
	// Lease is the set lease policy (default: Any is an hour, at most a
	// day).
	Lease lease.Policy
	// MaxSets bounds live sets (default 1,000,000); MaxLeases the client
	// leases of all sets (default 10,000,000) and MaxSetLeases those of
	// one set (default 1,000,000).
	MaxSets, MaxLeases, MaxSetLeases int
	// Landlords renews client leases. Required.
	Landlords Landlords
	// RenewBatch is the most leases per renewal call (default 4096);
	// MaxCalls the renewal calls in flight (default 16); CallTimeout
	// bounds one call (default 20s).
	RenewBatch, MaxCalls int
	CallTimeout          time.Duration
	// MinRetry and MaxRetry bound the backoff between failed renewals of
	// a lease (default 1s and 30s).
	MinRetry, MaxRetry time.Duration
	// Window is how early a renewal may be made so that renewals to one
	// landlord batch (default 1s).
	Window time.Duration
	// Probe is how long a client lease may go unchecked at its landlord
	// between renewals (default DefaultProbe; negative: until its
	// renewal). A lease cancelled behind the set's back is reported about
	// this soon (see State.SetProbe).
	Probe time.Duration
	// WarnPoll is how often set lease expirations are checked for warning
	// listeners (default 250ms); warnings come this much early at most.
	WarnPoll time.Duration
	// Delivery configures event delivery; its Sender is required.
	Delivery event.Config
	Logger   *slog.Logger
}

// Defaults.
const (
	DefaultMaxSets      = 1_000_000
	DefaultMaxLeases    = 10_000_000
	DefaultMaxSetLeases = 1_000_000
	DefaultRenewBatch   = 4096
	DefaultMaxCalls     = 16
	DefaultProbe        = time.Minute
)

// DefaultPolicy is the set lease policy: sets are leased long (LR.1), so a
// client that sleeps seldom needs to wake to renew one.
var DefaultPolicy = lease.Policy{Default: time.Hour, Max: 24 * time.Hour}

// Service is the lease renewal service.
type Service struct {
	state  *State
	lessor *lease.Lessor
	log    Proposer
	now    func() time.Time
	self   func() djinn.Ref // the service's reference: its endpoint and id
	cfg    Config

	current atomic.Pointer[deliverer]

	// Counters for metrics.
	Calls      atomic.Uint64 // renewal calls made
	Renewed    atomic.Uint64 // client leases renewed
	Retried    atomic.Uint64 // renewals failed indefinitely, to be retried
	Failed     atomic.Uint64 // client leases removed with a failure event
	Unrecorded atomic.Uint64 // renewal outcomes the log did not take
	Probes     atomic.Uint64 // client leases checked between renewals
}

// New returns the service over state s.
func New(s *State, l *lease.Lessor, log Proposer, now func() time.Time, self func() djinn.Ref, cfg Config) (*Service, error) {
	if cfg.Lease == (lease.Policy{}) {
		cfg.Lease = DefaultPolicy
	}
	if err := l.Table().SetPolicy(LeaseKind, cfg.Lease); err != nil {
		return nil, err
	}
	if cfg.Landlords == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "renewal service: no landlord client")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.MaxSets, DefaultMaxSets)
	def(&cfg.MaxLeases, DefaultMaxLeases)
	def(&cfg.MaxSetLeases, DefaultMaxSetLeases)
	def(&cfg.RenewBatch, DefaultRenewBatch)
	def(&cfg.MaxCalls, DefaultMaxCalls)
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defd(&cfg.CallTimeout, 20*time.Second)
	defd(&cfg.MinRetry, time.Second)
	defd(&cfg.MaxRetry, 30*time.Second)
	defd(&cfg.Window, time.Second)
	defd(&cfg.WarnPoll, 250*time.Millisecond)
	if cfg.Probe == 0 {
		cfg.Probe = DefaultProbe
	}
	s.SetProbe(cfg.Probe)
	if cfg.Delivery.MaxQueue < DefaultMaxPending {
		cfg.Delivery.MaxQueue = DefaultMaxPending
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{state: s, lessor: l, log: log, now: now, self: self, cfg: cfg}, nil
}

// Run renews client leases, warns of set expirations and delivers events
// while this node leads, until ctx ends.
func (s *Service) Run(ctx context.Context) {
	// Set lease expirations are the lessor's: wait until it has promoted
	// them, or every set would look expired for a moment.
	select {
	case <-ctx.Done():
		return
	case <-s.lessor.Ready():
	}
	s.state.promote(s.now().UnixNano())
	d := newDeliverer(s.state, s.log, s.self, s.cfg.Logger, s.cfg.Delivery)
	s.current.Store(d)
	defer s.current.CompareAndSwap(d, nil)
	r := newRenewer(s)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		d.run(ctx)
	}()
	go func() {
		defer wg.Done()
		r.run(ctx)
	}()
	go func() {
		defer wg.Done()
		s.warnLoop(ctx)
	}()
	wg.Wait()
}

// DeliveryStats returns the event delivery counters while this node leads.
func (s *Service) DeliveryStats() event.Stats {
	d := s.current.Load()
	if d == nil {
		return event.Stats{}
	}
	var st event.Stats
	for _, e := range d.engines {
		x := e.Stats()
		st.Queues += x.Queues
		st.Queued += x.Queued
		st.Sends += x.Sends
		st.Delivered += x.Delivered
		st.Failed += x.Failed
		st.Retried += x.Retried
		st.Overflowed += x.Overflowed
	}
	return st
}

// Len returns the number of sets and client leases.
func (s *Service) Len() (sets, leases int) { return s.state.Len() }

// Set is a renewal set as Create and Get return it.
type Set struct {
	Ref   djinn.Ref
	Lease *djinnpb.Lease
	Info  SetInfo
}

func (s *Service) setRef(id djinn.ID) djinn.Ref {
	self := s.self()
	return djinn.Ref{Endpoint: self.Endpoint, Service: self.Service, Object: id}
}

func (s *Service) set(in SetInfo, remaining time.Duration) Set {
	return Set{Ref: s.setRef(in.ID), Lease: lease.Proto(s.self(), in.Cookie, remaining), Info: in}
}

// Create creates a renewal set (LR.2 createLeaseRenewalSet): the lease
// duration must be positive, Forever or Any. The set's lease is granted
// no longer than asked.
func (s *Service) Create(ctx context.Context, d time.Duration) (Set, error) {
	if d <= 0 && d != djinn.Any {
		return Set{}, djinn.Errorf(djinn.InvalidArgument, "lease duration %s: must be positive, Forever or Any", djinn.FormatDuration(d))
	}
	if err := s.leading(); err != nil {
		return Set{}, err
	}
	if n := s.state.Sets(); n >= s.cfg.MaxSets {
		return Set{}, djinn.Errorf(djinn.LeaseDenied, "renewal service holds %d sets, the most allowed", n)
	}
	granted := s.cfg.Lease.Grant(d)
	now := s.now()
	exp := djinn.AddDuration(now, granted)
	id, cookie := djinn.NewID(), djinn.NewID()
	res, err := s.log.Propose(ctx, &statepb.Command{
		NowUnixNanos: now.UnixNano(),
		Op: &statepb.Command_RenewalCreate{RenewalCreate: &statepb.RenewalCreate{
			SetId: id[:], Cookie: cookie[:], ExpiresUnixNanos: nanos(exp), HorizonUnixNanos: s.lessor.Horizon(exp),
			Principal: principal.From(ctx),
		}},
	})
	if err != nil {
		return Set{}, err
	}
	return s.set(res.(SetInfo), granted), nil
}

func nanos(t time.Time) int64 {
	if !t.Before(djinn.EndOfTime) {
		return never
	}
	return t.UnixNano()
}

// leading refuses calls on a node that is not serving as leader: only the
// leader knows whether a set's lease is still alive.
func (s *Service) leading() error { return s.lessor.Serving("renewal service") }

// CheckOwner is the ownership rule of the calls on set id: it answers
// NoSuchObject when the set belongs to another principal than the
// caller's (for the caller it does not exist), and nil otherwise — a set
// that does not exist is left to the call to answer.
func (s *Service) CheckOwner(ctx context.Context, id djinn.ID) error {
	if in, err := s.state.Get(id); err == nil && in.Principal != principal.From(ctx) {
		return noSuchSet(id)
	}
	return nil
}

// live returns the set if its lease has not ended (LR.2: NoSuchObject for a
// destroyed set) and it belongs to the caller's principal.
func (s *Service) live(ctx context.Context, id djinn.ID) (SetInfo, time.Duration, error) {
	if err := s.leading(); err != nil {
		return SetInfo{}, 0, err
	}
	in, err := s.state.Get(id)
	if err != nil {
		return SetInfo{}, 0, err
	}
	if in.Principal != principal.From(ctx) {
		return SetInfo{}, 0, noSuchSet(id)
	}
	now := s.now()
	li, ok := s.lessor.Table().Lookup(in.Cookie, now)
	if !ok {
		return SetInfo{}, 0, noSuchSet(id)
	}
	return in, djinn.Remaining(li.Expires, now), nil
}

// Get returns a set with its lease's remaining time.
func (s *Service) Get(ctx context.Context, id djinn.ID) (Set, error) {
	in, rem, err := s.live(ctx, id)
	// A deposed leader must not describe a set its successor may have
	// changed or ended, nor deny one its successor created.
	if err = s.lessor.ConfirmRead("renewal service", err); err != nil {
		return Set{}, err
	}
	return s.set(in, rem), nil
}

// clientLease checks a client lease argument and returns its landlord and
// cookie.
func clientLeaseArg(l *djinnpb.Lease) (djinn.Ref, djinn.ID, error) {
	if l == nil {
		return djinn.Ref{}, djinn.ID{}, djinn.Errorf(djinn.InvalidArgument, "lease: missing (null)")
	}
	ref, err := wire.RefFrom("lease landlord", l.GetLandlord())
	if err != nil {
		return djinn.Ref{}, djinn.ID{}, err
	}
	cookie, err := djinn.IDFromBytes("lease cookie", l.GetCookie())
	if err != nil {
		return djinn.Ref{}, djinn.ID{}, err
	}
	return ref, cookie, nil
}

// CheckRenewFor checks a renewFor's arguments, which do not depend on the
// set (LR.2): the client lease (its landlord's reference and endpoint,
// its cookie, its serial format and duration) and the renew duration.
func CheckRenewFor(l *djinnpb.Lease, desired, renew time.Duration) error {
	ref, _, err := clientLeaseArg(l)
	if err != nil {
		return err
	}
	if err := djinn.CheckEndpoint(ref.Endpoint); err != nil {
		return djinn.Errorf(djinn.InvalidArgument, "lease landlord: %v", err)
	}
	switch {
	case renew > 0:
	case renew == djinn.Any && desired == djinn.Forever:
	case renew == djinn.Any:
		return djinn.Errorf(djinn.InvalidArgument, "renew duration Any: allowed only when the desired duration is Forever, not %s: give a positive renew duration", djinn.FormatDuration(desired))
	default:
		return djinn.Errorf(djinn.InvalidArgument, "renew duration %s: must be positive", djinn.FormatDuration(renew))
	}
	switch l.GetFormat() {
	case djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE:
	case djinnpb.SerialFormat_SERIAL_FORMAT_DURATION, djinnpb.SerialFormat_SERIAL_FORMAT_UNSPECIFIED:
		if d := time.Duration(l.GetDurationNanos()); d < 0 {
			return djinn.Errorf(djinn.InvalidArgument, "lease duration %s: negative", d)
		}
	default:
		return djinn.Errorf(djinn.InvalidArgument, "lease serial format %d: want duration (1) or absolute (2)", int32(l.GetFormat()))
	}
	return nil
}

// CheckLease checks a client lease a call names (Remove's), on its own:
// its landlord's reference and its cookie.
func CheckLease(l *djinnpb.Lease) error {
	_, _, err := clientLeaseArg(l)
	return err
}

// RenewFor adds a client lease to a set, or sets the durations of an equal
// one already in it (LR.2 renewFor). desired is added to the service's
// clock, saturating at Forever; a negative desired duration drops the lease
// at once. renew must be positive, or Any when desired is Forever.
func (s *Service) RenewFor(ctx context.Context, id djinn.ID, l *djinnpb.Lease, desired, renew time.Duration) error {
	if err := CheckRenewFor(l, desired, renew); err != nil {
		return err
	}
	ref, cookie, _ := clientLeaseArg(l)
	now := s.now()
	actual := l.GetExpirationUnixNanos()
	if l.GetFormat() != djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE {
		actual = nanos(djinn.AddDuration(now, time.Duration(l.GetDurationNanos())))
	}
	in, _, err := s.live(ctx, id)
	if err != nil {
		return err
	}
	// LR.2: a lease this service granted and that has not expired cannot
	// be renewed by it — a set renewing its own lease would subvert
	// leasing. The cookie decides, whatever landlord reference the lease
	// names: renewals reach the landlord by endpoint and cookie alone.
	if li, ok := s.lessor.Table().Lookup(cookie, now); ok && li.Owner.Kind == LeaseKind {
		return djinn.Errorf(djinn.InvalidArgument, "lease %s: granted by this renewal service itself (a set's lease), which a set cannot renew; renew it yourself", cookie)
	}
	k := KeyOf(ref, cookie)
	if other, ok := s.state.SetOf(k); ok && other != id {
		return djinn.Errorf(djinn.InvalidArgument, "lease %s: already in another renewal set of this service; remove it there first", cookie)
	} else if !ok {
		if in.Leases >= s.cfg.MaxSetLeases {
			return djinn.Errorf(djinn.ResourceExhausted, "renewal set %s holds %d leases, the most allowed", id, in.Leases)
		}
		if _, n := s.state.Len(); n >= s.cfg.MaxLeases {
			return djinn.Errorf(djinn.ResourceExhausted, "renewal service holds %d leases, the most allowed", n)
		}
	}
	format := l.GetFormat()
	if format == djinnpb.SerialFormat_SERIAL_FORMAT_UNSPECIFIED {
		format = djinnpb.SerialFormat_SERIAL_FORMAT_DURATION
	}
	var desiredAt int64
	switch {
	case desired == djinn.Forever:
		desiredAt = never
	default:
		// Negative durations (Any included) give a desired expiration in
		// the past (LR.2); overflow saturates at Forever.
		desiredAt = now.UnixNano() + int64(desired)
		if desired > 0 && desiredAt < now.UnixNano() {
			desiredAt = never
		}
	}
	_, err = s.log.Propose(ctx, &statepb.Command{
		NowUnixNanos: now.UnixNano(),
		Op: &statepb.Command_RenewalAdd{RenewalAdd: &statepb.RenewalAdd{
			SetId: id[:], Landlord: &djinnpb.Ref{Endpoint: ref.Endpoint, ServiceId: ref.Service[:], ObjectId: ref.Object[:]},
			Cookie: cookie[:], ExpiresUnixNanos: actual, Format: format,
			DesiredUnixNanos: desiredAt, RenewNanos: int64(renew),
		}},
	})
	return err
}

// ClientLeaseProto is the wire form of a client lease at now: its recorded
// expiration in its own serial format.
func ClientLeaseProto(c ClientLease, now time.Time) *djinnpb.Lease {
	pb := &djinnpb.Lease{
		Landlord: &djinnpb.Ref{Endpoint: c.Landlord.Endpoint, ServiceId: c.Landlord.Service[:], ObjectId: c.Landlord.Object[:]},
		Cookie:   c.Cookie[:], Format: c.Format,
	}
	if c.Format == djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE {
		pb.ExpirationUnixNanos = nanos(c.Actual)
	} else {
		pb.DurationNanos = int64(djinn.Remaining(c.Actual, now))
	}
	return pb
}

// Remove takes a client lease out of a set without cancelling it (LR.2)
// and returns it, or nil when it was not in the set. It does not wait for
// a renewal in progress.
func (s *Service) Remove(ctx context.Context, id djinn.ID, l *djinnpb.Lease) (*djinnpb.Lease, error) {
	ref, cookie, err := clientLeaseArg(l)
	if err != nil {
		return nil, err
	}
	if _, _, err := s.live(ctx, id); err != nil {
		return nil, err
	}
	k := KeyOf(ref, cookie)
	res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_RenewalRemove{RenewalRemove: &statepb.RenewalRemove{
		SetId: id[:], Key: k[:],
	}}})
	if err != nil {
		return nil, err
	}
	c, _ := res.(*ClientLease)
	if c == nil {
		return nil, nil
	}
	return ClientLeaseProto(*c, s.now()), nil
}

// Leases returns every client lease of a set (LR.2 getLeases), however
// many; LeasesPage is GetLeases's, a page at a time.
func (s *Service) Leases(ctx context.Context, id djinn.ID) ([]*djinnpb.ClientLease, error) {
	_, _, err := s.live(ctx, id)
	var ls []ClientLease
	if err == nil {
		ls, err = s.state.Leases(id)
	}
	// A deposed leader must not list leases its successor may have
	// removed, nor miss ones it added, nor deny a set it created.
	if err = s.lessor.ConfirmRead("renewal service", err); err != nil {
		return nil, err
	}
	now := s.now()
	out := make([]*djinnpb.ClientLease, len(ls))
	for i, c := range ls {
		out[i] = clientLeaseProto(c, now)
	}
	return out, nil
}

// Listen sets a set's listener for one kind of event (LR.2.1): the
// registration replaces any earlier one, keeps its sequence numbers, and
// shares the set's lease. minWarning applies to expiration warnings and
// must not be negative.
func (s *Service) Listen(ctx context.Context, id djinn.ID, eventID int64, target *djinnpb.Ref, minWarning time.Duration, handback []byte) (*djinnpb.EventRegistration, error) {
	if err := CheckListen(target, minWarning, handback); err != nil {
		return nil, err
	}
	return s.listen(ctx, id, eventID, target, minWarning, handback)
}

// CheckListen checks a listener's registration arguments, which do not
// depend on the set: the listener's reference and endpoint, the minimum
// warning and the handback.
func CheckListen(target *djinnpb.Ref, minWarning time.Duration, handback []byte) error {
	if target == nil {
		return djinn.Errorf(djinn.InvalidArgument, "listener: missing: give the listener the events go to")
	}
	if _, err := wire.RefFrom("listener", target); err != nil {
		return err
	}
	if err := djinn.CheckEndpoint(target.GetEndpoint()); err != nil {
		return djinn.Errorf(djinn.InvalidArgument, "listener: %v", err)
	}
	if minWarning < 0 {
		return djinn.Errorf(djinn.InvalidArgument, "minimum warning %s: must be zero or positive", djinn.FormatDuration(minWarning))
	}
	return event.CheckHandback(handback)
}

// Clear removes a set's listener for one kind of event; it is fine when
// there is none (LR.2.1).
func (s *Service) Clear(ctx context.Context, id djinn.ID, eventID int64) error {
	_, err := s.listen(ctx, id, eventID, nil, 0, nil)
	return err
}

func (s *Service) listen(ctx context.Context, id djinn.ID, eventID int64, target *djinnpb.Ref, minWarning time.Duration, handback []byte) (*djinnpb.EventRegistration, error) {
	in, rem, err := s.live(ctx, id)
	if err != nil {
		return nil, err
	}
	res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_RenewalListen{RenewalListen: &statepb.RenewalListen{
		SetId: id[:], EventId: eventID, Target: target, Handback: handback, MinWarningNanos: int64(minWarning),
	}}})
	if err != nil {
		return nil, err
	}
	lr := res.(ListenResult)
	if lr.Done != nil {
		select {
		case <-lr.Done:
		case <-ctx.Done():
			return nil, djinn.Errorf(djinn.Unavailable, "set %s: the listener change is logged but delivery had not switched when the call ended: %v", id, ctx.Err())
		}
	}
	ref := s.setRef(id)
	return &djinnpb.EventRegistration{
		EventId: eventID, Source: &djinnpb.Ref{Endpoint: ref.Endpoint, ServiceId: ref.Service[:], ObjectId: ref.Object[:]},
		Lease: lease.Proto(s.self(), in.Cookie, rem), Sequence: lr.Seq,
	}, nil
}

// warnLoop raises expiration warnings (LR.2.1): for each set with a
// warning listener, once its lease is within the minimum warning (plus one
// poll, so the first attempt is never late) of expiring.
func (s *Service) warnLoop(ctx context.Context) {
	tick := time.NewTicker(s.cfg.WarnPoll)
	defer tick.Stop()
	for {
		now := s.now()
		for _, w := range s.state.warnChecks() {
			li, ok := s.lessor.Table().Lookup(w.cookie, now)
			if !ok || !li.Expires.Before(djinn.EndOfTime) {
				continue
			}
			exp := li.Expires.UnixNano()
			// Due once the time left is within minWarning plus one poll
			// (so the first attempt is never late), in saturating
			// arithmetic: a minWarning of Forever is due at once.
			left, lead := exp-now.UnixNano(), int64(w.minWarning)+int64(s.cfg.WarnPoll)
			if lead < 0 {
				lead = int64(djinn.Forever)
			}
			if exp == w.warnedExp || left > lead {
				continue
			}
			pl := lease.Proto(s.self(), w.cookie, 0)
			pl.DurationNanos, pl.ExpirationUnixNanos, pl.Format = 0, exp, djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE
			_, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_RenewalWarn{RenewalWarn: &statepb.RenewalWarn{
				SetId: w.id[:], SetExpiresUnixNanos: exp, SetLease: pl,
			}}})
			if err != nil && ctx.Err() == nil {
				s.cfg.Logger.Warn("renewal: raising an expiration warning failed; will retry", "set", wire.Fingerprint(w.id), "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.state.warn:
		}
	}
}
