package client

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Failure reports a lease that a Renewer stopped renewing before its desired
// expiration, and why: the landlord refused a renewal with a definite error
// (djinn.IsDefinite: the lease is unknown, the renewal denied, ...), or the
// lease expired while renewals kept failing with indefinite errors (Err then
// matches djinn.ErrUnknownLease and the last renewal's error).
type Failure struct {
	Lease *Lease
	Err   error
}

// RenewerOption configures a Renewer. A nil RenewerOption is ignored.
type RenewerOption func(*renewerConfig)

type renewerConfig struct {
	onFailure     func(Failure)
	onReached     func(*Lease)
	renewDuration time.Duration
	margin        time.Duration
	minBackoff    time.Duration
	maxBackoff    time.Duration
	callTimeout   time.Duration
}

// Renewer defaults.
const (
	DefaultRenewMargin = 10 * time.Second
	DefaultMinBackoff  = time.Second
	DefaultMaxBackoff  = time.Minute
	defaultCallTimeout = 30 * time.Second
	maxRenewBatch      = 1000
)

// WithFailureHandler sets the function told of every Failure. It is called
// from one goroutine of the Renewer, one failure at a time, never after
// Close returns. It may call the Renewer's methods except Close (which waits
// for it), and should return quickly. Without it failures are logged with
// slog.
func WithFailureHandler(f func(Failure)) RenewerOption {
	return func(c *renewerConfig) { c.onFailure = f }
}

// WithDesiredExpirationHandler sets the function told of every lease that
// leaves the Renewer because its desired expiration was reached (River's
// DesiredExpirationListener). It is called like the failure handler: from
// the same goroutine, one notice at a time and in the order they arose,
// never after Close returns. Without it such leases leave quietly.
func WithDesiredExpirationHandler(f func(*Lease)) RenewerOption {
	return func(c *renewerConfig) { c.onReached = f }
}

// WithRenewDuration sets the duration each renewal asks for (default
// djinn.Any: the landlord's choice). A renewal never asks past the lease's
// desired expiration.
func WithRenewDuration(d time.Duration) RenewerOption {
	return func(c *renewerConfig) { c.renewDuration = d }
}

// WithRenewMargin sets how long before expiry a lease is renewed at the
// latest, when half its granted duration leaves less than that (default
// DefaultRenewMargin). It also widens batches: leases of a landlord being
// renewed whose own renewal is due within the margin go in the same call.
func WithRenewMargin(d time.Duration) RenewerOption {
	return func(c *renewerConfig) { c.margin = d }
}

// WithRetryBackoff sets the wait after a renewal fails with an indefinite
// error: min after the first failure, doubling up to max.
func WithRetryBackoff(min, max time.Duration) RenewerOption {
	return func(c *renewerConfig) { c.minBackoff, c.maxBackoff = min, max }
}

// Renewer renews leases until their desired expirations, as LE.3.1's
// renewal class and River's LeaseRenewalManager do: hand it a lease and say
// until when it is needed, and it renews in the background and tells you
// only if it could not.
//
// Scheduling. Each renewal is timed from when its request was sent (LE.2.3):
// a lease granted g at sent is renewed at sent + g/2, or earlier so that at
// least the renew margin is left before it expires, but never before
// sent + g/4. An indefinite failure (unreachable landlord) is retried after
// a doubling backoff, and always once more in the second half of the time
// left; a lease that expires meanwhile is reported. A definite failure stops
// the lease's renewal at once and is reported. All due leases of one landlord
// are renewed with one RenewAll per round.
//
// A lease leaves the Renewer when its desired expiration is reached — also a
// lease granted past it, which is never renewed — and the desired-expiration
// handler hears of it then; when it fails (reported); or by Remove or
// Cancel. Expiration answers djinn.ErrUnknownLease once it has left. The Renewer owns its
// goroutines: Close stops them and waits. It is safe for concurrent use.
type Renewer struct {
	dial   landlordDialer
	cfg    renewerConfig
	ctx    context.Context // cancelled by Close; owned, never a caller's
	cancel context.CancelFunc
	wake   chan struct{} // pokes the loop; buffered 1
	signal chan struct{} // pokes the notifier; buffered 1
	done   chan struct{} // closed when every goroutine has stopped
	wg     sync.WaitGroup

	mu      sync.Mutex
	leases  map[leaseKey]*managed // guarded by mu
	notices []notice              // guarded by mu: waiting for the handlers
	closed  bool                  // guarded by mu
}

// notice is a failure, or a lease that reached its desired expiration.
type notice struct {
	failure Failure
	reached *Lease
}

// managed is a lease under management. Fields are guarded by Renewer.mu.
type managed struct {
	lease    *Lease
	until    time.Time // desired expiration
	next     time.Time // when to renew (or retry)
	attempts int       // consecutive indefinite failures
	lastErr  error
	inflight bool
}

// NewRenewer returns a Renewer that reaches landlords through c. It fails
// only on bad options.
func NewRenewer(c Connector, opts ...RenewerOption) (*Renewer, error) {
	return newRenewer(dialLandlord(c), opts...)
}

func newRenewer(dial landlordDialer, opts ...RenewerOption) (*Renewer, error) {
	cfg := renewerConfig{
		renewDuration: djinn.Any, margin: DefaultRenewMargin,
		minBackoff: DefaultMinBackoff, maxBackoff: DefaultMaxBackoff, callTimeout: defaultCallTimeout,
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := djinn.CheckLeaseDuration("renew duration", cfg.renewDuration); err != nil {
		return nil, err
	}
	if cfg.margin < 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "renew margin %s: negative", cfg.margin)
	}
	if cfg.minBackoff <= 0 || cfg.maxBackoff < cfg.minBackoff {
		return nil, djinn.Errorf(djinn.InvalidArgument, "retry backoff %s to %s: want 0 < min <= max",
			cfg.minBackoff, cfg.maxBackoff)
	}
	if cfg.onFailure == nil {
		cfg.onFailure = func(f Failure) {
			slog.Warn("djinn lease renewal failed", "lease", f.Lease, "err", f.Err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Renewer{
		dial: dial, cfg: cfg, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), signal: make(chan struct{}, 1), done: make(chan struct{}),
		leases: map[leaseKey]*managed{},
	}
	r.wg.Add(1)
	go r.notifier()
	go r.run()
	return r, nil
}

// Renew manages l until the desired expiration until (djinn.EndOfTime:
// forever; the zero time is refused with djinn.ErrInvalidArgument). A
// lease already managed gets the new desired expiration.
//
// A lease new to the Renewer has its landlord reached at once (a
// connection, no call): through a Pool, that has the pool learn the
// landlord's cluster while the member that granted the lease still
// answers, so that its renewals, due much later, go to the other members
// if that one has died meanwhile.
func (r *Renewer) Renew(l *Lease, until time.Time) error {
	if l == nil {
		return djinn.Errorf(djinn.InvalidArgument, "lease: missing")
	}
	if err := checkUntil(until); err != nil {
		return err
	}
	added, err := r.manage(l, until)
	if added {
		_, _ = r.dial(l.landlord) // an error comes again at the renewal
	}
	return err
}

// manage records l and its desired expiration; added reports whether l
// was not managed before.
func (r *Renewer) manage(l *Lease, until time.Time) (added bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false, errClosed("renewer")
	}
	if m, ok := r.leases[l.key()]; ok {
		m.lease, m.until = l, until
	} else {
		now := time.Now()
		r.leases[l.key()] = &managed{lease: l, until: until, next: r.renewTime(now, l.Expiration())}
		added = true
	}
	r.poke()
	return added, nil
}

// RenewFor manages l for d from now (positive, or djinn.Forever).
func (r *Renewer) RenewFor(l *Lease, d time.Duration) error {
	if d <= 0 {
		return djinn.Errorf(djinn.InvalidArgument, "renew for %s: must be positive or Forever", djinn.FormatDuration(d))
	}
	return r.Renew(l, djinn.AddDuration(time.Now(), d))
}

// checkUntil refuses the zero time as a desired expiration: it is always
// past, so the lease would leave at once, and it is what a desired
// expiration left unset reads as.
func checkUntil(until time.Time) error {
	if until.IsZero() {
		return djinn.Errorf(djinn.InvalidArgument, "desired expiration: the zero time: give a time, or djinn.EndOfTime to renew for ever")
	}
	return nil
}

func (r *Renewer) unknown(l *Lease) error {
	return djinn.Errorf(djinn.UnknownLease, "%v: not managed by this renewer", l)
}

// Expiration returns l's desired expiration: when the Renewer lets it
// expire (not l.Expiration, when it expires unless renewed). Once that is
// reached, l has left the Renewer: djinn.ErrUnknownLease.
func (r *Renewer) Expiration(l *Lease) (time.Time, error) {
	if l == nil {
		return time.Time{}, djinn.Errorf(djinn.InvalidArgument, "lease: missing")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.leases[l.key()]
	if !ok {
		return time.Time{}, r.unknown(l)
	}
	return m.until, nil
}

// SetExpiration changes l's desired expiration (not the zero time, as for
// Renew).
func (r *Renewer) SetExpiration(l *Lease, until time.Time) error {
	if l == nil {
		return djinn.Errorf(djinn.InvalidArgument, "lease: missing")
	}
	if err := checkUntil(until); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.leases[l.key()]
	if !ok {
		return r.unknown(l)
	}
	m.until = until
	r.poke()
	return nil
}

// Remove stops managing l without cancelling it: it expires when it will.
func (r *Renewer) Remove(l *Lease) error {
	if l == nil {
		return djinn.Errorf(djinn.InvalidArgument, "lease: missing")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.leases[l.key()]; !ok {
		return r.unknown(l)
	}
	delete(r.leases, l.key())
	return nil
}

// Cancel stops managing l and cancels it at its landlord. A lease the
// Renewer does not manage gets djinn.ErrUnknownLease and is not cancelled.
func (r *Renewer) Cancel(ctx context.Context, l *Lease) error {
	if err := r.Remove(l); err != nil {
		return err
	}
	lc, err := r.dial(l.landlord)
	if err != nil {
		return err
	}
	_, err = lc.Cancel(ctx, &djinnpb.CancelRequest{Cookie: l.cookie[:]})
	return fromRPC(err)
}

// Close stops renewing and waits for the Renewer's goroutines. Leases are
// not cancelled; they expire when they will. Notices not yet handed to the
// handlers are dropped.
func (r *Renewer) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	<-r.done
	return nil
}

// Done is closed when the Renewer has stopped.
func (r *Renewer) Done() <-chan struct{} { return r.done }

func (r *Renewer) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// renewTime returns when to renew a lease expiring at exp whose last
// renewal was sent at sent.
func (r *Renewer) renewTime(sent, exp time.Time) time.Time {
	if !exp.Before(djinn.EndOfTime) || !exp.After(sent) {
		return exp
	}
	g := exp.Sub(sent)
	at := sent.Add(g / 2)
	if early := exp.Add(-r.cfg.margin); early.Before(at) {
		at = early
	}
	if floor := sent.Add(g / 4); at.Before(floor) {
		at = floor
	}
	return at
}

// retryTime returns when to retry after the attempts-th consecutive
// indefinite failure at now of a lease expiring at exp.
func (r *Renewer) retryTime(now, exp time.Time, attempts int) time.Time {
	d := r.cfg.minBackoff
	for i := 1; i < attempts && d < r.cfg.maxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.cfg.maxBackoff)
	at := now.Add(d)
	if last := now.Add(exp.Sub(now) / 2); last.Before(at) {
		at = last
	}
	if floor := now.Add(r.cfg.minBackoff / 4); at.Before(floor) {
		at = floor
	}
	return at
}

// run is the Renewer's loop: it starts due renewals and sleeps until the
// next thing to do.
func (r *Renewer) run() {
	defer func() {
		r.wg.Wait()
		close(r.done)
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next, ok := r.step(time.Now())
		var tc <-chan time.Time
		if ok {
			timer.Reset(time.Until(next))
			tc = timer.C
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.wake:
		case <-tc:
		}
	}
}

// renewItem is one lease in a batch, captured when the batch was formed.
type renewItem struct {
	m     *managed
	lease *Lease
	until time.Time
	exp   time.Time
}

// step expires what has expired, starts the renewals due at now, and
// returns when it next has something to do.
func (r *Renewer) step(now time.Time) (next time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return time.Time{}, false
	}
	batches := map[[32]byte][]renewItem{}
	needs := func(m *managed) (time.Time, bool) {
		exp := m.lease.Expiration()
		return exp, exp.Before(m.until)
	}
	for k, m := range r.leases {
		if !m.until.After(now) && !m.lease.Expiration().Before(m.until) {
			// Desired expiration reached (in flight or not: a renewal
			// under way is ignored when it ends).
			delete(r.leases, k)
			r.notices = append(r.notices, notice{reached: m.lease})
			continue
		}
		if m.inflight {
			continue
		}
		exp, need := needs(m)
		if !exp.After(now) {
			delete(r.leases, k)
			if need {
				r.notices = append(r.notices, notice{failure: Failure{Lease: m.lease, Err: expiredError(m.lease, m.lastErr)}})
			}
			continue
		}
		if need && !m.next.After(now) {
			lk := m.lease.landlord.Key()
			batches[lk] = append(batches[lk], renewItem{m: m, lease: m.lease, until: m.until, exp: exp})
			m.inflight = true
		}
	}
	// Leases due soon ride along with their landlord's batch.
	soon := now.Add(r.cfg.margin)
	for _, m := range r.leases {
		lk := m.lease.landlord.Key()
		if _, ok := batches[lk]; !ok || m.inflight || m.next.After(soon) {
			continue
		}
		if exp, need := needs(m); need {
			batches[lk] = append(batches[lk], renewItem{m: m, lease: m.lease, until: m.until, exp: exp})
			m.inflight = true
		}
	}
	for _, items := range batches {
		for len(items) > 0 {
			n := min(len(items), maxRenewBatch)
			r.wg.Add(1)
			go r.renewBatch(items[:n:n])
			items = items[n:]
		}
	}
	for _, m := range r.leases {
		if m.inflight {
			continue
		}
		exp, need := needs(m)
		t := exp
		if need && m.next.Before(t) {
			t = m.next
		}
		if m.until.Before(t) {
			t = m.until
		}
		if !ok || t.Before(next) {
			next, ok = t, true
		}
	}
	if len(r.notices) > 0 {
		select {
		case r.signal <- struct{}{}:
		default:
		}
	}
	return next, ok
}

// expiredError is the error of a lease that expired before the Renewer
// could renew it.
func expiredError(l *Lease, last error) error {
	err := djinn.Errorf(djinn.UnknownLease, "%v: expired before it could be renewed", l)
	if last == nil {
		return err
	}
	return fmt.Errorf("%w: last attempt: %w", err, last)
}

// renewBatch renews leases of one landlord in one call and records the
// outcome.
func (r *Renewer) renewBatch(items []renewItem) {
	defer r.wg.Done()
	landlord := items[0].lease.landlord
	sent := time.Now()
	req := &djinnpb.RenewAllRequest{Cookies: make([]byte, 0, 16*len(items)), DurationNanos: make([]int64, len(items))}
	deadline := sent.Add(r.cfg.callTimeout)
	latest := items[0].exp
	for i, it := range items {
		d := r.cfg.renewDuration
		if it.until.Before(djinn.EndOfTime) {
			if left := it.until.Sub(sent); d == djinn.Any || d > left {
				d = max(left, 0)
			}
		}
		req.Cookies = append(req.Cookies, it.lease.cookie[:]...)
		req.DurationNanos[i] = int64(d)
		latest = later(latest, it.exp)
	}
	if latest.Before(deadline) {
		deadline = latest // no lease can be saved after that
	}
	ctx, cancel := context.WithDeadline(r.ctx, deadline)
	var (
		granted []time.Duration
		errs    []error
	)
	lc, err := r.dial(landlord)
	if err == nil {
		var resp *djinnpb.RenewAllResponse
		resp, err = lc.RenewAll(ctx, req)
		err = fromRPC(err)
		if err == nil {
			granted, errs, err = renewResults(landlord, len(items), resp)
		}
	}
	cancel()
	now := time.Now()

	r.mu.Lock()
	defer r.mu.Unlock()
	for i, it := range items {
		e := err
		var g time.Duration
		if e == nil {
			g = granted[i]
			if e = errs[i]; e == nil {
				e = checkGranted(landlord, g)
			}
			if e == nil {
				it.lease.renewed(sent, g)
			}
		}
		m := it.m
		if r.leases[it.lease.key()] != m {
			continue // removed meanwhile
		}
		m.inflight = false
		if e == nil && m.lease != it.lease {
			m.lease.renewed(sent, g) // Renew gave another *Lease for this lease meanwhile
		}
		switch {
		case e == nil:
			m.attempts, m.lastErr = 0, nil
			m.next = r.renewTime(sent, m.lease.Expiration())
		case r.closed:
		case djinn.IsDefinite(e):
			delete(r.leases, it.lease.key())
			r.notices = append(r.notices, notice{failure: Failure{Lease: m.lease, Err: fmt.Errorf("renew %v: %w", m.lease, e)}})
		default:
			m.attempts++
			m.lastErr = e
			m.next = r.retryTime(now, m.lease.Expiration(), m.attempts)
		}
	}
	r.poke()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// notifier hands failures and desired expirations reached to the
// handlers, one at a time.
func (r *Renewer) notifier() {
	defer r.wg.Done()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.signal:
		}
		for {
			r.mu.Lock()
			ns := r.notices
			r.notices = nil
			r.mu.Unlock()
			if len(ns) == 0 {
				break
			}
			for _, n := range ns {
				if r.ctx.Err() != nil {
					return
				}
				switch {
				case n.reached == nil:
					r.cfg.onFailure(n.failure)
				case r.cfg.onReached != nil:
					r.cfg.onReached(n.reached)
				}
			}
		}
	}
}
