package mailbox

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Proposer appends a command to the replicated log and returns its result
// once applied here (an error result comes back as the error).
// ProposeRider does so for a command that need not be written at once: it
// rides in the log entry of the next command proposed, or goes alone after
// a short bound (the node's rider delay); the deliverer records deliveries
// so.
type Proposer interface {
	Propose(ctx context.Context, cmd *statepb.Command) (any, error)
	ProposeRider(ctx context.Context, cmd *statepb.Command) (any, error)
}

// Config configures the mailbox service. Zero values take the defaults.
type Config struct {
	// Lease is the registration lease policy.
	Lease lease.Policy
	// MaxStored bounds stored events per registration (default 10000).
	MaxStored int
	// MaxEventBytes bounds one event's encoded size (default 64 KiB).
	MaxEventBytes int
	// MaxRegistrations bounds live registrations (default 2,000,000).
	MaxRegistrations int
	// Delivery configures the delivery engine; its Sender is required for
	// push delivery.
	Delivery event.Config
	Logger   *slog.Logger
}

// Defaults.
const (
	DefaultMaxStored        = 10000
	DefaultMaxEventBytes    = 64 << 10
	DefaultMaxRegistrations = 2_000_000
	DefaultPullBatch        = 256
)

// Service is the event mailbox.
type Service struct {
	state  *State
	lessor *lease.Lessor
	log    Proposer
	now    func() time.Time
	self   func() djinn.Ref // the mailbox's own reference
	cfg    Config
	// current is the deliverer of the term this node leads, if any.
	current atomic.Pointer[deliverer]
	// ended adds up the delivery counters of the terms that ended, so
	// that DeliveryStats counts since the service started.
	endedMu sync.Mutex
	ended   event.Stats // guarded by endedMu
	// RefusedFull counts events refused because their registration held
	// its maximum of stored events.
	RefusedFull atomic.Uint64
	// Streams counts the delivery streams open on this node, and
	// StreamedEvents the events they sent.
	Streams        atomic.Int64
	StreamedEvents atomic.Uint64
}

// New returns the mailbox service over state s, whose leases the lessor
// serves. self returns the mailbox's reference (endpoint and service id);
// listener references share its endpoint and service id.
func New(s *State, l *lease.Lessor, log Proposer, now func() time.Time, self func() djinn.Ref, cfg Config) (*Service, error) {
	if cfg.Lease == (lease.Policy{}) {
		cfg.Lease = lease.DefaultPolicy
	}
	if err := l.Table().SetPolicy(LeaseKind, cfg.Lease); err != nil {
		return nil, err
	}
	if cfg.MaxStored <= 0 {
		cfg.MaxStored = DefaultMaxStored
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = DefaultMaxEventBytes
	}
	if cfg.MaxRegistrations <= 0 {
		cfg.MaxRegistrations = DefaultMaxRegistrations
	}
	if cfg.Delivery.MaxQueue < cfg.MaxStored {
		cfg.Delivery.MaxQueue = cfg.MaxStored
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s.maxStored = cfg.MaxStored
	return &Service{state: s, lessor: l, log: log, now: now, self: self, cfg: cfg}, nil
}

// Run delivers stored events while this node leads, until ctx ends.
func (s *Service) Run(ctx context.Context) {
	d := newDeliverer(s.state, s.log, s.cfg.Logger, s.cfg.Delivery)
	s.current.Store(d)
	d.run(ctx)
	s.endedMu.Lock()
	defer s.endedMu.Unlock()
	s.ended = addStats(s.ended, d.engine.Stats())
	s.ended.Queues, s.ended.Queued = 0, 0
	s.current.CompareAndSwap(d, nil)
}

// Serving reports whether this node serves as the mailbox's leader: its
// term's delivery has started (streams and pulls are served).
func (s *Service) Serving() bool { return s.current.Load() != nil }

// DeliveryStats returns the delivery counters: events sent, delivered,
// failed, retried and overflowed since the service started, over every
// term this node led; and the queues of the current term (zero when not
// leading).
func (s *Service) DeliveryStats() event.Stats {
	s.endedMu.Lock()
	defer s.endedMu.Unlock()
	if d := s.current.Load(); d != nil {
		return addStats(s.ended, d.engine.Stats())
	}
	return s.ended
}

func addStats(a, b event.Stats) event.Stats {
	return event.Stats{
		Queues: a.Queues + b.Queues, Queued: a.Queued + b.Queued,
		Sends: a.Sends + b.Sends, Delivered: a.Delivered + b.Delivered, Failed: a.Failed + b.Failed,
		Retried: a.Retried + b.Retried, Overflowed: a.Overflowed + b.Overflowed,
	}
}

// Registration is what Register returns: EM.4's MailboxRegistration.
type Registration struct {
	ID       djinn.ID
	Lease    *djinnpb.Lease
	Listener djinn.Ref
	Target   *djinnpb.Ref
	Stored   int
	Unknown  []*djinnpb.EventKey
}

// Register creates a registration (EM.3): the lease duration must be
// positive or Any.
func (s *Service) Register(ctx context.Context, d time.Duration) (Registration, error) {
	if d <= 0 && d != djinn.Any {
		return Registration{}, djinn.Errorf(djinn.InvalidArgument, "lease duration %s: must be positive or Any", djinn.FormatDuration(d))
	}
	if err := s.leading(); err != nil {
		return Registration{}, err
	}
	if n := s.state.Registrations(); n >= s.cfg.MaxRegistrations {
		// EM.3: a registration the service is unable to grant is refused
		// with LeaseDeniedException.
		return Registration{}, djinn.Errorf(djinn.LeaseDenied, "mailbox holds %d registrations, the most its server allows ([mailbox] max-registrations); try again once some end, or ask the operator to raise it", n)
	}
	granted := s.cfg.Lease.Grant(d)
	now := s.now()
	exp := djinn.AddDuration(now, granted)
	// The command, its parts and the three ids in one allocation, the ids
	// drawn in one read.
	c := new(registerCommand)
	if _, err := rand.Read(c.ids[:]); err != nil {
		// crypto/rand.Read never fails on supported platforms (Go 1.24+).
		panic("mailbox: crypto/rand failed: " + err.Error())
	}
	c.reg = statepb.MailboxRegister{
		RegistrationId: c.ids[0:16:16], ListenerId: c.ids[16:32:32], Cookie: c.ids[32:48:48],
		ExpiresUnixNanos: nanos(exp), HorizonUnixNanos: s.lessor.Horizon(exp),
		Principal: principal.From(ctx),
	}
	c.op.MailboxRegister = &c.reg
	c.cmd.NowUnixNanos, c.cmd.Op = now.UnixNano(), &c.op
	res, err := s.log.Propose(ctx, &c.cmd)
	if err != nil {
		return Registration{}, err
	}
	in := res.(Info)
	return s.registration(in, granted), nil
}

// registerCommand is a registration's command with its parts and ids.
type registerCommand struct {
	cmd statepb.Command
	op  statepb.Command_MailboxRegister
	reg statepb.MailboxRegister
	ids [3 * len(djinn.ID{})]byte // registration id, listener id, cookie
}

func nanos(t time.Time) int64 {
	if !t.Before(djinn.EndOfTime) {
		return djinn.EndOfTime.UnixNano()
	}
	return t.UnixNano()
}

func (s *Service) registration(in Info, remaining time.Duration) Registration {
	self := s.self()
	return Registration{
		ID:       in.ID,
		Lease:    lease.Proto(self, in.Cookie, remaining),
		Listener: djinn.Ref{Endpoint: self.Endpoint, Service: self.Service, Object: in.Listener},
		Target:   in.Target,
		Stored:   in.Stored,
		Unknown:  in.Unknown,
	}
}

// leading refuses calls on a node that is not serving as leader: only the
// leader knows whether a lease is still alive (renewals are not logged), so
// a follower must not answer NoSuchObject from its stale view.
func (s *Service) leading() error { return s.lessor.Serving("mailbox") }

// CheckOwner is the ownership rule of the calls on registration id: it
// answers NoSuchObject when the registration belongs to another principal
// than the caller's (for the caller it does not exist), and nil otherwise
// — a registration that does not exist is left to the call to answer.
func (s *Service) CheckOwner(ctx context.Context, id djinn.ID) error {
	if in, err := s.state.Get(id); err == nil && in.Principal != principal.From(ctx) {
		return noSuchRegistration(id)
	}
	return nil
}

// live returns the registration if its lease has not ended (EM.4: every
// call on an ended registration is NoSuchObject) and it belongs to the
// caller's principal (another principal's registration does not exist for
// the caller).
func (s *Service) live(ctx context.Context, id djinn.ID) (Info, time.Duration, error) {
	in, expires, now, err := s.liveUntil(ctx, id)
	if err != nil {
		return Info{}, 0, err
	}
	return in, djinn.Remaining(expires, now), nil
}

// liveUntil is live answering its lease's expiration and the time it
// looked at.
func (s *Service) liveUntil(ctx context.Context, id djinn.ID) (in Info, expires, now time.Time, err error) {
	if err := s.leading(); err != nil {
		return Info{}, time.Time{}, time.Time{}, err
	}
	in, err = s.state.Get(id)
	if err != nil {
		return Info{}, time.Time{}, time.Time{}, err
	}
	if in.Principal != principal.From(ctx) {
		return Info{}, time.Time{}, time.Time{}, noSuchRegistration(id)
	}
	now = s.now()
	li, ok := s.lessor.Table().Lookup(in.Cookie, now)
	if !ok {
		return Info{}, time.Time{}, time.Time{}, noSuchRegistration(id)
	}
	return in, li.Expires, now, nil
}

// Get returns a registration with its lease's remaining time.
func (s *Service) Get(ctx context.Context, id djinn.ID) (Registration, error) {
	in, rem, err := s.live(ctx, id)
	// A deposed leader must not describe a registration its successor
	// may have changed or ended, nor deny one its successor created.
	if err = s.lessor.ConfirmRead("mailbox", err); err != nil {
		return Registration{}, err
	}
	return s.registration(in, rem), nil
}

// CheckTarget checks a delivery target on its own (State.CheckTarget).
func (s *Service) CheckTarget(target *djinnpb.Ref) error { return s.state.CheckTarget(target) }

// EnableDelivery sets the target listener (EM.4.1). A nil target disables
// delivery. A mailbox listener of this mailbox is refused. It returns once
// delivery to any previous target has stopped. A target supersedes the
// registration's pull stream, if any (see Pull).
func (s *Service) EnableDelivery(ctx context.Context, id djinn.ID, target *djinnpb.Ref) error {
	if err := s.state.CheckTarget(target); err != nil {
		return err
	}
	if _, _, err := s.live(ctx, id); err != nil {
		return err
	}
	res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_MailboxEnable{MailboxEnable: &statepb.MailboxEnable{
		RegistrationId: id[:], Target: target,
	}}})
	if err != nil {
		return err
	}
	return wait(ctx, res)
}

// DisableDelivery stops delivery (EM.4.1); it is fine when none is
// enabled. It returns once delivery to the previous target has stopped.
func (s *Service) DisableDelivery(ctx context.Context, id djinn.ID) error {
	if _, _, err := s.live(ctx, id); err != nil {
		return err
	}
	res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_MailboxDisable{MailboxDisable: &statepb.MailboxDisable{
		RegistrationId: id[:],
	}}})
	if err != nil {
		return err
	}
	return wait(ctx, res)
}

func wait(ctx context.Context, res any) error {
	done, _ := res.(chan struct{})
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Notify stores an event that arrived at a mailbox listener. It is refused
// with NoSuchObject once the registration's lease has ended, UnknownEvent
// when the event's (source, id) is on the unknown-event list, and
// ResourceExhausted when the registration is full.
func (s *Service) Notify(ctx context.Context, listener djinn.ID, ev *djinnpb.RemoteEvent) error {
	c := new(storeCommand)
	c.one[0] = ev
	_, err := s.notifyBatch(ctx, c, listener, c.one[:])
	return err
}

// storeCommand is a store's command with its parts, the listener id it
// names and, for Notify, the one event: one allocation for them all.
type storeCommand struct {
	cmd      statepb.Command
	op       statepb.Command_MailboxStore
	store    statepb.MailboxStore
	listener djinn.ID
	one      [1]*djinnpb.RemoteEvent
}

// Listens answers NoSuchObject unless listener is the mailbox listener of
// a live registration: what a call that names the listener — its
// capability — must present.
func (s *Service) Listens(listener djinn.ID) error {
	if err := s.leading(); err != nil {
		return err
	}
	in, err := s.state.ByListener(listener)
	if err != nil {
		return err
	}
	if !s.lessor.Table().Alive(in.Cookie, s.now()) {
		return djinn.Errorf(djinn.NoSuchObject, "mailbox listener %s: its registration's lease ended", listener)
	}
	return nil
}

// CheckNotifyBatch refuses a batch of more than MaxNotifyBatch events.
// Each event is checked as it is stored: those before a bad one are
// (NotifyBatch).
func CheckNotifyBatch(events []*djinnpb.RemoteEvent) error {
	if len(events) > MaxNotifyBatch {
		return djinn.Errorf(djinn.InvalidArgument, "batch of %d events: at most %d", len(events), MaxNotifyBatch)
	}
	return nil
}

// NotifyBatch stores events in order, in one log entry, up to the first
// that is refused (for Notify's reasons, or as invalid); it returns how
// many were stored and why the next was not.
func (s *Service) NotifyBatch(ctx context.Context, listener djinn.ID, events []*djinnpb.RemoteEvent) (int, error) {
	return s.notifyBatch(ctx, new(storeCommand), listener, events)
}

// notifyBatch is NotifyBatch, its command made in c.
func (s *Service) notifyBatch(ctx context.Context, c *storeCommand, listener djinn.ID, events []*djinnpb.RemoteEvent) (int, error) {
	if err := CheckNotifyBatch(events); err != nil {
		return 0, err
	}
	if err := s.leading(); err != nil {
		return 0, err
	}
	in, err := s.state.ByListener(listener)
	if err != nil {
		return 0, err
	}
	if !s.lessor.Table().Alive(in.Cookie, s.now()) {
		return 0, djinn.Errorf(djinn.NoSuchObject, "mailbox listener %s: its registration's lease ended", listener)
	}
	var refused error
	for i, ev := range events {
		if err := s.CheckEvent(ev); err != nil {
			events, refused = events[:i], err
			break
		}
		if s.state.IsUnknown(in.ID, ev) {
			events, refused = events[:i], unknownEvent(ev)
			break
		}
	}
	if len(events) == 0 {
		return 0, refused
	}
	c.listener = listener
	c.store = statepb.MailboxStore{ListenerId: c.listener[:], Events: events}
	c.op.MailboxStore = &c.store
	c.cmd.Op = &c.op
	res, err := s.log.Propose(ctx, &c.cmd)
	if err != nil {
		return 0, err
	}
	sr := res.(StoreResult)
	if sr.Err != nil {
		if djinn.KindOf(sr.Err) == djinn.ResourceExhausted {
			s.RefusedFull.Add(uint64(len(events) - sr.Accepted))
		}
		return sr.Accepted, sr.Err
	}
	return sr.Accepted, refused
}

// MaxNotifyBatch bounds the events of one NotifyBatch.
const MaxNotifyBatch = 4096

// CheckEvent checks an event a mailbox listener is sent, on its own: its
// source, and its size against the mailbox's bound.
func (s *Service) CheckEvent(ev *djinnpb.RemoteEvent) error {
	if ev == nil {
		return djinn.Errorf(djinn.InvalidArgument, "event: missing")
	}
	src := ev.GetSource()
	if src == nil {
		return djinn.Errorf(djinn.InvalidArgument, "event source: missing")
	}
	svc, err := djinn.IDFromBytes("event source service id", src.GetServiceId())
	if err != nil {
		return err
	}
	obj, err := djinn.IDFromBytes("event source object id", src.GetObjectId())
	if err != nil {
		return err
	}
	if svc.IsZero() && obj.IsZero() {
		return djinn.Errorf(djinn.InvalidArgument, "event source: missing (all-zero reference)")
	}
	if n := proto.Size(ev); n > s.cfg.MaxEventBytes {
		return djinn.Errorf(djinn.InvalidArgument, "event of %d bytes: larger than %d", n, s.cfg.MaxEventBytes)
	}
	return nil
}

// Pull sends stored events with an index above after, in batches of at
// most max, and then each new one as it arrives, until ctx ends or the
// registration does (NoSuchObject). Events stay stored until acknowledged.
//
// Push and pull are exclusive (River's MailboxPullRegistration): Pull
// first disables push delivery, and waits until delivery to the target has
// stopped, and it supersedes the registration's earlier pull stream. A
// stream superseded by a newer Pull, or by EnableDelivery to a target,
// ends with InvalidIterator. So at any time one consumer takes the events,
// and one that is superseded is told; the events it received and did not
// acknowledge go to the next one. Like a delivery stream, a pull stream
// ends with Unavailable when this node stops leading, so that its client
// pulls again at the next leader.
func (s *Service) Pull(ctx context.Context, id djinn.ID, after uint64, max int, send func([]Stored) error) error {
	if err := CheckPullBatch(max); err != nil {
		return err
	}
	if max == 0 {
		max = DefaultPullBatch
	}
	in, _, err := s.live(ctx, id)
	if err != nil {
		return err
	}
	if err := checkAfter(id, after, in.Last); err != nil {
		return err
	}
	term := s.current.Load()
	if term == nil {
		return djinn.Errorf(djinn.Unavailable, "mailbox not ready: leadership starting; pull again")
	}
	res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_MailboxPull{MailboxPull: &statepb.MailboxPull{RegistrationId: id[:]}}})
	if err != nil {
		return err
	}
	begun := res.(PullBegun)
	if begun.Done != nil {
		if err := wait(ctx, begun.Done); err != nil {
			return err
		}
	}
	for {
		if _, _, err := s.live(ctx, id); err != nil {
			return err
		}
		events, more, err := s.state.After(id, begun.Pull, after, max)
		if err != nil {
			return err
		}
		if len(events) > 0 {
			if err := send(events); err != nil {
				return err
			}
			after = events[len(events)-1].Index
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-term.ended:
			return djinn.Errorf(djinn.Unavailable, "mailbox leadership moved; pull again (events not acknowledged come again)")
		case <-more:
		}
	}
}

// CheckPullBatch refuses a pull's batch size out of range: 0 (the
// default) to MaxStreamBatch.
func CheckPullBatch(max int) error {
	if max < 0 || max > MaxStreamBatch {
		return djinn.Errorf(djinn.InvalidArgument, "pull batch %d: want 0 (the default, %d) to %d", max, DefaultPullBatch, MaxStreamBatch)
	}
	return nil
}

// Ack forgets stored events through an index (pull mode). An index past
// the last event stored is refused: it acknowledges events the caller
// cannot have pulled.
func (s *Service) Ack(ctx context.Context, id djinn.ID, through uint64) error {
	in, _, err := s.live(ctx, id)
	if err != nil {
		return err
	}
	if through > in.Last {
		return djinn.Errorf(djinn.InvalidArgument, "acknowledge through index %d: past the last event stored for mailbox registration %s (index %d%s); acknowledge the index of the last event you pulled: nothing was acknowledged", through, id, in.Last, noneYet(in.Last, "stored"))
	}
	_, err = s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_MailboxDelivered{MailboxDelivered: &statepb.MailboxDelivered{
		Entries: []*statepb.Delivered{{RegistrationId: id[:], ThroughIndex: through}},
	}}})
	return err
}

// MaxUnknownEvents bounds the unknown-event list AddUnknownEvents grows.
const MaxUnknownEvents = 4096

// maxEndpoint bounds an endpoint kept as part of a key: a host name and a
// port.
const maxEndpoint = 300

// checkAfter refuses to resume registration id after an index past the
// last event stored (last): no client received it. Taken, the events
// stored next up to that index would be skipped, and forgotten with the
// first acknowledgement after them, never delivered.
func checkAfter(id djinn.ID, after, last uint64) error {
	if after > last {
		return djinn.Errorf(djinn.InvalidArgument, "after index %d: past the last event stored for mailbox registration %s (index %d%s); resume after the index of the last event you received", after, id, last, noneYet(last, "stored"))
	}
	return nil
}

// noneYet says, after a last index of 0, that no event was done yet.
func noneYet(last uint64, done string) string {
	if last == 0 {
		return ": none " + done + " yet"
	}
	return ""
}

// CheckUnknownEvents checks the keys an AddUnknownEvents adds, on their
// own: at least one, each with a source whose ids are 16 bytes and whose
// endpoint is at most maxEndpoint bytes.
func CheckUnknownEvents(keys []*djinnpb.EventKey) error {
	if len(keys) == 0 {
		return djinn.Errorf(djinn.InvalidArgument, "unknown events: none given")
	}
	// A key is its source's ids and the event id (keyOf): ids not of 16
	// bytes would be cut or padded into another source's.
	for i, k := range keys {
		if k.GetSource() == nil {
			return djinn.Errorf(djinn.InvalidArgument, "unknown event %d: source missing", i)
		}
		if _, err := djinn.IDFromBytes("unknown event "+strconv.Itoa(i)+" source service id", k.GetSource().GetServiceId()); err != nil {
			return err
		}
		if _, err := djinn.IDFromBytes("unknown event "+strconv.Itoa(i)+" source object id", k.GetSource().GetObjectId()); err != nil {
			return err
		}
		if n := len(k.GetSource().GetEndpoint()); n > maxEndpoint {
			return djinn.Errorf(djinn.InvalidArgument, "unknown event %d source endpoint of %d bytes: at most %d", i, n, maxEndpoint)
		}
	}
	return nil
}

// AddUnknownEvents adds (source, id) pairs to the unknown-event list, as a
// target's UnknownEvent would (River's MailboxPullRegistration).
func (s *Service) AddUnknownEvents(ctx context.Context, id djinn.ID, keys []*djinnpb.EventKey) error {
	if err := CheckUnknownEvents(keys); err != nil {
		return err
	}
	in, _, err := s.live(ctx, id)
	if err != nil {
		return err
	}
	// The list is state every member keeps, and GetRegistration answers
	// it whole: bounded, counting the keys it does not hold yet.
	held := make(map[eventKey]bool, len(in.Unknown)+len(keys))
	for _, k := range in.Unknown {
		held[eventKey{source: refKey(k.GetSource()), id: k.GetEventId()}] = true
	}
	n := len(in.Unknown)
	for _, k := range keys {
		if ek := (eventKey{source: refKey(k.GetSource()), id: k.GetEventId()}); !held[ek] {
			held[ek] = true
			n++
		}
	}
	if n > MaxUnknownEvents {
		return djinn.Errorf(djinn.ResourceExhausted, "unknown events: mailbox registration %s would hold %d, at most %d; nothing was added", id, n, MaxUnknownEvents)
	}
	_, err = s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_MailboxUnknown{MailboxUnknown: &statepb.MailboxUnknown{
		RegistrationId: id[:], Keys: keys,
	}}})
	return err
}
