package lease

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Proposer appends commands to the replicated log. Propose blocks until the
// command is applied on this node and returns the state machine's result;
// VerifyLeader confirms leadership with a quorum (a round trip);
// LeaderLease reports, without blocking, whether this node holds a leader
// lease: no other member can have been elected since a quorum last
// confirmed it leads. All are safe for concurrent use.
type Proposer interface {
	Propose(ctx context.Context, cmd *statepb.Command) (any, error)
	VerifyLeader() error
	LeaderLease() bool
}

// Config tunes a Lessor. Zero values take the defaults.
type Config struct {
	// Slack is how far past a granted expiration a logged horizon reaches;
	// it bounds how much longer than granted a lease may live after a
	// failover or restart, and how often busy leases are checkpointed.
	// Default 30s.
	Slack time.Duration
	// Grace is what a new leader adds to live leases before expiring any:
	// one election timeout. Default 1s.
	Grace time.Duration
	// ExpiryBatch is the most leases one expiry command ends (default 1000);
	// ExpiryRate the most expiry commands a second (default 20).
	ExpiryBatch int
	ExpiryRate  int
	// Now is the clock; nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Lessor is the leader side of the lease table: it renews leases from
// memory, checkpoints horizons and expires leases. Renew and Cancel are safe
// for concurrent use; Run drives the loops while this node leads.
type Lessor struct {
	table  *Table
	log    Proposer
	cfg    Config
	active atomic.Bool
	// ready is closed while active; a new one waits for the next term.
	ready atomic.Pointer[chan struct{}]

	// Counters for metrics.
	Renewals     atomic.Uint64
	Expired      atomic.Uint64
	Cancelled    atomic.Uint64
	HorizonSyncs atomic.Uint64 // renewals that waited for a horizon write
	Checkpoints  atomic.Uint64 // horizons raised ahead of need
	// Confirmations counts answers from memory that waited for a quorum
	// round trip: no leader lease held when they were read.
	Confirmations atomic.Uint64
}

// NewLessor returns a lessor for t that proposes through p.
func NewLessor(t *Table, p Proposer, cfg Config) *Lessor {
	if cfg.Slack <= 0 {
		cfg.Slack = 30 * time.Second
	}
	cfg.Slack = max(cfg.Slack, 4*time.Millisecond) // the checkpoint ticks every Slack/4
	if cfg.Grace <= 0 {
		cfg.Grace = time.Second
	}
	if cfg.ExpiryBatch <= 0 {
		cfg.ExpiryBatch = 1000
	}
	if cfg.ExpiryRate <= 0 {
		cfg.ExpiryRate = 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Lessor{table: t, log: p, cfg: cfg}
	ready := make(chan struct{})
	l.ready.Store(&ready)
	return l
}

// Ready returns a channel closed once this lessor serves (it leads and has
// promoted its leases). Leader work that reads lease expirations waits
// for it.
func (l *Lessor) Ready() <-chan struct{} { return *l.ready.Load() }

// Table returns the lessor's table.
func (l *Lessor) Table() *Table { return l.table }

// Horizon returns the horizon to log with a lease granted to expire at exp.
func (l *Lessor) Horizon(exp time.Time) int64 { return horizonOf(toNanos(exp), l.cfg.Slack) }

// Active reports whether this lessor serves renewals (it leads and has
// promoted its leases).
func (l *Lessor) Active() bool { return l.active.Load() }

func (l *Lessor) checkActive() error { return l.Serving("lessor") }

// Serving refuses, with Unavailable naming what, a call on a node that is
// not serving as leader: only the leader knows whether a lease is still
// alive (renewals are not logged), so services whose resources are leased
// must not answer from a follower's stale view.
func (l *Lessor) Serving(what string) error {
	if !l.active.Load() {
		return djinn.Errorf(djinn.Unavailable, "%s not ready: this node is not the serving leader (its cluster still electing one, or the new leader taking over the leases); retry once the server's /readyz answers ready", what)
	}
	return nil
}

// Run serves as lessor until ctx ends: it promotes the table (every live
// lease gets max(horizon, now+grace)), then runs the expiry and checkpoint
// loops. Call it from the node's leader hook.
func (l *Lessor) Run(ctx context.Context) {
	l.table.Promote(l.cfg.Now(), l.cfg.Grace)
	l.active.Store(true)
	close(*l.ready.Load())
	defer func() {
		l.active.Store(false)
		next := make(chan struct{})
		l.ready.Store(&next)
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.checkpointLoop(ctx)
	}()
	l.expiryLoop(ctx)
	<-done
}

// Renew renews one lease (LE.2.2) and returns the granted duration.
func (l *Lessor) Renew(ctx context.Context, cookie djinn.ID, d time.Duration) (time.Duration, error) {
	res := l.RenewAll(ctx, []djinn.ID{cookie}, []time.Duration{d})
	return res[0].Granted, res[0].Err
}

// Remaining returns how long the lease with cookie has left, and what it
// covers; UnknownLease when it is unknown, expired or cancelled. Only the
// leader knows (renewals are not logged), so a follower refuses.
func (l *Lessor) Remaining(cookie djinn.ID) (time.Duration, Owner, error) {
	if err := l.checkActive(); err != nil {
		return 0, Owner{}, err
	}
	now := l.cfg.Now()
	info, ok := l.table.Lookup(cookie, now)
	if !ok {
		err := unknownLease(cookie)
		if settled := l.settleLapsed(context.Background(), []djinn.ID{cookie}, []*error{&err}); len(settled) == 0 {
			l.confirmUnknown([]*error{&err})
		}
		return 0, Owner{}, err
	}
	// A deposed leader that has not yet heard of its successor must answer
	// neither way: the successor may have granted or cancelled the lease.
	if err := l.confirmLeader(); err != nil {
		return 0, Owner{}, err
	}
	if !info.Expires.Before(djinn.EndOfTime) {
		return djinn.Forever, info.Owner, nil
	}
	return info.Expires.Sub(now), info.Owner, nil
}

// RenewAll renews leases in one pass: cookies[i] for durations[i]. Leases
// whose new expiration passes their horizon share one horizon write.
func (l *Lessor) RenewAll(ctx context.Context, cookies []djinn.ID, durations []time.Duration) []RenewResult {
	if err := l.checkActive(); err != nil {
		out := make([]RenewResult, len(cookies))
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	out, pending := l.table.Renew(l.cfg.Now(), l.cfg.Slack, principal.From(ctx), cookies, durations)
	if len(pending.Horizons) > 0 {
		l.HorizonSyncs.Add(uint64(len(pending.Horizons)))
		if _, err := l.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LeaseHorizon{LeaseHorizon: &statepb.LeaseHorizon{Entries: pending.Horizons}}}); err != nil {
			// The renewal failed: the lease keeps the expiration it had
			// (LE.2.2), unless another renewal changed it meanwhile.
			l.table.Unrenew(pending)
			for _, i := range pending.Indexes {
				out[i] = RenewResult{Err: err}
			}
		}
	}
	errs := make([]*error, len(out))
	for i := range out {
		errs[i] = &out[i].Err
	}
	settled := l.settleLapsed(ctx, cookies, errs)
	l.confirmFromMemory(out, mergeSorted(pending.Indexes, settled))
	for _, r := range out {
		if r.Err == nil {
			l.Renewals.Add(1)
		}
	}
	return out
}

// Confirm confirms, after a service read its state for an answer that
// must reflect every write acknowledged before it was asked (a fence's
// validity, a transaction's outcome), that this node still serves as
// leader: a deposed leader that has not yet heard of its successor answers
// Unavailable, naming the leader when known, instead of from a stale
// state. Under the leader lease it costs nothing; otherwise a quorum
// round trip.
func (l *Lessor) Confirm(what string) error {
	if err := l.Serving(what); err != nil {
		return err
	}
	return l.confirmLeader()
}

// ConfirmRead is Confirm after a read that answered err: an answer drawn
// from this node's state — a success, or "not found" (no such object,
// unknown lease, transaction or event) — is confirmed, since a deposed
// leader may not know a resource its successor created; Confirm's error,
// if any, replaces it. Any other error (a bad argument, say) is returned
// as it is.
func (l *Lessor) ConfirmRead(what string, err error) error {
	switch djinn.KindOf(err) {
	case "", djinn.NoSuchObject, djinn.UnknownLease, djinn.UnknownTransaction, djinn.UnknownEvent:
		if cerr := l.Confirm(what); cerr != nil {
			return cerr
		}
	}
	return err
}

// confirmLeader confirms that this node still leads, after it read its
// table for an answer: at once while it holds a leader lease (the lease
// was valid after the read, so no successor existed at the read), with a
// quorum round trip otherwise. It returns why not — Unavailable, naming the
// leader when known — and the caller asks again.
func (l *Lessor) confirmLeader() error {
	if l.log.LeaderLease() {
		return nil
	}
	l.Confirmations.Add(1)
	return l.log.VerifyLeader()
}

// confirmFromMemory confirms leadership before renewals answered from
// memory leave: a deposed leader that has not yet heard of its successor
// must neither renew a lease the successor cancelled or expired nor deny
// one it granted. The answers are the positive ones that wrote nothing
// (logged ones are confirmed by their commit: logged lists their indexes)
// and the UnknownLease ones not settled by a logged expiry; logged is
// ascending. When this node no longer leads, each becomes
// the error saying so. The renewal may have changed this node's table;
// its leases are the successor's to decide from then on.
func (l *Lessor) confirmFromMemory(out []RenewResult, logged []int) {
	fromMemory := func(i int) bool {
		if _, wrote := slices.BinarySearch(logged, i); wrote { // ascending
			return false
		}
		return out[i].Err == nil || errors.Is(out[i].Err, djinn.ErrUnknownLease)
	}
	var err error
	confirmed := false
	for i := range out {
		if !fromMemory(i) {
			continue
		}
		if !confirmed {
			err, confirmed = l.confirmLeader(), true
		}
		if err == nil {
			return
		}
		out[i].Err = err
	}
}

// settleLapsed logs the expiry of the leases among cookies whose answer
// (errs, one per cookie) is UnknownLease because this node found them
// expired while their expiry is not yet applied, before those answers
// leave. A successor promotes every lease still in the log to its horizon,
// so an expiry known only to this node's clock would come back to life
// after a failover: a lease its holder was told is gone would be alive
// again. The commit also confirms this node leads, so the answers it
// settles need no other confirmation: it returns their positions,
// ascending. When the expiry is not logged, those answers become the
// error saying why (Unavailable while no leader takes it), and the caller
// asks again.
func (l *Lessor) settleLapsed(ctx context.Context, cookies []djinn.ID, errs []*error) []int {
	now := l.cfg.Now()
	var (
		lapsed  [][]byte
		settled []int
	)
	for i, e := range errs {
		if errors.Is(*e, djinn.ErrUnknownLease) && l.table.Lapsed(cookies[i], now) {
			lapsed = append(lapsed, cookies[i][:])
			settled = append(settled, i)
		}
	}
	if len(lapsed) == 0 {
		return nil
	}
	if _, err := l.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LeaseExpire{LeaseExpire: &statepb.LeaseExpire{Cookies: lapsed}}}); err != nil {
		for _, i := range settled {
			*errs[i] = err
		}
		return settled
	}
	l.Expired.Add(uint64(len(lapsed)))
	return settled
}

// mergeSorted returns the ascending union of two ascending lists.
func mergeSorted(a, b []int) []int {
	if len(b) == 0 {
		return a
	}
	out := append(slices.Clone(a), b...)
	slices.Sort(out)
	return slices.Compact(out)
}

// confirmUnknown confirms leadership before UnknownLease answers among
// errs leave (confirmAnswers).
func (l *Lessor) confirmUnknown(errs []*error) {
	var unknown []*error
	for _, e := range errs {
		if errors.Is(*e, djinn.ErrUnknownLease) {
			unknown = append(unknown, e)
		}
	}
	l.confirmAnswers(unknown)
}

// confirmAnswers confirms leadership once for answers read from this
// node's table; when it no longer leads each becomes the error saying so.
// Nothing is asked when there is no such answer.
func (l *Lessor) confirmAnswers(errs []*error) {
	if len(errs) == 0 {
		return
	}
	if err := l.confirmLeader(); err != nil {
		for _, e := range errs {
			*e = err
		}
	}
}

// Cancel cancels leases (LE.2.2): one error (or nil) per cookie, and
// UnknownLease for expired, cancelled or unknown leases.
func (l *Lessor) Cancel(ctx context.Context, cookies []djinn.ID) []error {
	errs := make([]error, len(cookies))
	if err := l.checkActive(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	now := l.cfg.Now()
	var (
		send [][]byte
		idx  []int
	)
	for i, c := range cookies {
		if !l.table.Alive(c, now) {
			errs[i] = unknownLease(c)
			continue
		}
		send = append(send, c[:])
		idx = append(idx, i)
	}
	ptrs := pointers(errs)
	for _, i := range slices.Backward(l.settleLapsed(ctx, cookies, ptrs)) {
		ptrs = slices.Delete(ptrs, i, i+1)
	}
	l.confirmUnknown(ptrs)
	if len(send) == 0 {
		return errs
	}
	res, err := l.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LeaseCancel{LeaseCancel: &statepb.LeaseCancel{Cookies: send}}})
	for j, i := range idx {
		switch {
		case err != nil:
			errs[i] = err
		default:
			if applied, ok := res.([]error); ok && j < len(applied) {
				errs[i] = applied[j]
			}
		}
		if errs[i] == nil {
			l.Cancelled.Add(1)
		}
	}
	return errs
}

// expiryLoop proposes the expiry of leases past their expiration, in
// batches of at most ExpiryBatch, at most ExpiryRate batches a second, each
// after confirming leadership.
func (l *Lessor) expiryLoop(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	pace := time.Second / time.Duration(l.cfg.ExpiryRate)
	for {
		now := l.cfg.Now()
		batch, next := l.table.PopExpired(now, l.cfg.ExpiryBatch)
		if batch.Len() > 0 {
			if err := l.expire(ctx, batch); err != nil {
				if ctx.Err() != nil {
					return
				}
				l.cfg.Logger.Warn("lease expiry failed; will retry", "leases", batch.Len(), "err", err)
			}
			next = now.Add(pace).UnixNano()
		}
		wait := time.Hour
		if next != never {
			wait = time.Unix(0, next).Sub(l.cfg.Now())
			if batch.Len() > 0 && wait < pace {
				wait = pace
			}
		}
		if wait < 0 {
			wait = 0
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-l.table.Wake():
		case <-timer.C:
		}
	}
}

// expire proposes the expiry of a batch after confirming leadership; a
// batch the log does not take goes back on the heap.
func (l *Lessor) expire(ctx context.Context, batch Expiring) error {
	err := l.log.VerifyLeader()
	if err == nil {
		_, err = l.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LeaseExpire{LeaseExpire: &statepb.LeaseExpire{Cookies: batch.Cookies()}}})
	}
	if err != nil {
		l.table.Requeue(batch)
		return err
	}
	l.Expired.Add(uint64(batch.Len()))
	return nil
}

// checkpointLoop raises the horizons of leases whose live expiration came
// within Slack/2 of their horizon, every Slack/4, so that renewals seldom
// wait for a horizon write.
func (l *Lessor) checkpointLoop(ctx context.Context) {
	tick := time.NewTicker(l.cfg.Slack / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		entries := l.table.DueHorizons(l.cfg.Now(), l.cfg.Slack)
		for len(entries) > 0 && ctx.Err() == nil {
			n := min(len(entries), 4096)
			_, err := l.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LeaseHorizon{LeaseHorizon: &statepb.LeaseHorizon{Entries: entries[:n]}}})
			if err != nil {
				l.cfg.Logger.Warn("lease checkpoint failed", "leases", n, "err", err)
				break
			}
			l.Checkpoints.Add(uint64(n))
			entries = entries[n:]
		}
	}
}

// pointers returns pointers to the elements of errs.
func pointers(errs []error) []*error {
	out := make([]*error, len(errs))
	for i := range errs {
		out[i] = &errs[i]
	}
	return out
}
