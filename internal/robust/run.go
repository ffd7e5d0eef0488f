package robust

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
)

// Run is one fault schedule against a cluster: the workers, the faults,
// and what was recorded.
type Run struct {
	c     *Cluster
	clock Clock
	seed  int64
	log   func(format string, args ...any)

	kv, lock   History
	leases     LeaseLog
	mailbox    MailboxLog
	deliveries DeliveryLog
	txns       TxnLog
	items      ItemLog
	renewals   RenewalLog
	isolation  IsolationLog
	// intruder is the principal the isolation workload's intruder calls
	// as: Bob, but for a test that plants a leak.
	intruder Principal
	sets     [][]byte // the lock workload's sets

	// grace ends when the run stops asking again the calls whose answers
	// were lost: after the workload, once the faults are healed.
	grace context.Context

	mu      sync.Mutex
	counts  map[string]int             // guarded by mu
	outages map[string][]time.Duration // unavailability by fault kind, guarded by mu
	windows [][2]int64                 // when each fault began and the cluster was whole again, guarded by mu
	phase   string                     // what the schedule is doing, guarded by mu

	told0, untold0 int // the network's TLS Raft senders told and not, when the run began
}

// Report is what a run found.
type Report struct {
	Faults     map[string]int
	Ops        map[string]int // operations recorded by history
	Violations map[string][]string
	Counts     map[string]int
	Outages    map[string][]time.Duration
}

// Workers is how many workers of each workload a run starts, the least
// time they work (the faults may take longer), and the least time they
// go on working after the last fault (a second unless said).
type Workers struct {
	KV, Lock, Lease, Txn, Lookup, Renewal int
	Mailbox                               bool
	Delivery                              int // mailbox registrations received over delivery streams
	Isolation                             int // workers trying one principal's resources as the other
	For                                   time.Duration
	Tail                                  time.Duration
}

// NewRun prepares a run on a started cluster.
func NewRun(c *Cluster, seed int64, log func(string, ...any)) *Run {
	r := &Run{c: c, clock: Clock{start: time.Now()}, seed: seed, log: log,
		counts: map[string]int{}, outages: map[string][]time.Duration{}, intruder: Bob}
	r.told0, r.untold0 = c.Net.TLSSenders()
	return r
}

func (r *Run) count(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[what]++
}

func (r *Run) countN(what string, n int) {
	if n == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[what] += n
}

// setPhase names what the schedule does from now on.
func (r *Run) setPhase(p string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.phase = p
}

func (r *Run) phaseNow() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.phase
}

func (r *Run) window(from, to int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.windows = append(r.windows, [2]int64{from, to})
}

func (r *Run) outage(kind string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outages[kind] = append(r.outages[kind], d)
}

// pause waits d or until ctx ends.
func (r *Run) pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Go runs the workers while schedule injects its faults, then heals the
// network, restarts whatever is down, lets the lost calls be asked again
// and checks the histories.
func (r *Run) Go(ctx context.Context, w Workers, faults []Fault) (*Report, error) {
	if err := r.lockSets(ctx, 2); err != nil {
		return nil, err
	}
	r.setPhase("before the faults")
	grace, cancelGrace := context.WithCancel(ctx)
	defer cancelGrace()
	r.grace = grace
	work, stopWork := context.WithCancel(ctx)
	var wg sync.WaitGroup
	start := func(n int, base int, f func(context.Context, int, *rand.Rand)) {
		for i := range n {
			wg.Add(1)
			id := base + i
			rng := rand.New(rand.NewPCG(uint64(r.seed), uint64(id)))
			go func() { defer wg.Done(); f(work, id, rng) }()
		}
	}
	start(w.KV, 0, r.kvWorker)
	start(w.Lock, 0, r.lockWorker)
	start(w.Lease, 100, r.leaseWorker)
	start(w.Txn, 200, r.txnWorker)
	start(w.Lookup, 300, r.lookupWorker)
	start(w.Renewal, 401, r.renewalWorker) // Bob's: the other workloads' first workers are Alice's
	for i := range w.Isolation {
		wg.Add(1)
		go func() { defer wg.Done(); r.isolationWorker(work, 500+i) }()
	}
	if w.Mailbox {
		wg.Add(1)
		go func() { defer wg.Done(); r.mailboxWorkload(work) }()
	}
	if w.Delivery > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); r.deliveryWorkload(work, w.Delivery) }()
	}

	injected := map[string]int{}
	var err error
	rng := rand.New(rand.NewPCG(uint64(r.seed), 0xfa17))
	for i, f := range faults {
		r.pause(ctx, time.Duration(500+rng.IntN(1000))*time.Millisecond)
		r.setPhase(fmt.Sprintf("fault %d of %d: %s", i+1, len(faults), f.Kind))
		if err = r.inject(ctx, f, rng); err != nil {
			break
		}
		injected[f.Kind]++
	}
	r.setPhase("after the faults")
	r.pause(ctx, max(time.Second, w.Tail, w.For-time.Since(r.clock.start)))
	stopWork()
	if herr := r.heal(ctx); err == nil {
		err = herr
	}
	r.setPhase("healed, work stopped")
	// Calls whose answers were lost are asked again until they are
	// answered, for a while.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cancelGrace()
		<-done
	}
	if err != nil {
		return nil, err
	}
	rep := r.check(injected)
	tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	rep.Violations["transactions"] = r.CheckTxns(tctx)
	rep.Ops["txn"] = len(r.txns.Records())
	return rep, nil
}

// heal removes every network rule and starts every stopped member, then
// waits until all are voters again.
func (r *Run) heal(ctx context.Context) error {
	r.c.Net.Heal()
	for _, n := range r.c.Nodes {
		if !n.Up() {
			if err := n.Start(ctx); err != nil {
				return err
			}
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return r.c.WaitVoters(wctx)
}

func (r *Run) check(injected map[string]int) *Report {
	rep := &Report{Faults: injected, Ops: map[string]int{}, Violations: map[string][]string{}, Counts: map[string]int{}, Outages: map[string][]time.Duration{}}
	kv, lock, leases := r.kv.Ops(), r.lock.Ops(), r.leases.Leases()
	rep.Ops["kv"], rep.Ops["lock"] = len(kv), len(lock)
	for _, l := range leases {
		rep.Ops["lease"] += len(l)
	}
	rep.Violations["kv linearizable"] = CheckLinearizable("kv", KVModel, kv, time.Minute)
	rep.Violations["lock linearizable"] = CheckLinearizable("lock", LockModel, lock, time.Minute)
	rep.Violations["fencing"] = CheckFencing(lock)
	rep.Violations["lease safety"] = CheckLeases(leases)
	rep.Violations["mailbox"] = CheckMailbox(&r.mailbox)
	rep.Ops["mailbox"] = r.mailbox.ops()
	rep.Violations["delivery"] = CheckDeliveries(r.deliveries.Snapshot())
	rep.Ops["delivery"] = r.deliveries.ops()
	items := r.items.Items()
	for _, it := range items {
		rep.Ops["lookup"] += len(it)
	}
	rep.Violations["lookup"] = CheckLookups(items)
	cls, failures, pulled := r.renewals.Snapshot()
	for _, cl := range cls {
		rep.Ops["renewal"] += len(cl.Added) + len(cl.Removed) + len(cl.Cancel) + len(cl.SetEnd) + len(cl.Seen)
	}
	var excused int
	r.mu.Lock()
	windows := append([][2]int64(nil), r.windows...)
	r.mu.Unlock()
	rep.Violations["renewal"], excused = CheckRenewals(cls, failures, pulled, windows)
	attempts, changed := r.isolation.Snapshot()
	rep.Ops["isolation"] = len(attempts)
	rep.Violations["isolation"] = CheckIsolation(attempts, changed)
	r.countN("renewal: leases lost in an outage (allowed)", excused)
	told, untold := r.c.Net.TLSSenders()
	r.countN("raft TLS connections: sender told by its process", told-r.told0)
	r.countN("raft TLS connections: sender not told", untold-r.untold0)
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range r.counts {
		rep.Counts[k] = v
	}
	for k, v := range r.outages {
		rep.Outages[k] = v
	}
	return rep
}

// Failed lists every violation, checker by checker, and every check that
// did not finish.
func (rep *Report) Failed() []string {
	var out []string
	for k, v := range rep.Violations {
		for _, s := range v {
			out = append(out, k+": "+s)
		}
	}
	sort.Strings(out)
	return out
}

// violations counts a checker's violations, leaving out checks that did
// not finish.
func violations(v []string) (found, unfinished int) {
	for _, s := range v {
		if strings.HasPrefix(s, ErrUnfinished) {
			unfinished++
		} else {
			found++
		}
	}
	return found, unfinished
}

// String is a one-line summary.
func (rep *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "faults %v; operations %v; violations", rep.Faults, rep.Ops)
	for _, k := range sortedKeys(rep.Violations) {
		n, u := violations(rep.Violations[k])
		fmt.Fprintf(&b, " %s=%d", k, n)
		if u > 0 {
			fmt.Fprintf(&b, " (%d unfinished)", u)
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
