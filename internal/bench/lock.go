package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Lock measures the lock service. It calls the service through the
// generated gRPC client, so every call it counts is one call on the wire.
//
//	uncontended  each client has its own lock set and its own owner and
//	             loops lock(W), unlock(W): an op is one cycle, two calls
//	contended    one lock set, an owner per client; each client loops a
//	             blocking lock(W), then unlock(W): an op is one grant, a
//	             hand-off from the last holder, two calls; its latency is
//	             the wait for the grant
//	spread       the contended workload over Locks lock sets at once, the
//	             clients spread evenly over them: hand-offs of different
//	             locks may share the log's appends
//	sets         Sets lock sets, each with one W lock held by one of a few
//	             owners (one per client), then the server's resident memory,
//	             its live heap, and its peak resident memory through a
//	             forced snapshot
//
// The bench checks mutual exclusion with the fencing tokens while it
// measures: a set's grants are numbered, so a grant whose fence is not
// above every fence already released (and still is not when its holder is
// about to release it) was held while a later grant was: two holders
// overlapped (a set's fences are its own, so each set is checked on
// its own). In the uncontended workload each client is its set's only
// user, so its fences must count its own cycles exactly.
//
// A cycle under way when the time is up is finished and counted, so no lock
// stays held and no waiter is cancelled: after the run every set must be
// empty and the fences it issued must equal the grants counted. The bench's
// sets and owners are cancelled at the end of each run.
type Lock struct {
	Ops      []string
	Levels   []int
	Duration time.Duration
	Conns    int
	Sets     int
	Locks    int    // the lock sets of the spread workload
	Admin    string // the server's admin endpoint: its memory and CPU ("": not read; sets needs it)
}

// LockWorkloads are the workloads of Lock, in the order they run by
// default.
var LockWorkloads = []string{"uncontended", "contended", "spread", "sets"}

// lockLease is the lease the bench asks for its sets and owners; it
// cancels them when done.
const lockLease = time.Hour

// The targets, at 64 clients. A hand-off on one lock has no
// target of its own here: it is bounded by the disk's serial fsync rate,
// which the bench does not measure.
const (
	lockTargetClients = 64
	lockTargetCycles  = 20_000
	lockTargetGrants  = 11_000 // over 16 locks
	lockTargetLocks   = 16
	lockTargetRSSMB   = 500 // for a million sets
)

// lockSlack bounds the calls of a run past its duration: a cycle under
// way, or a waiter's turn, must finish within it.
const lockSlack = time.Minute

// Check implements Bench.
func (b *Lock) Check() error {
	if len(b.Ops) == 0 {
		return errors.New("--ops: want uncontended, contended, spread or sets")
	}
	for _, op := range b.Ops {
		switch op {
		case "uncontended", "contended", "spread":
		case "sets":
			if b.Admin == "" {
				return errors.New("the sets workload reads the server's memory from --admin: give it")
			}
		default:
			return fmt.Errorf("workload %q: want uncontended, contended, spread or sets", op)
		}
	}
	if err := checkCommon(b.Levels, b.Duration, b.Conns); err != nil {
		return err
	}
	if b.Sets <= 0 {
		return fmt.Errorf("--sets %d: want at least 1", b.Sets)
	}
	if contains(b.Ops, "spread") && b.Locks <= 0 {
		return fmt.Errorf("--locks %d: want at least 1", b.Locks)
	}
	return nil
}

// lockRun is the bench's connections.
type lockRun struct {
	*Lock
	env   Env
	conns *Conns
}

// Run implements Bench.
func (b *Lock) Run(ctx context.Context, env Env) (Report, error) {
	var rep Report
	conns, err := dialConns(ctx, env, env.Server, b.Conns)
	if err != nil {
		return rep, err
	}
	defer conns.Close()
	r := &lockRun{Lock: b, env: env, conns: conns}
	for _, op := range b.Ops {
		if op == "sets" {
			res, err := r.sets(ctx, slices.Max(b.Levels))
			if err != nil {
				return rep, fmt.Errorf("sets: %w", err)
			}
			env.measured(&rep, res)
			continue
		}
		for _, n := range b.Levels {
			res, err := r.measure(ctx, op, n)
			if err != nil {
				return rep, fmt.Errorf("%s at %d clients: %w", op, n, err)
			}
			env.measured(&rep, res)
		}
	}
	return rep, nil
}

func (r *lockRun) ls(c int) djinnpb.LockServiceClient {
	return djinnpb.NewLockServiceClient(r.conns.For(c))
}

// lockFixture is what a run locks in: sets and owners, with their leases'
// cookies to cancel.
type lockFixture struct {
	sets    [][]byte
	owners  []*djinnpb.LockHolder
	cookies [][]byte
}

// fixture creates sets lock sets and owners owners, before the clock
// starts. On an error, what it created is cancelled.
func (r *lockRun) fixture(ctx context.Context, sets, owners int) (*lockFixture, error) {
	fx := &lockFixture{sets: make([][]byte, sets), owners: make([]*djinnpb.LockHolder, owners), cookies: make([][]byte, sets+owners)}
	err := parallel(ctx, r.conns.Len()*4, sets+owners, func(ctx context.Context, c, i int) error {
		if i < sets {
			s, err := r.ls(c).CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(lockLease)})
			if err != nil {
				return fmt.Errorf("create set: %w", err)
			}
			fx.sets[i], fx.cookies[i] = s.GetSetId(), s.GetLease().GetCookie()
			return nil
		}
		o, err := r.ls(c).CreateOwner(ctx, &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(lockLease)})
		if err != nil {
			return fmt.Errorf("create owner: %w", err)
		}
		fx.owners[i-sets], fx.cookies[i] = &djinnpb.LockHolder{Owner: o.GetLease().GetCookie()}, o.GetLease().GetCookie()
		return nil
	})
	if err != nil {
		r.cancel(fx.cookies)
		return nil, err
	}
	return fx, nil
}

// cancel cancels the leases of the bench's sets and owners, which ends
// them and drops their locks.
func (r *lockRun) cancel(cookies [][]byte) {
	cancelLeases(r.env, r.conns.For(0), "lock sets and owners", cookies)
}

// measure runs the empty call, then workload op (uncontended, contended
// or spread) at n clients.
func (r *lockRun) measure(ctx context.Context, op string, n int) (Result, error) {
	empty, err := emptyCall(ctx, r.conns, n, r.Duration)
	if err != nil {
		return Result{}, err
	}
	contended, sets, unit := op != "uncontended", n, "cycle"
	switch op {
	case "contended":
		sets, unit = 1, "grant"
	case "spread":
		sets, unit = r.Locks, "grant"
	}
	fx, err := r.fixture(ctx, sets, n)
	if err != nil {
		return Result{}, err
	}
	defer r.cancel(fx.cookies)
	p0, err := maybeProcess(ctx, r.Admin)
	if err != nil {
		return Result{}, err
	}
	released := make([]atomic.Uint64, sets) // the highest fence released in each contended set
	m, err := Load{Clients: n, Duration: r.Duration, Finish: true, Slack: lockSlack,
		Step: r.cycle(fx, contended, released)}.Run(ctx)
	if err != nil {
		return Result{}, err
	}
	p1, err := maybeProcess(ctx, r.Admin)
	if err != nil {
		return Result{}, err
	}
	res := m.Result(op, unit, "lock", "unlock").withBaseline(empty, 2)
	if op == "spread" {
		res.Figures = append(res.Figures, fig("locks", float64(sets), ""))
	}
	if cpu := cpuCores(p0, p1, m.Elapsed.Seconds()); cpu > 0 {
		res.Figures = append(res.Figures, fig("server CPU", cpu, "cores"))
	}
	return r.judge(ctx, res, fx, m.Count("violations"))
}

// cycle is the step of client c: lock(W), then unlock(W), checking the
// fence granted.
func (r *lockRun) cycle(fx *lockFixture, contended bool, released []atomic.Uint64) func(context.Context, int, *Recorder) error {
	last := make([]uint64, len(fx.owners)) // uncontended: each client's last fence in its own set
	return func(ctx context.Context, c int, rec *Recorder) error {
		set, rel := fx.sets[c%len(fx.sets)], &released[c%len(fx.sets)]
		ls := r.ls(c)
		t0 := time.Now()
		resp, err := ls.Lock(ctx, &djinnpb.LockRequest{SetId: set, Holder: fx.owners[c], Mode: djinnpb.LockMode_LOCK_MODE_WRITE})
		if err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		t1 := time.Now()
		if !resp.GetGranted() {
			return errors.New("lock: a blocking request answered not granted")
		}
		// A contended grant is bad when a fence above its own was released
		// before it was granted, or before its holder gives it up: the two
		// grants were held at once. An uncontended grant must be the next
		// of its client's set.
		f := resp.GetFence()
		bad := f != last[c]+1
		if contended {
			bad = f <= rel.Load()
		}
		last[c] = f
		t2 := time.Now()
		if bad || (contended && f <= rel.Load()) {
			rec.Count("violations", 1)
		}
		if _, err := ls.Unlock(ctx, &djinnpb.UnlockRequest{SetId: set, Holder: fx.owners[c], Mode: djinnpb.LockMode_LOCK_MODE_WRITE}); err != nil {
			return fmt.Errorf("unlock: %w", err)
		}
		t3 := time.Now()
		if contended {
			raise(rel, f)
		}
		rec.Phase("lock", t1.Sub(t0))
		rec.Phase("unlock", t3.Sub(t2))
		if contended {
			rec.Op(t1.Sub(t0))
		} else {
			rec.Op(t3.Sub(t0))
		}
		return nil
	}
}

// raise sets v to f if f is higher.
func raise(v *atomic.Uint64, f uint64) {
	for {
		old := v.Load()
		if f <= old || v.CompareAndSwap(old, f) {
			return
		}
	}
}

// judge checks a run against the sets, which are the bench's alone: their
// fences count the grants, and nothing is left in them.
func (r *lockRun) judge(ctx context.Context, res Result, fx *lockFixture, violations int64) (Result, error) {
	var issued uint64
	left := 0
	for _, set := range fx.sets {
		d, err := r.ls(0).Describe(ctx, &djinnpb.LockSetRequest{SetId: set})
		if err != nil {
			return res, fmt.Errorf("describe: %w", err)
		}
		issued += d.GetLastFence()
		left += len(d.GetHolders()) + len(d.GetWaiters())
	}
	res.Figures = append(res.Figures, fig("fences issued", float64(issued), ""))
	res.Checks = append(res.Checks, mustZero("fence violations", float64(violations)), mustZero("left held", float64(left)),
		must("fences issued per grant", float64(issued), strconv.FormatInt(res.Ops, 10), issued == uint64(res.Ops)))
	if want := lockTarget(res, len(fx.sets)); want > 0 {
		res.Checks = append(res.Checks, target(plural(res.Unit)+"/s", res.OpsPerS, ">= "+strconv.Itoa(want), res.OpsPerS >= float64(want)))
	}
	return res, nil
}

// lockTarget is the target rate for res, run over sets lock
// sets, or 0 where it sets none.
func lockTarget(res Result, sets int) int {
	switch {
	case res.Clients != lockTargetClients:
		return 0
	case res.Workload == "uncontended":
		return lockTargetCycles
	case res.Workload == "spread" && sets == lockTargetLocks:
		return lockTargetGrants
	}
	return 0
}

// sets creates Sets lock sets, each with one W lock held by one of clients
// owners, clients calls at a time, and reads the server's memory.
func (r *lockRun) sets(ctx context.Context, clients int) (Result, error) {
	fx, err := r.fixture(ctx, 0, clients)
	if err != nil {
		return Result{}, err
	}
	cookies := make([][]byte, r.Sets)
	defer func() { r.cancel(append(cookies, fx.cookies...)) }()
	p0, err := readProcess(ctx, r.Admin)
	if err != nil {
		return Result{}, err
	}
	var done, first atomic.Int64
	stop := progressEvery(r.env, "sets", r.Sets, &done)
	start := time.Now()
	err = parallel(ctx, clients, r.Sets, func(ctx context.Context, c, i int) error {
		fence, cookie, err := r.lockedSet(ctx, c, fx.owners[c])
		cookies[i] = cookie
		if err != nil {
			return fmt.Errorf("set %d: %w", i, err)
		}
		if fence == 1 {
			first.Add(1)
		}
		done.Add(1)
		return nil
	})
	setup := time.Since(start)
	stop()
	if err != nil {
		return Result{}, err
	}
	p1, err := readProcess(ctx, r.Admin)
	if err != nil {
		return Result{}, err
	}
	res := r.setsResult(ctx, clients, setup, p0, p1, first.Load())
	return res, r.setsSnapshot(ctx, &res)
}

// setsSnapshot adds to res the server's live heap holding the sets, then
// has it take a snapshot of them and adds the snapshot's size and time and
// the server's peak resident memory, the snapshot included.
func (r *lockRun) setsSnapshot(ctx context.Context, res *Result) error {
	const mb = 1 << 20
	m1, err := readMemory(ctx, r.Admin, true)
	if err != nil {
		return err
	}
	r.env.progress("sets: live heap %.1f MB; taking a snapshot", m1.live/mb)
	start := time.Now()
	var size countWriter
	if _, err := r.conns.clients[0].SaveSnapshot(ctx, &size); errors.Is(err, djinn.ErrPermissionDenied) {
		// Taking a snapshot is an operator's action: without the join
		// secret the sets are measured all the same, the snapshot not.
		res.Figures = append(res.Figures, fig("live heap", m1.live/mb, "MB"), fig("live heap per set", m1.live/float64(r.Sets), "B"))
		res.Notes = append(res.Notes, "no snapshot taken: it needs the operator role; pass --join-secret-file (the join-secret file in the first node's data directory) to measure it")
		return nil
	} else if err != nil {
		return fmt.Errorf("force a snapshot: %w", err)
	}
	took := time.Since(start)
	m2, err := readMemory(ctx, r.Admin, true)
	if err != nil {
		return err
	}
	res.Figures = append(res.Figures, fig("live heap", m1.live/mb, "MB"),
		fig("live heap per set", m1.live/float64(r.Sets), "B"),
		fig("snapshot", float64(size)/mb, "MB"), fig("snapshot time", took.Seconds(), "s"),
		fig("live heap after the snapshot", m2.live/mb, "MB"),
		fig("peak RSS (snapshot included)", m2.peakRSS/mb, "MB"))
	return nil
}

// lockedSet creates a set and locks it for owner; it returns the grant's
// fence and the set's lease cookie.
func (r *lockRun) lockedSet(ctx context.Context, c int, owner *djinnpb.LockHolder) (uint64, []byte, error) {
	s, err := r.ls(c).CreateSet(ctx, &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(lockLease)})
	if err != nil {
		return 0, nil, fmt.Errorf("create: %w", err)
	}
	resp, err := r.ls(c).Lock(ctx, &djinnpb.LockRequest{SetId: s.GetSetId(), Holder: owner, Mode: djinnpb.LockMode_LOCK_MODE_WRITE})
	if err != nil {
		return 0, s.GetLease().GetCookie(), fmt.Errorf("lock: %w", err)
	}
	if !resp.GetGranted() {
		return 0, s.GetLease().GetCookie(), errors.New("lock: a blocking request answered not granted")
	}
	return resp.GetFence(), s.GetLease().GetCookie(), nil
}

func (r *lockRun) setsResult(ctx context.Context, clients int, setup time.Duration, p0, p1 process, first int64) Result {
	n := float64(r.Sets)
	res := Result{Workload: "sets", Clients: clients, Unit: "set", Ops: int64(r.Sets), Seconds: setup.Seconds(),
		OpsPerS: n / setup.Seconds(), CallsPerOp: 2}
	res.Figures = []Figure{fig("owners", float64(clients), ""), fig("calls/s", 2*n/setup.Seconds(), ""),
		fig("server CPU", (p1.cpu-p0.cpu)/setup.Seconds(), "cores"), fig("server RSS before", p0.rss/(1<<20), "MB"),
		fig("server RSS after", p1.rss/(1<<20), "MB"), fig("heap in use", heapInuseMB(ctx, r.Admin), "MB"),
		fig("bytes per set", (p1.rss-p0.rss)/n, ""), fig("RSS per set", p1.rss/n, "bytes")}
	res.Checks = []Check{must("first grants (fence 1)", float64(first), strconv.Itoa(r.Sets), first == int64(r.Sets))}
	if r.Sets >= 1_000_000 {
		mb := p1.rss / (1 << 20) * 1_000_000 / n
		res.Checks = append(res.Checks, target("RSS for 1M sets", mb, fmt.Sprintf("<= %d MB", lockTargetRSSMB), mb <= lockTargetRSSMB))
	}
	return res
}
