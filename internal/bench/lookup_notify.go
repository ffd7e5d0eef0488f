package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The lookup bench's one-off measurements: notify fan-out and discovery.

// lookupRound is one round of the notify workload: one new item, and which
// watchers have had its event.
type lookupRound struct {
	id    djinn.ID
	got   []atomic.Bool // by watcher
	left  atomic.Int64  // watchers still waiting
	first atomic.Int64  // when the first watcher had it, Unix nanoseconds
	last  time.Time     // when the last did; written before done is closed
	done  chan struct{}
}

// watchers are the notify workload's listeners and what they heard.
type watchers struct {
	cur                 atomic.Pointer[lookupRound]
	events, dups, stray atomic.Int64
	host                *client.Listener
	leases              [][]byte
}

// listener is watcher w's listener; the host's own, w < 0, has no
// registration.
func (ws *watchers) listener(w int) client.NotifyFunc {
	return func(_ context.Context, ev *client.RemoteEvent) error {
		now := time.Now()
		var se djinnpb.ServiceEvent
		rd := ws.cur.Load()
		if w < 0 || ev.Payload == nil || ev.Payload.UnmarshalTo(&se) != nil || rd == nil || !bytes.Equal(se.GetServiceId(), rd.id[:]) {
			ws.stray.Add(1)
			return nil
		}
		ws.events.Add(1)
		if !rd.got[w].CompareAndSwap(false, true) {
			ws.dups.Add(1)
			return nil
		}
		rd.first.CompareAndSwap(0, now.UnixNano())
		if rd.left.Add(-1) == 0 {
			rd.last = now
			close(rd.done)
		}
		return nil
	}
}

// notify registers the watchers, then runs the rounds.
func (r *lookupRun) notify(ctx context.Context) (Result, error) {
	ws := &watchers{leases: make([][]byte, r.Watchers)}
	host, err := client.Listen(ctx, r.Listen, ws.listener(-1))
	if err != nil {
		return Result{}, err
	}
	defer host.Close()
	ws.host = host
	defer func() { r.cancel(ws.leases) }()
	typ := "bench.lookup.Watched-" + r.tag
	start := time.Now()
	if err := r.watch(ctx, ws, typ); err != nil {
		return Result{}, err
	}
	setup := time.Since(start)
	var last, first, regs []time.Duration
	var fanout time.Duration
	for i := range r.Rounds {
		l, f, reg, err := r.round(ctx, ws, typ, i)
		if err != nil {
			return Result{}, fmt.Errorf("round %d: %w", i, err)
		}
		last, first, regs = append(last, l), append(first, f), append(regs, reg)
		fanout += l
	}
	res := Result{Workload: "notify", Clients: r.Watchers, Unit: "round", Ops: int64(r.Rounds), Seconds: fanout.Seconds(),
		OpsPerS: float64(r.Rounds) / fanout.Seconds()}
	res.P50ms, res.P99ms = percentiles(last)
	fp50, _ := percentiles(first)
	rp50, _ := percentiles(regs)
	res.Phases = []Phase{{Name: "first watcher", P50ms: fp50}, {Name: "register call", P50ms: rp50}}
	res.Figures = []Figure{fig("watchers", float64(r.Watchers), ""), fig("watchers registered/s", float64(r.Watchers)/setup.Seconds(), ""),
		fig("min", percentileMs(last, 0), "ms"), fig("max", percentileMs(last, 1), "ms"),
		fig("events/s", float64(r.Watchers*r.Rounds)/fanout.Seconds(), ""), fig("events", float64(ws.events.Load()), ""),
		fig("duplicates", float64(ws.dups.Load()), ""), fig("stray", float64(ws.stray.Load()), "")}
	res.Checks = []Check{must("events of the rounds", float64(ws.events.Load()-ws.dups.Load()), strconv.Itoa(r.Watchers*r.Rounds),
		ws.events.Load()-ws.dups.Load() == int64(r.Watchers*r.Rounds))}
	res.Notes = []string{"p50 and p99: from a round's register call to the last watcher's event"}
	return res, nil
}

// watch makes the notify registrations, each with a listener of its own.
func (r *lookupRun) watch(ctx context.Context, ws *watchers, typ string) error {
	tmpl := &djinnpb.ServiceTemplate{Types: []string{typ}}
	return parallel(ctx, lookupLoaders, r.Watchers, func(ctx context.Context, c, w int) error {
		l, err := ws.host.AddListener(ws.listener(w))
		if err != nil {
			return err
		}
		reg, err := r.ls(c).Notify(ctx, &djinnpb.LookupNotifyRequest{Template: tmpl, Transitions: uint32(djinnpb.Transition_TRANSITION_NOMATCH_MATCH),
			Listener: client.RefToProto(l.Ref()), Handback: []byte("bench"), LeaseDurationNanos: int64(lookupLease)})
		if err != nil {
			return fmt.Errorf("notify %d: %w", w, err)
		}
		ws.leases[w] = reg.GetLease().GetCookie()
		return nil
	})
}

// round registers one new matching item and waits until every watcher had
// its event: it returns the time to the last one and to the first, and
// the register call's.
func (r *lookupRun) round(ctx context.Context, ws *watchers, typ string, i int) (last, first, reg time.Duration, err error) {
	rd := &lookupRound{id: djinn.NewID(), got: make([]atomic.Bool, r.Watchers), done: make(chan struct{})}
	rd.left.Store(int64(r.Watchers))
	ws.cur.Store(rd)
	item := r.item(rd.id[:], fmt.Sprintf("watched-%s-%d", r.tag, i), i, typ)
	t0 := time.Now()
	resp, err := r.ls(0).Register(ctx, &djinnpb.RegisterRequest{Item: item, LeaseDurationNanos: int64(lookupLease)})
	if err != nil {
		return 0, 0, 0, fmt.Errorf("register: %w", err)
	}
	reg = time.Since(t0)
	timer := time.NewTimer(lookupWait)
	defer timer.Stop()
	missing := int64(0)
	select {
	case <-rd.done:
	case <-timer.C:
		missing = rd.left.Load()
	case <-ctx.Done():
	}
	// The item goes; its removal is not among the watched transitions.
	r.cancel([][]byte{resp.GetLease().GetCookie()})
	if missing > 0 {
		return 0, 0, 0, fmt.Errorf("%d of %d watchers had no event after %s", missing, r.Watchers, lookupWait)
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, 0, err
	}
	return rd.last.Sub(t0), time.Unix(0, rd.first.Load()).Sub(t0), reg, nil
}

// discovery runs the discovery rounds: a LookupLocatorDiscovery client is
// started first, at a loopback locator where nothing listens yet, and
// retries every RetryMin, doubling up to RetryMax; once its wait has
// reached RetryMax, at a random point of that wait, a unicast-only
// Registrar is started there: the time from the registrar's start to the
// client's Discovered event. It needs no server.
func (r *lookupRun) discovery(ctx context.Context) (Result, error) {
	var found, started []time.Duration
	var attempts uint64
	for i := range r.Rounds {
		f, s, a, err := r.discoverOnce(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("round %d: %w", i, err)
		}
		found, started = append(found, f), append(started, s)
		attempts += a
	}
	var total time.Duration
	for _, f := range found {
		total += f
	}
	res := Result{Workload: "discovery", Clients: 1, Unit: "round", Ops: int64(r.Rounds), Seconds: total.Seconds(),
		OpsPerS: float64(r.Rounds) / total.Seconds()}
	res.P50ms, res.P99ms = percentiles(found)
	sp50, _ := percentiles(started)
	res.Phases = []Phase{{Name: "NewRegistrar", P50ms: sp50}}
	res.Figures = []Figure{fig("min", percentileMs(found, 0), "ms"), fig("max", percentileMs(found, 1), "ms"),
		fig("retry min", ms(r.RetryMin), "ms"), fig("retry max", ms(r.RetryMax), "ms"),
		fig("failed first", float64(r.settled()), "attempts"), fig("attempts per round", float64(attempts)/float64(r.Rounds), "")}
	res.Checks = []Check{must("attempts per round", float64(attempts)/float64(r.Rounds), fmt.Sprintf("> %d", r.settled()),
		attempts > uint64(r.Rounds)*r.settled())}
	res.Notes = []string{"loopback, unicast: registrar start -> Discovered; the registrar started at a random point of the client's capped wait"}
	return res, nil
}

// settled is the number of failed attempts after which the client's wait
// between attempts has reached RetryMax: it doubles from RetryMin.
func (r *lookupRun) settled() uint64 {
	return 1 + uint64(min(62, math.Ceil(math.Log2(float64(r.RetryMax)/float64(r.RetryMin)))))
}

// freeLocator returns a loopback locator where nothing listens.
func freeLocator() (discovery.Locator, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return discovery.Locator{}, "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	_, portS, _ := net.SplitHostPort(addr)
	port, err := strconv.Atoi(portS)
	if err != nil {
		return discovery.Locator{}, "", err
	}
	loc, err := discovery.NewLocator("127.0.0.1", port)
	return loc, addr, err
}

// discoverOnce starts a locator discovery client at a free loopback port,
// waits until it has failed there often enough to retry at its slowest,
// then, after a random part of RetryMax, starts a unicast-only registrar on
// that port. It returns the time from the registrar's start to the
// client's Discovered event, the time NewRegistrar took, and the client's
// attempts.
func (r *lookupRun) discoverOnce(ctx context.Context) (found, started time.Duration, attempts uint64, err error) {
	loc, addr, err := freeLocator()
	if err != nil {
		return 0, 0, 0, err
	}
	d, err := discovery.NewLookupLocatorDiscovery(discovery.LookupLocatorDiscoveryConfig{
		Locators: []discovery.Locator{loc}, RetryMin: r.RetryMin, RetryMax: r.RetryMax})
	if err != nil {
		return 0, 0, 0, err
	}
	defer d.Close()
	deadline := time.NewTimer(lookupWait)
	defer deadline.Stop()
	if err := r.untilSettled(ctx, d, deadline.C, loc); err != nil {
		return 0, 0, 0, err
	}
	id := djinn.NewID()
	t0 := time.Now()
	reg, err := discovery.NewRegistrar(discovery.RegistrarConfig{ServiceID: id, Endpoint: "127.0.0.1:1", ListenAddr: addr, DisableMulticast: true})
	if err != nil {
		return 0, 0, 0, err
	}
	started = time.Since(t0)
	defer reg.Close()
	for {
		select {
		case ev, ok := <-d.Events():
			if !ok {
				return 0, 0, 0, errEventsEnded
			}
			if ev.Kind == discovery.Discovered && ev.Registrar.ServiceID == id {
				return time.Since(t0), started, d.Stats().Attempts, nil
			}
		case <-deadline.C:
			return 0, 0, 0, fmt.Errorf("registrar at %s not discovered in %s", loc, lookupWait)
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		}
	}
}

// untilSettled waits until d has failed settled times, then a random part
// of RetryMax: a registrar started just after a failure would always leave
// the whole wait to go.
func (r *lookupRun) untilSettled(ctx context.Context, d *discovery.LookupLocatorDiscovery, deadline <-chan time.Time, loc discovery.Locator) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for d.Stats().Failures < r.settled() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("the client failed %d times at %s in %s, want %d", d.Stats().Failures, loc, lookupWait, r.settled())
		case <-tick.C:
		}
	}
	phase := time.NewTimer(rand.N(r.RetryMax))
	defer phase.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-phase.C:
		return nil
	}
}
