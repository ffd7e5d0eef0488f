package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// CallWorkloads are the workloads of Calls, in the order they run by
// default.
var CallWorkloads = []string{"empty", "renew", "renewstream", "renewall", "register", "notify", "notifybatch", "deliver", "deliverbatch", "deliverstream", "deliverstreambatch", "leases"}

// Calls measures single calls of the landlord and the event mailbox, each
// a call on the wire, at each number of clients:
//
//	empty        the gRPC health check: the floor every call pays
//	renew        one lease per client
//	renewstream  renewals over one stream per client, one in flight
//	renewall     Batch leases per call
//	register     a mailbox registration: a logged lease grant
//	notify       durable mailbox ingest, one event a call
//	notifybatch  Events events a call
//	deliver      ingest with delivery enabled to a listener hosted by the
//	             bench; reports the events it received per second
//	deliverbatch the same, Events events a call
//	deliverstream ingest, one event a call, each registration's events
//	             taken by the bench over a delivery stream (client Receive,
//	             acknowledged on the stream); reports events received per
//	             second
//	deliverstreambatch the same, Events events a call
//	             (the deliver forms, with Admin, also say what each event
//	             cost on the wire: delivery.go)
//	leases       Leases registrations, a snapshot forced, and the server's
//	             memory from Admin (memory.go)
type Calls struct {
	Ops      []string
	Levels   []int // clients
	Duration time.Duration
	Conns    int
	Batch    int // leases per renewall call
	Events   int // events per notifybatch call
	Leases   int // registrations of the leases workload
	Admin    string
}

// Check implements Bench.
func (b *Calls) Check() error {
	if err := checkCommon(b.Levels, b.Duration, b.Conns); err != nil {
		return err
	}
	for _, op := range b.Ops {
		if !contains(CallWorkloads, op) {
			return fmt.Errorf("workload %q: want one of %s", op, strings.Join(CallWorkloads, ", "))
		}
	}
	switch {
	case b.Batch <= 0:
		return fmt.Errorf("--batch %d: want at least 1", b.Batch)
	case b.Events <= 0:
		return fmt.Errorf("--events %d: want at least 1", b.Events)
	case b.Leases <= 0:
		return fmt.Errorf("--leases %d: want at least 1", b.Leases)
	case contains(b.Ops, "leases") && b.Admin == "":
		return fmt.Errorf("the leases workload reads the server's memory from --admin: give it")
	}
	return nil
}

// Run implements Bench.
func (b *Calls) Run(ctx context.Context, env Env) (Report, error) {
	var rep Report
	conns, err := dialConns(ctx, env, env.Server, b.Conns)
	if err != nil {
		return rep, err
	}
	defer conns.Close()
	for _, op := range b.Ops {
		if op == "leases" {
			r, err := b.leaseMemory(ctx, env, conns)
			if err != nil {
				return rep, fmt.Errorf("leases: %w", err)
			}
			env.measured(&rep, r)
			continue
		}
		for _, n := range b.Levels {
			r, err := b.measure(ctx, env, conns, op, n)
			if err != nil {
				return rep, fmt.Errorf("%s at %d clients: %w", op, n, err)
			}
			env.measured(&rep, r)
		}
	}
	return rep, nil
}

// callLoad is one workload's step, made ready for n clients: after, when
// set, counts the units once the run is over; done cleans up.
type callLoad struct {
	step  func(ctx context.Context, c int, rec *Recorder) error
	after func() int64
	// failed, when set, says why the work after the calls failed, if it
	// did (a delivery stream ended).
	failed func() error
	done   func()
	units  string // what a unit is, when it is not a call
}

// measure runs op at n clients.
func (b *Calls) measure(ctx context.Context, env Env, conns *Conns, op string, n int) (Result, error) {
	cl, err := b.load(ctx, env, conns, op, n)
	if err != nil {
		return Result{}, err
	}
	if cl.done != nil {
		defer cl.done()
	}
	var wire0 map[string]float64
	if cl.after != nil {
		wire0 = deliveryCounts(ctx, b.Admin)
	}
	m, err := Load{Clients: n, Duration: b.Duration, Step: cl.step}.Run(ctx)
	if err != nil {
		return Result{}, err
	}
	accepted := m.Units
	if cl.after != nil {
		// Delivery: give the mailbox a moment to drain, and count what the
		// listener received over the whole run.
		drain := time.Now()
		for cl.after() < m.Units && time.Since(drain) < 30*time.Second {
			<-time.After(10 * time.Millisecond)
		}
		m.Elapsed += time.Since(drain)
		m.Units = cl.after()
	}
	if cl.failed != nil {
		if err := cl.failed(); err != nil {
			return Result{}, err
		}
	}
	r := m.Result(op, "call")
	if cl.units != "" {
		r.Figures = append(r.Figures, fig(cl.units, float64(m.Units), ""), fig(cl.units+"/s", m.PerS(m.Units), ""))
	}
	if cl.after != nil {
		r.Figures = append(r.Figures, fig("events accepted", float64(accepted), ""))
		r.Figures = append(r.Figures, deliveryFigures(op, wire0, deliveryCounts(ctx, b.Admin))...)
		r.Checks = append(r.Checks, mustZero("events not delivered", float64(max(0, accepted-m.Units))))
	}
	return r, nil
}

// load makes op's step for n clients.
func (b *Calls) load(ctx context.Context, env Env, conns *Conns, op string, n int) (callLoad, error) {
	switch op {
	case "empty":
		return callLoad{step: func(ctx context.Context, c int, rec *Recorder) error {
			t0 := time.Now()
			_, err := healthpb.NewHealthClient(conns.For(c)).Check(ctx, &healthpb.HealthCheckRequest{})
			return timed(rec, t0, err)
		}}, nil
	case "register":
		return callLoad{step: func(ctx context.Context, c int, rec *Recorder) error {
			t0 := time.Now()
			_, err := djinnpb.NewEventMailboxClient(conns.For(c)).Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Minute)})
			return timed(rec, t0, err)
		}}, nil
	case "renew", "renewstream", "renewall":
		return b.renewLoad(ctx, conns, op, n)
	}
	return b.notifyLoad(ctx, env, conns, op, n)
}

// timed records an op that started at t0, unless it failed.
func timed(rec *Recorder, t0 time.Time, err error) error {
	if err != nil {
		return err
	}
	rec.Op(time.Since(t0))
	return nil
}

// register makes n mailbox registrations with hour-long leases, 64 calls at
// a time.
func register(ctx context.Context, conns *Conns, n int) ([]*djinnpb.MailboxRegistration, error) {
	out := make([]*djinnpb.MailboxRegistration, n)
	err := parallel(ctx, 64, n, func(ctx context.Context, c, i int) error {
		r, err := djinnpb.NewEventMailboxClient(conns.For(c)).Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Hour)})
		out[i] = r
		return err
	})
	return out, err
}

// renewLoad renews the leases of registrations made first: one per client
// and call, on a stream, or Batch per call.
func (b *Calls) renewLoad(ctx context.Context, conns *Conns, op string, n int) (callLoad, error) {
	per := 1
	if op == "renewall" {
		per = b.Batch
	}
	regs, err := register(ctx, conns, n*per)
	if err != nil {
		return callLoad{}, err
	}
	ll := func(c int) djinnpb.LandlordClient { return djinnpb.NewLandlordClient(conns.For(c)) }
	switch op {
	case "renew":
		return callLoad{step: func(ctx context.Context, c int, rec *Recorder) error {
			t0 := time.Now()
			_, err := ll(c).Renew(ctx, &djinnpb.RenewRequest{Cookie: regs[c].Lease.Cookie, DurationNanos: int64(time.Hour)})
			return timed(rec, t0, err)
		}}, nil
	case "renewstream":
		return streamLoad(ctx, n, ll, regs)
	}
	reqs := make([]*djinnpb.RenewAllRequest, n)
	for c := range n {
		reqs[c] = &djinnpb.RenewAllRequest{}
		for _, r := range regs[c*per : (c+1)*per] {
			reqs[c].Cookies = append(reqs[c].Cookies, r.Lease.Cookie...)
			reqs[c].DurationNanos = append(reqs[c].DurationNanos, int64(time.Hour))
		}
	}
	return callLoad{units: "leases renewed", step: func(ctx context.Context, c int, rec *Recorder) error {
		t0 := time.Now()
		resp, err := ll(c).RenewAll(ctx, reqs[c])
		if err != nil {
			return err
		}
		if len(resp.Errors) > 0 {
			return fmt.Errorf("renewAll: %s", resp.Errors[0].GetError().GetMessage())
		}
		rec.OpUnits(time.Since(t0), int64(len(resp.GrantedNanos)))
		return nil
	}}, nil
}

// streamLoad renews over one stream per client, one renewal in flight.
func streamLoad(ctx context.Context, n int, ll func(int) djinnpb.LandlordClient, regs []*djinnpb.MailboxRegistration) (callLoad, error) {
	streams := make([]djinnpb.Landlord_RenewStreamClient, n)
	sctx, stop := context.WithCancel(ctx)
	for c := range n {
		var err error
		if streams[c], err = ll(c).RenewStream(sctx); err != nil {
			stop()
			return callLoad{}, err
		}
	}
	return callLoad{done: stop, step: func(_ context.Context, c int, rec *Recorder) error {
		t0 := time.Now()
		if err := streams[c].Send(&djinnpb.RenewRequest{Cookie: regs[c].Lease.Cookie, DurationNanos: int64(time.Hour)}); err != nil {
			return err
		}
		resp, err := streams[c].Recv()
		if err != nil {
			return err
		}
		if resp.Error != nil {
			return fmt.Errorf("renew: %s", resp.Error.GetMessage())
		}
		rec.Op(time.Since(t0))
		return nil
	}}, nil
}

// notifyLoad is durable ingest into mailbox listeners, one event a call or
// Events a call; the deliver forms also enable delivery to a listener
// hosted here and count what it receives.
func (b *Calls) notifyLoad(ctx context.Context, env Env, conns *Conns, op string, n int) (callLoad, error) {
	regs, err := register(ctx, conns, n)
	if err != nil {
		return callLoad{}, err
	}
	cookies := make([][]byte, len(regs))
	for i, r := range regs {
		cookies[i] = r.GetLease().GetCookie()
	}
	cl := callLoad{units: "events accepted", done: func() { cancelLeases(env, conns.For(0), "registrations", cookies) }}
	if strings.HasPrefix(op, "deliverstream") {
		after, failed, stop, err := deliverOverStreams(ctx, conns, regs)
		if err != nil {
			cl.done()
			return callLoad{}, err
		}
		cleanup := cl.done
		cl.after, cl.failed, cl.units = after, failed, "events delivered"
		cl.done = func() { stop(); cleanup() }
	} else if strings.HasPrefix(op, "deliver") {
		after, stop, err := deliverTo(ctx, conns, regs)
		if err != nil {
			cl.done()
			return callLoad{}, err
		}
		cleanup := cl.done
		cl.after, cl.units = after, "events delivered"
		cl.done = func() { stop(); cleanup() }
	}
	src := &djinnpb.Ref{Endpoint: "127.0.0.1:1", ServiceId: []byte("bench-generator-"), ObjectId: []byte("source-object-id")}
	var seq atomic.Int64
	event := func() *djinnpb.RemoteEvent {
		return &djinnpb.RemoteEvent{Source: src, EventId: 1, Sequence: seq.Add(1), Handback: []byte("bench")}
	}
	if strings.HasSuffix(op, "batch") {
		cl.step = b.batchStep(conns, regs, event)
		return cl, nil
	}
	cl.step = func(ctx context.Context, c int, rec *Recorder) error {
		t0 := time.Now()
		_, err := djinnpb.NewEventListenerClient(conns.For(c)).Notify(ctx, &djinnpb.NotifyRequest{ListenerId: regs[c].Listener.ObjectId, Event: event()})
		return timed(rec, t0, err)
	}
	return cl, nil
}

func (b *Calls) batchStep(conns *Conns, regs []*djinnpb.MailboxRegistration, event func() *djinnpb.RemoteEvent) func(context.Context, int, *Recorder) error {
	return func(ctx context.Context, c int, rec *Recorder) error {
		req := &djinnpb.NotifyBatchRequest{ListenerId: regs[c].Listener.ObjectId, Events: make([]*djinnpb.RemoteEvent, b.Events)}
		for i := range req.Events {
			req.Events[i] = event()
		}
		t0 := time.Now()
		resp, err := djinnpb.NewEventListenerClient(conns.For(c)).NotifyBatch(ctx, req)
		if err != nil {
			return err
		}
		if resp.Error != nil {
			return fmt.Errorf("notifyBatch: %s", resp.Error.GetMessage())
		}
		rec.OpUnits(time.Since(t0), int64(resp.Accepted))
		return nil
	}
}

// deliverTo hosts a listener, has every registration deliver to it, and
// returns the count of events it received.
func deliverTo(ctx context.Context, conns *Conns, regs []*djinnpb.MailboxRegistration) (received func() int64, stop func(), err error) {
	var got atomic.Int64
	l, err := client.Listen(ctx, "127.0.0.1:0", func(context.Context, *client.RemoteEvent) error {
		got.Add(1)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	m := djinnpb.NewEventMailboxClient(conns.For(0))
	for _, r := range regs {
		if _, err := m.EnableDelivery(ctx, &djinnpb.EnableDeliveryRequest{RegistrationId: r.RegistrationId, Target: client.RefToProto(l.Ref())}); err != nil {
			l.Close()
			return nil, nil, err
		}
	}
	return got.Load, func() { l.Close() }, nil
}

// deliverOverStreams takes every registration's events with client
// Receive, as a client does: the Receives of the registrations on one
// connection share its delivery stream, which packs the events of several
// registrations into a message and takes their acknowledgements in one.
// It returns the count of events received and why a Receive failed, if
// one did.
func deliverOverStreams(ctx context.Context, conns *Conns, regs []*djinnpb.MailboxRegistration) (received func() int64, failed func() error, stop func(), err error) {
	var (
		got   atomic.Int64
		first atomic.Pointer[error]
		wg    sync.WaitGroup
	)
	sctx, cancel := context.WithCancel(ctx)
	stop = func() { cancel(); wg.Wait() }
	for i, r := range regs {
		id, err := djinn.IDFromBytes("registration id", r.GetRegistrationId())
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		reg, err := conns.clients[i%len(conns.clients)].Mailbox().Registration(ctx, id)
		if err != nil {
			stop()
			return nil, nil, nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := reg.Receive(sctx, func(context.Context, client.StoredEvent) error {
				got.Add(1)
				return nil
			})
			if err != nil {
				err = fmt.Errorf("delivery stream of registration %s: %w", id, err)
				first.CompareAndSwap(nil, &err)
			}
		}()
	}
	failed = func() error {
		if err := first.Load(); err != nil {
			return *err
		}
		return nil
	}
	return got.Load, failed, stop, nil
}

// ParseClients parses a comma-separated list of numbers of clients.
func ParseClients(s string) ([]int, error) {
	var levels []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--clients %q: want a comma-separated list of positive numbers", s)
		}
		levels = append(levels, n)
	}
	return levels, nil
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// checkCommon checks the settings of a closed-loop bench.
func checkCommon(levels []int, d time.Duration, conns int) error {
	if len(levels) == 0 {
		return fmt.Errorf("--clients: want at least one number of clients")
	}
	for _, n := range levels {
		if n <= 0 {
			return fmt.Errorf("--clients %d: want a positive number", n)
		}
	}
	if d <= 0 {
		return fmt.Errorf("--for %s: want a positive time per measurement", d)
	}
	if conns <= 0 {
		return fmt.Errorf("--conns %d: want at least 1", conns)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
