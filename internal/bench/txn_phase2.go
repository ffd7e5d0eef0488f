package bench

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Phase 2 of the transactions measured: a commit returns once the
// outcome is decided (TX.2.5), before the manager has told the
// participants, so a rate of commits alone says nothing of whether the
// participants keep up. The bench counts a transaction as done only once
// every participant has been told its outcome: after the load it waits
// for the manager to have told them all, and reads every transaction of
// the run at the manager to check it. The rate is of completed
// transactions; the rate of decisions (commits returned) is beside it.
// A run whose participants are told more than Lag after the last commit
// returned — phase 2 fell behind — or not at all fails.

// phase2Poll is how often the bench asks the manager how many decided
// transactions still have participants to tell, while it waits for them.
const phase2Poll = 10 * time.Millisecond

// backlogPoll is how often it asks during the load, for the largest
// backlog.
const backlogPoll = 100 * time.Millisecond

// txnSample is how many committed transactions the bench reads back from
// the participants, which must show their writes.
const txnSample = 64

// lagAllowed is how long after the load's last commit returned every
// participant must have been told: Lag when set, otherwise a ninth of the
// load's time (completed transactions/s then stay within 90 % of the
// decisions/s) and at least half a second (the time of a few polls and a
// scheduler's hiccup).
func (r *txnRun) lagAllowed(elapsed time.Duration) time.Duration {
	if r.Lag > 0 {
		return r.Lag
	}
	return max(elapsed/9, 500*time.Millisecond)
}

// unsettled asks the manager how many decided transactions have
// participants still to tell.
func (r *txnRun) unsettled(ctx context.Context) (int64, error) {
	st, err := djinnpb.NewAdminClient(r.conns[r.server].For(0)).Status(ctx, &djinnpb.StatusRequest{})
	if err != nil {
		return 0, fmt.Errorf("manager status: %w", err)
	}
	n, ok := st.GetCounts()["transactions_unsettled"]
	if !ok {
		return 0, fmt.Errorf("manager status: no transactions_unsettled count: the server at %s is too old for this bench", r.server)
	}
	return n, nil
}

// sampleBacklog samples the manager's phase-2 backlog until the returned
// function is called, which returns the largest seen.
func (r *txnRun) sampleBacklog(ctx context.Context) func() int64 {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg   sync.WaitGroup
		most int64
	)
	wg.Go(func() {
		t := time.NewTicker(backlogPoll)
		defer t.Stop()
		for {
			if n, err := r.unsettled(ctx); err == nil {
				most = max(most, n)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return func() int64 {
		cancel()
		wg.Wait()
		return most
	}
}

// drain waits until the manager's backlog is back to base (what it was
// before the load), for at most allowed. It returns how long that took,
// and whether it got there.
func (r *txnRun) drain(ctx context.Context, base int64, allowed time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	for {
		n, err := r.unsettled(ctx)
		if err != nil {
			return 0, false, err
		}
		lag := time.Since(start)
		if n <= base {
			return lag, true, nil
		}
		if lag > allowed {
			return lag, false, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(phase2Poll):
		}
	}
}

// txnDone is one transaction of a run, as its client left it.
type txnDone struct {
	id        uint64
	committed bool
	key       string
}

// outcome is what the manager says of a run's transactions.
type outcome struct {
	decided, undecided int // transactions
	told, untold       int // participants of the decided ones
}

// outcomes reads every transaction of the run at the manager: for the
// decided ones, whether each participant has been told.
func (r *txnRun) outcomes(ctx context.Context, run []txnDone) (outcome, error) {
	descs, err := r.mgrs[0].List(ctx, 0, 0)
	if err != nil {
		return outcome{}, fmt.Errorf("listing the run's transactions: %w", err)
	}
	byID := make(map[uint64]*client.TransactionDescription, len(descs))
	for _, d := range descs {
		byID[d.ID] = d
	}
	var o outcome
	for _, t := range run {
		d, ok := byID[t.id]
		switch {
		case !ok:
			// Forgotten: settled and past the retention time.
			o.decided++
		case d.State != client.TxnCommitted && d.State != client.TxnAborted:
			o.undecided++
		default:
			o.decided++
			for _, p := range d.Participants {
				if p.Notified {
					o.told++
				} else {
					o.untold++
				}
			}
		}
	}
	return o, nil
}

// readBack reads the writes of up to txnSample committed transactions
// from the participants, outside any transaction: each must be there,
// rolled forward. It returns the number read and the number missing.
func (r *txnRun) readBack(ctx context.Context, run []txnDone) (read, missing int, err error) {
	step := max(1, len(run)/txnSample)
	want := []byte(txnValue)
	for i := 0; i < len(run) && read < txnSample; i += step {
		t := run[i]
		if !t.committed {
			continue
		}
		read++
		for w := range txnWrites {
			v, found, err := r.kvcs[w][0].Get(ctx, nil, t.key+"/"+fmt.Sprint(w))
			if err != nil {
				return read, missing, fmt.Errorf("reading back %s/%d: %w", t.key, w, err)
			}
			if !found || string(v) != string(want) {
				missing++
			}
		}
	}
	return read, missing, nil
}

// phase2 is what the bench saw of phase 2 in one run.
type phase2 struct {
	elapsed      time.Duration // the load's time: its last commit returned then
	lag, allowed time.Duration
	drained      bool
	backlogMax   int64
	out          outcome
	read, miss   int
}

// apply sets the run's rate to completed transactions and adds phase 2's
// figures and checks.
func (p phase2) apply(res *Result) {
	decided := res.OpsPerS
	total := p.elapsed + p.lag
	res.Seconds = total.Seconds()
	res.OpsPerS = float64(res.Ops) / total.Seconds()
	if !p.drained {
		res.OpsPerS = 0 // not completed within the time allowed
	}
	res.Figures = append(res.Figures, fig("decided/s", decided, ""), fig("completed/s", res.OpsPerS, ""),
		fig("phase-2 lag", ms(p.lag), "ms"), fig("phase-2 backlog max", float64(p.backlogMax), "transactions"),
		fig("undecided", float64(p.out.undecided), ""), fig("read back", float64(p.read), "transactions"))
	ratio := 0.0
	if decided > 0 {
		ratio = res.OpsPerS / decided
	}
	res.Checks = append(res.Checks,
		mustZero("participants not told", float64(p.out.untold)),
		must("phase-2 lag ms", math.Round(ms(p.lag)), fmt.Sprintf("<= %.0f", ms(p.allowed)), p.drained),
		target("completed/decided", ratio, ">= 0.9", ratio >= 0.9),
		mustZero("writes missing at participants", float64(p.miss)))
	res.Notes = append(res.Notes, fmt.Sprintf("transactions/s counts a transaction once every participant was told its outcome (%.0f/s decided, the last told %.0f ms after the last commit returned)",
		decided, ms(p.lag)))
}
