package quota

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Name names a quota: the key that sets it in the [quota] section of the
// configuration.
type Name string

// The quotas.
const (
	Leases               Name = "leases" // every lease, of any kind
	MailboxRegistrations Name = "mailbox-registrations"
	StoredEvents         Name = "mailbox-stored-events"
	Transactions         Name = "transactions" // active (undecided) ones
	Participants         Name = "participants" // joined to active transactions
	LockSets             Name = "lock-sets"
	LockOwners           Name = "lock-owners"
	LockWaiters          Name = "lock-waiters"
	LookupItems          Name = "lookup-items"
	LookupWatches        Name = "lookup-watches"
	RenewalSets          Name = "renewal-sets"
	RenewalLeases        Name = "renewal-leases" // client leases in renewal sets
	LDSRegistrations     Name = "lds-registrations"
	// Streams is the one quota not in the state machine: the concurrent
	// gRPC streams (pulls, watches, renewal streams) a principal has open
	// on one server, counted by that server.
	Streams Name = "streams"
	// CallsInFlight, like Streams counted by each server, is the calls
	// (unary, or carried in any of its sessions) a principal has in
	// flight on one server.
	CallsInFlight Name = "calls-in-flight"
)

// Names lists every quota.
func Names() []Name {
	return []Name{Leases, MailboxRegistrations, StoredEvents, Transactions, Participants, LockSets, LockOwners,
		LockWaiters, LookupItems, LookupWatches, RenewalSets, RenewalLeases, LDSRegistrations, Streams, CallsInFlight}
}

// Limit is one quota's limits; 0 is no limit.
type Limit struct {
	// PerPrincipal is what each principal may hold, but for those
	// Principals names.
	PerPrincipal int64
	// Total is what all principals together may hold.
	Total int64
	// Principals are principals' own limits (0: none).
	Principals map[string]int64
}

// Of returns the limit of principal p.
func (l Limit) Of(p string) int64 {
	if v, ok := l.Principals[p]; ok {
		return v
	}
	return l.PerPrincipal
}

// Limits are the limits of every quota that has one.
type Limits map[Name]Limit

type key struct {
	principal string
	name      Name
}

// Ledger counts what each principal holds and refuses what would pass a
// limit. It is safe for concurrent use; its lock is taken last (callers
// may hold theirs).
type Ledger struct {
	mu sync.Mutex
	// limits, held and total are guarded by mu.
	limits Limits
	held   map[key]int64
	total  map[Name]int64
}

// New returns an empty ledger without limits.
func New() *Ledger {
	l := &Ledger{}
	l.Reset()
	return l
}

// Reset forgets every count and limit, before a snapshot is restored.
func (l *Ledger) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limits, l.held, l.total = Limits{}, map[key]int64{}, map[Name]int64{}
}

// Take counts n more of name for principal p, or, if that would pass p's
// limit or the total, counts nothing and answers ResourceExhausted naming
// the quota.
func (l *Ledger) Take(p string, name Name, n int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkLocked(p, name, n); err != nil {
		return err
	}
	l.addLocked(p, name, n)
	return nil
}

// Check answers what Take would, counting nothing.
func (l *Ledger) Check(p string, name Name, n int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.checkLocked(p, name, n)
}

func (l *Ledger) checkLocked(p string, name Name, n int64) error {
	lim, ok := l.limits[name]
	if !ok || n <= 0 {
		return nil
	}
	if max := lim.Of(p); max > 0 && l.held[key{p, name}]+n > max {
		return &ExhaustedError{Quota: name, Principal: p, Held: l.held[key{p, name}], More: n, Limit: max}
	}
	if lim.Total > 0 && l.total[name]+n > lim.Total {
		return djinn.Errorf(djinn.ResourceExhausted, "quota %s: the server holds %d in all, and %d more would pass its limit of %d; try again once some end",
			name, l.total[name], n, lim.Total)
	}
	return nil
}

// ExhaustedError is a principal's limit refusing more: a ResourceExhausted
// error naming the quota, the principal and what it holds. A call may be
// refused by another principal's limit — one whose capability it holds
// adds to what that principal holds (a participant joined to its
// transaction, an event sent to its mailbox) — and must not learn that
// principal's name or holdings: For says it to the caller.
type ExhaustedError struct {
	Quota     Name
	Principal string
	// Held is what the principal holds, More what the call would have
	// added, Limit the principal's limit.
	Held, More, Limit int64
}

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("quota %s: principal %q holds %d, and %d more would pass its limit of %d; end some first, or ask an operator to raise [quota] %s",
		e.Quota, e.Principal, e.Held, e.More, e.Limit, e.Quota)
}

// Unwrap makes the error's kind ResourceExhausted (djinn.KindOf).
func (e *ExhaustedError) Unwrap() error { return djinn.ResourceExhausted }

// For returns the refusal as caller may see it: itself when the limit is
// caller's own; otherwise a ResourceExhausted that names the quota
// without the principal whose limit it is or what that one holds.
func (e *ExhaustedError) For(caller string) error {
	if caller == e.Principal {
		return e
	}
	return djinn.Errorf(djinn.ResourceExhausted, "quota %s: this call adds to what the owner of the resource it names holds, and the owner is at its limit; ask the owner to end some first, or an operator to raise [quota] %s", e.Quota, e.Quota)
}

// Add counts n more of name for p without checking any limit: for things
// that exist already (a snapshot restored, a command the leader checked).
func (l *Ledger) Add(p string, name Name, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.addLocked(p, name, n)
}

func (l *Ledger) addLocked(p string, name Name, n int64) {
	if n == 0 {
		return
	}
	k := key{p, name}
	l.held[k] += n
	if l.held[k] <= 0 {
		delete(l.held, k)
	}
	l.total[name] += n
}

// Release counts n fewer of name for p.
func (l *Ledger) Release(p string, name Name, n int64) {
	l.Add(p, name, -n)
}

// Held returns what p holds of name.
func (l *Ledger) Held(p string, name Name) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[key{p, name}]
}

// Total returns what all principals hold of name.
func (l *Ledger) Total(name Name) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total[name]
}

// Limits returns the limits in force. The caller owns the map.
func (l *Ledger) Limits() Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.limits)
}

// ApplyLimits puts the limits a Quotas command or record carries in force.
// What principals already hold stays: a lowered limit refuses only what
// would come on top.
func (l *Ledger) ApplyLimits(q *statepb.Quotas) {
	lim := FromProto(q)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limits = lim
}

// Proto returns limits as a Quotas command or record, in name order.
func (lim Limits) Proto() *statepb.Quotas {
	q := &statepb.Quotas{}
	for _, n := range slices.Sorted(maps.Keys(lim)) {
		v := lim[n]
		q.Quotas = append(q.Quotas, &statepb.Quota{Name: string(n), PerPrincipal: v.PerPrincipal, Total: v.Total, Principals: maps.Clone(v.Principals)})
	}
	return q
}

// FromProto returns the limits of a Quotas command or record. Unknown
// names are kept: a newer leader's quotas bind a node that does not count
// them yet only once it does.
func FromProto(q *statepb.Quotas) Limits {
	lim := Limits{}
	for _, v := range q.GetQuotas() {
		lim[Name(v.GetName())] = Limit{PerPrincipal: v.GetPerPrincipal(), Total: v.GetTotal(), Principals: maps.Clone(v.GetPrincipals())}
	}
	return lim
}

// Equal reports whether two sets of limits are the same.
func (lim Limits) Equal(o Limits) bool {
	return maps.EqualFunc(lim, o, func(a, b Limit) bool {
		return a.PerPrincipal == b.PerPrincipal && a.Total == b.Total && maps.Equal(a.Principals, b.Principals)
	})
}
