package client

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LeaseMap is a set of leases of one landlord, each with the duration to
// renew it for, renewed or cancelled together in one call (LE.2.2). It is
// safe for concurrent use. The zero LeaseMap is an empty map ready to use.
type LeaseMap struct {
	mu       sync.Mutex
	landlord djinn.Ref              // guarded by mu; valid while entries is not empty
	entries  map[leaseKey]*mapEntry // guarded by mu
	seq      uint64                 // guarded by mu: insertion counter, for a stable order
}

type mapEntry struct {
	lease *Lease
	d     time.Duration
	seq   uint64
}

// NewLeaseMap returns an empty lease map.
func NewLeaseMap() *LeaseMap {
	return &LeaseMap{entries: map[leaseKey]*mapEntry{}}
}

// CreateLeaseMap returns a lease map holding l, to be renewed for d
// (LE.2.2's createLeaseMap).
func (l *Lease) CreateLeaseMap(d time.Duration) (*LeaseMap, error) {
	m := NewLeaseMap()
	if err := m.Put(l, d); err != nil {
		return nil, err
	}
	return m, nil
}

// CanContainKey reports whether l can be added: whether it can be batched
// with the leases already in the map (LE.2.2).
func (m *LeaseMap) CanContainKey(l *Lease) bool {
	if l == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.canContainLocked(l)
}

func (m *LeaseMap) canContainLocked(l *Lease) bool {
	return len(m.entries) == 0 || m.landlord.Equal(l.landlord)
}

// Put adds l, to be renewed for d (positive, Forever or Any), or changes
// the duration of a lease already in the map. A lease that cannot be batched
// with the others is refused with djinn.ErrInvalidArgument, as LE.2.2's
// IllegalArgumentException.
func (m *LeaseMap) Put(l *Lease, d time.Duration) error {
	if l == nil {
		return djinn.Errorf(djinn.InvalidArgument, "lease: missing")
	}
	if err := checkRenewDuration(d); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.canContainLocked(l) {
		return djinn.Errorf(djinn.InvalidArgument, "%v: landlord %v cannot batch with the map's landlord %v",
			l, l.landlord, m.landlord)
	}
	k := l.key()
	if e, ok := m.entries[k]; ok {
		e.lease, e.d = l, d
		return nil
	}
	m.seq++
	if m.entries == nil {
		m.entries = map[leaseKey]*mapEntry{}
	}
	m.entries[k] = &mapEntry{lease: l, d: d, seq: m.seq}
	m.landlord = l.landlord
	return nil
}

// Get returns the renewal duration of l, and whether l is in the map.
func (m *LeaseMap) Get(l *Lease) (time.Duration, bool) {
	if l == nil {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[l.key()]
	if !ok {
		return 0, false
	}
	return e.d, true
}

// Remove removes l and reports whether it was in the map.
func (m *LeaseMap) Remove(l *Lease) bool {
	if l == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := l.key()
	_, ok := m.entries[k]
	delete(m.entries, k)
	return ok
}

// Len returns the number of leases in the map.
func (m *LeaseMap) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}

// All iterates over the leases and their durations in the order they were
// added, over a snapshot taken when iteration starts.
func (m *LeaseMap) All() iter.Seq2[*Lease, time.Duration] {
	return func(yield func(*Lease, time.Duration) bool) {
		for _, e := range m.snapshot() {
			if !yield(e.lease, e.d) {
				return
			}
		}
	}
}

func (m *LeaseMap) snapshot() []mapEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]mapEntry, 0, len(m.entries))
	for _, e := range m.entries {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b mapEntry) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// removeFailed removes the leases that failed, unless the map was changed
// to hold another lease object for the same lease meanwhile.
func (m *LeaseMap) removeFailed(failed map[*Lease]error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for l := range failed {
		if e, ok := m.entries[l.key()]; ok && e.lease == l {
			delete(m.entries, l.key())
		}
	}
}

// LeaseMapError reports the leases of a LeaseMap that could not be renewed
// or cancelled, each with its own error (LE.2.2's LeaseMapException). Those
// leases have been removed from the map. Match it with errors.As; errors.Is
// looks through every lease's error.
type LeaseMapError struct {
	Op     string           // "renew" or "cancel"
	Total  int              // leases in the call
	Failed map[*Lease]error // the leases that failed and why
}

func (e *LeaseMapError) Error() string {
	first := e.Errors()
	msg := fmt.Sprintf("%s %d of %d leases failed", e.Op, len(e.Failed), e.Total)
	if len(first) > 0 {
		msg += ": " + first[0].Error()
	}
	return msg
}

// Errors returns the leases' errors, ordered by lease fingerprint so that
// the order is stable.
func (e *LeaseMapError) Errors() []error {
	ls := make([]*Lease, 0, len(e.Failed))
	for l := range e.Failed {
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b *Lease) int { return compareKeys(a.key(), b.key()) })
	out := make([]error, len(ls))
	for i, l := range ls {
		out[i] = e.Failed[l]
	}
	return out
}

// Unwrap returns the leases' errors, so errors.Is(err, djinn.ErrUnknownLease)
// holds when some lease was unknown.
func (e *LeaseMapError) Unwrap() []error { return e.Errors() }

func compareKeys(a, b leaseKey) int {
	if c := slices.Compare(a.landlord[:], b.landlord[:]); c != 0 {
		return c
	}
	return slices.Compare(a.cookie[:], b.cookie[:])
}

// RenewAll renews every lease for its duration in one call to the landlord
// (LE.2.2). Each renewed lease's expiration becomes the time the request was
// sent plus its granted duration. Leases that fail are removed from the map
// and reported in a *LeaseMapError. If the call itself fails (the landlord
// cannot be reached) the error says so and the map is unchanged.
func (m *LeaseMap) RenewAll(ctx context.Context, c Connector) error {
	return m.renewAll(ctx, dialLandlord(c))
}

// begin takes the map's leases and dials their landlord; it returns no
// entries when the map is empty.
func (m *LeaseMap) begin(dial landlordDialer) ([]mapEntry, djinn.Ref, djinnpb.LandlordClient, []byte, error) {
	entries := m.snapshot()
	if len(entries) == 0 {
		return nil, djinn.Ref{}, nil, nil, nil
	}
	landlord := entries[0].lease.landlord
	lc, err := dial(landlord)
	if err != nil {
		return nil, landlord, nil, nil, err
	}
	cookies := make([]djinn.ID, len(entries))
	for i, e := range entries {
		cookies[i] = e.lease.cookie
	}
	return entries, landlord, lc, batch.PackCookies(cookies), nil
}

func (m *LeaseMap) renewAll(ctx context.Context, dial landlordDialer) error {
	entries, landlord, lc, cookies, err := m.begin(dial)
	if err != nil || len(entries) == 0 {
		return err
	}
	req := &djinnpb.RenewAllRequest{Cookies: cookies, DurationNanos: make([]int64, len(entries))}
	for i, e := range entries {
		req.DurationNanos[i] = int64(e.d)
	}
	sent := time.Now()
	resp, err := lc.RenewAll(ctx, req)
	if err != nil {
		return fromRPC(err)
	}
	granted, errs, err := renewResults(landlord, len(entries), resp)
	if err != nil {
		return err
	}
	failed := map[*Lease]error{}
	for i, g := range granted {
		l := entries[i].lease
		err := errs[i]
		if err == nil {
			err = checkGranted(landlord, g)
		}
		if err != nil {
			failed[l] = fmt.Errorf("renew %v: %w", l, err)
			continue
		}
		l.renewed(sent, g)
	}
	return m.failures("renew", len(entries), failed)
}

// CancelAll cancels every lease in one call to the landlord (LE.2.2). Leases
// that were cancelled stay in the map; those that could not be are removed
// and reported in a *LeaseMapError. If the call itself fails the error says
// so and the map is unchanged.
func (m *LeaseMap) CancelAll(ctx context.Context, c Connector) error {
	return m.cancelAll(ctx, dialLandlord(c))
}

func (m *LeaseMap) cancelAll(ctx context.Context, dial landlordDialer) error {
	entries, landlord, lc, cookies, err := m.begin(dial)
	if err != nil || len(entries) == 0 {
		return err
	}
	resp, err := lc.CancelAll(ctx, &djinnpb.CancelAllRequest{Cookies: cookies})
	if err != nil {
		return fromRPC(err)
	}
	errs, err := batch.ErrorsFrom(len(entries), resp.GetErrors())
	if err != nil {
		return djinn.Errorf(djinn.Internal, "landlord %s: %v", landlord.Endpoint, err)
	}
	failed := map[*Lease]error{}
	for i, err := range errs {
		if err != nil {
			l := entries[i].lease
			failed[l] = fmt.Errorf("cancel %v: %w", l, err)
		}
	}
	return m.failures("cancel", len(entries), failed)
}

func (m *LeaseMap) failures(op string, total int, failed map[*Lease]error) error {
	if len(failed) == 0 {
		return nil
	}
	m.removeFailed(failed)
	return &LeaseMapError{Op: op, Total: total, Failed: failed}
}

// renewResults checks a RenewAll answer for n leases and returns each
// lease's granted duration and error.
func renewResults(landlord djinn.Ref, n int, resp *djinnpb.RenewAllResponse) ([]time.Duration, []error, error) {
	if got := len(resp.GetGrantedNanos()); got != n {
		return nil, nil, djinn.Errorf(djinn.Internal, "landlord %s answered renewAll of %d leases with %d results",
			landlord.Endpoint, n, got)
	}
	errs, err := batch.ErrorsFrom(n, resp.GetErrors())
	if err != nil {
		return nil, nil, djinn.Errorf(djinn.Internal, "landlord %s: %v", landlord.Endpoint, err)
	}
	granted := make([]time.Duration, n)
	for i, g := range resp.GetGrantedNanos() {
		granted[i] = time.Duration(g)
	}
	return granted, errs, nil
}

// errorFromProto converts an in-band error (nil for success).
func errorFromProto(e *djinnpb.Error) error {
	if e == nil || e.GetCode() == 0 {
		return nil
	}
	return grpcerr.FromProto(e)
}
