package renewal

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// renewer is the leader's renewal loop: it takes due client leases from the
// schedule, renews them at their landlords in batches, and records the
// outcomes in the log. Successful renewals are recorded in batches by the
// recorder; leases that must leave their sets are ended by one command per
// pass.
type renewer struct {
	s     *Service
	calls chan struct{} // one token per renewal call in flight
	wg    sync.WaitGroup

	mu    sync.Mutex
	keys  []byte // renewals to record: 48-byte keys back to back
	exps  []int64
	flush chan struct{}
}

func newRenewer(s *Service) *renewer {
	return &renewer{s: s, calls: make(chan struct{}, s.cfg.MaxCalls), flush: make(chan struct{}, 1)}
}

// maxTake bounds the client leases taken in one pass.
const maxTake = 1 << 16

func (r *renewer) run(ctx context.Context) {
	st := r.s.state
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.recordLoop(ctx)
	}()
	defer r.wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	window := int64(r.s.cfg.Window)
	for {
		now := r.s.now()
		w, next := st.take(now.UnixNano(), window, maxTake)
		if len(w.ends) > 0 {
			r.end(ctx, w.ends)
		}
		for ll, rs := range w.renew {
			for len(rs) > 0 {
				n := min(len(rs), r.s.cfg.RenewBatch)
				if !r.call(ctx, ll.ref, rs[:n]) {
					return
				}
				rs = rs[n:]
			}
		}
		wait := time.Hour
		if next != never {
			wait = time.Duration(next - r.s.now().UnixNano())
		}
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-st.wake:
		case <-timer.C:
		}
	}
}

// call renews one batch in the background, waiting for a call slot; it
// returns false when ctx ended first.
func (r *renewer) call(ctx context.Context, ll djinn.Ref, batch []renewal) bool {
	select {
	case r.calls <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	r.wg.Add(1)
	go func() {
		defer func() {
			<-r.calls
			r.wg.Done()
		}()
		r.renew(ctx, ll, batch)
	}()
	return true
}

func (r *renewer) renew(ctx context.Context, ll djinn.Ref, batch []renewal) {
	if plantedSkipsRenewals {
		batch = slices.DeleteFunc(batch, func(b renewal) bool { return b.cookie[0]%4 == 0 })
		if len(batch) == 0 {
			return
		}
	}
	cookies := make([]djinn.ID, len(batch))
	durations := make([]time.Duration, len(batch))
	for i, b := range batch {
		cookies[i], durations[i] = b.cookie, b.request
	}
	// A call that hangs must not spend the batch's last chance: it gets
	// at most half the time its soonest lease has left (at least a
	// second), so a retry on a new connection can still save it.
	sent := r.s.now()
	timeout := r.s.cfg.CallTimeout
	for _, b := range batch {
		timeout = min(timeout, max(time.Duration(b.actual-sent.UnixNano())/2, time.Second))
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	granted, errs, callErr := r.s.cfg.Landlords.RenewAll(cctx, ll, cookies, durations)
	cancel()
	r.s.Calls.Add(1)
	for _, b := range batch {
		if b.probe {
			r.s.Probes.Add(1)
		}
	}
	if ctx.Err() != nil {
		return // leadership ended: the next leader starts over
	}
	var ends []*statepb.RenewalEnding
	r.mu.Lock()
	for i, b := range batch {
		err := callErr
		if err == nil && i < len(errs) {
			err = errs[i]
		}
		if err == nil && i >= len(granted) {
			err = &djinnpb.Error{Code: 13, Kind: string(djinn.Internal), Message: "landlord answered fewer leases than asked"}
		}
		ok := err == nil || err.GetCode() == 0
		var exp int64
		if ok {
			exp = nanos(djinn.AddDuration(sent, granted[i]))
		}
		switch {
		case b.probe && ok && exp >= b.actual:
			// Alive, and its recorded expiration still holds: nothing
			// to record.
			r.s.state.probed(b, true, sent.UnixNano(), r.s.now().UnixNano())
		case ok:
			// Renewed, or probed and found to expire sooner than
			// recorded: recorded either way.
			r.keys = append(r.keys, b.key[:]...)
			r.exps = append(r.exps, exp)
		case djinn.IsDefinite(djinn.Kind(err.GetKind())):
			ends = append(ends, &statepb.RenewalEnding{Key: b.key[:], Reason: statepb.RenewalEndReason_RENEWAL_END_REASON_DEFINITE, Error: err})
		case b.probe:
			// Unreachable, say: no news. The renewal, when due, retries.
			r.s.state.probed(b, false, 0, r.s.now().UnixNano())
		default:
			r.s.Retried.Add(1)
			attempts := r.s.state.attempts(b)
			now := r.s.now()
			r.s.state.retry(b, err, now.Add(r.backoff(attempts, time.Duration(b.actual-now.UnixNano()))).UnixNano())
		}
	}
	n := len(r.exps)
	r.mu.Unlock()
	if n > 0 {
		select {
		case r.flush <- struct{}{}:
		default:
		}
	}
	if len(ends) > 0 {
		r.end(ctx, ends)
	}
}

// backoff returns how long to wait before retrying a renewal that failed
// attempts times in a row, left before the lease expires: exponential with
// jitter, but at most half of what is left (and no less than MinRetry for
// that), so that the lease is tried again while it can still be saved
// (LR.2: retry until the lease would otherwise be removed).
func (r *renewer) backoff(attempts int, left time.Duration) time.Duration {
	d := r.s.cfg.MinRetry << min(attempts, 20)
	if d <= 0 || d > r.s.cfg.MaxRetry {
		d = r.s.cfg.MaxRetry
	}
	d = d/2 + rand.N(d/2+1)
	return min(d, max(left/2, r.s.cfg.MinRetry))
}

// end proposes the removal of client leases; what the log does not take
// is looked at again shortly.
func (r *renewer) end(ctx context.Context, ends []*statepb.RenewalEnding) {
	_, err := r.s.log.Propose(ctx, &statepb.Command{NowUnixNanos: r.s.now().UnixNano(), Op: &statepb.Command_RenewalEnd{RenewalEnd: &statepb.RenewalEnd{Entries: ends}}})
	if err != nil {
		r.s.Unrecorded.Add(uint64(len(ends)))
		keys := make([]Key, len(ends))
		for i, e := range ends {
			keys[i], _ = keyFrom(e.GetKey())
		}
		r.s.state.release(keys, r.s.now().Add(r.s.cfg.MinRetry).UnixNano())
		if ctx.Err() == nil {
			r.s.cfg.Logger.Warn("renewal: recording removals failed; will retry", "leases", len(ends), "err", err)
		}
		return
	}
	for _, e := range ends {
		if e.GetReason() != statepb.RenewalEndReason_RENEWAL_END_REASON_DESIRED {
			r.s.Failed.Add(1)
		}
	}
}

// recordBatch bounds the renewals one record command carries.
const recordBatch = 8192

// recordLoop records successful renewals, in batches: LR.2 asks that the
// interval between a renewal and its recording be short, and a client
// lease is returned with its last recorded expiration.
func (r *renewer) recordLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.flush:
		}
		for {
			r.mu.Lock()
			n := min(len(r.exps), recordBatch)
			keys, exps := r.keys[:n*len(Key{})], r.exps[:n]
			r.keys, r.exps = r.keys[n*len(Key{}):], r.exps[n:]
			if len(r.exps) == 0 {
				r.keys, r.exps = nil, nil
			}
			r.mu.Unlock()
			if n == 0 {
				break
			}
			_, err := r.s.log.Propose(ctx, &statepb.Command{NowUnixNanos: r.s.now().UnixNano(), Op: &statepb.Command_RenewalRenewed{RenewalRenewed: &statepb.RenewalRenewed{
				Keys: keys, ExpiresUnixNanos: exps,
			}}})
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				// The renewals happened but are not recorded: renew them
				// again soon, which records them then.
				r.s.Unrecorded.Add(uint64(n))
				ks := make([]Key, n)
				for i := range ks {
					ks[i] = Key(keys[i*len(Key{}) : (i+1)*len(Key{})])
				}
				r.s.state.release(ks, r.s.now().Add(r.s.cfg.MinRetry).UnixNano())
				r.s.cfg.Logger.Warn("renewal: recording renewals failed; will renew again", "leases", n, "err", err)
				continue
			}
			r.s.Renewed.Add(uint64(n))
		}
	}
}
