package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The lookup discovery service bench: registrations waiting for lookup
// services, then the lookup services starting, and the time until every
// registration has heard of every one.

const ldsBenchLease = 30 * time.Minute

func newBenchLDS(g *globals) *cobra.Command {
	b := &ldsBench{}
	cmd := &cobra.Command{
		Use:   "lds",
		Short: "Measure the lookup discovery service: registrations over registrars, discovery to delivery",
		Long: `Measure the lookup discovery service of a djinn server running in its own process.

--registrations registrations are made first (by --clients callers over
--conns connections), each with one of ten groups and the locators of all
--registrars lookup services, which are not running yet; every event goes
to one listener the bench hosts at --listen. The server's live heap
(read from --admin right after a collection) before and after gives the
memory per registration; its resident memory is shown beside it.

Then the bench starts the --registrars lookup services (the discovery
side of a registrar, unicast only, in this process, at the locators'
addresses) and measures the time from the first one's start until the
last registration has had a discovered event for every one of them: the
server's locator discovery finds them, and the events are batched per
registration. It reports the time to the first and the last event, the
per-registration completion p50/p99, the events and registrars per event.

Every event is checked: sequence numbers strictly increasing per
registration, no lookup service discovered twice for a registration, no
discarded events, the groups each lookup service announced. The bench
exits non-zero on any violation or when a registration is still missing
a lookup service after --timeout. It cancels its registrations at the end.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			rep, err := b.run(cmd.Context())
			if rep != nil {
				if perr := g.print(cmd.OutOrStdout(), rep, rep.print); perr != nil && err == nil {
					err = perr
				}
			}
			if err != nil {
				return err
			}
			return rep.verdict()
		},
	}
	f := cmd.Flags()
	f.IntVar(&b.registrations, "registrations", 10_000, "registrations to make")
	f.IntVar(&b.registrars, "registrars", 50, "lookup services to start")
	f.IntVar(&b.clients, "clients", 64, "concurrent callers making the registrations")
	f.IntVar(&b.conns, "conns", 4, "gRPC connections the callers share")
	f.DurationVar(&b.timeout, "timeout", 5*time.Minute, "longest wait for the last discovered event")
	f.StringVar(&b.listen, "listen", "127.0.0.1:0", "address of the bench's listener (the server must reach it)")
	f.StringVar(&b.admin, "admin", "127.0.0.1:4162", "admin address of the server, for its memory (empty: not read)")
	return cmd
}

type ldsBench struct {
	registrations, registrars, clients, conns int
	timeout                                   time.Duration
	listen, admin                             string

	ccs      []*grpc.ClientConn
	progress io.Writer
}

func (b *ldsBench) check() error {
	switch {
	case b.registrations <= 0:
		return fmt.Errorf("registrations %d: want at least 1", b.registrations)
	case b.registrars <= 0 || b.registrars > 256:
		return fmt.Errorf("registrars %d: want 1 to 256", b.registrars)
	case b.clients <= 0:
		return fmt.Errorf("clients %d: want at least 1", b.clients)
	case b.conns <= 0:
		return fmt.Errorf("conns %d: want at least 1", b.conns)
	case b.timeout <= 0:
		return fmt.Errorf("timeout %s: want positive", b.timeout)
	}
	return nil
}

func (b *ldsBench) lds(c int) djinnpb.LookupDiscoveryServiceClient {
	return djinnpb.NewLookupDiscoveryServiceClient(b.ccs[c%len(b.ccs)])
}

// ldsBenchReport is what the bench measured.
type ldsBenchReport struct {
	Registrations int     `json:"registrations"`
	Registrars    int     `json:"registrars"`
	SetupSeconds  float64 `json:"setup_seconds"`
	SetupPerS     float64 `json:"registrations_per_s"`
	RSSBeforeMB   float64 `json:"rss_before_mb,omitempty"`
	RSSAfterMB    float64 `json:"rss_after_mb,omitempty"`
	HeapBeforeMB  float64 `json:"live_heap_before_mb,omitempty"`
	HeapAfterMB   float64 `json:"live_heap_after_mb,omitempty"`
	BytesPerReg   float64 `json:"bytes_per_registration,omitempty"` // live heap after − before, per registration

	FirstEventMs  float64 `json:"first_event_ms"`
	LastEventMs   float64 `json:"last_event_ms"`
	CompleteP50Ms float64 `json:"complete_p50_ms"`
	CompleteP99Ms float64 `json:"complete_p99_ms"`
	Events        int64   `json:"events"`
	PerEvent      float64 `json:"registrars_per_event"`
	EventsPerS    float64 `json:"events_per_s"`

	Incomplete int    `json:"incomplete"` // registrations missing a lookup service at the end
	Violations int64  `json:"violations"` // sequence, duplicate, discard or group errors
	FirstError string `json:"first_error,omitempty"`
}

func (r *ldsBenchReport) print(w io.Writer) {
	fmt.Fprintf(w, "setup     %d registrations (one of 10 groups, %d locators each) in %.1f s: %.0f/s\n",
		r.Registrations, r.Registrars, r.SetupSeconds, r.SetupPerS)
	if r.HeapAfterMB > 0 {
		fmt.Fprintf(w, "    server live heap %.1f MB before, %.1f MB after: %.0f bytes per registration; RSS %.0f MB before, %.0f MB after\n",
			r.HeapBeforeMB, r.HeapAfterMB, r.BytesPerReg, r.RSSBeforeMB, r.RSSAfterMB)
	}
	fmt.Fprintf(w, "discovery %d registrars started -> first discovered event %.1f ms, last %.1f ms\n", r.Registrars, r.FirstEventMs, r.LastEventMs)
	fmt.Fprintf(w, "    per registration: all %d discovered p50 %.1f ms  p99 %.1f ms; %d events, %.1f registrars per event, %.0f events/s\n",
		r.Registrars, r.CompleteP50Ms, r.CompleteP99Ms, r.Events, r.PerEvent, r.EventsPerS)
	fmt.Fprintf(w, "    incomplete %d, violations %d   (both must be 0: %s)\n", r.Incomplete, r.Violations, map[bool]string{true: "ok", false: "FAILED"}[r.Incomplete == 0 && r.Violations == 0])
	if r.FirstError != "" {
		fmt.Fprintf(w, "    first violation: %s\n", r.FirstError)
	}
}

func (r *ldsBenchReport) verdict() error {
	if r.Incomplete > 0 || r.Violations > 0 {
		return fmt.Errorf("lds bench: %d registrations incomplete, %d violations", r.Incomplete, r.Violations)
	}
	return nil
}

// ldsBenchReg is what the listener heard for one registration.
type ldsBenchReg struct {
	mu       sync.Mutex
	lastSeq  int64
	found    map[djinn.ID]bool
	complete time.Time
}

// ldsBenchListener checks and counts the events.
type ldsBenchListener struct {
	want   int                 // registrars each registration must hear of
	groups map[djinn.ID]string // each registrar's one group
	regsMu sync.RWMutex
	regs   map[int64]*ldsBenchReg // by event id; filled before the registrars start
	left   atomic.Int64
	done   chan struct{}

	events, registrars, violations atomic.Int64
	first, last                    atomic.Int64 // unix nanos
	errMu                          sync.Mutex
	firstErr                       string
}

func (l *ldsBenchListener) violation(format string, args ...any) {
	if l.violations.Add(1) == 1 {
		l.errMu.Lock()
		l.firstErr = fmt.Sprintf(format, args...)
		l.errMu.Unlock()
	}
}

func (l *ldsBenchListener) notify(_ context.Context, ev *client.RemoteEvent) error {
	now := time.Now().UnixNano()
	l.first.CompareAndSwap(0, now)
	l.last.Store(now)
	l.events.Add(1)
	l.regsMu.RLock()
	reg := l.regs[ev.ID]
	l.regsMu.RUnlock()
	if reg == nil {
		l.violation("an event for unknown event id %d", ev.ID)
		return nil
	}
	var de djinnpb.RemoteDiscoveryEvent
	if ev.Payload == nil || ev.Payload.UnmarshalTo(&de) != nil {
		l.violation("event id %d seq %d: the payload is no RemoteDiscoveryEvent", ev.ID, ev.Seq)
		return nil
	}
	if de.GetDiscarded() {
		l.violation("event id %d seq %d: a discarded event", ev.ID, ev.Seq)
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if ev.Seq <= reg.lastSeq {
		l.violation("event id %d: sequence %d after %d", ev.ID, ev.Seq, reg.lastSeq)
	}
	reg.lastSeq = ev.Seq
	for _, r := range de.GetRegistrars() {
		id, err := djinn.IDFromBytes("registrar service id", r.GetServiceId())
		if err != nil {
			l.violation("event id %d seq %d: %v", ev.ID, ev.Seq, err)
			continue
		}
		g, known := l.groups[id]
		switch {
		case !known:
			l.violation("event id %d seq %d: unknown registrar %s", ev.ID, ev.Seq, id)
			continue
		case !slices.Equal(r.GetGroups(), []string{g}):
			l.violation("event id %d seq %d: registrar %s with groups %q, want [%q]", ev.ID, ev.Seq, id, r.GetGroups(), g)
		case reg.found[id]:
			l.violation("event id %d seq %d: registrar %s discovered twice", ev.ID, ev.Seq, id)
			continue
		}
		l.registrars.Add(1)
		reg.found[id] = true
		if len(reg.found) == l.want {
			reg.complete = time.Unix(0, now)
			if l.left.Add(-1) == 0 {
				close(l.done)
			}
		}
	}
	return nil
}

// reservePorts returns n free loopback addresses.
func reservePorts(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

func (b *ldsBench) run(ctx context.Context) (*ldsBenchReport, error) {
	rep := &ldsBenchReport{Registrations: b.registrations, Registrars: b.registrars}
	addrs, err := reservePorts(b.registrars)
	if err != nil {
		return nil, err
	}
	tag := djinn.NewID().String()[:8]
	ids := make([]djinn.ID, b.registrars)
	locs := make([]string, b.registrars)
	lis := &ldsBenchListener{want: b.registrars, groups: map[djinn.ID]string{}, regs: map[int64]*ldsBenchReg{}, done: make(chan struct{})}
	for j := range b.registrars {
		ids[j] = djinn.NewID()
		locs[j] = "jini://" + addrs[j] + "/"
		lis.groups[ids[j]] = fmt.Sprintf("bench-%s-%d", tag, j%10)
	}

	// Events come only once the registrars start, below; an event for an
	// event id not yet in regs counts as a violation.
	host, err := client.Listen(ctx, b.listen, lis.notify)
	if err != nil {
		return nil, err
	}
	defer host.Close()
	listener := client.RefToProto(host.Ref())

	before, heapBefore := b.memory(ctx)
	cookies := make([][]byte, b.registrations)
	eventIDs := make([]int64, b.registrations)
	defer func() { b.cancel(cookies) }()
	start := time.Now()
	err = lockBenchParallel(ctx, b.clients, b.registrations, func(ctx context.Context, c, i int) error {
		resp, err := b.lds(c).Register(ctx, &djinnpb.LDSRegisterRequest{Groups: []string{fmt.Sprintf("bench-%s-%d", tag, i%10)},
			Locators: locs, Listener: listener, Handback: []byte("bench"), LeaseDurationNanos: int64(ldsBenchLease)})
		if err != nil {
			return fmt.Errorf("register %d: %w", i, err)
		}
		cookies[i] = resp.GetRegistration().GetLease().GetCookie()
		eventIDs[i] = resp.GetRegistration().GetEventId()
		if done := i + 1; done%2000 == 0 {
			fmt.Fprintf(b.progress, "registrations: %d of %d in %.0f s\n", done, b.registrations, time.Since(start).Seconds())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.SetupSeconds = time.Since(start).Seconds()
	rep.SetupPerS = float64(b.registrations) / rep.SetupSeconds
	lis.regsMu.Lock()
	for _, id := range eventIDs {
		if lis.regs[id] != nil {
			lis.regsMu.Unlock()
			return nil, fmt.Errorf("event id %d given to two registrations", id)
		}
		lis.regs[id] = &ldsBenchReg{found: map[djinn.ID]bool{}}
	}
	lis.regsMu.Unlock()
	lis.left.Store(int64(b.registrations))
	if after, heapAfter := b.memory(ctx); heapBefore > 0 && heapAfter > 0 {
		rep.RSSBeforeMB, rep.RSSAfterMB = float64(before)/(1<<20), float64(after)/(1<<20)
		rep.HeapBeforeMB, rep.HeapAfterMB = float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20)
		rep.BytesPerReg = float64(heapAfter-heapBefore) / float64(b.registrations)
	}

	t0 := time.Now()
	for j := range b.registrars {
		r, err := discovery.NewRegistrar(discovery.RegistrarConfig{ServiceID: ids[j], Groups: []string{lis.groups[ids[j]]},
			Endpoint: "127.0.0.1:9", ListenAddr: addrs[j], DisableMulticast: true})
		if err != nil {
			return nil, fmt.Errorf("registrar %d at %s: %w", j, addrs[j], err)
		}
		defer r.Close()
	}
	timer := time.NewTimer(b.timeout)
	defer timer.Stop()
	select {
	case <-lis.done:
	case <-timer.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Collect under each registration's lock: the listener may still run.
	var complete []time.Duration
	for _, reg := range lis.regs {
		reg.mu.Lock()
		if reg.complete.IsZero() {
			rep.Incomplete++
		} else {
			complete = append(complete, reg.complete.Sub(t0))
		}
		reg.mu.Unlock()
	}
	if f := lis.first.Load(); f > 0 {
		rep.FirstEventMs = float64(time.Unix(0, f).Sub(t0)) / 1e6
		rep.LastEventMs = float64(time.Unix(0, lis.last.Load()).Sub(t0)) / 1e6
	}
	if len(complete) > 0 {
		rep.CompleteP50Ms, rep.CompleteP99Ms = percentileMs(complete, 0.50), percentileMs(complete, 0.99)
	}
	rep.Events = lis.events.Load()
	if rep.Events > 0 {
		rep.PerEvent = float64(lis.registrars.Load()) / float64(rep.Events)
		if rep.LastEventMs > rep.FirstEventMs {
			rep.EventsPerS = float64(rep.Events) / ((rep.LastEventMs - rep.FirstEventMs) / 1000)
		}
	}
	rep.Violations = lis.violations.Load()
	lis.errMu.Lock()
	rep.FirstError = lis.firstErr
	lis.errMu.Unlock()
	return rep, nil
}

// memory reads the server's resident memory and live heap; zeros without
// --admin or when the admin endpoint does not answer.
func (b *ldsBench) memory(ctx context.Context) (rss, heap int64) {
	if b.admin == "" {
		return 0, 0
	}
	rss, _ = residentBytes(ctx, b.admin)
	heap, _ = liveHeapBytes(ctx, b.admin)
	return rss, heap
}

// cancel ends the bench's registrations.
func (b *ldsBench) cancel(cookies [][]byte) {
	var cs [][]byte
	for _, c := range cookies {
		if c != nil {
			cs = append(cs, c)
		}
	}
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Minute)
	defer stop()
	ll := djinnpb.NewLandlordClient(b.ccs[0])
	for lo := 0; lo < len(cs); lo += batch.MaxLeases {
		req := &djinnpb.CancelAllRequest{}
		for _, c := range cs[lo:min(lo+batch.MaxLeases, len(cs))] {
			req.Cookies = append(req.Cookies, c...)
		}
		if _, err := ll.CancelAll(ctx, req); err != nil {
			fmt.Fprintf(b.progress, "cancel the bench's registrations: %v\n", err)
			return
		}
	}
}
