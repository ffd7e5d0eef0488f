package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/client/clienttest"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Renewal measures the lease renewal service: it hands the service Leases
// client leases, granted by landlords hosted in the bench (the in-memory
// landlord of package clienttest, served on loopback ports), and checks for
// Run that the service keeps every one of them alive. The landlords are
// strict: a renewal that arrives after a lease expired is a lapse, and so is
// a lease found expired by the periodic sweep. Every renewal failure event
// the sets' listener receives is spurious, since no landlord ever refuses a
// live lease.
type Renewal struct {
	Leases, Sets, Landlords int
	LeaseDuration           time.Duration // the longest lease the landlords grant
	RunFor                  time.Duration // steady-state time, after the leases are added
	Sample                  time.Duration // between samples of the server and the landlords
	Clients, Conns          int           // concurrent calls while setting up, and their connections
	Admin                   string
	SetLease                time.Duration // asked for each set
}

// Check implements Bench.
func (b *Renewal) Check() error {
	switch {
	case b.Leases <= 0:
		return fmt.Errorf("--leases %d: want at least 1", b.Leases)
	case b.Sets <= 0:
		return fmt.Errorf("--sets %d: want at least 1", b.Sets)
	case b.Landlords <= 0:
		return fmt.Errorf("--landlords %d: want at least 1", b.Landlords)
	case b.LeaseDuration <= 0:
		return fmt.Errorf("--client-lease %s: want positive", b.LeaseDuration)
	case b.RunFor <= 0:
		return fmt.Errorf("--for %s: want positive", b.RunFor)
	case b.Sample <= 0:
		return fmt.Errorf("--sample %s: want positive", b.Sample)
	case b.Clients <= 0:
		return fmt.Errorf("--clients %d: want at least 1", b.Clients)
	case b.Conns <= 0:
		return fmt.Errorf("--conns %d: want at least 1", b.Conns)
	}
	return djinn.CheckLeaseDuration("--set-lease", b.SetLease)
}

// renewalRun is one run of the renewal bench: what it builds and counts.
type renewalRun struct {
	*Renewal
	env   Env
	conns *Conns

	lls      []*clienttest.Landlord
	failures atomic.Int64 // renewal failure events received
	warnings atomic.Int64 // expiration warning events received (none asked for)
	firstErr atomic.Value // string: the error of the first failure event
	setIDs   [][]byte
	setLeas  [][]byte    // the sets' lease cookies
	setExp   []time.Time // the sets' lease expirations, as the bench knows them
	setGrant time.Duration
	added    atomic.Int64

	res     Result
	rss     struct{ before, peak, final float64 } // MB
	counted struct {                              // the last sample
		p  process
		at time.Time
		ll clienttest.Counts
	}
}

// Run implements Bench. It returns a result whenever it measured
// something, with an error when it could not finish.
func (b *Renewal) Run(ctx context.Context, env Env) (Report, error) {
	var rep Report
	conns, err := dialConns(ctx, env, env.Server, b.Conns)
	if err != nil {
		return rep, err
	}
	defer conns.Close()
	r := &renewalRun{Renewal: b, env: env, conns: conns}
	res, err := r.run(ctx)
	if res != nil {
		env.measured(&rep, *res)
	}
	return rep, err
}

func (r *renewalRun) run(ctx context.Context) (*Result, error) {
	p0, err := readProcess(ctx, r.Admin)
	if err != nil {
		return nil, err
	}
	r.rss.before, r.rss.peak = p0.rss/(1<<20), p0.rss/(1<<20)
	stop, err := r.startLandlords()
	defer stop()
	if err != nil {
		return nil, err
	}
	listener, err := client.Listen(ctx, "127.0.0.1:0", r.notify)
	if err != nil {
		return nil, err
	}
	defer listener.Close()
	// Whatever happens, take the sets away before the landlords go, so
	// the server is not left renewing leases nobody grants.
	defer r.cancelSets()
	if err := r.createSets(ctx, listener.Ref()); err != nil {
		return nil, fmt.Errorf("create sets: %w", err)
	}
	p1, setup, err := r.setup(ctx, p0)
	if err != nil {
		return nil, err
	}
	return r.steady(ctx, p1, setup)
}

// startLandlords serves the landlords on loopback ports.
func (r *renewalRun) startLandlords() (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	for range r.Landlords {
		l := clienttest.NewLandlord(r.LeaseDuration, r.LeaseDuration)
		l.SetRecording(false)
		s, err := l.Listen("127.0.0.1:0")
		if err != nil {
			return stop, err
		}
		stops = append(stops, s)
		r.lls = append(r.lls, l)
	}
	return stop, nil
}

// setup adds the leases, sampling meanwhile; it returns the server's
// process when done and how long it took.
func (r *renewalRun) setup(ctx context.Context, p0 process) (process, time.Duration, error) {
	start := time.Now()
	addErr := make(chan error, 1)
	actx, stopAdding := context.WithCancel(ctx)
	defer stopAdding()
	go func() { addErr <- r.addLeases(actx) }()
	r.counted.p, r.counted.at = p0, start
	tick := time.NewTicker(r.Sample)
	defer tick.Stop()
	for adding := true; adding; {
		select {
		case err := <-addErr:
			if err != nil {
				return process{}, 0, fmt.Errorf("add leases: %w", err)
			}
			adding = false
		case <-tick.C:
			r.sample(ctx, "setup")
		}
	}
	took := time.Since(start)
	p1, err := readProcess(ctx, r.Admin)
	if err != nil {
		return process{}, 0, err
	}
	r.res.Figures = append(r.res.Figures, fig("setup", took.Seconds(), "s"),
		fig("setup adds/s", float64(r.Leases)/took.Seconds(), ""), fig("setup server CPU", (p1.cpu-p0.cpu)/took.Seconds(), "cores"))
	return p1, took, nil
}

// steady watches for RunFor, then reads what the landlords and the server
// counted.
func (r *renewalRun) steady(ctx context.Context, p1 process, setup time.Duration) (*Result, error) {
	c1 := r.counts()
	start := time.Now()
	r.counted.p, r.counted.at, r.counted.ll = p1, start, c1
	end := time.NewTimer(r.RunFor)
	defer end.Stop()
	tick := time.NewTicker(r.Sample)
	defer tick.Stop()
	interrupted := false
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			interrupted, waiting = true, false
		case <-end.C:
			waiting = false
		case <-tick.C:
			r.sample(ctx, "steady")
		}
	}
	elapsed := time.Since(start)
	c2 := r.counts()
	// The end: from here on calls must not depend on ctx, which may have
	// ended.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	p2, err := readProcess(fctx, r.Admin)
	if err != nil {
		return nil, err
	}
	res := r.result(c1, c2, elapsed, (p2.cpu-p1.cpu)/elapsed.Seconds(), p2.rss/(1<<20))
	if interrupted {
		res.Notes = append(res.Notes, "interrupted: the steady window is shorter than asked")
	}
	r.serverMetrics(fctx, res)
	kept, err := r.leasesInSets(fctx)
	if err != nil {
		return res, fmt.Errorf("count the leases in the sets: %w", err)
	}
	res.Checks = append(res.Checks, must("leases kept", float64(kept), strconv.Itoa(r.Leases), kept == int64(r.Leases)))
	return res, nil
}

// result is the bench's result from the landlords' counts at the start
// and the end of the steady window.
func (r *renewalRun) result(c1, c2 clienttest.Counts, elapsed time.Duration, cpu, finalRSS float64) *Result {
	d := c2.Sub(c1)
	calls := d.RenewAllCalls + d.RenewCalls + d.StreamRenewals
	res := r.res
	res.Workload, res.Clients, res.Unit = "renewal", r.Clients, "renewal call"
	res.Ops, res.Seconds, res.OpsPerS = calls, elapsed.Seconds(), float64(calls)/elapsed.Seconds()
	perCall := 0.0
	if calls > 0 {
		perCall = float64(d.Renewed) / float64(calls)
	}
	r.rss.final, r.rss.peak = finalRSS, max(r.rss.peak, finalRSS)
	set := 0.0
	if r.setGrant != djinn.Forever {
		set = r.setGrant.Seconds()
	}
	first, _ := r.firstErr.Load().(string)
	res.Figures = append([]Figure{
		fig("leases", float64(r.Leases), ""), fig("sets", float64(r.Sets), ""), fig("landlords", float64(r.Landlords), ""),
		fig("lease", r.LeaseDuration.Seconds(), "s"), fig("set lease", set, "s (0: forever)"),
	}, res.Figures...)
	res.Figures = append(res.Figures,
		fig("renewAll calls", float64(d.RenewAllCalls), ""), fig("renew calls", float64(d.RenewCalls), ""),
		fig("stream renewals", float64(d.StreamRenewals), ""), fig("leases renewed", float64(d.Renewed), ""),
		fig("leases per call", perCall, ""), fig("leases renewed/s", float64(d.Renewed)/elapsed.Seconds(), ""),
		fig("live at the landlords", float64(c2.Live), ""), fig("unknown renewals", float64(c2.Unknown), ""),
		fig("cancelled", float64(c2.Cancelled), ""), fig("expiration warnings", float64(r.warnings.Load()), ""),
		fig("server CPU", cpu, "cores"), fig("server RSS before", r.rss.before, "MB"), fig("peak RSS", r.rss.peak, "MB"),
		fig("final RSS", r.rss.final, "MB"))
	res.Checks = []Check{
		mustZero("lapses", float64(c2.Lapses)),
		mustZero("failure events", float64(r.failures.Load())),
		target("server CPU", cpu, "<= 1 core", cpu <= 1),
		target("peak RSS", r.rss.peak, "<= 600 MB", r.rss.peak <= 600),
	}
	if first != "" {
		res.Notes = append(res.Notes, "first failure: "+first)
	}
	return &res
}

// serverMetrics adds the server's djinn_renewal_* metrics to res.
func (r *renewalRun) serverMetrics(ctx context.Context, res *Result) {
	m, err := adminMetrics(ctx, r.Admin, func(n string) bool { return strings.HasPrefix(n, "djinn_renewal") })
	if err != nil {
		return
	}
	for _, n := range slices.Sorted(maps.Keys(m)) {
		res.Figures = append(res.Figures, fig(n, m[n], ""))
	}
}

// sample reads the server and the landlords, writes a progress line,
// keeps the peak memory and renews the sets' leases when they need it.
func (r *renewalRun) sample(ctx context.Context, phase string) {
	now := time.Now()
	c := r.counts()
	p, err := readProcess(ctx, r.Admin)
	if err != nil {
		r.env.progress("%s: %v", phase, err)
		return
	}
	r.rss.peak = max(r.rss.peak, p.rss/(1<<20))
	secs := now.Sub(r.counted.at).Seconds()
	d := c.Sub(r.counted.ll)
	calls := d.RenewAllCalls + d.RenewCalls + d.StreamRenewals
	perCall := 0.0
	if calls > 0 {
		perCall = float64(d.Renewed) / float64(calls)
	}
	r.env.progress("%-6s added %7d live %7d | server %.2f cores %4.0f MB | %6.1f calls/s %7.1f leases/call %7.0f renewed/s | lapses %d failures %d",
		phase, r.added.Load(), c.Live, (p.cpu-r.counted.p.cpu)/secs, p.rss/(1<<20),
		float64(calls)/secs, perCall, float64(d.Renewed)/secs, c.Lapses, r.failures.Load())
	r.counted.p, r.counted.at, r.counted.ll = p, now, c
	if err := r.renewSetsIfDue(ctx, now); err != nil {
		r.env.progress("%s: renew the sets' leases: %v", phase, err)
	}
}

// notify counts the events the sets send.
func (r *renewalRun) notify(_ context.Context, ev *client.RemoteEvent) error {
	switch ev.ID {
	case int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_RENEWAL_FAILURE):
		if r.failures.Add(1) == 1 {
			r.firstErr.Store(failureText(ev))
		}
	case int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_EXPIRATION_WARNING):
		r.warnings.Add(1)
	}
	return nil
}

// failureText is what a renewal failure event says went wrong.
func failureText(ev *client.RemoteEvent) string {
	if ev.Payload == nil {
		return "no payload"
	}
	var f djinnpb.RenewalFailure
	if err := ev.Payload.UnmarshalTo(&f); err != nil {
		return "payload: " + err.Error()
	}
	if f.GetError() == nil {
		return "no error recorded (the lease reached its expiration)"
	}
	return fmt.Sprintf("%s: %s", f.GetError().GetKind(), f.GetError().GetMessage())
}

func (r *renewalRun) rs(c int) djinnpb.LeaseRenewalServiceClient {
	return djinnpb.NewLeaseRenewalServiceClient(r.conns.For(c))
}

// createSets creates the sets and gives each the bench's failure listener.
func (r *renewalRun) createSets(ctx context.Context, listener djinn.Ref) error {
	r.setIDs = make([][]byte, r.Sets)
	r.setLeas = make([][]byte, r.Sets)
	r.setExp = make([]time.Time, r.Sets)
	grants := make([]time.Duration, r.Sets)
	target := client.RefToProto(listener)
	start := time.Now()
	err := parallel(ctx, r.Clients, r.Sets, func(ctx context.Context, c, i int) error {
		sent := time.Now()
		s, err := r.rs(c).CreateSet(ctx, &djinnpb.CreateSetRequest{LeaseDurationNanos: int64(r.SetLease)})
		if err != nil {
			return err
		}
		r.setIDs[i] = s.GetSet().GetObjectId()
		r.setLeas[i] = s.GetLease().GetCookie()
		grants[i] = time.Duration(s.GetLease().GetDurationNanos())
		r.setExp[i] = djinn.AddDuration(sent, grants[i])
		_, err = r.rs(c).SetRenewalFailureListener(ctx, &djinnpb.SetRenewalFailureListenerRequest{
			SetId: r.setIDs[i], Listener: target, Handback: []byte(strconv.Itoa(i))})
		return err
	})
	if err != nil {
		return err
	}
	r.setGrant = grants[0]
	r.env.progress("sets   %d created in %.1f s, set lease %s", r.Sets, time.Since(start).Seconds(), djinn.FormatDuration(r.setGrant))
	return nil
}

// addLeases grants the client leases and adds them to the sets: lease i
// goes to set i mod sets, from landlord (i div sets) mod landlords, so
// that every set holds leases of every landlord. Each lease is granted
// just before it is added, so none expires while the others are added.
func (r *renewalRun) addLeases(ctx context.Context) error {
	return parallel(ctx, r.Clients, r.Leases, func(ctx context.Context, c, i int) error {
		set := i % r.Sets
		lease, err := r.lls[(i/r.Sets)%len(r.lls)].Grant(djinn.Any)
		if err != nil {
			return err
		}
		_, err = r.rs(c).RenewFor(ctx, &djinnpb.RenewForRequest{SetId: r.setIDs[set], Lease: lease,
			DesiredDurationNanos: int64(djinn.Forever), RenewDurationNanos: int64(djinn.Forever)})
		if err != nil {
			return fmt.Errorf("lease %d into set %d: %w", i, set, err)
		}
		r.added.Add(1)
		return nil
	})
}

// renewSetsIfDue renews the sets' leases once the first of them is within
// half a granted term of expiring.
func (r *renewalRun) renewSetsIfDue(ctx context.Context, now time.Time) error {
	if r.setGrant == djinn.Forever || len(r.setExp) == 0 || slices.MinFunc(r.setExp, time.Time.Compare).Sub(now) > r.setGrant/2 {
		return nil
	}
	ll := djinnpb.NewLandlordClient(r.conns.For(0))
	for lo := 0; lo < len(r.setLeas); lo += batch.MaxLeases {
		hi := min(lo+batch.MaxLeases, len(r.setLeas))
		req := &djinnpb.RenewAllRequest{DurationNanos: make([]int64, hi-lo)}
		for i := lo; i < hi; i++ {
			req.Cookies = append(req.Cookies, r.setLeas[i]...)
			req.DurationNanos[i-lo] = int64(r.SetLease)
		}
		sent := time.Now()
		resp, err := ll.RenewAll(ctx, req)
		if err != nil {
			return err
		}
		if len(resp.GetErrors()) > 0 {
			e := resp.GetErrors()[0]
			return fmt.Errorf("set %d of %d failed: %s", lo+int(e.GetIndex()), len(resp.GetErrors()), e.GetError().GetMessage())
		}
		for i, g := range resp.GetGrantedNanos() {
			r.setExp[lo+i] = djinn.AddDuration(sent, time.Duration(g))
		}
	}
	return nil
}

// leasesInSets sums the client leases the service holds in the sets.
func (r *renewalRun) leasesInSets(ctx context.Context) (int64, error) {
	var n atomic.Int64
	err := parallel(ctx, r.Clients, r.Sets, func(ctx context.Context, c, i int) error {
		s, err := r.rs(c).GetSet(ctx, &djinnpb.SetRequest{SetId: r.setIDs[i]})
		if err != nil {
			return fmt.Errorf("set %d: %w", i, err)
		}
		n.Add(s.GetLeases())
		return nil
	})
	return n.Load(), err
}

// cancelSets cancels the sets' leases, which ends the sets.
func (r *renewalRun) cancelSets() { cancelLeases(r.env, r.conns.For(0), "renewal sets", r.setLeas) }

// counts sweeps the landlords and sums their counters.
func (r *renewalRun) counts() clienttest.Counts {
	var sum clienttest.Counts
	for _, l := range r.lls {
		l.Sweep()
		sum = sum.Add(l.Counts())
	}
	return sum
}
