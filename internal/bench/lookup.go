package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Lookup measures the lookup service, and discovery in the bench's own
// process. It calls the service through the generated gRPC client or the
// client library, so every call it counts is one call on the wire.
//
//	register       each client loops register(item), then cancel of the
//	               item's lease: an op is one cycle, two calls; the
//	               registrar must hold as many items after the run as before
//	lookup         Items items registered first (2 service types, one all
//	               share and one of 100 kinds, and 5 entries, one naming the
//	               item alone); each client loops a lookup (max 1) by the
//	               name of a random item with Registrar.LookupN (a unary
//	               call): the one match must be that item
//	lookup-stream  the same lookups over a LookupStream per client
//	lookup-shared  the same over Streams streams all the clients share
//	notify         Watchers notify registrations on one type, each its own
//	               listener, then Rounds registers of a new matching item:
//	               the time until the last watcher had its event
//	discovery      Rounds times: a locator discovery client retrying at a
//	               loopback locator, then a registrar started there: the
//	               time until the client's Discovered event (no server)
//
// Items and notify registrations are cancelled at the end of their
// workload. The registrar grants the first few thousand items 5 minutes
// whatever is asked (Reggie's lease policy), so a lookup workload that runs
// longer than that sees items expire: mismatches.
type Lookup struct {
	Ops      []string
	Levels   []int
	Duration time.Duration
	Conns    int
	Streams  int // lookup-shared: streams all the clients share
	Items    int
	Watchers int
	Rounds   int // of notify and discovery
	RetryMin time.Duration
	RetryMax time.Duration
	Listen   string // address of the bench's listeners for notify
	Admin    string // the server's admin endpoint ("": not read)
	// MaxStaleness, when positive, lets any member of the cluster answer
	// the lookups from a state at most that old (client.ReadStale): with
	// several --server addresses, the lookups spread over the members.
	MaxStaleness time.Duration
}

// LookupWorkloads are the workloads of Lookup, in the order they run by
// default.
var LookupWorkloads = []string{"register", "lookup", "lookup-stream", "lookup-shared", "notify", "discovery"}

// lookupLease is the lease the bench asks for its items and notify
// registrations; it cancels them when done.
const lookupLease = time.Hour

// The target, at 64 clients.
const (
	lookupTargetClients = 64
	lookupTargetLookups = 40_000
)

// lookupLoaders is how many calls at once register the lookup workload's
// items and the notify workload's watchers.
const lookupLoaders = 64

// lookupWait bounds a notify round and a discovery round.
const lookupWait = 30 * time.Second

// The bench's item shape.
const (
	lookupType  = "bench.lookup.Service" // every item's first type
	lookupKinds = 100                    // its second: bench.lookup.KindNN, NN = i mod 100
	lookupName  = "bench.lookup.Name"    // the entry that names an item alone
)

// Check implements Bench.
func (b *Lookup) Check() error {
	want := strings.Join(LookupWorkloads[:len(LookupWorkloads)-1], ", ") + " or discovery"
	if len(b.Ops) == 0 {
		return fmt.Errorf("--ops: want %s", want)
	}
	for _, op := range b.Ops {
		if !contains(LookupWorkloads, op) {
			return fmt.Errorf("workload %q: want %s", op, want)
		}
	}
	if err := checkCommon(b.Levels, b.Duration, b.Conns); err != nil {
		return err
	}
	switch {
	case b.Streams <= 0:
		return fmt.Errorf("--streams %d: want at least 1", b.Streams)
	case b.Items <= 0:
		return fmt.Errorf("--items %d: want at least 1", b.Items)
	case b.Watchers <= 0:
		return fmt.Errorf("--watchers %d: want at least 1", b.Watchers)
	case b.Rounds <= 0:
		return fmt.Errorf("--rounds %d: want at least 1", b.Rounds)
	case b.RetryMin <= 0 || b.RetryMax < b.RetryMin:
		return fmt.Errorf("--retry-min %s, --retry-max %s: want 0 < retry-min <= retry-max", b.RetryMin, b.RetryMax)
	case b.MaxStaleness < 0:
		return fmt.Errorf("--max-staleness %s: want a positive bound, or 0 for the leader alone", b.MaxStaleness)
	}
	return nil
}

// lookupRun is the bench's connections and this run's tag.
type lookupRun struct {
	*Lookup
	env   Env
	conns *Conns
	tag   string // names this run's items and watched type
}

// Run implements Bench.
func (b *Lookup) Run(ctx context.Context, env Env) (Report, error) {
	var rep Report
	id := djinn.NewID()
	r := &lookupRun{Lookup: b, env: env, tag: fmt.Sprintf("%x", id[:4])}
	if !(len(b.Ops) == 1 && b.Ops[0] == "discovery") {
		conns, err := dialConns(ctx, env, env.Server, b.Conns)
		if err != nil {
			return rep, err
		}
		defer conns.Close()
		r.conns = conns
	}
	loaded := false
	for _, op := range b.Ops {
		var err error
		switch {
		case op == "register":
			err = r.levels(ctx, &rep, op, nil)
		case strings.HasPrefix(op, "lookup") && !loaded:
			loaded = true // the lookup workloads share one loading of the items
			err = r.lookups(ctx, &rep)
		case op == "notify" || op == "discovery":
			err = r.once(ctx, &rep, op)
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", op, err)
		}
	}
	return rep, nil
}

// once runs a one-off measurement: notify or discovery.
func (r *lookupRun) once(ctx context.Context, rep *Report, op string) error {
	measure := r.notify
	if op == "discovery" {
		measure = r.discovery
	}
	res, err := measure(ctx)
	if err != nil {
		return err
	}
	r.env.measured(rep, res)
	return nil
}

// levels measures op at every number of clients; ids are the lookup
// workloads' items.
func (r *lookupRun) levels(ctx context.Context, rep *Report, op string, ids [][]byte) error {
	for _, n := range r.Levels {
		res, err := r.measure(ctx, op, n, ids)
		if err != nil {
			return fmt.Errorf("at %d clients: %w", n, err)
		}
		r.env.measured(rep, res)
	}
	return nil
}

// lookups loads the items, measures the lookup workloads at every level,
// and cancels the items.
func (r *lookupRun) lookups(ctx context.Context, rep *Report) error {
	ids, cookies, items, err := r.loadItems(ctx)
	defer r.cancel(cookies)
	if err != nil {
		return err
	}
	r.env.measured(rep, items)
	for _, op := range r.Ops {
		if strings.HasPrefix(op, "lookup") {
			if err := r.levels(ctx, rep, op, ids); err != nil {
				return fmt.Errorf("%s %w", op, err)
			}
		}
	}
	return nil
}

func (r *lookupRun) ls(c int) djinnpb.LookupServiceClient {
	return djinnpb.NewLookupServiceClient(r.conns.For(c))
}

// cancel cancels the leases of the bench's items and notify registrations.
func (r *lookupRun) cancel(cookies [][]byte) {
	if len(cookies) > 0 {
		cancelLeases(r.env, r.conns.For(0), "items and notify registrations", cookies)
	}
}

// item returns the bench's item i, named name, with typ as its first
// service type; an empty id asks the registrar for one.
func (r *lookupRun) item(id []byte, name string, i int, typ string) *djinnpb.ServiceItem {
	str := func(s string) *djinnpb.Value { return &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: s}} }
	num := func(n int) *djinnpb.Value { return &djinnpb.Value{Kind: &djinnpb.Value_IntValue{IntValue: int64(n)}} }
	field := func(name string, v *djinnpb.Value) *djinnpb.Field { return &djinnpb.Field{Name: name, Value: v} }
	return &djinnpb.ServiceItem{
		ServiceId: id,
		Service:   []byte("bench-service-" + name),
		Types:     []string{typ, fmt.Sprintf("bench.lookup.Kind%02d", i%lookupKinds)},
		Entries: []*djinnpb.Entry{
			{Type: lookupName, Fields: []*djinnpb.Field{field("name", str(name))}},
			{Type: "bench.lookup.Location", Fields: []*djinnpb.Field{
				field("building", str(fmt.Sprintf("b%d", i%10))), field("floor", num(i%50)), field("room", str(fmt.Sprintf("r%d", i%1000)))}},
			{Type: "bench.lookup.Owner", Supertypes: []string{"bench.lookup.Contact"}, Fields: []*djinnpb.Field{
				field("team", str(fmt.Sprintf("team-%d", i%20))), field("email", str(fmt.Sprintf("team%d@example.com", i%20)))}},
			{Type: "bench.lookup.Version", Fields: []*djinnpb.Field{
				field("major", num(1)), field("minor", num(i%7)), field("stable", &djinnpb.Value{Kind: &djinnpb.Value_BoolValue{BoolValue: i%2 == 0}})}},
			{Type: "bench.lookup.Comment", Fields: []*djinnpb.Field{
				field("text", str(fmt.Sprintf("item %d of the lookup bench", i))), field("weight", &djinnpb.Value{Kind: &djinnpb.Value_DoubleValue{DoubleValue: float64(i) / 7}})}},
		},
	}
}

// name is the name of the lookup workload's item i.
func (r *lookupRun) name(i int) string { return fmt.Sprintf("item-%s-%d", r.tag, i) }

// template is the lookups' template: item k by its Name entry's name.
func (r *lookupRun) template(k int) client.ServiceTemplate {
	return client.ServiceTemplate{Entries: []client.EntryTemplate{{Type: lookupName,
		Fields: []client.Field{{Name: "name", Value: client.NewString(r.name(k))}}}}}
}

// measure runs the empty call, then op at n clients; ids are the lookup
// workload's items, by index.
func (r *lookupRun) measure(ctx context.Context, op string, n int, ids [][]byte) (Result, error) {
	empty, err := emptyCall(ctx, r.conns, n, r.Duration)
	if err != nil {
		return Result{}, err
	}
	step, calls, done, err := r.step(ctx, op, n, ids)
	if err != nil {
		return Result{}, err
	}
	defer done()
	before, err := r.registered(ctx)
	if err != nil {
		return Result{}, err
	}
	p0, err := maybeProcess(ctx, r.Admin)
	if err != nil {
		return Result{}, err
	}
	h0 := readHostCPU()
	m, err := Load{Clients: n, Duration: r.Duration, Finish: true, Slack: time.Minute, Step: step}.Run(ctx)
	if err != nil {
		return Result{}, err
	}
	steal := readHostCPU().stealSince(h0)
	p1, err := maybeProcess(ctx, r.Admin)
	if err != nil {
		return Result{}, err
	}
	after, err := r.registered(ctx)
	if err != nil {
		return Result{}, err
	}
	return r.result(m, op, calls, cpuCores(p0, p1, m.Elapsed.Seconds()), steal, after-before).withBaseline(empty, float64(calls)), nil
}

// result is a register or lookup run's result.
func (r *lookupRun) result(m *Measurement, op string, calls int, cpu, steal float64, left int64) Result {
	var res Result
	if op == "register" {
		res = m.Result(op, "cycle", "register", "cancel")
		res.Checks = append(res.Checks, mustZero("left registered", float64(left)))
	} else {
		res = m.Result(op, "lookup")
		res.Checks = append(res.Checks, mustZero("mismatches", float64(m.Count("mismatches"))))
		if m.Clients == lookupTargetClients {
			res.Checks = append(res.Checks, target("lookups/s", res.OpsPerS, fmt.Sprintf(">= %d", lookupTargetLookups), res.OpsPerS >= lookupTargetLookups))
		}
	}
	if cpu > 0 {
		res.Figures = append(res.Figures, fig("server CPU", cpu, "cores"))
	}
	if steal >= 0.005 {
		res.Figures = append(res.Figures, fig("host steal", 100*steal, "%"))
	}
	return res
}

// step returns op's step, the calls one op makes, and what to do after.
func (r *lookupRun) step(ctx context.Context, op string, n int, ids [][]byte) (func(context.Context, int, *Recorder) error, int, func(), error) {
	switch op {
	case "register":
		return r.registerStep(), 2, func() {}, nil
	case "lookup":
		regs := make([]*client.Registrar, r.conns.Len())
		for i, cc := range r.conns.ccs {
			regs[i] = client.NewRegistrar(fixedConn{cc}, djinn.Ref{Endpoint: cc.Target()})
		}
		return r.lookupStep(ids, func(c int) lookupNer { return regs[c%len(regs)] }), 1, func() {}, nil
	}
	count := n // a stream per client
	if op == "lookup-shared" {
		count = r.Streams
	}
	streams, err := r.openStreams(ctx, count)
	if err != nil {
		return nil, 0, nil, err
	}
	return r.lookupStep(ids, func(c int) lookupNer { return streams[c%len(streams)] }), 1, func() { closeAll(streams) }, nil
}

// registerStep registers an item and cancels its lease.
func (r *lookupRun) registerStep() func(context.Context, int, *Recorder) error {
	var seq atomic.Int64
	return func(ctx context.Context, c int, rec *Recorder) error {
		i := int(seq.Add(1))
		item := r.item(nil, fmt.Sprintf("reg-%s-%d", r.tag, i), i, lookupType)
		t0 := time.Now()
		reg, err := r.ls(c).Register(ctx, &djinnpb.RegisterRequest{Item: item, LeaseDurationNanos: int64(lookupLease)})
		if err != nil {
			return fmt.Errorf("register: %w", err)
		}
		t1 := time.Now()
		if _, err := djinnpb.NewLandlordClient(r.conns.For(c)).Cancel(ctx, &djinnpb.CancelRequest{Cookie: reg.GetLease().GetCookie()}); err != nil {
			return fmt.Errorf("cancel: %w", err)
		}
		t2 := time.Now()
		rec.Phase("register", t1.Sub(t0))
		rec.Phase("cancel", t2.Sub(t1))
		rec.Op(t2.Sub(t0))
		return nil
	}
}

// lookupNer is a Registrar or a LookupStream.
type lookupNer interface {
	LookupN(ctx context.Context, tmpl client.ServiceTemplate, max int) (int, []client.ServiceItem, error)
}

// reads asks for the lookups' freshness on ctx.
func (r *lookupRun) reads(ctx context.Context) context.Context {
	if r.MaxStaleness > 0 {
		return client.ReadStale(ctx, r.MaxStaleness)
	}
	return ctx
}

// lookupStep looks up a random item by its name with client c's lookupNer.
func (r *lookupRun) lookupStep(ids [][]byte, of func(c int) lookupNer) func(context.Context, int, *Recorder) error {
	return func(ctx context.Context, c int, rec *Recorder) error {
		ctx = r.reads(ctx)
		k := rand.IntN(len(ids))
		t0 := time.Now()
		total, items, err := of(c).LookupN(ctx, r.template(k), 1)
		if err != nil {
			return fmt.Errorf("lookup: %w", err)
		}
		rec.Op(time.Since(t0))
		if total != 1 || len(items) != 1 || !bytes.Equal(items[0].ID[:], ids[k]) {
			rec.Count("mismatches", 1)
		}
		return nil
	}
}

// openStreams opens n lookup streams, spread over the connections.
func (r *lookupRun) openStreams(ctx context.Context, n int) ([]*client.LookupStream, error) {
	streams := make([]*client.LookupStream, 0, n)
	for i := range n {
		cc := r.conns.For(i)
		s, err := client.NewRegistrar(fixedConn{cc}, djinn.Ref{Endpoint: cc.Target()}).Stream(r.reads(ctx))
		if err != nil {
			closeAll(streams)
			return nil, fmt.Errorf("lookup stream: %w", err)
		}
		streams = append(streams, s)
	}
	return streams, nil
}

func closeAll(streams []*client.LookupStream) {
	for _, s := range streams {
		s.Close()
	}
}

// fixedConn is a client.Connector that has one connection for every
// endpoint.
type fixedConn struct{ cc *grpc.ClientConn }

func (f fixedConn) Conn(string) (*grpc.ClientConn, error) { return f.cc, nil }

// registered returns the number of items the registrar holds.
func (r *lookupRun) registered(ctx context.Context) (int64, error) {
	info, err := r.ls(0).GetRegistrar(ctx, &djinnpb.GetRegistrarRequest{})
	if err != nil {
		return 0, fmt.Errorf("get registrar: %w", err)
	}
	return info.GetItems(), nil
}

// loadItems registers the lookup workloads' items, lookupLoaders calls at
// a time, and reads the server's memory before and after. It returns the
// items' service ids by index and the cookies of every lease granted, even
// on error.
func (r *lookupRun) loadItems(ctx context.Context) (ids, cookies [][]byte, res Result, err error) {
	ids, cookies = make([][]byte, r.Items), make([][]byte, r.Items)
	p0, err := maybeProcess(ctx, r.Admin)
	if err != nil {
		return ids, cookies, res, err
	}
	var done atomic.Int64
	stop := progressEvery(r.env, "items", r.Items, &done)
	start := time.Now()
	err = parallel(ctx, lookupLoaders, r.Items, func(ctx context.Context, c, i int) error {
		reg, err := r.ls(c).Register(ctx, &djinnpb.RegisterRequest{Item: r.item(nil, r.name(i), i, lookupType), LeaseDurationNanos: int64(lookupLease)})
		if err != nil {
			return fmt.Errorf("register item %d: %w", i, err)
		}
		ids[i], cookies[i] = reg.GetServiceId(), reg.GetLease().GetCookie()
		done.Add(1)
		return nil
	})
	setup := time.Since(start)
	stop()
	if err != nil {
		return ids, cookies, res, err
	}
	p1, err := maybeProcess(ctx, r.Admin)
	if err != nil {
		return ids, cookies, res, err
	}
	res = Result{Workload: "items", Clients: lookupLoaders, Unit: "item", Ops: int64(r.Items), Seconds: setup.Seconds(),
		OpsPerS: float64(r.Items) / setup.Seconds()}
	if p0 != nil && p1 != nil {
		res.Figures = append(res.Figures, fig("server CPU", cpuCores(p0, p1, setup.Seconds()), "cores"),
			fig("server RSS before", p0.rss/(1<<20), "MB"), fig("with the items", p1.rss/(1<<20), "MB"),
			fig("heap in use", heapInuseMB(ctx, r.Admin), "MB"), fig("bytes per item", (p1.rss-p0.rss)/float64(r.Items), ""))
	}
	err = r.typeMatches(ctx, &res)
	return ids, cookies, res, err
}

// typeMatches checks that templates on a type match many: the type every
// item has, and one of the 100 kinds.
func (r *lookupRun) typeMatches(ctx context.Context, res *Result) error {
	const kind = 7
	kindWant := 0
	for i := range r.Items {
		if i%lookupKinds == kind {
			kindWant++
		}
	}
	for _, q := range []struct {
		name, typ string
		want      int
	}{{"shared type matches", lookupType, r.Items}, {"one kind matches", fmt.Sprintf("bench.lookup.Kind%02d", kind), kindWant}} {
		resp, err := r.ls(0).Lookup(ctx, &djinnpb.LookupRequest{Template: &djinnpb.ServiceTemplate{Types: []string{q.typ}}})
		if err != nil {
			return fmt.Errorf("lookup by type %s: %w", q.typ, err)
		}
		got := resp.GetTotal()
		res.Checks = append(res.Checks, must(q.name, float64(got), ">= "+strconv.Itoa(q.want), got >= int64(q.want)))
	}
	return nil
}

// errEventsEnded is a discovery client's events ending early.
var errEventsEnded = errors.New("the client's events ended")
