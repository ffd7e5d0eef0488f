package lease

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/slab"
	"github.com/djinn-go/djinn/proto/statepb"
)

// never is the expiration of a Forever lease, in unix nanoseconds.
const never = math.MaxInt64

// record is one lease, by value in the table's slab: cookie, owner,
// principal and horizon are replicated state; expires is the leader's
// live expiration (on followers, the last logged one). Where it sits in
// the expiry heap is kept beside it, in the heap, so that moving a lease
// there does not change its record.
//
// A record is 56 bytes with no pointer: a million leases are 56 MB of
// records the collector does not scan, beside a slot number in the cookie
// index (4 bytes, the index between three eighths and three quarters
// full) and 16 bytes in the expiry heap each.
type record struct {
	cookie  djinn.ID
	ownerID djinn.ID
	expires int64
	horizon int64
	// principal is the lease's principal, by its number in the table's
	// principals.
	principal uint32
	kind      uint16
	// gen changes with every in-memory change of expires, so an undo can
	// tell whether anything renewed the lease after it.
	gen uint16
}

func (r *record) owner() Owner { return Owner{Kind: Kind(r.kind), ID: r.ownerID} }

// Handle names a live lease by where the table keeps it, for a service
// that holds one lease per resource and would otherwise store the lease's
// cookie a second time (the mailbox). It stays the lease's while the
// lease lives, and is meaningless once it ends or the table is reset.
type Handle uint32

// Table is the set of live leases. Every lease belongs to a principal,
// and the table counts each principal's leases in its quota ledger: all
// of them (quota.Leases), and those of each kind that has a quota
// (SetQuota), refusing a grant past a limit.
type Table struct {
	mu sync.Mutex
	// recs, byCookie, byExpiry, policies, quotas, principals and numbers
	// are guarded by mu.
	recs     slab.Slab[record]
	byCookie *slab.Index[djinn.ID]
	byExpiry slab.Heap
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

	// cuts counts the times a lease ended or its expiration moved
	// earlier: see Cuts.
	cuts atomic.Uint64
}

// NewTable returns an empty table with an empty ledger.
func NewTable() *Table {
	t := &Table{
		policies:   make(map[Kind]Policy),
		quotas:     make(map[Kind]quota.Name),
		principals: []string{""},
		numbers:    map[string]uint32{"": 0},
		wake:       make(chan struct{}, 1),
		ledger:     quota.New(),
	}
	t.byCookie = slab.NewIndex(func(slot uint32) djinn.ID { return t.recs.At(slot).cookie })
	return t
}

// findLocked returns the slot of the lease with cookie c.
func (t *Table) findLocked(c djinn.ID) (uint32, *record, bool) {
	slot, ok := t.byCookie.Find(c)
	if !ok {
		return 0, nil, false
	}
	return slot, t.recs.At(slot), true
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
	_, r, ok := t.findLocked(cookie)
	if !ok {
		return "", false
	}
	return t.principals[r.principal], true
}

// Handle returns the handle of the live lease with cookie c.
func (t *Table) Handle(c djinn.ID) (Handle, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	slot, ok := t.byCookie.Find(c)
	return Handle(slot), ok
}

// Owned returns the cookie and principal of the lease h names, if it is
// live and o's: a resource that keeps its lease's handle may be read
// between the end of its lease and its own removal, in the same Apply.
func (t *Table) Owned(h Handle, o Owner) (djinn.ID, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	slot := uint32(h)
	if !t.recs.Live(slot) {
		return djinn.ID{}, "", false
	}
	r := t.recs.At(slot)
	if r.owner() != o {
		return djinn.ID{}, "", false
	}
	return r.cookie, t.principals[r.principal], true
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
	return t.recs.Len()
}

// Info describes a lease.
type Info struct {
	Owner   Owner
	Expires time.Time // djinn.EndOfTime for Forever
	Horizon time.Time
}

// Cuts counts the times, since the table was made, that a lease ended
// (cancelled, expired, released, reset) or had its expiration moved
// earlier. A caller that found a lease alive until a time may take it as
// still alive before that time for as long as Cuts is what it was before
// the lookup: a lease only ever lives longer without a cut.
func (t *Table) Cuts() uint64 { return t.cuts.Load() }

// Lookup returns a lease's owner and expiration, and whether it exists and
// has not expired at now.
func (t *Table) Lookup(cookie djinn.ID, now time.Time) (Info, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, r, ok := t.findLocked(cookie)
	if !ok || r.expires <= now.UnixNano() {
		return Info{}, false
	}
	return Info{Owner: r.owner(), Expires: fromNanos(r.expires), Horizon: fromNanos(r.horizon)}, true
}

// Alive reports whether the lease exists and has not expired at now.
func (t *Table) Alive(cookie djinn.ID, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, r, ok := t.findLocked(cookie)
	return ok && r.expires > now.UnixNano()
}

// Lapsed reports whether the lease is still in the table although it
// expired at now: this leader found it expired, and its expiry is not yet
// applied.
func (t *Table) Lapsed(cookie djinn.ID, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, r, ok := t.findLocked(cookie)
	return ok && r.expires <= now.UnixNano()
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
	if _, _, ok := t.findLocked(cookie); ok {
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
	slot := t.recs.Alloc()
	*t.recs.Mut(slot) = record{cookie: cookie, ownerID: owner.ID, kind: uint16(owner.Kind), expires: expires, horizon: horizon, principal: t.numberLocked(p)}
	t.byCookie.Insert(slot)
	t.byExpiry.Push(slot, expires)
	if t.byExpiry.IsMin(slot) {
		t.signal()
	}
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
		slot, r, ok := t.findLocked(c)
		if !ok {
			errs[i] = unknownLease(c)
			continue
		}
		owners = append(owners, r.owner())
		t.removeLocked(slot)
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
		if slot, r, ok := t.findLocked(c); ok {
			owners = append(owners, r.owner())
			t.removeLocked(slot)
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
		if slot, _, ok := t.findLocked(c); ok {
			t.removeLocked(slot)
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
		if slot, r, ok := t.findLocked(c); ok && e.GetHorizonUnixNanos() > r.horizon {
			t.recs.Mut(slot).horizon = e.GetHorizonUnixNanos()
		}
	}
}

// Records returns every lease as a snapshot record, in no particular
// order: what a view writes, gathered.
func (t *Table) Records() []*statepb.LeaseRecord {
	v := t.View()
	defer v.Release()
	out := make([]*statepb.LeaseRecord, 0, v.Len())
	_ = v.Each(func(r *statepb.LeaseRecord) error {
		out = append(out, proto.CloneOf(r))
		return nil
	})
	return out
}

// Reset empties the table, and its ledger, before a restore.
func (t *Table) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cuts.Add(1)
	t.recs.Reset()
	t.byCookie.Reset()
	t.byExpiry.Reset()
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
func (t *Table) setExpiresLocked(slot uint32, exp int64) {
	r := t.recs.Mut(slot)
	if exp < r.expires {
		t.cuts.Add(1)
	}
	r.expires = exp
	r.gen++
	h := &t.byExpiry
	if h.Has(slot) && exp >= h.Key(slot) {
		return
	}
	h.Set(slot, exp)
	if h.IsMin(slot) {
		t.signal()
	}
}

func (t *Table) removeLocked(slot uint32) {
	t.cuts.Add(1)
	r := t.recs.At(slot)
	p := t.principals[r.principal]
	t.ledger.Release(p, quota.Leases, 1)
	if q, ok := t.quotas[Kind(r.kind)]; ok {
		t.ledger.Release(p, q, 1)
	}
	t.byCookie.Delete(r.cookie)
	t.byExpiry.Remove(slot)
	t.recs.Free(slot)
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
