package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// benchResult is one measured workload at one concurrency.
type benchResult struct {
	Op      string  `json:"op"`
	Clients int     `json:"clients"`
	Ops     int64   `json:"ops"`
	Units   int64   `json:"units"` // leases renewed, events delivered, ... (= ops unless batched)
	Seconds float64 `json:"seconds"`
	OpsPerS float64 `json:"ops_per_s"`
	UnitsS  float64 `json:"units_per_s"`
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
}

func newBench(g *globals) *cobra.Command {
	var (
		ops      string
		clients  string
		duration time.Duration
		batch    int
		leases   int
		admin    string
		conns    int
		events   int
		profile  string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running server: ops/s with p50/p99 at several concurrencies",
		Long: `Measure a djinn server running in its own process.

Workloads (--ops): empty (gRPC health check: the floor every call pays),
renew (one lease per client), renewstream (renewals over one stream per
client), renewall (--batch leases per call), register
(mailbox registration: a logged lease grant), notify (durable mailbox
ingest, one event a call), notifybatch (--events per call), deliver (ingest with delivery enabled to a listener hosted by the
bench; reports events received per second), leases (grants --leases
registrations and reports the server's resident memory from --admin).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var levels []int
			for _, s := range strings.Split(clients, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil || n <= 0 {
					return fmt.Errorf("clients %q: want a comma-separated list of positive numbers", clients)
				}
				levels = append(levels, n)
			}
			if conns <= 0 {
				return fmt.Errorf("conns %d: want at least 1", conns)
			}
			b := &bencher{duration: duration, batch: batch, events: events}
			ccs, closeConns, err := g.dialConns(cmd.Context(), conns)
			if err != nil {
				return err
			}
			defer closeConns()
			b.conns = ccs
			b.cc = b.conns[0]
			var results []benchResult
			for _, op := range strings.Split(ops, ",") {
				op = strings.TrimSpace(op)
				if op == "leases" {
					r, err := b.leaseMemory(cmd.Context(), leases, admin)
					if err != nil {
						return err
					}
					fmt.Fprintln(cmd.OutOrStdout(), r)
					continue
				}
				for _, n := range levels {
					r, err := b.run(cmd.Context(), op, n)
					if err != nil {
						return fmt.Errorf("%s at %d clients: %w", op, n, err)
					}
					results = append(results, r)
					if g.output != "json" {
						fmt.Fprintf(cmd.OutOrStdout(), "%-9s clients=%-3d %12.0f ops/s %12.0f units/s  p50 %7.3f ms  p99 %7.3f ms\n",
							r.Op, r.Clients, r.OpsPerS, r.UnitsS, r.P50ms, r.P99ms)
					}
				}
			}
			if g.output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(results)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&ops, "ops", "empty,renew,renewall,register,notify,deliver", "workloads to run")
	f.StringVar(&clients, "clients", "1,16,64", "concurrent clients")
	f.DurationVar(&duration, "duration", 5*time.Second, "time per measurement")
	f.IntVar(&batch, "batch", 1000, "leases per renewall call")
	f.IntVar(&leases, "leases", 1000000, "registrations for the leases workload")
	f.StringVar(&admin, "admin", "127.0.0.1:4162", "admin address of the server, for its memory")
	f.IntVar(&conns, "conns", 4, "gRPC connections the clients share")
	f.IntVar(&events, "events", 100, "events per notifybatch call")
	cmd.PersistentFlags().StringVar(&profile, "cpuprofile", "", "write this process's CPU profile (the load generator's) to FILE")
	cmd.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		stop, err := startCPUProfile(profile)
		if err != nil {
			return err
		}
		// Finalizers run however the command ends, errors included.
		cobra.OnFinalize(func() {
			if err := stop(); err != nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "cpu profile:", err)
			}
		})
		return nil
	}
	cmd.AddCommand(newBenchRenewal(g), newBenchTxn(g), newBenchLock(g), newBenchLookup(g), newBenchLDS(g))
	return cmd
}

type bencher struct {
	cc       *grpc.ClientConn
	conns    []*grpc.ClientConn // client i uses conns[i%len(conns)]
	duration time.Duration
	batch    int
	events   int // events per notifybatch call
}

// register makes n registrations with hour-long leases.
func (b *bencher) register(ctx context.Context, n int) ([]*djinnpb.MailboxRegistration, error) {
	mb := djinnpb.NewEventMailboxClient(b.cc)
	out := make([]*djinnpb.MailboxRegistration, n)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	work := make(chan int)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				r, err := mb.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Hour)})
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					continue
				}
				out[i] = r
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, err
	}
	return out, nil
}

// run measures op with n clients, each calling in a loop for the duration.
func (b *bencher) run(ctx context.Context, op string, n int) (benchResult, error) {
	var (
		call  func(ctx context.Context, client int) (units int64, err error)
		after func() int64
	)
	ll := func(c int) djinnpb.LandlordClient { return djinnpb.NewLandlordClient(b.conns[c%len(b.conns)]) }
	mb := func(c int) djinnpb.EventListenerClient {
		return djinnpb.NewEventListenerClient(b.conns[c%len(b.conns)])
	}
	src := &djinnpb.Ref{Endpoint: "127.0.0.1:1", ServiceId: []byte("bench-generator-"), ObjectId: []byte("source-object-id")}
	var seq atomic.Int64
	switch op {
	case "empty":
		call = func(ctx context.Context, c int) (int64, error) {
			_, err := healthpb.NewHealthClient(b.conns[c%len(b.conns)]).Check(ctx, &healthpb.HealthCheckRequest{})
			return 1, err
		}
	case "renew":
		regs, err := b.register(ctx, n)
		if err != nil {
			return benchResult{}, err
		}
		call = func(ctx context.Context, c int) (int64, error) {
			_, err := ll(c).Renew(ctx, &djinnpb.RenewRequest{Cookie: regs[c].Lease.Cookie, DurationNanos: int64(time.Hour)})
			return 1, err
		}
	case "renewstream":
		// Renew over one stream per client, one renewal in flight.
		regs, err := b.register(ctx, n)
		if err != nil {
			return benchResult{}, err
		}
		streams := make([]djinnpb.Landlord_RenewStreamClient, n)
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		for c := range n {
			if streams[c], err = ll(c).RenewStream(sctx); err != nil {
				return benchResult{}, err
			}
		}
		call = func(_ context.Context, c int) (int64, error) {
			if err := streams[c].Send(&djinnpb.RenewRequest{Cookie: regs[c].Lease.Cookie, DurationNanos: int64(time.Hour)}); err != nil {
				return 0, err
			}
			resp, err := streams[c].Recv()
			if err != nil {
				return 0, err
			}
			if resp.Error != nil {
				return 0, fmt.Errorf("renew: %s", resp.Error.GetMessage())
			}
			return 1, nil
		}
	case "renewall":
		regs, err := b.register(ctx, n*b.batch)
		if err != nil {
			return benchResult{}, err
		}
		reqs := make([]*djinnpb.RenewAllRequest, n)
		for c := range n {
			reqs[c] = &djinnpb.RenewAllRequest{}
			for _, r := range regs[c*b.batch : (c+1)*b.batch] {
				reqs[c].Cookies = append(reqs[c].Cookies, r.Lease.Cookie...)
				reqs[c].DurationNanos = append(reqs[c].DurationNanos, int64(time.Hour))
			}
		}
		call = func(ctx context.Context, c int) (int64, error) {
			resp, err := ll(c).RenewAll(ctx, reqs[c])
			if err != nil {
				return 0, err
			}
			if len(resp.Errors) > 0 {
				return 0, fmt.Errorf("renewAll: %s", resp.Errors[0].GetError().GetMessage())
			}
			return int64(len(resp.GrantedNanos)), nil
		}
	case "register":
		call = func(ctx context.Context, c int) (int64, error) {
			_, err := djinnpb.NewEventMailboxClient(b.conns[c%len(b.conns)]).Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
			return 1, err
		}
	case "notify", "notifybatch", "deliver", "deliverbatch":
		// Durable ingest into mailbox listeners, one event a call or
		// --events a call; the deliver forms also enable delivery to a
		// listener hosted here and count what it receives.
		regs, err := b.register(ctx, n)
		if err != nil {
			return benchResult{}, err
		}
		defer func() {
			// Leave the server clean for the next workload.
			for _, r := range regs {
				_, _ = ll(0).Cancel(context.Background(), &djinnpb.CancelRequest{Cookie: r.Lease.Cookie})
			}
		}()
		if strings.HasPrefix(op, "deliver") {
			var got atomic.Int64
			l, err := client.Listen(ctx, "127.0.0.1:0", func(context.Context, *client.RemoteEvent) error {
				got.Add(1)
				return nil
			})
			if err != nil {
				return benchResult{}, err
			}
			defer l.Close()
			m := djinnpb.NewEventMailboxClient(b.cc)
			for _, r := range regs {
				if _, err := m.EnableDelivery(ctx, &djinnpb.EnableDeliveryRequest{RegistrationId: r.RegistrationId, Target: client.RefToProto(l.Ref())}); err != nil {
					return benchResult{}, err
				}
			}
			after = got.Load
		}
		if !strings.HasSuffix(op, "batch") {
			call = func(ctx context.Context, c int) (int64, error) {
				_, err := mb(c).Notify(ctx, &djinnpb.NotifyRequest{ListenerId: regs[c].Listener.ObjectId,
					Event: &djinnpb.RemoteEvent{Source: src, EventId: 1, Sequence: seq.Add(1), Handback: []byte("bench")}})
				return 1, err
			}
			break
		}
		call = func(ctx context.Context, c int) (int64, error) {
			req := &djinnpb.NotifyBatchRequest{ListenerId: regs[c].Listener.ObjectId, Events: make([]*djinnpb.RemoteEvent, b.events)}
			for i := range req.Events {
				req.Events[i] = &djinnpb.RemoteEvent{Source: src, EventId: 1, Sequence: seq.Add(1), Handback: []byte("bench")}
			}
			resp, err := mb(c).NotifyBatch(ctx, req)
			if err != nil {
				return 0, err
			}
			if resp.Error != nil {
				return int64(resp.Accepted), fmt.Errorf("notifyBatch: %s", resp.Error.GetMessage())
			}
			return int64(resp.Accepted), nil
		}
	default:
		return benchResult{}, fmt.Errorf("unknown workload %q", op)
	}

	lat := make([][]time.Duration, n)
	var ops, units atomic.Int64
	var firstErr atomic.Value
	rctx, cancel := context.WithTimeout(ctx, b.duration)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rctx.Err() == nil {
				t0 := time.Now()
				u, err := call(rctx, c)
				if err != nil {
					// gRPC may notice the deadline a moment before the
					// context does: that is the end of the run, not a failure.
					if rctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && status.Code(err) != codes.DeadlineExceeded {
						firstErr.CompareAndSwap(nil, err)
						cancel()
					}
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
				ops.Add(1)
				units.Add(u)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	if err, _ := firstErr.Load().(error); err != nil {
		return benchResult{}, err
	}
	if after != nil {
		// Delivery: give the mailbox a moment to drain, and count what
		// the listener received over the whole run.
		deadline := time.Now().Add(30 * time.Second)
		for after() < units.Load() && time.Now().Before(deadline) {
			<-time.After(10 * time.Millisecond)
		}
		elapsed = time.Since(start).Seconds()
		units.Store(after())
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		return float64(all[int(float64(len(all)-1)*p)]) / float64(time.Millisecond)
	}
	return benchResult{
		Op: op, Clients: n, Ops: ops.Load(), Units: units.Load(), Seconds: elapsed,
		OpsPerS: float64(ops.Load()) / elapsed, UnitsS: float64(units.Load()) / elapsed,
		P50ms: pct(0.50), P99ms: pct(0.99),
	}, nil
}

// leaseMemory grants n registrations and reports the server's resident
// memory before and after.
func (b *bencher) leaseMemory(ctx context.Context, n int, admin string) (string, error) {
	before, err := residentBytes(ctx, admin)
	if err != nil {
		return "", err
	}
	start := time.Now()
	if _, err := b.register(ctx, n); err != nil {
		return "", err
	}
	took := time.Since(start)
	after, err := residentBytes(ctx, admin)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("leases: %d registrations in %s (%.0f/s); server RSS %d MB before, %d MB after (%.0f bytes per lease)",
		n, took.Round(time.Millisecond), float64(n)/took.Seconds(), before>>20, after>>20, float64(after-before)/float64(n)), nil
}

func residentBytes(ctx context.Context, admin string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read server memory from %s: %w", admin, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "process_resident_memory_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err
		}
	}
	return 0, fmt.Errorf("no process_resident_memory_bytes at %s", admin)
}

// liveHeapBytes reads the server's heap in use right after a collection:
// the live data, without the garbage a reading of /metrics may include.
// It asks the admin endpoint's heap profile, which collects first (gc=1)
// and ends with the runtime's memory statistics.
func liveHeapBytes(ctx context.Context, admin string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+admin+"/debug/pprof/heap?gc=1&debug=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("read server heap from %s: %w", admin, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no HeapInuse in the heap profile at %s", admin)
}

// dialConns dials the server n times, so that a bench's load is spread
// over n connections, and returns them with the function that closes them.
// On an error, those already dialled are closed.
func (g *globals) dialConns(ctx context.Context, n int) ([]*grpc.ClientConn, func(), error) {
	var cls []*client.Client
	closeAll := func() {
		for _, cl := range cls {
			cl.Close()
		}
	}
	ccs := make([]*grpc.ClientConn, 0, n)
	for range n {
		cl, err := g.dial(ctx)
		if err != nil {
			closeAll()
			return nil, func() {}, err
		}
		cls = append(cls, cl)
		ccs = append(ccs, cl.ClientConn())
	}
	return ccs, closeAll, nil
}

// startCPUProfile profiles this process's CPU into the file at path until
// the returned stop is called; with an empty path it does nothing.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// hostCPU is the machine's CPU time as /proc/stat counts it, in ticks:
// all of it, and the part stolen by the hypervisor for other machines.
// On a shared host, steal is time the bench and the server wanted the
// CPU and did not get it, which a reading of the figures must allow for.
type hostCPU struct {
	total, steal uint64
	ok           bool // read: Linux, and a /proc/stat as documented
}

// readHostCPU reads /proc/stat's cpu line; elsewhere it returns !ok.
func readHostCPU() hostCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostCPU{}
	}
	return parseProcStat(string(b))
}

// parseProcStat reads the cpu line of /proc/stat's contents.
func parseProcStat(stat string) hostCPU {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return hostCPU{}
	}
	var h hostCPU
	for i, s := range f[1:] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return hostCPU{}
		}
		if i < 8 { // guest time is counted in user time already
			h.total += n
		}
		if i == 7 {
			h.steal = n
		}
	}
	h.ok = true
	return h
}

// stealSince returns the fraction of the machine's CPU time stolen since
// h0, or 0 when either reading failed.
func (h hostCPU) stealSince(h0 hostCPU) float64 {
	if !h.ok || !h0.ok || h.total <= h0.total {
		return 0
	}
	return float64(h.steal-h0.steal) / float64(h.total-h0.total)
}
