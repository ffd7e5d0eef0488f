package renewal

import (
	"container/heap"
	"math"
	"sync"
	"time"

	"github.com/djinn-go/djinn/internal/wire"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Event ids of LR.2 (LeaseRenewalSet.RENEWAL_FAILURE_EVENT_ID and
// EXPIRATION_WARNING_EVENT_ID).
const (
	FailureEventID = int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_RENEWAL_FAILURE)
	WarningEventID = int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_EXPIRATION_WARNING)
)

// never is a Forever expiration in unix nanoseconds.
const never = math.MaxInt64

// Key identifies a client lease: its landlord's service and object ids and
// its cookie. Two leases are equal (LE.2.2) when their keys are.
type Key [48]byte

// KeyOf returns the key of a lease granted by landlord under cookie.
func KeyOf(landlord djinn.Ref, cookie djinn.ID) Key {
	var k Key
	copy(k[:16], landlord.Service[:])
	copy(k[16:32], landlord.Object[:])
	copy(k[32:], cookie[:])
	return k
}

func keyFrom(b []byte) (Key, error) {
	var k Key
	if len(b) != len(k) {
		return k, djinn.Errorf(djinn.InvalidArgument, "client lease key of %d bytes: want %d", len(b), len(k))
	}
	copy(k[:], b)
	return k, nil
}

// landlord is a landlord reference shared by the client leases it granted.
type landlord struct {
	ref  djinn.Ref
	pb   *djinnpb.Ref
	refs int
}

// clientLease is a lease in a renewal set. The fields down to format are
// replicated state; the rest is the leader's renewal schedule, which every
// member keeps from the log (so a new leader has it) and the leader alone
// adjusts for retries.
type clientLease struct {
	set      *set
	landlord *landlord
	cookie   djinn.ID
	actual   int64 // the last recorded expiration
	desired  int64
	renew    int64 // the renewal duration: positive, or Any
	renewed  int64 // when the lease was last recorded renewed (or added)
	format   djinnpb.SerialFormat

	early    bool           // due is a renewal time, which take may anticipate by its window (in format's padding)
	probe    bool           // due is a probe time (the renewal comes later)
	due      int64          // when the schedule next looks at the lease
	checked  int64          // when a probe last found the lease alive (leader)
	heapIdx  int32          // in the schedule; -1 while taken
	attempts int32          // failed renewals since the last success
	lastErr  *djinnpb.Error // the last renewal failure since the last success
}

func (c *clientLease) key() Key { return KeyOf(c.landlord.ref, c.cookie) }

// listener is a set's registration for one kind of event (LR.2.1).
type listener struct {
	target     *djinnpb.Ref // nil: no registration
	handback   []byte
	minWarning int64
	next       int64  // the next event's sequence number
	epoch      uint64 // bumped by every set and clear
	pending    []*djinnpb.RemoteEvent
}

type set struct {
	id, cookie djinn.ID
	principal  string
	leases     map[*clientLease]struct{}
	lis        [2]listener // by event id
	warnedExp  int64       // the set lease expiration last warned of
}

// Sink observes the state's event changes in log order, on the leader. Its
// methods are called from Apply with the state locked: they must not block
// or call back into State.
type Sink interface {
	// Event: an event to deliver to target.
	Event(set djinn.ID, eventID int64, target *djinnpb.Ref, epoch uint64, ev *djinnpb.RemoteEvent)
	// Retargeted: the registration now delivers to target (nil: none);
	// pending is what is still undelivered. done, if not nil, is closed
	// when the change is in effect.
	Retargeted(set djinn.ID, eventID int64, target *djinnpb.Ref, epoch uint64, pending []*djinnpb.RemoteEvent, done chan struct{})
	// Removed: the set is gone.
	Removed(set djinn.ID)
}

// State is the replicated state of the lease renewal service.
type State struct {
	mu sync.Mutex
	// Everything below is guarded by mu.
	sets      map[djinn.ID]*set
	leases    index
	landlords map[[32]byte]*landlord
	warnSets  map[*set]struct{} // sets with a warning listener
	sched     schedule
	sink      Sink
	// Overflowed counts events not kept because a registration already
	// held DefaultMaxPending undelivered ones.
	overflowed uint64

	table   *lease.Table
	service func() djinn.ID // the cluster's service id
	// probe is how long a client lease may go unchecked at its landlord
	// between renewals (0: until its renewal); set once, before use.
	probe int64
	// wake is signalled when the schedule's earliest entry moves earlier;
	// warn when a warning listener is set.
	wake, warn chan struct{}
}

// DefaultMaxPending bounds the undelivered events kept per registration. It
// is a constant, not a setting: what Apply keeps must not depend on a
// member's configuration.
const DefaultMaxPending = 1000

// NewState returns an empty state whose set leases live in t; service
// returns the cluster's service id, the service id of every set.
func NewState(t *lease.Table, service func() djinn.ID) *State {
	s := &State{table: t, service: service, wake: make(chan struct{}, 1), warn: make(chan struct{}, 1)}
	s.resetLocked()
	return s
}

func (s *State) resetLocked() {
	s.sets = make(map[djinn.ID]*set)
	s.leases = newIndex()
	s.landlords = make(map[[32]byte]*landlord)
	s.warnSets = make(map[*set]struct{})
	s.sched = nil
}

func (s *State) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Len returns the number of sets and client leases.
func (s *State) Len() (sets, leases int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sets), s.leases.len()
}

func noSuchSet(id djinn.ID) error {
	return djinn.Errorf(djinn.NoSuchObject, "renewal set %s: no such set (its lease expired or was cancelled)", id)
}

// SetInfo is a set as clients see it.
type SetInfo struct {
	ID, Cookie djinn.ID
	Principal  string
	Leases     int
	Listeners  [2]ListenerInfo
}

// ListenerInfo is one event registration of a set.
type ListenerInfo struct {
	Target     *djinnpb.Ref // nil: none
	Handback   []byte
	MinWarning time.Duration
	Next       int64 // the next event's sequence number
	Pending    int
}

func (st *set) info() SetInfo {
	in := SetInfo{ID: st.id, Cookie: st.cookie, Principal: st.principal, Leases: len(st.leases)}
	for i, l := range st.lis {
		in.Listeners[i] = ListenerInfo{Target: l.target, Handback: l.handback, MinWarning: time.Duration(l.minWarning), Next: l.next, Pending: len(l.pending)}
	}
	return in
}

// Get returns a set.
func (s *State) Get(id djinn.ID) (SetInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return SetInfo{}, noSuchSet(id)
	}
	return st.info(), nil
}

// Sets returns the number of sets.
func (s *State) Sets() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sets)
}

// ClientLease is a client lease as clients see it.
type ClientLease struct {
	Landlord djinn.Ref
	Cookie   djinn.ID
	Actual   time.Time // djinn.EndOfTime for Forever
	Format   djinnpb.SerialFormat
	Desired  time.Time // djinn.EndOfTime for Forever
	Renew    time.Duration
	LastErr  *djinnpb.Error
}

func (c *clientLease) view() ClientLease {
	return ClientLease{
		Landlord: c.landlord.ref, Cookie: c.cookie, Actual: fromNanos(c.actual), Format: c.format,
		Desired: fromNanos(c.desired), Renew: time.Duration(c.renew), LastErr: c.lastErr,
	}
}

// Leases returns a set's client leases.
func (s *State) Leases(id djinn.ID) ([]ClientLease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return nil, noSuchSet(id)
	}
	out := make([]ClientLease, 0, len(st.leases))
	for c := range st.leases {
		out = append(out, c.view())
	}
	return out, nil
}

// SetOf returns the id of the set holding a client lease, if any.
func (s *State) SetOf(k Key) (djinn.ID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.leases.get(k)
	if !ok {
		return djinn.ID{}, false
	}
	return c.set.id, true
}

// ApplyCreate creates a set and grants its lease.
func (s *State) ApplyCreate(c *statepb.RenewalCreate) (SetInfo, error) {
	id, err := djinn.IDFromBytes("set id", c.GetSetId())
	if err != nil {
		return SetInfo{}, err
	}
	cookie, err := djinn.IDFromBytes("lease cookie", c.GetCookie())
	if err != nil {
		return SetInfo{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.sets[id]; dup {
		return SetInfo{}, djinn.Errorf(djinn.Internal, "renewal set %s: already exists", id)
	}
	if err := s.table.ApplyGrant(cookie, lease.Owner{Kind: LeaseKind, ID: id}, c.GetPrincipal(), c.GetExpiresUnixNanos(), c.GetHorizonUnixNanos()); err != nil {
		return SetInfo{}, err
	}
	st := newSet(id, cookie, c.GetPrincipal())
	s.sets[id] = st
	return st.info(), nil
}

func newSet(id, cookie djinn.ID, principal string) *set {
	st := &set{id: id, cookie: cookie, principal: principal, leases: map[*clientLease]struct{}{}}
	st.lis[0].next, st.lis[1].next = 1, 1
	return st
}

// AddResult is the outcome of ApplyAdd: whether the lease stayed in the set
// (a lease whose desired or actual expiration has passed is dropped at
// once, LR.2).
type AddResult struct {
	Kept bool
}

// ApplyAdd is renewFor (LR.2). A lease in another set of this service is
// refused; an equal lease in this set gets the new durations (the original
// copy is kept). A lease whose desired or actual expiration has passed is
// dropped at once, with a renewal failure event if and only if its actual
// expiration is before its desired one.
func (s *State) ApplyAdd(now int64, c *statepb.RenewalAdd) (AddResult, error) {
	id, err := djinn.IDFromBytes("set id", c.GetSetId())
	if err != nil {
		return AddResult{}, err
	}
	ref, err := wire.RefFrom("lease landlord", c.GetLandlord())
	if err != nil {
		return AddResult{}, err
	}
	cookie, err := djinn.IDFromBytes("lease cookie", c.GetCookie())
	if err != nil {
		return AddResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return AddResult{}, noSuchSet(id)
	}
	k := KeyOf(ref, cookie)
	cl, ok := s.leases.get(k)
	switch {
	case ok && cl.set != st:
		return AddResult{}, djinn.Errorf(djinn.InvalidArgument, "lease %s: already in another renewal set of this service; remove it there first", cookie)
	case ok:
		cl.desired, cl.renew = c.GetDesiredUnixNanos(), c.GetRenewNanos()
	default:
		if err := s.table.Quotas().Take(st.principal, quota.RenewalLeases, 1); err != nil {
			return AddResult{}, err
		}
		cl = &clientLease{
			set: st, landlord: s.landlordLocked(ref, c.GetLandlord()), cookie: cookie,
			actual: c.GetExpiresUnixNanos(), desired: c.GetDesiredUnixNanos(), renew: c.GetRenewNanos(),
			renewed: now, format: c.GetFormat(), heapIdx: -1,
		}
		s.leases.put(k, cl)
		st.leases[cl] = struct{}{}
	}
	if cl.desired <= now || cl.actual <= now {
		s.endLocked(cl, cl.actual < cl.desired, nil)
		return AddResult{}, nil
	}
	cl.attempts, cl.lastErr = 0, nil
	s.scheduleLocked(now, cl)
	return AddResult{Kept: true}, nil
}

func (s *State) landlordLocked(ref djinn.Ref, pb *djinnpb.Ref) *landlord {
	var k [32]byte
	copy(k[:16], ref.Service[:])
	copy(k[16:], ref.Object[:])
	l, ok := s.landlords[k]
	if !ok {
		l = &landlord{}
		s.landlords[k] = l
	}
	if !ok || l.ref.Endpoint != ref.Endpoint {
		// The endpoint last given is where the landlord is renewed: a
		// landlord that moved is followed, not called where it was.
		l.ref = ref
		l.pb = &djinnpb.Ref{Endpoint: ref.Endpoint, ServiceId: ref.Service[:], ObjectId: ref.Object[:]}
	}
	l.refs++
	return l
}

// removeLocked takes a client lease out of its set and the schedule.
func (s *State) removeLocked(cl *clientLease) {
	s.table.Quotas().Release(cl.set.principal, quota.RenewalLeases, 1)
	k := cl.key()
	s.leases.del(k)
	delete(cl.set.leases, cl)
	if cl.heapIdx >= 0 {
		heap.Remove(&s.sched, int(cl.heapIdx))
	}
	if cl.landlord.refs--; cl.landlord.refs == 0 {
		delete(s.landlords, [32]byte(k[:32]))
	}
}

// endLocked removes a client lease on the service's own account, with a
// renewal failure event when failed (LR.2.1) carrying err.
func (s *State) endLocked(cl *clientLease, failed bool, err *djinnpb.Error) {
	s.removeLocked(cl)
	if !failed {
		return
	}
	p := &djinnpb.RenewalFailure{Lease: cl.absolute(), Error: err}
	s.raiseLocked(cl.set, FailureEventID, p)
}

// absolute returns the client lease's wire form with its recorded
// expiration as an instant: events are kept and delivered later, so a
// duration would be stale.
func (c *clientLease) absolute() *djinnpb.Lease {
	return &djinnpb.Lease{
		Landlord: c.landlord.pb, Cookie: c.cookie[:],
		ExpirationUnixNanos: c.actual, Format: djinnpb.SerialFormat_SERIAL_FORMAT_ABSOLUTE,
	}
}

// raiseLocked gives the next sequence number of a set's event id to an
// event and keeps it for delivery if a listener is registered. An event
// with no registration still uses its sequence number (LR.2.1: two events
// never share one).
func (s *State) raiseLocked(st *set, eventID int64, payload *djinnpb.RenewalFailure) {
	a, err := anypb.New(payload)
	if err != nil {
		return // a message of ours always marshals
	}
	s.raiseAnyLocked(st, eventID, a)
}

func (s *State) raiseAnyLocked(st *set, eventID int64, payload *anypb.Any) {
	svc := s.service()
	l := &st.lis[eventID]
	seq := l.next
	l.next++
	if l.target == nil {
		return
	}
	if len(l.pending) >= DefaultMaxPending {
		s.overflowed++
		return
	}
	ev := &djinnpb.RemoteEvent{
		Source: &djinnpb.Ref{ServiceId: svc[:], ObjectId: st.id[:]}, EventId: eventID, Sequence: seq,
		Handback: l.handback, Payload: payload,
	}
	l.pending = append(l.pending, ev)
	if s.sink != nil {
		s.sink.Event(st.id, eventID, l.target, l.epoch, ev)
	}
}

// ApplyRemove takes a client lease out of a set (LR.2 remove). It returns
// the lease as it was, or nil when it was not in the set.
func (s *State) ApplyRemove(c *statepb.RenewalRemove) (*ClientLease, error) {
	id, err := djinn.IDFromBytes("set id", c.GetSetId())
	if err != nil {
		return nil, err
	}
	k, err := keyFrom(c.GetKey())
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return nil, noSuchSet(id)
	}
	cl, ok := s.leases.get(k)
	if !ok || cl.set != st {
		return nil, nil
	}
	v := cl.view()
	s.removeLocked(cl)
	return &v, nil
}

// ApplyListen sets or clears a set's registration for one event id. It
// returns the registration's sequence number (the last one used) and a
// channel closed when the leader's deliverer has switched (nil without
// one).
func (s *State) ApplyListen(c *statepb.RenewalListen) (ListenResult, error) {
	id, err := djinn.IDFromBytes("set id", c.GetSetId())
	if err != nil {
		return ListenResult{}, err
	}
	eid := c.GetEventId()
	if eid != FailureEventID && eid != WarningEventID {
		return ListenResult{}, djinn.Errorf(djinn.InvalidArgument, "event id %d: want %d or %d", eid, FailureEventID, WarningEventID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return ListenResult{}, noSuchSet(id)
	}
	l := &st.lis[eid]
	if want := c.GetOnlyIfEpoch(); want != 0 && want != l.epoch {
		return ListenResult{Seq: l.next - 1}, nil
	}
	l.epoch++
	l.target, l.handback, l.minWarning = c.GetTarget(), c.GetHandback(), c.GetMinWarningNanos()
	if l.target == nil {
		l.handback, l.minWarning = nil, 0
		clear(l.pending)
		l.pending = nil
	}
	if eid == WarningEventID {
		if l.target != nil {
			// A new registration is warned even of an expiration an
			// earlier one was warned of.
			st.warnedExp = 0
			s.warnSets[st] = struct{}{}
			select {
			case s.warn <- struct{}{}:
			default:
			}
		} else {
			delete(s.warnSets, st)
		}
	}
	res := ListenResult{Seq: l.next - 1}
	if s.sink != nil {
		res.Done = make(chan struct{})
		s.sink.Retargeted(st.id, eid, l.target, l.epoch, append([]*djinnpb.RemoteEvent(nil), l.pending...), res.Done)
	}
	return res, nil
}

// ListenResult is the outcome of ApplyListen.
type ListenResult struct {
	Seq  int64
	Done chan struct{}
}

// ApplyRenewed records successful renewals and schedules the next ones.
func (s *State) ApplyRenewed(now int64, c *statepb.RenewalRenewed) {
	keys, exps := c.GetKeys(), c.GetExpiresUnixNanos()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < len(exps) && (i+1)*len(Key{}) <= len(keys); i++ {
		k := Key(keys[i*len(Key{}) : (i+1)*len(Key{})])
		cl, ok := s.leases.get(k)
		if !ok {
			continue // removed meanwhile
		}
		cl.actual, cl.renewed = exps[i], now
		cl.attempts, cl.lastErr = 0, nil
		s.scheduleLocked(now, cl)
	}
}

// ApplyEnd takes client leases out of their sets on the service's own
// account, checking that the reason still holds: a renewFor applied since
// the leader decided may have changed it. Entries whose reason no longer
// holds are rescheduled.
func (s *State) ApplyEnd(now int64, c *statepb.RenewalEnd) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range c.GetEntries() {
		k, err := keyFrom(e.GetKey())
		if err != nil {
			continue
		}
		cl, ok := s.leases.get(k)
		if !ok {
			continue
		}
		switch e.GetReason() {
		case statepb.RenewalEndReason_RENEWAL_END_REASON_DESIRED:
			if cl.desired <= now {
				s.endLocked(cl, cl.actual < cl.desired, e.GetError())
				continue
			}
		case statepb.RenewalEndReason_RENEWAL_END_REASON_EXPIRED:
			if cl.actual <= now && cl.actual < cl.desired {
				s.endLocked(cl, true, e.GetError())
				continue
			}
		case statepb.RenewalEndReason_RENEWAL_END_REASON_DEFINITE:
			s.endLocked(cl, true, e.GetError())
			continue
		}
		s.scheduleLocked(now, cl)
	}
}

// ApplyWarn raises a set's expiration warning event, once for each set
// lease expiration.
func (s *State) ApplyWarn(c *statepb.RenewalWarn) {
	id, err := djinn.IDFromBytes("set id", c.GetSetId())
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok || st.lis[WarningEventID].target == nil || c.GetSetExpiresUnixNanos() == st.warnedExp {
		return
	}
	st.warnedExp = c.GetSetExpiresUnixNanos()
	a, err := anypb.New(&djinnpb.ExpirationWarning{SetLease: c.GetSetLease()})
	if err != nil {
		return
	}
	s.raiseAnyLocked(st, WarningEventID, a)
}

// ApplyDelivered forgets delivered events.
func (s *State) ApplyDelivered(c *statepb.RenewalDelivered) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range c.GetEntries() {
		id, err := djinn.IDFromBytes("set id", e.GetSetId())
		if err != nil {
			continue
		}
		st, ok := s.sets[id]
		eid := e.GetEventId()
		if !ok || (eid != FailureEventID && eid != WarningEventID) {
			continue
		}
		l := &st.lis[eid]
		n := 0
		for n < len(l.pending) && l.pending[n].GetSequence() <= e.GetThroughSequence() {
			n++
		}
		clear(l.pending[:n])
		l.pending = l.pending[n:]
		if len(l.pending) == 0 {
			l.pending = nil
		}
	}
}

// LeaseEnded destroys the set whose lease ended. Its client leases are left
// alone: neither renewed nor cancelled (LR.2).
func (s *State) LeaseEnded(id djinn.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return
	}
	for cl := range st.leases {
		s.removeLocked(cl)
	}
	delete(s.sets, id)
	delete(s.warnSets, st)
	if s.sink != nil {
		s.sink.Removed(id)
	}
}

func (s *State) pushLocked(cl *clientLease, due int64) {
	cl.due = due
	if cl.heapIdx >= 0 {
		heap.Fix(&s.sched, int(cl.heapIdx))
	} else {
		heap.Push(&s.sched, cl)
	}
	if cl.heapIdx == 0 {
		s.signal()
	}
}

func fromNanos(n int64) time.Time {
	if n == never {
		return djinn.EndOfTime
	}
	return time.Unix(0, n)
}

// schedule orders client leases by due time, earliest first.
type schedule []*clientLease

func (h schedule) Len() int           { return len(h) }
func (h schedule) Less(i, j int) bool { return h[i].due < h[j].due }
func (h schedule) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = int32(i)
	h[j].heapIdx = int32(j)
}
func (h *schedule) Push(x any) {
	c := x.(*clientLease)
	c.heapIdx = int32(len(*h))
	*h = append(*h, c)
}
func (h *schedule) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	c.heapIdx = -1
	return c
}
