package bench

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Load is a closed loop: Clients clients, each running Step again and
// again for Duration. It is the one runner of every throughput workload.
type Load struct {
	Clients  int
	Duration time.Duration
	// Finish lets a step under way when the time is up run to its end,
	// within Slack more, and counts it: for steps that must not be cut
	// short (a lock held, a transaction half done). Without Finish the
	// steps' context ends with the time, and a step cut short counts
	// nothing and is no failure.
	Finish bool
	Slack  time.Duration
	// Step runs one operation as client c and records what it completed
	// in rec, which only client c's goroutine uses. An error ends the run.
	Step func(ctx context.Context, c int, rec *Recorder) error
}

// Recorder is what one client completed.
type Recorder struct {
	ops, units int64
	whole      []time.Duration // the samples of the phase "" (whole operations)
	phases     map[string][]time.Duration
	counts     map[string]int64
	// The clients' recorders lie side by side: each on cache lines of its
	// own, so that clients on different cores do not share one.
	_ [64]byte
}

// Op records one completed operation that took d, worth one unit.
func (r *Recorder) Op(d time.Duration) { r.OpUnits(d, 1) }

// OpUnits records one completed operation that took d and did n units of
// work (leases renewed, events accepted).
func (r *Recorder) OpUnits(d time.Duration, n int64) {
	r.ops++
	r.units += n
	r.Phase("", d)
}

// Phase records d as one sample of a named part of an operation; the
// whole operation is the phase "".
func (r *Recorder) Phase(name string, d time.Duration) {
	if name == "" {
		r.whole = append(r.whole, d) // every op's: without a map lookup
		return
	}
	if r.phases == nil {
		r.phases = map[string][]time.Duration{}
	}
	r.phases[name] = append(r.phases[name], d)
}

// Count adds n to a named counter.
func (r *Recorder) Count(name string, n int64) {
	if r.counts == nil {
		r.counts = map[string]int64{}
	}
	r.counts[name] += n
}

// Measurement is what the clients of a Load completed, merged.
type Measurement struct {
	Clients    int
	Ops, Units int64
	Elapsed    time.Duration
	phases     map[string][]time.Duration // each sorted
	counts     map[string]int64
}

// Run runs the load. It returns the first error of a step, or the
// context's error when ctx ended the run.
func (l Load) Run(ctx context.Context) (*Measurement, error) {
	run, stopRun := context.WithCancel(ctx) // a failure stops every client
	defer stopRun()
	timed, stopTimed := context.WithTimeout(run, l.Duration)
	defer stopTimed()
	calls := timed
	if l.Finish {
		var stopCalls context.CancelFunc
		calls, stopCalls = context.WithTimeout(run, l.Duration+l.Slack)
		defer stopCalls()
	}
	recs := make([]Recorder, l.Clients)
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		stopRun()
	}
	start := time.Now()
	for c := range l.Clients {
		wg.Go(func() {
			for timed.Err() == nil {
				err := l.Step(calls, c, &recs[c])
				if err == nil {
					continue
				}
				if run.Err() == nil && (l.Finish || !cutShort(timed, err)) {
					fail(err)
				}
				return
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return merge(recs, elapsed), nil
}

// cutShort reports whether err is the end of the time cutting a step
// short. gRPC may notice the deadline a moment before the context does.
func cutShort(timed context.Context, err error) bool {
	return timed.Err() != nil || errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
}

func merge(recs []Recorder, elapsed time.Duration) *Measurement {
	m := &Measurement{Clients: len(recs), Elapsed: elapsed, phases: map[string][]time.Duration{}, counts: map[string]int64{}}
	for _, r := range recs {
		m.Ops += r.ops
		m.Units += r.units
		if len(r.whole) > 0 {
			m.phases[""] = append(m.phases[""], r.whole...)
		}
		for name, ds := range r.phases {
			m.phases[name] = append(m.phases[name], ds...)
		}
		for name, n := range r.counts {
			m.counts[name] += n
		}
	}
	for _, ds := range m.phases {
		slices.Sort(ds)
	}
	return m
}

// Percentile returns the p-th fraction (0 to 1) of a phase's samples, in
// milliseconds; 0 without samples.
func (m *Measurement) Percentile(phase string, p float64) float64 {
	return percentileMs(m.phases[phase], p)
}

// Count returns a named counter's sum over the clients.
func (m *Measurement) Count(name string) int64 { return m.counts[name] }

// PerS returns n per second of the measurement's time.
func (m *Measurement) PerS(n int64) float64 { return float64(n) / m.Elapsed.Seconds() }

// Result returns the measurement as a result of workload whose operation
// is a unit: ops/s, p50 and p99 of whole operations, and of the named
// phases.
func (m *Measurement) Result(workload, unit string, phases ...string) Result {
	r := Result{Workload: workload, Clients: m.Clients, Unit: unit, Ops: m.Ops, Seconds: m.Elapsed.Seconds(),
		OpsPerS: m.PerS(m.Ops), P50ms: m.Percentile("", 0.50), P99ms: m.Percentile("", 0.99)}
	for _, p := range phases {
		r.Phases = append(r.Phases, Phase{Name: p, P50ms: m.Percentile(p, 0.50), P99ms: m.Percentile(p, 0.99)})
	}
	return r
}

// percentileMs returns the p-th fraction of ds, sorted, in milliseconds.
func percentileMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	return ms(ds[int(float64(len(ds)-1)*p)])
}

// percentiles sorts ds and returns its p50 and p99 in milliseconds.
func percentiles(ds []time.Duration) (p50, p99 float64) {
	slices.Sort(ds)
	return percentileMs(ds, 0.50), percentileMs(ds, 0.99)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
