package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The lock bench measures the lock service of a server running in its own
// process (issue 4, section 4). It calls the service through the generated
// gRPC client, so every call it counts is one call on the wire.
//
// uncontended: each client has its own lock set and its own owner and
// loops lock(W), unlock(W). An op is one cycle: two calls.
//
// contended: one lock set, an owner per client; each client loops a
// blocking lock(W), then unlock(W). An op is one grant, a hand-off from
// the last holder: two calls. Its latency is the wait for the grant. The
// bench checks mutual exclusion with the fencing tokens while it measures:
// a set's grants are numbered, so a grant whose fence is not above every
// fence already released (and still is not when its holder is about to
// release it) was held while a later grant was: two holders overlapped.
// In the uncontended workload each client is its set's only user, so its
// fences must count its own cycles exactly.
//
// sets: --sets lock sets, each with one W lock held by one of a few
// owners (one per client), then the server's resident memory.
//
// Every uncontended and contended measurement is preceded by the empty
// call (the gRPC health check) at the same concurrency: the unary ceiling
// of the server, the connections and this load generator together.
//
// A cycle under way when the time is up is finished and counted, so no
// lock stays held and no waiter is cancelled: after the run every set must
// be empty and the fences it issued must equal the grants counted. The
// bench's sets and owners are cancelled at the end of each run.

// lockBenchLease is the lease the bench asks for its sets and owners; it
// cancels them when done.
const lockBenchLease = time.Hour

// The targets, at 64 clients.
const (
	lockBenchTargetClients = 64
	lockBenchTargetCycles  = 20_000
	lockBenchTargetGrants  = 11_000
	lockBenchTargetRSSMB   = 500 // for a million sets
)

// lockBenchSlack bounds the calls of a run past its duration: a cycle
// under way, or a waiter's turn, must finish within it.
const lockBenchSlack = time.Minute

func newBenchLock(g *globals) *cobra.Command {
	b := &lockBench{}
	var ops, clients string
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Measure the lock service: lock+unlock cycles, contended hand-offs, memory per lock set",
		Long: `Measure the lock service of a djinn server running in its own process.

Workloads (--ops):
  uncontended  each client its own lock set and owner, looping lock(W) +
               unlock(W); reports cycles/s (2 calls each) and p50/p99 per cycle
  contended    one lock set, an owner per client, each looping a blocking
               lock(W) then unlock(W); reports grants/s (hand-offs, 2 calls
               each), p50/p99 of the wait for a grant, and fence violations
               (a grant overlapping another, told by the fencing tokens:
               must be 0)
  sets         --sets lock sets, each with one W lock held by one of a few
               owners (one per client), created at the largest --clients;
               reports the setup rate and the server's resident memory
               from --admin, per set

Each uncontended and contended measurement runs the empty workload (a gRPC
health check) at the same concurrency first, and reports the calls/s it
reached as a fraction of the empty call's. With --admin the server's CPU
is read from its /metrics too. The bench exits non-zero when a fence was
violated, a lock was left held, or the fences issued do not match the
grants counted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := b.parse(ops, clients); err != nil {
				return err
			}
			ccs, closeConns, err := g.dialConns(cmd.Context(), b.conns)
			if err != nil {
				return err
			}
			defer closeConns()
			b.ccs = ccs
			b.progress = cmd.ErrOrStderr()
			rep, err := b.run(cmd.Context(), func(r lockBenchRun) {
				if g.output != "json" {
					r.print(cmd.OutOrStdout())
				}
			}, func(r *lockBenchSets) {
				if g.output != "json" {
					r.print(cmd.OutOrStdout())
				}
			})
			if err != nil {
				return err
			}
			if g.output == "json" {
				if err := g.print(cmd.OutOrStdout(), rep, nil); err != nil {
					return err
				}
			}
			return rep.verdict()
		},
	}
	f := cmd.Flags()
	f.StringVar(&ops, "ops", "uncontended,contended,sets", "workloads to run")
	f.StringVar(&clients, "clients", "1,16,64", "concurrent clients")
	f.DurationVar(&b.duration, "duration", 5*time.Second, "time per measurement")
	f.IntVar(&b.conns, "conns", 4, "gRPC connections the clients share")
	f.IntVar(&b.sets, "sets", 1_000_000, "lock sets for the sets workload")
	f.StringVar(&b.admin, "admin", "127.0.0.1:4162", "admin address of the server, for its memory and CPU (empty: not read; the sets workload needs it)")
	return cmd
}

// lockBench is the lock bench: its flags, then its connections.
type lockBench struct {
	ops      []string
	levels   []int
	duration time.Duration
	conns    int
	sets     int
	admin    string

	ccs      []*grpc.ClientConn // client c uses ccs[c%len(ccs)]
	progress io.Writer          // progress of the sets workload
}

// parse checks the flags and sets ops and levels.
func (b *lockBench) parse(ops, clients string) error {
	var err error
	if b.levels, err = parseClientLevels(clients); err != nil {
		return err
	}
	b.ops = splitList(ops)
	if len(b.ops) == 0 {
		return fmt.Errorf("ops %q: want uncontended, contended or sets", ops)
	}
	for _, op := range b.ops {
		switch op {
		case "uncontended", "contended":
		case "sets":
			if b.admin == "" {
				return errors.New("the sets workload reads the server's memory from --admin: give it")
			}
		default:
			return fmt.Errorf("workload %q: want uncontended, contended or sets", op)
		}
	}
	switch {
	case b.duration <= 0:
		return fmt.Errorf("duration %s: want positive", b.duration)
	case b.conns <= 0:
		return fmt.Errorf("conns %d: want at least 1", b.conns)
	case b.sets <= 0:
		return fmt.Errorf("sets %d: want at least 1", b.sets)
	}
	return nil
}

func (b *lockBench) ls(c int) djinnpb.LockServiceClient {
	return djinnpb.NewLockServiceClient(b.ccs[c%len(b.ccs)])
}

// lockBenchReport is everything the bench measured.
type lockBenchReport struct {
	Runs []lockBenchRun `json:"runs,omitempty"`
	Sets *lockBenchSets `json:"sets,omitempty"`
}

// verdict is the bench's exit status: a safety or consistency failure of
// the lock service is an error; a missed target is not.
func (r *lockBenchReport) verdict() error {
	var errs []error
	for _, x := range r.Runs {
		if x.FenceViolations != 0 {
			errs = append(errs, fmt.Errorf("%s at %d clients: %d fence violations", x.Op, x.Clients, x.FenceViolations))
		}
		if x.LeftHeld != 0 {
			errs = append(errs, fmt.Errorf("%s at %d clients: %d locks or waiters left in the sets after the run", x.Op, x.Clients, x.LeftHeld))
		}
		if x.FencesIssued != uint64(x.Ops) {
			errs = append(errs, fmt.Errorf("%s at %d clients: the sets issued %d fences for %d grants", x.Op, x.Clients, x.FencesIssued, x.Ops))
		}
	}
	if s := r.Sets; s != nil && s.FirstGrants != int64(s.Sets) {
		errs = append(errs, fmt.Errorf("sets: %d of %d locks were their set's first grant (fence 1)", s.FirstGrants, s.Sets))
	}
	return errors.Join(errs...)
}

// lockBenchRun is one uncontended or contended measurement.
type lockBenchRun struct {
	Op      string  `json:"op"`
	Clients int     `json:"clients"`
	Ops     int64   `json:"ops"` // cycles (uncontended) or grants (contended)
	Seconds float64 `json:"seconds"`
	OpsPerS float64 `json:"ops_per_s"`
	// P50ms and P99ms are per cycle (uncontended) or of the wait for a
	// grant, the lock call (contended).
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	LockP50ms   float64 `json:"lock_p50_ms"`
	LockP99ms   float64 `json:"lock_p99_ms"`
	UnlockP50ms float64 `json:"unlock_p50_ms"`
	UnlockP99ms float64 `json:"unlock_p99_ms"`
	CallsPerOp  int     `json:"calls_per_op"`
	CallsPerS   float64 `json:"calls_per_s"`

	FenceViolations int64  `json:"fence_violations"`
	FencesIssued    uint64 `json:"fences_issued"` // the sets' last fences after the run: one per grant
	LeftHeld        int    `json:"left_held"`     // holders and waiters in the sets after the run

	ServerCPU float64 `json:"server_cpu_cores,omitempty"` // with --admin

	// The empty call at the same concurrency, just before.
	EmptyPerS     float64 `json:"empty_per_s"`
	EmptyP50ms    float64 `json:"empty_p50_ms"`
	EmptyP99ms    float64 `json:"empty_p99_ms"`
	EmptyFraction float64 `json:"empty_fraction"` // calls/s ÷ empty calls/s
}

func (r *lockBenchRun) print(w io.Writer) {
	unit, lat, target := "cycles/s", "cycle", lockBenchTargetCycles
	if r.Op == "contended" {
		unit, lat, target = "grants/s", "wait", lockBenchTargetGrants
	}
	verdict := ""
	if r.Clients == lockBenchTargetClients {
		verdict = mark(r.OpsPerS >= float64(target), fmt.Sprintf("target >= %d", target))
	}
	fmt.Fprintf(w, "%-11s clients=%-3d %9.0f %s  %s p50 %7.3f ms  p99 %7.3f ms%s\n",
		r.Op, r.Clients, r.OpsPerS, unit, lat, r.P50ms, r.P99ms, verdict)
	fmt.Fprintf(w, "    %d in %.2f s; lock p50 %.3f / p99 %.3f ms, unlock p50 %.3f / p99 %.3f ms\n",
		r.Ops, r.Seconds, r.LockP50ms, r.LockP99ms, r.UnlockP50ms, r.UnlockP99ms)
	fmt.Fprintf(w, "    %d calls/op: %.0f calls/s = %.0f%% of the empty call's %.0f/s (p50 %.3f ms, p99 %.3f ms)\n",
		r.CallsPerOp, r.CallsPerS, 100*r.EmptyFraction, r.EmptyPerS, r.EmptyP50ms, r.EmptyP99ms)
	cpu := ""
	if r.ServerCPU > 0 {
		cpu = fmt.Sprintf("; server CPU %.2f cores", r.ServerCPU)
	}
	fmt.Fprintf(w, "    fence violations %d%s; fences issued %d for %d grants; left held %d%s\n",
		r.FenceViolations, mark(r.FenceViolations == 0, "must be 0"), r.FencesIssued, r.Ops, r.LeftHeld, cpu)
}

// lockBenchSets is the sets workload's result.
type lockBenchSets struct {
	Sets         int     `json:"sets"`
	Owners       int     `json:"owners"` // = the clients creating the sets
	SetupSeconds float64 `json:"setup_seconds"`
	SetsPerS     float64 `json:"sets_per_s"`
	CallsPerS    float64 `json:"calls_per_s"` // createSet and lock: 2 per set
	FirstGrants  int64   `json:"first_grants"`
	SetupCPU     float64 `json:"server_cpu_cores"`
	RSSBeforeMB  float64 `json:"rss_before_mb"`
	RSSAfterMB   float64 `json:"rss_after_mb"`
	HeapInuseMB  float64 `json:"heap_inuse_mb,omitempty"` // go_memstats_heap_inuse_bytes after, when exported
	BytesPerSet  float64 `json:"bytes_per_set"`           // RSS after − before, per set
	RSSPerSet    float64 `json:"rss_per_set"`             // RSS after, per set
}

func (r *lockBenchSets) print(w io.Writer) {
	fmt.Fprintf(w, "sets        %d sets with one W lock each (%d owners) in %.1f s: %.0f sets/s, %.0f calls/s, server CPU %.2f cores\n",
		r.Sets, r.Owners, r.SetupSeconds, r.SetsPerS, r.CallsPerS, r.SetupCPU)
	verdict := ""
	if r.Sets >= 1_000_000 {
		verdict = mark(r.RSSAfterMB*1_000_000/float64(r.Sets) <= lockBenchTargetRSSMB, fmt.Sprintf("target <= %d MB for 1M sets", lockBenchTargetRSSMB))
	}
	heap := ""
	if r.HeapInuseMB > 0 {
		heap = fmt.Sprintf(", heap in use %.0f MB", r.HeapInuseMB)
	}
	fmt.Fprintf(w, "    server RSS %.0f MB before, %.0f MB after%s: %.0f bytes per set (%.0f with the base)%s\n",
		r.RSSBeforeMB, r.RSSAfterMB, heap, r.BytesPerSet, r.RSSPerSet, verdict)
	fmt.Fprintf(w, "    first grants (fence 1) %d of %d\n", r.FirstGrants, r.Sets)
}

// run runs the workloads, handing each result to its callback as it comes.
func (b *lockBench) run(ctx context.Context, onRun func(lockBenchRun), onSets func(*lockBenchSets)) (*lockBenchReport, error) {
	rep := &lockBenchReport{}
	for _, op := range b.ops {
		if op == "sets" {
			s, err := b.runSets(ctx, slices.Max(b.levels))
			if err != nil {
				return nil, fmt.Errorf("sets: %w", err)
			}
			rep.Sets = s
			onSets(s)
			continue
		}
		for _, n := range b.levels {
			r, err := b.measure(ctx, op, n)
			if err != nil {
				return nil, fmt.Errorf("%s at %d clients: %w", op, n, err)
			}
			rep.Runs = append(rep.Runs, r)
			onRun(r)
		}
	}
	return rep, nil
}

// measure runs the empty call, then op, at n clients.
func (b *lockBench) measure(ctx context.Context, op string, n int) (lockBenchRun, error) {
	calls := &bencher{cc: b.ccs[0], conns: b.ccs, duration: b.duration}
	empty, err := calls.run(ctx, "empty", n)
	if err != nil {
		return lockBenchRun{}, fmt.Errorf("empty: %w", err)
	}
	r, err := b.runLocks(ctx, op == "contended", n)
	if err != nil {
		return lockBenchRun{}, err
	}
	r.EmptyPerS, r.EmptyP50ms, r.EmptyP99ms = empty.OpsPerS, empty.P50ms, empty.P99ms
	if empty.OpsPerS > 0 {
		r.EmptyFraction = r.CallsPerS / empty.OpsPerS
	}
	return r, nil
}

// lockBenchFixture is what a run locks in: sets and owners, with their
// leases' cookies to cancel.
type lockBenchFixture struct {
	sets    [][]byte
	owners  []*djinnpb.LockHolder
	cookies [][]byte
}

// fixture creates sets lock sets and owners owners, before the clock starts.
func (b *lockBench) fixture(ctx context.Context, sets, owners int) (*lockBenchFixture, error) {
	fx := &lockBenchFixture{sets: make([][]byte, sets), owners: make([]*djinnpb.LockHolder, owners)}
	setCookies := make([][]byte, sets)
	ownerCookies := make([][]byte, owners)
	err := lockBenchParallel(ctx, len(b.ccs)*4, sets+owners, func(ctx context.Context, c, i int) error {
		if i < sets {
			s, err := b.ls(c).CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(lockBenchLease)})
			if err != nil {
				return fmt.Errorf("create set: %w", err)
			}
			fx.sets[i], setCookies[i] = s.GetSetId(), s.GetLease().GetCookie()
			return nil
		}
		o, err := b.ls(c).CreateOwner(ctx, &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(lockBenchLease)})
		if err != nil {
			return fmt.Errorf("create owner: %w", err)
		}
		fx.owners[i-sets], ownerCookies[i-sets] = &djinnpb.LockHolder{Owner: o.GetLease().GetCookie()}, o.GetLease().GetCookie()
		return nil
	})
	for _, cs := range [][][]byte{ownerCookies, setCookies} {
		for _, c := range cs {
			if c != nil {
				fx.cookies = append(fx.cookies, c)
			}
		}
	}
	if err != nil {
		b.cancel(fx.cookies)
		return nil, err
	}
	return fx, nil
}

// cancel cancels the leases of the bench's sets and owners, which ends
// them and drops their locks.
func (b *lockBench) cancel(cookies [][]byte) {
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Minute)
	defer stop()
	ll := djinnpb.NewLandlordClient(b.ccs[0])
	for lo := 0; lo < len(cookies); lo += batch.MaxLeases {
		req := &djinnpb.CancelAllRequest{}
		for _, c := range cookies[lo:min(lo+batch.MaxLeases, len(cookies))] {
			req.Cookies = append(req.Cookies, c...)
		}
		if _, err := ll.CancelAll(ctx, req); err != nil {
			fmt.Fprintf(b.progress, "cancel the bench's lock sets and owners: %v\n", err)
			return
		}
	}
}

// lockBenchClient is what one client measured; only its goroutine writes
// it.
type lockBenchClient struct {
	lock, unlock, op []time.Duration
	ops, violations  int64
}

// runLocks runs the uncontended or the contended workload at n clients.
func (b *lockBench) runLocks(ctx context.Context, contended bool, n int) (lockBenchRun, error) {
	r := lockBenchRun{Op: "uncontended", Clients: n, CallsPerOp: 2}
	sets := n
	if contended {
		r.Op, sets = "contended", 1
	}
	fx, err := b.fixture(ctx, sets, n)
	if err != nil {
		return r, err
	}
	defer b.cancel(fx.cookies)
	p0, err := b.process(ctx)
	if err != nil {
		return r, err
	}

	// released is the highest fence released (its unlock answered) in the
	// contended set.
	var released atomic.Uint64
	release := func(f uint64) {
		for {
			old := released.Load()
			if f <= old || released.CompareAndSwap(old, f) {
				return
			}
		}
	}
	cs := make([]lockBenchClient, n)
	var firstErr atomic.Value
	rctx, stop := context.WithTimeout(ctx, b.duration)
	defer stop()
	// Calls outlive the duration: a cycle under way is finished.
	cctx, abort := context.WithTimeout(ctx, b.duration+lockBenchSlack)
	defer abort()
	fail := func(err error) {
		firstErr.CompareAndSwap(nil, err)
		abort()
	}
	var wg sync.WaitGroup
	start := time.Now()
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &cs[c]
			ls := b.ls(c)
			set := fx.sets[c%len(fx.sets)]
			lockReq := &djinnpb.LockRequest{SetId: set, Holder: fx.owners[c], Mode: djinnpb.LockMode_LOCK_MODE_WRITE}
			unlockReq := &djinnpb.UnlockRequest{SetId: set, Holder: fx.owners[c], Mode: djinnpb.LockMode_LOCK_MODE_WRITE}
			var last uint64 // uncontended: the client's last fence in its own set
			for rctx.Err() == nil && cctx.Err() == nil {
				t0 := time.Now()
				resp, err := ls.Lock(cctx, lockReq)
				if err != nil {
					fail(fmt.Errorf("lock: %w", err))
					return
				}
				t1 := time.Now()
				if !resp.GetGranted() {
					fail(errors.New("lock: a blocking request answered not granted"))
					return
				}
				f := resp.GetFence()
				// A contended grant is bad when a fence above its own was
				// released before it was granted, or before its holder
				// gives it up: the two grants were held at once. An
				// uncontended grant must be the next of its client's set.
				bad := f != last+1
				if contended {
					bad = f <= released.Load()
				}
				last = f
				t2 := time.Now()
				if contended && f <= released.Load() {
					bad = true
				}
				if bad {
					st.violations++
				}
				if _, err := ls.Unlock(cctx, unlockReq); err != nil {
					fail(fmt.Errorf("unlock: %w", err))
					return
				}
				t3 := time.Now()
				if contended {
					release(f)
				}
				st.lock = append(st.lock, t1.Sub(t0))
				st.unlock = append(st.unlock, t3.Sub(t2))
				if contended {
					st.op = append(st.op, t1.Sub(t0))
				} else {
					st.op = append(st.op, t3.Sub(t0))
				}
				st.ops++
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		return r, err
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	p1, err := b.process(ctx)
	if err != nil {
		return r, err
	}

	var lock, unlock, op []time.Duration
	for _, st := range cs {
		lock = append(lock, st.lock...)
		unlock = append(unlock, st.unlock...)
		op = append(op, st.op...)
		r.Ops += st.ops
		r.FenceViolations += st.violations
	}
	r.Seconds = elapsed.Seconds()
	r.OpsPerS = float64(r.Ops) / r.Seconds
	r.CallsPerS = r.OpsPerS * float64(r.CallsPerOp)
	r.P50ms, r.P99ms = percentileMs(op, 0.50), percentileMs(op, 0.99)
	r.LockP50ms, r.LockP99ms = percentileMs(lock, 0.50), percentileMs(lock, 0.99)
	r.UnlockP50ms, r.UnlockP99ms = percentileMs(unlock, 0.50), percentileMs(unlock, 0.99)
	if p0 != nil && p1 != nil {
		r.ServerCPU = (p1.cpu - p0.cpu) / elapsed.Seconds()
	}

	// The sets are the bench's alone: their fences count the grants, and
	// nothing is left in them.
	for _, set := range fx.sets {
		d, err := b.ls(0).Describe(ctx, &djinnpb.LockSetRequest{SetId: set})
		if err != nil {
			return r, fmt.Errorf("describe: %w", err)
		}
		r.FencesIssued += d.GetLastFence()
		r.LeftHeld += len(d.GetHolders()) + len(d.GetWaiters())
	}
	return r, nil
}

// process reads the server's CPU and memory from --admin; nil without it.
func (b *lockBench) process(ctx context.Context) (*process, error) {
	if b.admin == "" {
		return nil, nil
	}
	p, err := readProcess(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// runSets creates --sets lock sets, each with one W lock held by one of
// clients owners, clients calls at a time, and reads the server's memory.
func (b *lockBench) runSets(ctx context.Context, clients int) (*lockBenchSets, error) {
	r := &lockBenchSets{Sets: b.sets, Owners: clients}
	fx, err := b.fixture(ctx, 0, clients)
	if err != nil {
		return nil, err
	}
	cookies := make([][]byte, b.sets)
	defer func() {
		for _, c := range cookies {
			if c != nil {
				fx.cookies = append(fx.cookies, c)
			}
		}
		b.cancel(fx.cookies)
	}()
	p0, err := readProcess(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	r.RSSBeforeMB = p0.rss / (1 << 20)

	var done, first atomic.Int64
	start := time.Now()
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stopProgress:
				return
			case <-tick.C:
				d := done.Load()
				fmt.Fprintf(b.progress, "sets: %d of %d in %.0f s (%.0f/s)\n", d, b.sets, time.Since(start).Seconds(), float64(d)/time.Since(start).Seconds())
			}
		}
	}()
	err = lockBenchParallel(ctx, clients, b.sets, func(ctx context.Context, c, i int) error {
		ls := b.ls(c)
		s, err := ls.CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(lockBenchLease)})
		if err != nil {
			return fmt.Errorf("create set %d: %w", i, err)
		}
		cookies[i] = s.GetLease().GetCookie()
		resp, err := ls.Lock(ctx, &djinnpb.LockRequest{SetId: s.GetSetId(), Holder: fx.owners[c], Mode: djinnpb.LockMode_LOCK_MODE_WRITE})
		if err != nil {
			return fmt.Errorf("lock set %d: %w", i, err)
		}
		if !resp.GetGranted() {
			return fmt.Errorf("lock set %d: a blocking request answered not granted", i)
		}
		if resp.GetFence() == 1 {
			first.Add(1)
		}
		done.Add(1)
		return nil
	})
	setup := time.Since(start)
	close(stopProgress)
	<-progressDone
	if err != nil {
		return nil, err
	}
	p1, err := readProcess(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	r.SetupSeconds = setup.Seconds()
	r.SetsPerS = float64(b.sets) / setup.Seconds()
	r.CallsPerS = 2 * r.SetsPerS
	r.FirstGrants = first.Load()
	r.SetupCPU = (p1.cpu - p0.cpu) / setup.Seconds()
	r.RSSAfterMB = p1.rss / (1 << 20)
	r.BytesPerSet = (p1.rss - p0.rss) / float64(b.sets)
	r.RSSPerSet = p1.rss / float64(b.sets)
	if m, err := adminMetrics(ctx, b.admin, func(n string) bool { return n == "go_memstats_heap_inuse_bytes" }); err == nil {
		r.HeapInuseMB = m["go_memstats_heap_inuse_bytes"] / (1 << 20)
	}
	return r, nil
}

// lockBenchParallel calls fn(c, i) for i in [0, n) on workers goroutines,
// goroutine c making its calls as client c, and returns the first error;
// an error stops the others.
func lockBenchParallel(ctx context.Context, workers, n int, fn func(ctx context.Context, c, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for c := range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, c, i); err != nil {
					first.CompareAndSwap(nil, err)
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return err
	}
	return ctx.Err()
}
