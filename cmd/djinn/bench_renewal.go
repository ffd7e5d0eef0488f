package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The renewal bench measures the lease renewal service of a server running
// in its own process: it hands the service --leases client leases, granted
// by landlords hosted in the bench, and checks for --run that the service
// keeps every one of them alive. The landlords are strict: a renewal that
// arrives after a lease expired is a lapse, and so is a lease found expired
// by the periodic sweep. Every renewal failure event the sets' listener
// receives is spurious, since no landlord ever refuses a live lease.

func newBenchRenewal(g *globals) *cobra.Command {
	b := &renewalBench{}
	var setLease string
	cmd := &cobra.Command{
		Use:   "renewal",
		Short: "Keep client leases alive through the lease renewal service and count lapses",
		Long: `Measure the lease renewal service of a djinn server running in its own
process (--server, with its admin endpoint at --admin).

The bench hosts --landlords landlords that grant leases of at most
--lease-duration, creates --sets renewal sets with a renewal failure
listener hosted here, and adds --leases client leases (spread evenly over
sets and landlords) with renewFor(lease, Forever), --clients calls at a
time. It then watches for --run: the server's CPU and resident memory,
the renewal calls the landlords receive, lapses (a lease the landlords saw
expire) and renewal failure events. It exits non-zero when a lease lapsed,
a failure event arrived, or a set lost a lease.

The issue's configuration is the default; a quick check is
  djinn bench renewal --leases 20000 --sets 200 --run 30s --lease-duration 10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := djinn.ParseDuration(setLease)
			if err != nil {
				return fmt.Errorf("--set-lease: %w", err)
			}
			b.setLease = d
			if err := b.check(); err != nil {
				return err
			}
			ccs, closeConns, err := g.dialConns(cmd.Context(), b.conns)
			if err != nil {
				return err
			}
			defer closeConns()
			b.ccs = ccs
			b.progress = cmd.ErrOrStderr()
			res, runErr := b.run(cmd.Context())
			if res == nil {
				return runErr
			}
			if err := g.print(cmd.OutOrStdout(), res, res.print); err != nil {
				return err
			}
			if runErr != nil {
				return runErr
			}
			return res.verdict()
		},
	}
	f := cmd.Flags()
	f.IntVar(&b.leases, "leases", 1_000_000, "client leases to keep alive")
	f.IntVar(&b.sets, "sets", 10_000, "renewal sets the leases are spread over")
	f.IntVar(&b.landlords, "landlords", 4, "landlords hosted by the bench, granting the leases")
	f.DurationVar(&b.leaseDuration, "lease-duration", time.Minute, "the longest lease the landlords grant")
	f.DurationVar(&b.runFor, "run", 10*time.Minute, "steady-state time, after the leases are added")
	f.DurationVar(&b.sample, "sample", 5*time.Second, "time between samples of the server and the landlords")
	f.IntVar(&b.clients, "clients", 64, "concurrent calls while setting up")
	f.IntVar(&b.conns, "conns", 4, "gRPC connections the setup calls share")
	f.StringVar(&b.admin, "admin", "127.0.0.1:4162", "admin address of the server, for its CPU and memory")
	f.StringVar(&setLease, "set-lease", "forever", "lease asked for each set (the server may grant less; the bench renews it)")
	return cmd
}

// renewalBench is one run of the renewal bench: its flags, then what it
// builds.
type renewalBench struct {
	leases, sets, landlords int
	leaseDuration           time.Duration
	runFor, sample          time.Duration
	clients, conns          int
	admin                   string
	setLease                time.Duration

	ccs      []*grpc.ClientConn // setup client c uses ccs[c%len(ccs)]
	progress io.Writer          // a line per sample

	lls      []*benchLandlord
	listener *client.Listener
	failures atomic.Int64 // renewal failure events received
	warnings atomic.Int64 // expiration warning events received (none asked for)
	firstErr atomic.Value // string: the error of the first failure event
	setIDs   [][]byte
	setLeas  [][]byte    // the sets' lease cookies
	setExp   []time.Time // the sets' lease expirations, as the bench knows them
	setGrant time.Duration
	added    atomic.Int64
}

func (b *renewalBench) check() error {
	switch {
	case b.leases <= 0:
		return fmt.Errorf("leases %d: want at least 1", b.leases)
	case b.sets <= 0:
		return fmt.Errorf("sets %d: want at least 1", b.sets)
	case b.landlords <= 0:
		return fmt.Errorf("landlords %d: want at least 1", b.landlords)
	case b.leaseDuration <= 0:
		return fmt.Errorf("lease duration %s: want positive", b.leaseDuration)
	case b.runFor <= 0:
		return fmt.Errorf("run %s: want positive", b.runFor)
	case b.sample <= 0:
		return fmt.Errorf("sample %s: want positive", b.sample)
	case b.clients <= 0:
		return fmt.Errorf("clients %d: want at least 1", b.clients)
	case b.conns <= 0:
		return fmt.Errorf("conns %d: want at least 1", b.conns)
	}
	return djinn.CheckLeaseDuration("set lease", b.setLease)
}

// renewalBenchResult is what the bench measured. Rates are over the steady
// window, which starts when the last lease was added.
type renewalBenchResult struct {
	Leases        int     `json:"leases"`
	LeasesKept    int64   `json:"leases_kept"`   // in the service's sets at the end
	LandlordLive  int64   `json:"landlord_live"` // unexpired at the landlords at the end
	Sets          int     `json:"sets"`          //
	Landlords     int     `json:"landlords"`     //
	LeaseSeconds  float64 `json:"lease_seconds"` // the landlords' longest lease
	SetLeaseS     float64 `json:"set_lease_s"`   // what the server granted on a set
	SetupSeconds  float64 `json:"setup_seconds"` // adding the leases
	SetupAddsPerS float64 `json:"setup_adds_per_s"`
	SetupCPU      float64 `json:"setup_cpu_cores"`
	RunSeconds    float64 `json:"run_seconds"` // the steady window

	RenewAllCalls    int64              `json:"renewall_calls"`
	RenewCalls       int64              `json:"renew_calls"`
	StreamRenewals   int64              `json:"stream_renewals"`
	LeasesRenewed    int64              `json:"leases_renewed"`
	CallsPerS        float64            `json:"renewal_calls_per_s"`
	LeasesPerCall    float64            `json:"leases_per_call"`
	LeasesRenewedS   float64            `json:"leases_renewed_per_s"`
	Lapses           int64              `json:"lapses"`           // whole bench, setup included
	UnknownRenewals  int64              `json:"unknown_renewals"` // renewals of cookies the landlords did not hold
	Cancelled        int64              `json:"cancelled"`        // client leases the service cancelled
	FailureEvents    int64              `json:"failure_events"`
	FirstFailure     string             `json:"first_failure,omitempty"`
	WarningEvents    int64              `json:"warning_events"`
	ServerCPU        float64            `json:"server_cpu_cores"` // steady window
	RSSBeforeMB      float64            `json:"rss_before_mb"`
	PeakRSSMB        float64            `json:"peak_rss_mb"` // over the whole bench
	FinalRSSMB       float64            `json:"final_rss_mb"`
	Interrupted      bool               `json:"interrupted,omitempty"`
	ServerRenewalSvc map[string]float64 `json:"server_renewal_metrics,omitempty"` // djinn_renewal_* at the end
}

func (r *renewalBenchResult) print(w io.Writer) {
	fmt.Fprintf(w, "renewal bench: %d client leases of %s in %d sets from %d landlords\n",
		r.Leases, time.Duration(r.LeaseSeconds*float64(time.Second)), r.Sets, r.Landlords)
	if r.Interrupted {
		fmt.Fprintln(w, "  (interrupted: the steady window is shorter than asked)")
	}
	fmt.Fprintf(w, "  %-20s %d adds in %.1f s (%.0f adds/s, server %.2f cores)\n", "setup", r.Leases, r.SetupSeconds, r.SetupAddsPerS, r.SetupCPU)
	fmt.Fprintf(w, "  %-20s %.1f s\n", "steady window", r.RunSeconds)
	fmt.Fprintf(w, "  %-20s %d in the sets, %d live at the landlords\n", "leases kept", r.LeasesKept, r.LandlordLive)
	fmt.Fprintf(w, "  %-20s %.1f (renewAll %d, renew %d, stream renewals %d)\n", "renewal calls/s", r.CallsPerS, r.RenewAllCalls, r.RenewCalls, r.StreamRenewals)
	fmt.Fprintf(w, "  %-20s %.1f\n", "leases per call", r.LeasesPerCall)
	fmt.Fprintf(w, "  %-20s %.0f\n", "leases renewed/s", r.LeasesRenewedS)
	fmt.Fprintf(w, "  %-20s %d%s\n", "lapses", r.Lapses, mark(r.Lapses == 0, "must be 0"))
	fmt.Fprintf(w, "  %-20s %d%s\n", "failure events", r.FailureEvents, mark(r.FailureEvents == 0, "must be 0"))
	if r.FirstFailure != "" {
		fmt.Fprintf(w, "  %-20s %s\n", "first failure", r.FirstFailure)
	}
	if r.UnknownRenewals != 0 || r.Cancelled != 0 || r.WarningEvents != 0 {
		fmt.Fprintf(w, "  %-20s unknown renewals %d, cancelled %d, expiration warnings %d\n", "also", r.UnknownRenewals, r.Cancelled, r.WarningEvents)
	}
	fmt.Fprintf(w, "  %-20s %.2f cores%s\n", "server CPU", r.ServerCPU, mark(r.ServerCPU <= 1, "target <= 1"))
	fmt.Fprintf(w, "  %-20s peak %.0f MB, final %.0f MB, before %.0f MB%s\n", "server RSS", r.PeakRSSMB, r.FinalRSSMB, r.RSSBeforeMB, mark(r.PeakRSSMB <= 600, "target <= 600 MB"))
	names := make([]string, 0, len(r.ServerRenewalSvc))
	for n := range r.ServerRenewalSvc {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-20s %s %g\n", "server metric", n, r.ServerRenewalSvc[n])
	}
}

func mark(ok bool, target string) string {
	if ok {
		return "   (" + target + ": ok)"
	}
	return "   (" + target + ": FAILED)"
}

// verdict is the bench's exit status: lapses, failure events and lost
// leases are failures of the renewal service.
func (r *renewalBenchResult) verdict() error {
	var errs []error
	if r.Lapses != 0 {
		errs = append(errs, fmt.Errorf("%d leases lapsed", r.Lapses))
	}
	if r.FailureEvents != 0 {
		errs = append(errs, fmt.Errorf("%d renewal failure events", r.FailureEvents))
	}
	if r.LeasesKept != int64(r.Leases) {
		errs = append(errs, fmt.Errorf("the sets hold %d of %d leases", r.LeasesKept, r.Leases))
	}
	return errors.Join(errs...)
}

// run runs the bench. It returns a result whenever it measured something,
// with an error when it could not finish.
func (b *renewalBench) run(ctx context.Context) (*renewalBenchResult, error) {
	p0, err := readProcess(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	res := &renewalBenchResult{Leases: b.leases, Sets: b.sets, Landlords: b.landlords,
		LeaseSeconds: b.leaseDuration.Seconds(), RSSBeforeMB: p0.rss / (1 << 20), PeakRSSMB: p0.rss / (1 << 20)}
	for range b.landlords {
		l, err := startBenchLandlord(b.leaseDuration)
		if err != nil {
			return nil, err
		}
		defer l.close()
		b.lls = append(b.lls, l)
	}
	b.listener, err = client.Listen(ctx, "127.0.0.1:0", b.notify)
	if err != nil {
		return nil, err
	}
	defer b.listener.Close()
	// Whatever happens, take the sets away before the landlords go, so
	// the server is not left renewing leases nobody grants.
	defer b.cancelSets()

	if err := b.createSets(ctx); err != nil {
		return nil, fmt.Errorf("create sets: %w", err)
	}
	if b.setGrant != djinn.Forever {
		res.SetLeaseS = b.setGrant.Seconds()
	}

	// Setup: add the leases, sampling meanwhile.
	setupStart := time.Now()
	addErr := make(chan error, 1)
	actx, stopAdding := context.WithCancel(ctx)
	defer stopAdding()
	go func() { addErr <- b.addLeases(actx) }()
	var smp sampler
	smp.prev, smp.prevAt = p0, setupStart
	tick := time.NewTicker(b.sample)
	defer tick.Stop()
	for adding := true; adding; {
		select {
		case err := <-addErr:
			if err != nil {
				return nil, fmt.Errorf("add leases: %w", err)
			}
			adding = false
		case <-tick.C:
			b.sampleOnce(ctx, &smp, res, "setup")
		}
	}
	setup := time.Since(setupStart)
	res.SetupSeconds = setup.Seconds()
	res.SetupAddsPerS = float64(b.leases) / setup.Seconds()

	// Steady state.
	p1, err := readProcess(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	res.SetupCPU = (p1.cpu - p0.cpu) / setup.Seconds()
	c1 := b.counts(time.Now())
	start := time.Now()
	end := time.NewTimer(b.runFor)
	defer end.Stop()
	smp.prev, smp.prevAt, smp.prevCounts = p1, start, c1
steady:
	for {
		select {
		case <-ctx.Done():
			res.Interrupted = true
			break steady
		case <-end.C:
			break steady
		case <-tick.C:
			b.sampleOnce(ctx, &smp, res, "steady")
		}
	}
	elapsed := time.Since(start)
	c2 := b.counts(time.Now())

	// The end: from here on calls must not depend on ctx, which may have
	// ended.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	p2, err := readProcess(fctx, b.admin)
	if err != nil {
		return nil, err
	}
	d := c2.sub(c1)
	calls := d.RenewAllCalls + d.RenewCalls + d.StreamRenewals
	res.RunSeconds = elapsed.Seconds()
	res.RenewAllCalls, res.RenewCalls, res.StreamRenewals, res.LeasesRenewed = d.RenewAllCalls, d.RenewCalls, d.StreamRenewals, d.Renewed
	res.CallsPerS = float64(calls) / elapsed.Seconds()
	if calls > 0 {
		res.LeasesPerCall = float64(d.Renewed) / float64(calls)
	}
	res.LeasesRenewedS = float64(d.Renewed) / elapsed.Seconds()
	res.Lapses, res.UnknownRenewals, res.Cancelled, res.LandlordLive = c2.Lapses, c2.Unknown, c2.Cancelled, c2.Live
	res.FailureEvents, res.WarningEvents = b.failures.Load(), b.warnings.Load()
	res.FirstFailure, _ = b.firstErr.Load().(string)
	res.ServerCPU = (p2.cpu - p1.cpu) / elapsed.Seconds()
	res.FinalRSSMB = p2.rss / (1 << 20)
	res.PeakRSSMB = max(res.PeakRSSMB, res.FinalRSSMB)
	if m, err := adminMetrics(fctx, b.admin, func(n string) bool { return strings.HasPrefix(n, "djinn_renewal") }); err == nil && len(m) > 0 {
		res.ServerRenewalSvc = m
	}
	kept, err := b.leasesInSets(fctx)
	if err != nil {
		return res, fmt.Errorf("count the leases in the sets: %w", err)
	}
	res.LeasesKept = kept
	return res, nil
}

// sampler carries one sample to the next.
type sampler struct {
	prev       process
	prevAt     time.Time
	prevCounts landlordCounts
}

// sampleOnce reads the server and the landlords, prints a progress line,
// keeps the peak memory and renews the sets' leases when they need it.
func (b *renewalBench) sampleOnce(ctx context.Context, s *sampler, res *renewalBenchResult, phase string) {
	now := time.Now()
	c := b.counts(now)
	p, err := readProcess(ctx, b.admin)
	if err != nil {
		fmt.Fprintf(b.progress, "%s: %v\n", phase, err)
		return
	}
	res.PeakRSSMB = max(res.PeakRSSMB, p.rss/(1<<20))
	secs := now.Sub(s.prevAt).Seconds()
	d := c.sub(s.prevCounts)
	calls := d.RenewAllCalls + d.RenewCalls + d.StreamRenewals
	perCall := 0.0
	if calls > 0 {
		perCall = float64(d.Renewed) / float64(calls)
	}
	fmt.Fprintf(b.progress, "%-6s added %7d live %7d | server %.2f cores %4.0f MB | %6.1f calls/s %7.1f leases/call %7.0f renewed/s | lapses %d failures %d\n",
		phase, b.added.Load(), c.Live, (p.cpu-s.prev.cpu)/secs, p.rss/(1<<20),
		float64(calls)/secs, perCall, float64(d.Renewed)/secs, c.Lapses, b.failures.Load())
	s.prev, s.prevAt, s.prevCounts = p, now, c
	if err := b.renewSetsIfDue(ctx, now); err != nil {
		fmt.Fprintf(b.progress, "%s: renew the sets' leases: %v\n", phase, err)
	}
}

// notify counts the events the sets send.
func (b *renewalBench) notify(_ context.Context, ev *client.RemoteEvent) error {
	switch ev.ID {
	case int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_RENEWAL_FAILURE):
		if b.failures.Add(1) == 1 {
			var f djinnpb.RenewalFailure
			msg := "no payload"
			if ev.Payload != nil {
				if err := ev.Payload.UnmarshalTo(&f); err != nil {
					msg = "payload: " + err.Error()
				} else if f.GetError() != nil {
					msg = fmt.Sprintf("%s: %s", f.GetError().GetKind(), f.GetError().GetMessage())
				} else {
					msg = "no error recorded (the lease reached its expiration)"
				}
			}
			b.firstErr.Store(msg)
		}
	case int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_EXPIRATION_WARNING):
		b.warnings.Add(1)
	}
	return nil
}

// parallel calls fn(c, i) for i in [0, n) on b.clients goroutines, client c
// making the calls of goroutine c, and returns the first error.
func (b *renewalBench) parallel(ctx context.Context, n int, fn func(ctx context.Context, c, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for c := range min(b.clients, n) {
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

func (b *renewalBench) rs(c int) djinnpb.LeaseRenewalServiceClient {
	return djinnpb.NewLeaseRenewalServiceClient(b.ccs[c%len(b.ccs)])
}

// createSets creates the sets and gives each the bench's failure listener.
func (b *renewalBench) createSets(ctx context.Context) error {
	b.setIDs = make([][]byte, b.sets)
	b.setLeas = make([][]byte, b.sets)
	b.setExp = make([]time.Time, b.sets)
	grants := make([]time.Duration, b.sets)
	target := client.RefToProto(b.listener.Ref())
	start := time.Now()
	err := b.parallel(ctx, b.sets, func(ctx context.Context, c, i int) error {
		sent := time.Now()
		s, err := b.rs(c).CreateSet(ctx, &djinnpb.CreateSetRequest{LeaseDurationNanos: int64(b.setLease)})
		if err != nil {
			return err
		}
		b.setIDs[i] = s.GetSet().GetObjectId()
		b.setLeas[i] = s.GetLease().GetCookie()
		grants[i] = time.Duration(s.GetLease().GetDurationNanos())
		b.setExp[i] = djinn.AddDuration(sent, grants[i])
		_, err = b.rs(c).SetRenewalFailureListener(ctx, &djinnpb.SetRenewalFailureListenerRequest{
			SetId: b.setIDs[i], Listener: target, Handback: []byte(strconv.Itoa(i))})
		return err
	})
	if err != nil {
		return err
	}
	b.setGrant = grants[0]
	fmt.Fprintf(b.progress, "sets   %d created in %.1f s, set lease %s\n", b.sets, time.Since(start).Seconds(), djinn.FormatDuration(b.setGrant))
	return nil
}

// addLeases grants the client leases and adds them to the sets: lease i
// goes to set i mod sets, from landlord (i div sets) mod landlords, so
// that every set holds leases of every landlord. Each lease is granted
// just before it is added, so none expires while the others are added.
func (b *renewalBench) addLeases(ctx context.Context) error {
	return b.parallel(ctx, b.leases, func(ctx context.Context, c, i int) error {
		set := i % b.sets
		l := b.lls[(i/b.sets)%len(b.lls)]
		cookie, exp := l.grant(time.Now())
		lease := &djinnpb.Lease{Landlord: l.refpb, Cookie: cookie[:],
			DurationNanos: int64(time.Until(exp)), Format: djinnpb.SerialFormat_SERIAL_FORMAT_DURATION}
		_, err := b.rs(c).RenewFor(ctx, &djinnpb.RenewForRequest{SetId: b.setIDs[set], Lease: lease,
			DesiredDurationNanos: int64(djinn.Forever), RenewDurationNanos: int64(djinn.Forever)})
		if err != nil {
			return fmt.Errorf("lease %d into set %d: %w", i, set, err)
		}
		b.added.Add(1)
		return nil
	})
}

// renewSetsIfDue renews the sets' leases once the first of them is within
// half a granted term of expiring.
func (b *renewalBench) renewSetsIfDue(ctx context.Context, now time.Time) error {
	if b.setGrant == djinn.Forever || len(b.setExp) == 0 {
		return nil
	}
	first := b.setExp[0]
	for _, e := range b.setExp {
		if e.Before(first) {
			first = e
		}
	}
	if first.Sub(now) > b.setGrant/2 {
		return nil
	}
	ll := djinnpb.NewLandlordClient(b.ccs[0])
	for lo := 0; lo < len(b.setLeas); lo += batch.MaxLeases {
		hi := min(lo+batch.MaxLeases, len(b.setLeas))
		req := &djinnpb.RenewAllRequest{DurationNanos: make([]int64, hi-lo)}
		for i := lo; i < hi; i++ {
			req.Cookies = append(req.Cookies, b.setLeas[i]...)
			req.DurationNanos[i-lo] = int64(b.setLease)
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
			b.setExp[lo+i] = djinn.AddDuration(sent, time.Duration(g))
		}
	}
	return nil
}

// leasesInSets sums the client leases the service holds in the sets.
func (b *renewalBench) leasesInSets(ctx context.Context) (int64, error) {
	var n atomic.Int64
	err := b.parallel(ctx, b.sets, func(ctx context.Context, c, i int) error {
		s, err := b.rs(c).GetSet(ctx, &djinnpb.SetRequest{SetId: b.setIDs[i]})
		if err != nil {
			return fmt.Errorf("set %d: %w", i, err)
		}
		n.Add(s.GetLeases())
		return nil
	})
	return n.Load(), err
}

// cancelSets cancels the sets' leases, which ends the sets.
func (b *renewalBench) cancelSets() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cookies []byte
	for _, c := range b.setLeas {
		if c != nil {
			cookies = append(cookies, c...)
		}
	}
	ll := djinnpb.NewLandlordClient(b.ccs[0])
	for lo := 0; lo < len(cookies); lo += 16 * batch.MaxLeases {
		hi := min(lo+16*batch.MaxLeases, len(cookies))
		if _, err := ll.CancelAll(ctx, &djinnpb.CancelAllRequest{Cookies: cookies[lo:hi]}); err != nil {
			fmt.Fprintf(b.progress, "cancel the sets: %v\n", err)
			return
		}
	}
}

// counts sweeps the landlords at now and sums their counters.
func (b *renewalBench) counts(now time.Time) landlordCounts {
	var sum landlordCounts
	for _, l := range b.lls {
		l.sweep(now)
		sum = sum.add(l.counts())
	}
	return sum
}

// process is what the server's admin endpoint says of its process.
type process struct {
	rss float64 // bytes
	cpu float64 // seconds
}

func readProcess(ctx context.Context, admin string) (process, error) {
	m, err := adminMetrics(ctx, admin, func(n string) bool {
		return n == "process_resident_memory_bytes" || n == "process_cpu_seconds_total"
	})
	if err != nil {
		return process{}, err
	}
	rss, ok1 := m["process_resident_memory_bytes"]
	cpu, ok2 := m["process_cpu_seconds_total"]
	if !ok1 || !ok2 {
		return process{}, fmt.Errorf("no process metrics at %s", admin)
	}
	return process{rss: rss, cpu: cpu}, nil
}

// adminMetrics reads the server's admin /metrics and returns the samples
// whose names (labels included) keep accepts.
func adminMetrics(ctx context.Context, admin string, keep func(name string) bool) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read server metrics from %s: %w", admin, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read server metrics from %s: %s", admin, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || !keep(line[:i]) {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}
