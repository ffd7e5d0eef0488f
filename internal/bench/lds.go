package bench

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LDS measures the lookup discovery service: Registrations registrations
// are made first (by Clients callers over Conns connections), each with one
// of ten groups and the locators of all Registrars lookup services, which
// are not running yet; every event goes to one listener the bench hosts at
// Listen. The server's live heap (read from Admin right after a
// collection) before and after gives the memory per registration.
//
// Then the bench starts the lookup services (the discovery side of a
// registrar, unicast only, in this process, at the locators' addresses)
// and measures the time from the first one's start until the last
// registration has had a discovered event for every one of them.
//
// Every event is checked: sequence numbers strictly increasing per
// registration, no lookup service discovered twice for a registration, no
// discarded events, the groups each lookup service announced. The bench
// fails on any violation or when a registration is still missing a lookup
// service after Timeout. It cancels its registrations at the end.
type LDS struct {
	Registrations, Registrars int
	Clients, Conns            int
	Timeout                   time.Duration
	Listen, Admin             string
}

const ldsLease = 30 * time.Minute

// Check implements Bench.
func (b *LDS) Check() error {
	switch {
	case b.Registrations <= 0:
		return fmt.Errorf("--registrations %d: want at least 1", b.Registrations)
	case b.Registrars <= 0 || b.Registrars > 256:
		return fmt.Errorf("--registrars %d: want 1 to 256", b.Registrars)
	case b.Clients <= 0:
		return fmt.Errorf("--clients %d: want at least 1", b.Clients)
	case b.Conns <= 0:
		return fmt.Errorf("--conns %d: want at least 1", b.Conns)
	case b.Timeout <= 0:
		return fmt.Errorf("--wait %s: want positive", b.Timeout)
	}
	return nil
}

// ldsReg is what the listener heard for one registration.
type ldsReg struct {
	mu       sync.Mutex
	lastSeq  int64
	found    map[djinn.ID]bool
	complete time.Time
}

// ldsListener checks and counts the events.
type ldsListener struct {
	want   int                 // registrars each registration must hear of
	groups map[djinn.ID]string // each registrar's one group
	regsMu sync.RWMutex
	regs   map[int64]*ldsReg // by event id; filled before the registrars start
	left   atomic.Int64
	done   chan struct{}

	events, registrars, violations atomic.Int64
	first, last                    atomic.Int64 // unix nanos
	errMu                          sync.Mutex
	firstErr                       string
}

func (l *ldsListener) violation(format string, args ...any) {
	if l.violations.Add(1) == 1 {
		l.errMu.Lock()
		l.firstErr = fmt.Sprintf(format, args...)
		l.errMu.Unlock()
	}
}

func (l *ldsListener) notify(_ context.Context, ev *client.RemoteEvent) error {
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
		l.discovered(ev, reg, r, now)
	}
	return nil
}

// discovered checks one lookup service an event names, under reg.mu.
func (l *ldsListener) discovered(ev *client.RemoteEvent, reg *ldsReg, r *djinnpb.DiscoveredRegistrar, now int64) {
	id, err := djinn.IDFromBytes("registrar service id", r.GetServiceId())
	if err != nil {
		l.violation("event id %d seq %d: %v", ev.ID, ev.Seq, err)
		return
	}
	g, known := l.groups[id]
	switch {
	case !known:
		l.violation("event id %d seq %d: unknown registrar %s", ev.ID, ev.Seq, id)
		return
	case !slices.Equal(r.GetGroups(), []string{g}):
		l.violation("event id %d seq %d: registrar %s with groups %q, want [%q]", ev.ID, ev.Seq, id, r.GetGroups(), g)
	case reg.found[id]:
		l.violation("event id %d seq %d: registrar %s discovered twice", ev.ID, ev.Seq, id)
		return
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

// ldsRun is one run: the registrars to start and the listener.
type ldsRun struct {
	*LDS
	env   Env
	conns *Conns
	tag   string
	addrs []string
	ids   []djinn.ID
	lis   *ldsListener
}

// Run implements Bench.
func (b *LDS) Run(ctx context.Context, env Env) (Report, error) {
	var rep Report
	conns, err := dialConns(ctx, env, env.Server, b.Conns)
	if err != nil {
		return rep, err
	}
	defer conns.Close()
	r := &ldsRun{LDS: b, env: env, conns: conns, tag: djinn.NewID().String()[:8]}
	if r.addrs, err = reservePorts(b.Registrars); err != nil {
		return rep, err
	}
	r.lis = &ldsListener{want: b.Registrars, groups: map[djinn.ID]string{}, regs: map[int64]*ldsReg{}, done: make(chan struct{})}
	for j := range b.Registrars {
		r.ids = append(r.ids, djinn.NewID())
		r.lis.groups[r.ids[j]] = r.group(j)
	}
	// Events come only once the registrars start; an event for an event id
	// not yet known counts as a violation.
	host, err := client.Listen(ctx, b.Listen, r.lis.notify)
	if err != nil {
		return rep, err
	}
	defer host.Close()
	res, err := r.run(ctx, host.Ref())
	if err != nil {
		return rep, err
	}
	env.measured(&rep, res)
	return rep, nil
}

func (r *ldsRun) group(j int) string { return fmt.Sprintf("bench-%s-%d", r.tag, j%10) }

func (r *ldsRun) run(ctx context.Context, listener djinn.Ref) (Result, error) {
	cookies := make([][]byte, r.Registrations)
	defer func() { cancelLeases(r.env, r.conns.For(0), "registrations", cookies) }()
	before, heapBefore := r.memory(ctx)
	start := time.Now()
	if err := r.register(ctx, listener, cookies); err != nil {
		return Result{}, err
	}
	setup := time.Since(start)
	res := Result{Workload: "lds", Clients: r.Clients, Unit: "registration", Ops: int64(r.Registrations),
		Seconds: setup.Seconds(), OpsPerS: float64(r.Registrations) / setup.Seconds()}
	if after, heapAfter := r.memory(ctx); heapBefore > 0 && heapAfter > 0 {
		res.Figures = append(res.Figures, fig("server live heap before", float64(heapBefore)/(1<<20), "MB"),
			fig("live heap after", float64(heapAfter)/(1<<20), "MB"),
			fig("bytes per registration", float64(heapAfter-heapBefore)/float64(r.Registrations), ""),
			fig("RSS before", float64(before)/(1<<20), "MB"), fig("RSS after", float64(after)/(1<<20), "MB"))
	}
	t0 := time.Now()
	stop, err := r.startRegistrars()
	defer stop()
	if err != nil {
		return Result{}, err
	}
	timer := time.NewTimer(r.Timeout)
	defer timer.Stop()
	select {
	case <-r.lis.done:
	case <-timer.C:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	r.judge(&res, t0)
	return res, nil
}

// register makes the registrations and tells the listener their event ids.
func (r *ldsRun) register(ctx context.Context, listener djinn.Ref, cookies [][]byte) error {
	locs := make([]string, len(r.addrs))
	for j, a := range r.addrs {
		locs[j] = "jini://" + a + "/"
	}
	ref := client.RefToProto(listener)
	eventIDs := make([]int64, r.Registrations)
	var done atomic.Int64
	stop := progressEvery(r.env, "registrations", r.Registrations, &done)
	err := parallel(ctx, r.Clients, r.Registrations, func(ctx context.Context, c, i int) error {
		resp, err := djinnpb.NewLookupDiscoveryServiceClient(r.conns.For(c)).Register(ctx, &djinnpb.LDSRegisterRequest{
			Groups: []string{r.group(i)}, Locators: locs, Listener: ref, Handback: []byte("bench"), LeaseDurationNanos: int64(ldsLease)})
		if err != nil {
			return fmt.Errorf("register %d: %w", i, err)
		}
		cookies[i] = resp.GetRegistration().GetLease().GetCookie()
		eventIDs[i] = resp.GetRegistration().GetEventId()
		done.Add(1)
		return nil
	})
	stop()
	if err != nil {
		return err
	}
	r.lis.regsMu.Lock()
	defer r.lis.regsMu.Unlock()
	for _, id := range eventIDs {
		if r.lis.regs[id] != nil {
			return fmt.Errorf("event id %d given to two registrations", id)
		}
		r.lis.regs[id] = &ldsReg{found: map[djinn.ID]bool{}}
	}
	r.lis.left.Store(int64(r.Registrations))
	return nil
}

// startRegistrars starts the lookup services' discovery at their addresses.
func (r *ldsRun) startRegistrars() (stop func(), err error) {
	var regs []*discovery.Registrar
	stop = func() {
		for _, reg := range regs {
			reg.Close()
		}
	}
	for j, addr := range r.addrs {
		reg, err := discovery.NewRegistrar(discovery.RegistrarConfig{ServiceID: r.ids[j], Groups: []string{r.lis.groups[r.ids[j]]},
			Endpoint: "127.0.0.1:9", ListenAddr: addr, DisableMulticast: true})
		if err != nil {
			return stop, fmt.Errorf("registrar %d at %s: %w", j, addr, err)
		}
		regs = append(regs, reg)
	}
	return stop, nil
}

// judge adds to res what the listener heard since t0.
func (r *ldsRun) judge(res *Result, t0 time.Time) {
	lis := r.lis
	var complete []time.Duration
	incomplete := 0
	// Under each registration's lock: the listener may still run.
	for _, reg := range lis.regs {
		reg.mu.Lock()
		if reg.complete.IsZero() {
			incomplete++
		} else {
			complete = append(complete, reg.complete.Sub(t0))
		}
		reg.mu.Unlock()
	}
	var firstMs, lastMs float64
	if f := lis.first.Load(); f > 0 {
		firstMs, lastMs = ms(time.Unix(0, f).Sub(t0)), ms(time.Unix(0, lis.last.Load()).Sub(t0))
	}
	p50, p99 := percentiles(complete)
	events := lis.events.Load()
	perEvent, perS := 0.0, 0.0
	if events > 0 {
		perEvent = float64(lis.registrars.Load()) / float64(events)
		if lastMs > firstMs {
			perS = float64(events) / ((lastMs - firstMs) / 1000)
		}
	}
	res.Phases = []Phase{{Name: "all registrars discovered, per registration", P50ms: p50, P99ms: p99}}
	res.Figures = append(res.Figures, fig("registrars", float64(r.Registrars), ""), fig("first event", firstMs, "ms"),
		fig("last event", lastMs, "ms"), fig("events", float64(events), ""), fig("registrars per event", perEvent, ""),
		fig("events/s", perS, ""))
	res.Checks = []Check{mustZero("incomplete", float64(incomplete)), mustZero("violations", float64(lis.violations.Load()))}
	lis.errMu.Lock()
	if lis.firstErr != "" {
		res.Notes = append(res.Notes, "first violation: "+lis.firstErr)
	}
	lis.errMu.Unlock()
}

// memory reads the server's resident memory and live heap; zeros without
// Admin or when the admin endpoint does not answer.
func (r *ldsRun) memory(ctx context.Context) (rss, heap int64) {
	if r.Admin == "" {
		return 0, 0
	}
	if p, err := readProcess(ctx, r.Admin); err == nil {
		rss = int64(p.rss)
	}
	heap, _ = liveHeapBytes(ctx, r.Admin)
	return rss, heap
}
