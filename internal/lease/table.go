package lease

import (
	"container/heap"
	"math"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/proto/statepb"
)

// never is the expiration of a Forever lease, in unix nanoseconds.
const never = math.MaxInt64

// record is one lease. cookie, owner, principal and horizon are
// replicated state; expires is the leader's live expiration (on
// followers, the last logged one); heapKey and heapIdx place it in the
// expiry heap.
//
// A record takes the 80-byte size class: a million leases are 80 MB of
// records.
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
	// principal is the lease's principal, by its number in the table's
	// principals.
	principal uint32
}

func (r *record) owner() Owner { return Owner{Kind: Kind(r.kind), ID: r.ownerID} }

// Table is the set of live leases. Every lease belongs to a principal,
// and the table counts each principal's leases in its quota ledger: all
// of them (quota.Leases), and those of each kind that has a quota
// (SetQuota), refusing a grant past a limit.
type Table struct {
	mu sync.Mutex
	// leases, byExpiry, policies, quotas, principals and numbers are
	// guarded by mu.
	leases   map[djinn.ID]*record
	byExpiry expiryHeap
	policies map[Kind]Policy
	quotas   map[Kind]quota.Name
	// principals are the principals leases have had, numbered in the
	// order they came (0 is ""); numbers finds a principal's number.
	principals []string
	numbers    map[string]uint32
	// wake is signalled (without blocking) when the earliest expiration
	// moves earlier, so the expiry loop can re-arm its timer.
	wake chan struct{}

	ledger *quota.Ledger
}

// NewTable returns an empty table with an empty ledger.
func NewTable() *Table {
	return &Table{
		leases:     make(map[djinn.ID]*record),
		policies:   make(map[Kind]Policy),
		quotas:     make(map[Kind]quota.Name),
		principals: []string{""},
		numbers:    map[string]uint32{"": 0},
		wake:       make(chan struct{}, 1),
		ledger:     quota.New(),
	}
}

// Quotas returns the ledger the table counts leases in: the replicated
// state machine's, which the services count their other holdings in too.
func (t *Table) Quotas() *quota.Ledger { return t.ledger }

// SetQuota makes the leases of kind k count towards quota q too.
func (t *Table) SetQuota(k Kind, q quota.Name) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.quotas[k] = q
}

// numberLocked returns principal p's number, giving it one if it has none.
func (t *Table) numberLocked(p string) uint32 {
	if n, ok := t.numbers[p]; ok {
		return n
	}
	n := uint32(len(t.principals))
	t.principals = append(t.principals, p)
	t.numbers[p] = n
	return n
}

// Principal returns the principal of a live lease.
func (t *Table) Principal(cookie djinn.ID) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.leases[cookie]
	if !ok {
		return "", false
	}
	return t.principals[r.principal], true
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

// ApplyGrant records a new lease of principal p. The owning service calls
// it from its own command's Apply, before it changes anything of its own:
// a grant that would take p (or all principals) past a quota is refused
// with ResourceExhausted, and nothing changes. A cookie already in use is
// refused too: cookies are random, so this only happens when a command is
// replayed in error.
func (t *Table) ApplyGrant(cookie djinn.ID, owner Owner, p string, expires, horizon int64) error {
	return t.grant(cookie, owner, p, expires, horizon, true)
}

// CheckGrant answers what ApplyGrant would answer for the quotas of a new
// lease of kind k for principal p, granting nothing: for a service that
// must know before it changes its own state.
func (t *Table) CheckGrant(k Kind, p string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.checkLocked(k, p)
}

func (t *Table) checkLocked(k Kind, p string) error {
	if err := t.ledger.Check(p, quota.Leases, 1); err != nil {
		return err
	}
	if q, ok := t.quotas[k]; ok {
		return t.ledger.Check(p, q, 1)
	}
	return nil
}

// ApplyGrantReplacing grants a lease that takes the place of lease prev of
// the same principal (a registration made again), ending prev without
// telling anyone: what p holds does not change, so no quota refuses it.
func (t *Table) ApplyGrantReplacing(prev, cookie djinn.ID, owner Owner, p string, expires, horizon int64) error {
	if err := t.grant(cookie, owner, p, expires, horizon, false); err != nil {
		return err
	}
	t.ApplyRelease(prev[:])
	return nil
}

func (t *Table) grant(cookie djinn.ID, owner Owner, p string, expires, horizon int64, check bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.leases[cookie]; ok {
		return djinn.Errorf(djinn.Internal, "lease %s: cookie already in use", cookie)
	}
	if check {
		if err := t.checkLocked(owner.Kind, p); err != nil {
			return err
		}
	}
	q, counted := t.quotas[owner.Kind]
	t.ledger.Add(p, quota.Leases, 1)
	if counted {
		t.ledger.Add(p, q, 1)
	}
	if horizon < expires {
		horizon = expires
	}
	r := &record{cookie: cookie, ownerID: owner.ID, kind: uint16(owner.Kind), expires: expires, horizon: horizon, principal: t.numberLocked(p)}
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

// UnknownLease is the error for a lease that is unknown, expired or
// cancelled — or another principal's, to whom it does not exist.
func UnknownLease(c djinn.ID) error { return unknownLease(c) }

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
			Principal: t.principals[r.principal],
		})
	}
	return out
}

// Reset empties the table, and its ledger, before a restore.
func (t *Table) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leases = make(map[djinn.ID]*record)
	t.byExpiry = nil
	t.ledger.Reset()
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
	// Counted, never refused: the lease exists.
	return t.grant(c, Owner{Kind: Kind(rec.GetOwnerKind()), ID: o}, rec.GetPrincipal(), rec.GetExpiresUnixNanos(), rec.GetHorizonUnixNanos(), false)
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
	p := t.principals[r.principal]
	t.ledger.Release(p, quota.Leases, 1)
	if q, ok := t.quotas[Kind(r.kind)]; ok {
		t.ledger.Release(p, q, 1)
	}
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
