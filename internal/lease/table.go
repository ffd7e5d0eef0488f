package lease

import (
	"container/heap"
	"math"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// never is the expiration of a Forever lease, in unix nanoseconds.
const never = math.MaxInt64

// record is one lease. cookie, owner and horizon are replicated state;
// expires is the leader's live expiration (on followers, the last logged
// one); heapKey and heapIdx place it in the expiry heap.
//
// Fields are ordered so a record fills a 64-byte size class exactly: a
// million leases are 64 MB of records.
type record struct {
	cookie  djinn.ID
	ownerID djinn.ID
	expires int64
	horizon int64
	heapKey int64
	heapIdx int32
	kind    uint16
	// gen changes with every in-memory change of expires, so an undo can
	// tell whether anything renewed the lease after it.
	gen uint16
}

func (r *record) owner() Owner { return Owner{Kind: Kind(r.kind), ID: r.ownerID} }

// Table is the set of live leases.
type Table struct {
	mu sync.Mutex
	// leases, byExpiry and policies are guarded by mu.
	leases   map[djinn.ID]*record
	byExpiry expiryHeap
	policies map[Kind]Policy
	// wake is signalled (without blocking) when the earliest expiration
	// moves earlier, so the expiry loop can re-arm its timer.
	wake chan struct{}
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{
		leases:   make(map[djinn.ID]*record),
		policies: make(map[Kind]Policy),
		wake:     make(chan struct{}, 1),
	}
}

// SetPolicy sets the lease policy of a kind of owner.
func (t *Table) SetPolicy(k Kind, p Policy) error {
	if err := p.Check(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.policies[k] = p
	return nil
}

func (t *Table) policyLocked(k Kind) Policy {
	if p, ok := t.policies[k]; ok {
		return p
	}
	return DefaultPolicy
}

// Len returns the number of leases.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.leases)
}

// Info describes a lease.
type Info struct {
	Owner   Owner
	Expires time.Time // djinn.EndOfTime for Forever
	Horizon time.Time
}

// Lookup returns a lease's owner and expiration, and whether it exists and
// has not expired at now.
func (t *Table) Lookup(cookie djinn.ID, now time.Time) (Info, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.leases[cookie]
	if !ok || r.expires <= now.UnixNano() {
		return Info{}, false
	}
	return Info{Owner: r.owner(), Expires: fromNanos(r.expires), Horizon: fromNanos(r.horizon)}, true
}

// Alive reports whether the lease exists and has not expired at now.
func (t *Table) Alive(cookie djinn.ID, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.leases[cookie]
	return ok && r.expires > now.UnixNano()
}

// ApplyGrant records a new lease. The owning service calls it from its own
// command's Apply. A cookie already in use is refused: cookies are random,
// so this only happens when a command is replayed in error.
func (t *Table) ApplyGrant(cookie djinn.ID, owner Owner, expires, horizon int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.leases[cookie]; ok {
		return djinn.Errorf(djinn.Internal, "lease %s: cookie already in use", cookie)
	}
	if horizon < expires {
		horizon = expires
	}
	r := &record{cookie: cookie, ownerID: owner.ID, kind: uint16(owner.Kind), expires: expires, horizon: horizon}
	t.leases[cookie] = r
	t.pushLocked(r)
	return nil
}

// ApplyCancel ends leases by cancellation (LE.2.2), returning one error per
// cookie — UnknownLease for a lease that does not exist — and the owners
// of the leases it ended, whom the caller tells. The leader has already
// refused cancels of expired leases.
func (t *Table) ApplyCancel(cookies [][]byte) ([]error, []Owner) {
	errs := make([]error, len(cookies))
	var owners []Owner
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, b := range cookies {
		c, err := djinn.IDFromBytes("lease cookie", b)
		if err != nil {
			errs[i] = err
			continue
		}
		r, ok := t.leases[c]
		if !ok {
			errs[i] = unknownLease(c)
			continue
		}
		t.removeLocked(r)
		owners = append(owners, r.owner())
	}
	return errs, owners
}

func unknownLease(c djinn.ID) error {
	return djinn.Errorf(djinn.UnknownLease, "lease %s: unknown, expired or cancelled", c)
}

// ApplyExpire ends leases the leader found expired and returns their
// owners, whom the caller tells. Leases already gone are skipped.
func (t *Table) ApplyExpire(cookies [][]byte) []Owner {
	var owners []Owner
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range cookies {
		c, err := djinn.IDFromBytes("cookie", b)
		if err != nil {
			continue
		}
		if r, ok := t.leases[c]; ok {
			t.removeLocked(r)
			owners = append(owners, r.owner())
		}
	}
	return owners
}

// ApplyRelease ends the leases of resources their owner has already let
// go (a decided transaction, a replaced registration), from the owner's
// own Apply: nobody is told. Leases already gone are skipped.
func (t *Table) ApplyRelease(cookies ...[]byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range cookies {
		c, err := djinn.IDFromBytes("cookie", b)
		if err != nil {
			continue
		}
		if r, ok := t.leases[c]; ok {
			t.removeLocked(r)
		}
	}
}

// ApplyHorizon raises logged horizons. It never lowers one.
func (t *Table) ApplyHorizon(entries []*statepb.HorizonEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range entries {
		c, err := djinn.IDFromBytes("cookie", e.GetCookie())
		if err != nil {
			continue
		}
		if r, ok := t.leases[c]; ok && e.GetHorizonUnixNanos() > r.horizon {
			r.horizon = e.GetHorizonUnixNanos()
		}
	}
}

// Records returns every lease for a snapshot, in no particular order.
func (t *Table) Records() []*statepb.LeaseRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*statepb.LeaseRecord, 0, len(t.leases))
	for _, r := range t.leases {
		// An expiration past the horizon is a renewal whose horizon write
		// is still pending and may fail: it is not state yet.
		out = append(out, &statepb.LeaseRecord{
			Cookie: r.cookie[:], OwnerKind: uint32(r.kind), OwnerId: r.ownerID[:],
			ExpiresUnixNanos: min(r.expires, r.horizon), HorizonUnixNanos: r.horizon,
		})
	}
	return out
}

// Reset empties the table before a restore.
func (t *Table) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leases = make(map[djinn.ID]*record)
	t.byExpiry = nil
}

// Restore adds one snapshot record.
func (t *Table) Restore(rec *statepb.LeaseRecord) error {
	c, err := djinn.IDFromBytes("lease cookie", rec.GetCookie())
	if err != nil {
		return err
	}
	o, err := djinn.IDFromBytes("lease owner", rec.GetOwnerId())
	if err != nil {
		return err
	}
	return t.ApplyGrant(c, Owner{Kind: Kind(rec.GetOwnerKind()), ID: o}, rec.GetExpiresUnixNanos(), rec.GetHorizonUnixNanos())
}

// setExpiresLocked changes a lease's live expiration, keeping the expiry
// heap able to find it: a later expiration is found lazily when the old key
// pops; an earlier one moves the key now.
func (t *Table) setExpiresLocked(r *record, exp int64) {
	r.expires = exp
	r.gen++
	if exp >= r.heapKey && r.heapIdx >= 0 {
		return
	}
	r.heapKey = min(r.heapKey, exp)
	if r.heapIdx >= 0 {
		heap.Fix(&t.byExpiry, int(r.heapIdx))
	} else {
		r.heapKey = exp
		heap.Push(&t.byExpiry, r)
	}
	if r.heapIdx == 0 {
		t.signal()
	}
}

// pushLocked adds r to the heap keyed by its expiration.
func (t *Table) pushLocked(r *record) {
	r.heapKey = r.expires
	heap.Push(&t.byExpiry, r)
	if r.heapIdx == 0 {
		t.signal()
	}
}

func (t *Table) removeLocked(r *record) {
	delete(t.leases, r.cookie)
	if i := int(r.heapIdx); i >= 0 && i < len(t.byExpiry) && t.byExpiry[i] == r {
		heap.Remove(&t.byExpiry, i)
	}
}

func (t *Table) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func fromNanos(n int64) time.Time {
	if n == never {
		return djinn.EndOfTime
	}
	return time.Unix(0, n)
}

func toNanos(t time.Time) int64 {
	if !t.Before(djinn.EndOfTime) {
		return never
	}
	return t.UnixNano()
}

// expiryHeap orders records by heapKey, earliest first.
type expiryHeap []*record

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].heapKey < h[j].heapKey }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = int32(i)
	h[j].heapIdx = int32(j)
}
func (h *expiryHeap) Push(x any) {
	r := x.(*record)
	r.heapIdx = int32(len(*h))
	*h = append(*h, r)
}
func (h *expiryHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	r.heapIdx = -1
	return r
}
