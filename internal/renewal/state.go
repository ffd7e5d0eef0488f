package renewal

import (
	"bytes"
	"cmp"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/google/btree"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/slab"
	"github.com/djinn-go/djinn/proto/djinnpb"
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

// landlord is a landlord reference shared by the client leases it
// granted, by its number in the state's landlords.
type landlord struct {
	num  uint32
	ref  djinn.Ref
	pb   *djinnpb.Ref
	refs int
}

// clientLease is a lease in a renewal set, by value in the state's slab:
// 96 bytes and no pointer. The fields down to format are replicated state;
// the rest is the leader's renewal schedule, which every member keeps from
// the log (so a new leader has it) and the leader alone adjusts for
// retries. Where it sits in the schedule is the schedule's (a slab.Heap).
type clientLease struct {
	cookie  djinn.ID
	actual  int64 // the last recorded expiration
	desired int64
	renew   int64 // the renewal duration: positive, or Any
	renewed int64 // when the lease was last recorded renewed (or added)
	due     int64 // when the schedule next looks at the lease
	checked int64 // when a probe last found the lease alive (leader)
	// set and landlord are numbers in the state's sets and landlords.
	set      uint32
	landlord uint32
	// prev and next link the set's leases: 1 + a slot, 0 for none.
	prev, next uint32
	// serial tells this lease from a later one in the same slot.
	serial   uint32
	attempts int32 // failed renewals since the last success
	format   djinnpb.SerialFormat
	early    bool // due is a renewal time, which take may anticipate by its window (in format's padding)
	probe    bool // due is a probe time (the renewal comes later)
}

// listener is a set's registration for one kind of event (LR.2.1).
type listener struct {
	target     *djinnpb.Ref // nil: no registration
	handback   []byte
	minWarning int64
	next       int64  // the next event's sequence number
	epoch      uint64 // bumped by every set and clear
	pending    []*djinnpb.RemoteEvent
}

// set is a renewal set; sets are few beside their leases, and stay
// pointers.
type set struct {
	id, cookie djinn.ID
	principal  string
	num        uint32      // in the state's sets by number
	first      uint32      // 1 + the slot of its first lease, 0 for none
	last       uint32      // 1 + the slot of its last lease, 0 for none
	n          int         // its leases
	lis        [2]listener // by event id
	warnedExp  int64       // the set lease expiration last warned of
	// keyed holds its leases' slots in key order, the order pages list
	// them in; nil until its first lease. unordered: leases came without
	// it (a snapshot's), and orderLocked builds it anew before use.
	keyed     *btree.BTreeG[uint32]
	unordered bool
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
	sets map[djinn.ID]*set
	// setNums and landlords are the sets and landlords by number (nil:
	// a free number, in freeSets or freeLandlords); landlordNums finds a
	// landlord's number by its service and object ids.
	setNums       []*set
	freeSets      []uint32
	landlords     []*landlord
	freeLandlords []uint32
	landlordNums  map[[32]byte]uint32
	// cls are the client leases, found by key in byKey and by due time in
	// sched; lastErr holds the last renewal failure of those that have
	// one since their last success.
	cls      slab.Slab[clientLease]
	byKey    *slab.Index[Key]
	sched    slab.Heap
	lastErr  map[uint32]*djinnpb.Error
	serial   uint32
	warnSets map[*set]struct{} // sets with a warning listener
	sink     Sink
	// Overflowed counts events not kept because a registration already
	// held DefaultMaxPending undelivered ones.
	overflowed uint64
	// visited counts the client leases listings of a set's leases (pages,
	// the first leases) looked at: a test's measure of what one costs.
	visited int
	// nodes are the free nodes of the sets' key orders; pageAfter is the
	// key afterSlot stands for in them.
	nodes     *btree.FreeListG[uint32]
	pageAfter Key

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
	s.byKey = slab.NewIndex(func(slot uint32) Key { return s.keyAt(slot) })
	s.nodes = btree.NewFreeListG[uint32](btree.DefaultFreeListSize)
	s.resetLocked()
	return s
}

func (s *State) resetLocked() {
	s.sets = make(map[djinn.ID]*set)
	s.setNums, s.freeSets = nil, nil
	s.landlords, s.freeLandlords = nil, nil
	s.landlordNums = make(map[[32]byte]uint32)
	s.cls.Reset()
	s.byKey.Reset()
	s.sched.Reset()
	s.lastErr = make(map[uint32]*djinnpb.Error)
	s.warnSets = make(map[*set]struct{})
}

func (s *State) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// keyAt returns the key of the client lease at slot.
func (s *State) keyAt(slot uint32) Key {
	cl := s.cls.At(slot)
	return KeyOf(s.landlords[cl.landlord].ref, cl.cookie)
}

// keyedDegree is the degree of a set's key order: nodes of 31 to 63
// slots, which a page reads through in order.
const keyedDegree = 32

// afterSlot is no client lease's slot (a slot+1 fits in a uint32): in a
// set's key order it stands for a key just after s.pageAfter, no lease's
// key, where a page after s.pageAfter starts.
const afterSlot = math.MaxUint32

// keyLess orders slots of a set's key order by their leases' keys.
func (s *State) keyLess(a, b uint32) bool {
	switch {
	case a == afterSlot && b == afterSlot:
		return false
	case a == afterSlot:
		k := s.keyAt(b)
		return bytes.Compare(s.pageAfter[:], k[:]) < 0
	case b == afterSlot:
		k := s.keyAt(a)
		return bytes.Compare(k[:], s.pageAfter[:]) <= 0
	}
	ca, cb := s.cls.At(a), s.cls.At(b)
	if ca.landlord == cb.landlord {
		return bytes.Compare(ca.cookie[:], cb.cookie[:]) < 0
	}
	ka, kb := s.keyAt(a), s.keyAt(b)
	return bytes.Compare(ka[:], kb[:]) < 0
}

// orderLocked builds a set's key order anew when leases came without it
// (a snapshot's): their keys sorted apart, then put in in order, which
// costs less than putting each in as it came (the tree places each by
// its key all the same: the sort only spares it work).
func (s *State) orderLocked(st *set) {
	if !st.unordered {
		return
	}
	st.unordered = false
	// A landlord's rank among the set's landlords orders its leases
	// before those of the landlords after it, as their keys do.
	ranks := make(map[uint32]uint32)
	type entry struct {
		landlord uint32 // its rank, once ranked
		slot     uint32
		cookie   djinn.ID
	}
	entries := make([]entry, 0, st.n)
	for next := st.first; next != 0; next = s.cls.At(next - 1).next {
		cl := s.cls.At(next - 1)
		ranks[cl.landlord] = 0
		entries = append(entries, entry{landlord: cl.landlord, slot: next - 1, cookie: cl.cookie})
	}
	nums := slices.Collect(maps.Keys(ranks))
	slices.SortFunc(nums, func(a, b uint32) int {
		ra, rb := s.landlords[a].ref, s.landlords[b].ref
		if c := bytes.Compare(ra.Service[:], rb.Service[:]); c != 0 {
			return c
		}
		return bytes.Compare(ra.Object[:], rb.Object[:])
	})
	for i, num := range nums {
		ranks[num] = uint32(i)
	}
	for i := range entries {
		entries[i].landlord = ranks[entries[i].landlord]
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if a.landlord != b.landlord {
			return cmp.Compare(a.landlord, b.landlord)
		}
		return bytes.Compare(a.cookie[:], b.cookie[:])
	})
	st.keyed = btree.NewWithFreeListG(keyedDegree, s.keyLess, s.nodes)
	for _, e := range entries {
		st.keyed.ReplaceOrInsert(e.slot)
	}
}

// findLocked returns the slot of the client lease with key k.
func (s *State) findLocked(k Key) (uint32, bool) { return s.byKey.Find(k) }

// setOf returns the set of the client lease at slot.
func (s *State) setOf(slot uint32) *set { return s.setNums[s.cls.At(slot).set] }

// leasesOf calls fn with the slot of each of a set's client leases; fn may
// remove the lease it is given.
func (s *State) leasesOf(st *set, fn func(slot uint32)) {
	for next := st.first; next != 0; {
		slot := next - 1
		next = s.cls.At(slot).next
		fn(slot)
	}
}

// Len returns the number of sets and client leases.
func (s *State) Len() (sets, leases int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sets), s.cls.Len()
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
	in := SetInfo{ID: st.id, Cookie: st.cookie, Principal: st.principal, Leases: st.n}
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

// viewLocked returns the client lease at slot as clients see it.
func (s *State) viewLocked(slot uint32) ClientLease {
	c := s.cls.At(slot)
	return ClientLease{
		Landlord: s.landlords[c.landlord].ref, Cookie: c.cookie, Actual: fromNanos(c.actual), Format: c.format,
		Desired: fromNanos(c.desired), Renew: time.Duration(c.renew), LastErr: s.lastErr[slot],
	}
}

// Leases returns a set's client leases.
func (s *State) Leases(id djinn.ID) ([]ClientLease, error) {
	return s.FirstLeases(id, math.MaxInt)
}

// FirstLeases returns the first n of a set's client leases, in the order
// they came.
func (s *State) FirstLeases(id djinn.ID, n int) ([]ClientLease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sets[id]
	if !ok {
		return nil, noSuchSet(id)
	}
	out := make([]ClientLease, 0, min(n, st.n))
	for next := st.first; next != 0 && len(out) < n; next = s.cls.At(next - 1).next {
		s.visited++
		out = append(out, s.viewLocked(next-1))
	}
	return out, nil
}

// SetOf returns the id of the set holding a client lease, if any.
func (s *State) SetOf(k Key) (djinn.ID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, ok := s.findLocked(k)
	if !ok {
		return djinn.ID{}, false
	}
	return s.setOf(slot).id, true
}

// addSetLocked adds a set, giving it a number.
func (s *State) addSetLocked(st *set) {
	if n := len(s.freeSets); n > 0 {
		st.num = s.freeSets[n-1]
		s.freeSets = s.freeSets[:n-1]
		s.setNums[st.num] = st
	} else {
		st.num = uint32(len(s.setNums))
		s.setNums = append(s.setNums, st)
	}
	s.sets[st.id] = st
}

// dropSetLocked removes a set that holds no lease.
func (s *State) dropSetLocked(st *set) {
	delete(s.sets, st.id)
	delete(s.warnSets, st)
	s.setNums[st.num] = nil
	s.freeSets = append(s.freeSets, st.num)
}

// landlordLocked returns the number of the landlord ref names, adding it
// when new, and counts one more lease of it.
func (s *State) landlordLocked(ref djinn.Ref, pb *djinnpb.Ref) uint32 {
	var k [32]byte
	copy(k[:16], ref.Service[:])
	copy(k[16:], ref.Object[:])
	num, ok := s.landlordNums[k]
	if !ok {
		if n := len(s.freeLandlords); n > 0 {
			num = s.freeLandlords[n-1]
			s.freeLandlords = s.freeLandlords[:n-1]
		} else {
			num = uint32(len(s.landlords))
			s.landlords = append(s.landlords, nil)
		}
		s.landlords[num] = &landlord{num: num}
		s.landlordNums[k] = num
	}
	l := s.landlords[num]
	if !ok || l.ref.Endpoint != ref.Endpoint {
		// The endpoint last given is where the landlord is renewed: a
		// landlord that moved is followed, not called where it was. The
		// landlord is replaced, not changed: a snapshot's view holds it.
		l = &landlord{num: num, ref: ref, pb: &djinnpb.Ref{Endpoint: ref.Endpoint, ServiceId: ref.Service[:], ObjectId: ref.Object[:]}, refs: l.refs}
		s.landlords[num] = l
	}
	l.refs++
	return num
}

// addLeaseLocked adds a client lease at the end of its set (cl.set), and
// returns its slot; the caller schedules it. A set's leases are in the
// order they came, which a snapshot keeps.
func (s *State) addLeaseLocked(cl clientLease) uint32 {
	st := s.setNums[cl.set]
	s.serial++
	cl.serial, cl.prev, cl.next = s.serial, st.last, 0
	slot := s.cls.Alloc()
	if st.last != 0 {
		s.cls.Mut(st.last - 1).next = slot + 1
	} else {
		st.first = slot + 1
	}
	*s.cls.Mut(slot) = cl
	st.last = slot + 1
	st.n++
	s.byKey.Insert(slot)
	if !st.unordered {
		if st.keyed == nil {
			st.keyed = btree.NewWithFreeListG(keyedDegree, s.keyLess, s.nodes)
		}
		st.keyed.ReplaceOrInsert(slot)
	}
	return slot
}

// removeLocked takes a client lease out of its set and the schedule.
func (s *State) removeLocked(slot uint32) {
	cl := *s.cls.At(slot)
	st := s.setNums[cl.set]
	s.table.Quotas().Release(st.principal, quota.RenewalLeases, 1)
	s.byKey.Delete(s.keyAt(slot))
	if st.keyed != nil && !st.unordered {
		st.keyed.Delete(slot)
	}
	if cl.prev != 0 {
		s.cls.Mut(cl.prev - 1).next = cl.next
	} else {
		st.first = cl.next
	}
	if cl.next != 0 {
		s.cls.Mut(cl.next - 1).prev = cl.prev
	} else {
		st.last = cl.prev
	}
	st.n--
	s.sched.Remove(slot)
	delete(s.lastErr, slot)
	s.cls.Free(slot)
	l := s.landlords[cl.landlord]
	if l.refs--; l.refs == 0 {
		var k [32]byte
		copy(k[:16], l.ref.Service[:])
		copy(k[16:], l.ref.Object[:])
		delete(s.landlordNums, k)
		s.landlords[cl.landlord] = nil
		s.freeLandlords = append(s.freeLandlords, cl.landlord)
	}
}

func fromNanos(n int64) time.Time {
	if n == never {
		return djinn.EndOfTime
	}
	return time.Unix(0, n)
}
