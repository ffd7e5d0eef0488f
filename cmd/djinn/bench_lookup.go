package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
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

// The lookup bench measures the lookup service of a server running in its
// own process, and discovery in the bench's own (issue 6, section 5). It
// calls the service through the generated gRPC client, so every call it
// counts is one call on the wire.
//
// register: each client loops register(item), then cancel of the item's
// lease through the Landlord. An op is one cycle: two calls. Every item
// has 2 service types and 5 attribute entries. The registrar must hold as
// many items after the run as before.
//
// lookup: --items items are registered first, each with 2 service types
// (one all of them share, one of 100 kinds) and 5 entries whose values
// vary: one entry names the item alone, the others repeat across items.
// Each client loops a lookup (max 1) with a template of one entry field,
// the name of a random item; the one match must be that item. The server's
// resident memory is read with the items loaded.
//
// notify: --watchers notify registrations on one service type, each with a
// listener of its own (all hosted by one listener server in the bench);
// then --rounds times, one register of a new item of that type: the time
// from the register call's start until the last watcher has its event.
//
// discovery: a LookupLocatorDiscovery client is started first, at a
// loopback locator where nothing listens yet, and retries every
// --retry-min, doubling up to --retry-max; once its wait has reached
// --retry-max, at a random point of that wait, a unicast-only Registrar is
// started there: the time from the registrar's start to the client's
// Discovered event. It runs in the bench process and needs no server.
//
// Every register and lookup measurement is preceded by the empty call (the
// gRPC health check) at the same concurrency: the unary ceiling of the
// server, the connections and this load generator together.
//
// A cycle under way when the time is up is finished and counted, so no
// item of the register workload stays registered. Items and notify
// registrations are cancelled at the end of their workload. The registrar
// grants the first few thousand items 5 minutes whatever is asked (Reggie's
// lease policy), so a lookup workload that runs longer than that sees
// items expire: mismatches.

// lookupBenchLease is the lease the bench asks for its items and notify
// registrations; it cancels them when done.
const lookupBenchLease = time.Hour

// The target, at 64 clients.
const (
	lookupBenchTargetClients = 64
	lookupBenchTargetLookups = 40_000
)

// lookupBenchSlack bounds the calls of a run past its duration: a cycle
// under way must finish within it.
const lookupBenchSlack = time.Minute

// lookupBenchLoaders is how many calls at once register the lookup
// workload's items and the notify workload's watchers.
const lookupBenchLoaders = 64

// lookupBenchWait bounds a notify round and a discovery round.
const lookupBenchWait = 30 * time.Second

// The bench's item shape.
const (
	lookupBenchType  = "bench.lookup.Service" // every item's first type
	lookupBenchKinds = 100                    // its second: bench.lookup.KindNN, NN = i mod 100
	lookupBenchName  = "bench.lookup.Name"    // the entry that names an item alone
)

func newBenchLookup(g *globals) *cobra.Command {
	b := &lookupBench{}
	var ops, clients string
	cmd := &cobra.Command{
		Use:   "lookup",
		Short: "Measure the lookup service: register+cancel, lookups, notify fan-out, discovery time",
		Long: `Measure the lookup service of a djinn server running in its own process.

Workloads (--ops):
  register   each client loops register(item) + cancel of its lease;
             reports cycles/s (2 calls each) and p50/p99 per cycle. Items
             have 2 service types and 5 attribute entries
  lookup     --items items registered first (2 types, 5 entries each; one
             entry names the item alone), then each client loops lookup
             (max 1) by that one entry field, for a random item, with the
             client library's Registrar.LookupN (a unary call); reports
             lookups/s, p50/p99, answers that were not the item asked for
             (must be 0), and the server's resident memory from --admin
             with the items loaded
  lookup-stream
             the lookup workload's lookups over LookupStream (the client
             library's Registrar.Stream), one stream per client: the same
             answers without a call each (the items are loaded once for
             all the lookup workloads)
  lookup-shared
             the same over --streams streams shared by all the clients:
             lookups that wait at the same time go as one batch. Two
             streams suit two cores: more make smaller batches and more
             messages for the same lookups
  notify     --watchers notify registrations on one service type, each its
             own listener (hosted by the bench at --listen), then --rounds
             registers of a new matching item; reports the time from the
             register call's start until the last watcher had its event,
             p50/p99, and events/s
  discovery  --rounds times: a locator discovery client retrying (every
             --retry-min, doubling to --retry-max) at a loopback locator,
             then, at a random point of its longest wait, a unicast-only
             registrar started there; reports the time
             from the registrar's start to the client's Discovered event,
             p50/p99. Runs in this process; needs no server

Each register and lookup measurement runs the empty workload (a gRPC
health check) at the same concurrency first, and reports the calls/s it
reached as a fraction of the empty call's. With --admin the server's CPU
is read from its /metrics too. The bench exits non-zero when a lookup
found the wrong item, a register cycle left an item behind, or a watcher
missed its event.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := b.parse(ops, clients); err != nil {
				return err
			}
			if b.needsServer() {
				ccs, closeConns, err := g.dialConns(cmd.Context(), b.conns)
				if err != nil {
					return err
				}
				defer closeConns()
				b.ccs = ccs
			}
			b.progress = cmd.ErrOrStderr()
			rep, err := b.run(cmd.Context(), func(r lookupBenchPrinter) {
				if g.output != "json" {
					r.print(cmd.OutOrStdout())
				}
			})
			if err != nil {
				return err
			}
			if g.output == "json" {
				if err := g.print(cmd.OutOrStdout(), rep, nil); err != nil {
					return err
				}
			}
			return rep.verdict()
		},
	}
	f := cmd.Flags()
	f.StringVar(&ops, "ops", "register,lookup,lookup-stream,lookup-shared,notify,discovery", "workloads to run")
	f.StringVar(&clients, "clients", "1,16,64", "concurrent clients")
	f.DurationVar(&b.duration, "duration", 5*time.Second, "time per measurement")
	f.IntVar(&b.conns, "conns", 4, "gRPC connections the clients share")
	f.IntVar(&b.streams, "streams", 2, "lookup-shared: lookup streams all the clients share, spread over the connections")
	f.IntVar(&b.items, "items", 100_000, "items registered for the lookup workload")
	f.IntVar(&b.watchers, "watchers", 1_000, "notify registrations for the notify workload")
	f.IntVar(&b.rounds, "rounds", 20, "rounds of the notify and discovery workloads")
	f.DurationVar(&b.retryMin, "retry-min", time.Millisecond, "discovery: the client's first wait between attempts")
	f.DurationVar(&b.retryMax, "retry-max", 10*time.Millisecond, "discovery: the client's longest wait between attempts")
	f.StringVar(&b.listen, "listen", "127.0.0.1:0", "address of the bench's listeners for the notify workload (the server must reach it)")
	f.StringVar(&b.admin, "admin", "127.0.0.1:4162", "admin address of the server, for its memory and CPU (empty: not read)")
	return cmd
}

// lookupBench is the lookup bench: its flags, then its connections.
type lookupBench struct {
	ops      []string
	levels   []int
	duration time.Duration
	conns    int
	streams  int
	items    int
	watchers int
	rounds   int
	retryMin time.Duration
	retryMax time.Duration
	listen   string
	admin    string

	tag      string             // names this run's items and watched type
	ccs      []*grpc.ClientConn // client c uses ccs[c%len(ccs)]
	progress io.Writer          // progress of the loading, and cleanup failures
}

// parse checks the flags and sets ops, levels and tag.
func (b *lookupBench) parse(ops, clients string) error {
	var err error
	if b.levels, err = parseClientLevels(clients); err != nil {
		return err
	}
	b.ops = splitList(ops)
	if len(b.ops) == 0 {
		return fmt.Errorf("ops %q: want register, lookup, lookup-stream, lookup-shared, notify or discovery", ops)
	}
	for _, op := range b.ops {
		switch op {
		case "register", "lookup", "lookup-stream", "lookup-shared", "notify", "discovery":
		default:
			return fmt.Errorf("workload %q: want register, lookup, lookup-stream, lookup-shared, notify or discovery", op)
		}
	}
	switch {
	case b.duration <= 0:
		return fmt.Errorf("duration %s: want positive", b.duration)
	case b.conns <= 0:
		return fmt.Errorf("conns %d: want at least 1", b.conns)
	case b.streams <= 0:
		return fmt.Errorf("streams %d: want at least 1", b.streams)
	case b.items <= 0:
		return fmt.Errorf("items %d: want at least 1", b.items)
	case b.watchers <= 0:
		return fmt.Errorf("watchers %d: want at least 1", b.watchers)
	case b.rounds <= 0:
		return fmt.Errorf("rounds %d: want at least 1", b.rounds)
	case b.retryMin <= 0 || b.retryMax < b.retryMin:
		return fmt.Errorf("retry %s to %s: want 0 < retry-min <= retry-max", b.retryMin, b.retryMax)
	}
	id := djinn.NewID()
	b.tag = fmt.Sprintf("%x", id[:4])
	return nil
}

// needsServer reports whether a workload calls the server.
func (b *lookupBench) needsServer() bool {
	return slices.ContainsFunc(b.ops, func(op string) bool { return op != "discovery" })
}

func (b *lookupBench) ls(c int) djinnpb.LookupServiceClient {
	return djinnpb.NewLookupServiceClient(b.ccs[c%len(b.ccs)])
}

func (b *lookupBench) ll(c int) djinnpb.LandlordClient {
	return djinnpb.NewLandlordClient(b.ccs[c%len(b.ccs)])
}

// item returns the bench's item i, named name, with typ as its first
// service type; an empty id asks the registrar for one.
func (b *lookupBench) item(id []byte, name string, i int, typ string) *djinnpb.ServiceItem {
	str := func(s string) *djinnpb.Value { return &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: s}} }
	num := func(n int) *djinnpb.Value { return &djinnpb.Value{Kind: &djinnpb.Value_IntValue{IntValue: int64(n)}} }
	field := func(name string, v *djinnpb.Value) *djinnpb.Field { return &djinnpb.Field{Name: name, Value: v} }
	return &djinnpb.ServiceItem{
		ServiceId: id,
		Service:   []byte("bench-service-" + name),
		Types:     []string{typ, fmt.Sprintf("bench.lookup.Kind%02d", i%lookupBenchKinds)},
		Entries: []*djinnpb.Entry{
			{Type: lookupBenchName, Fields: []*djinnpb.Field{field("name", str(name))}},
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
func (b *lookupBench) name(i int) string { return fmt.Sprintf("item-%s-%d", b.tag, i) }

// lookupBenchPrinter is a result that prints itself.
type lookupBenchPrinter interface{ print(w io.Writer) }

// lookupBenchReport is everything the bench measured.
type lookupBenchReport struct {
	Runs      []lookupBenchRun      `json:"runs,omitempty"`
	Items     *lookupBenchItems     `json:"items,omitempty"`
	Notify    *lookupBenchNotify    `json:"notify,omitempty"`
	Discovery *lookupBenchDiscovery `json:"discovery,omitempty"`
}

// verdict is the bench's exit status: a wrong answer of the lookup service
// is an error; a missed target is not.
func (r *lookupBenchReport) verdict() error {
	var errs []error
	for _, x := range r.Runs {
		if x.Mismatches != 0 {
			errs = append(errs, fmt.Errorf("%s at %d clients: %d lookups did not answer the one item asked for", x.Op, x.Clients, x.Mismatches))
		}
		if x.LeftRegistered != 0 {
			errs = append(errs, fmt.Errorf("%s at %d clients: the registrar holds %d items more after the run than before", x.Op, x.Clients, x.LeftRegistered))
		}
	}
	if it := r.Items; it != nil && (it.TypeMatches < int64(it.Items) || it.KindMatches < it.KindWant) {
		errs = append(errs, fmt.Errorf("items: a template on the shared type matched %d of %d, on one kind %d of %d", it.TypeMatches, it.Items, it.KindMatches, it.KindWant))
	}
	if n := r.Notify; n != nil && n.Missing != 0 {
		errs = append(errs, fmt.Errorf("notify: %d events missing", n.Missing))
	}
	return errors.Join(errs...)
}

// lookupBenchRun is one register or lookup measurement.
type lookupBenchRun struct {
	Op      string  `json:"op"`
	Clients int     `json:"clients"`
	Ops     int64   `json:"ops"` // cycles (register) or lookups
	Seconds float64 `json:"seconds"`
	OpsPerS float64 `json:"ops_per_s"`
	// P50ms and P99ms are per cycle (register) or per lookup.
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	RegisterP50ms float64 `json:"register_p50_ms,omitempty"`
	RegisterP99ms float64 `json:"register_p99_ms,omitempty"`
	CancelP50ms   float64 `json:"cancel_p50_ms,omitempty"`
	CancelP99ms   float64 `json:"cancel_p99_ms,omitempty"`
	CallsPerOp    int     `json:"calls_per_op"`
	CallsPerS     float64 `json:"calls_per_s"`

	Mismatches     int64 `json:"mismatches"`      // lookup: answers other than the one item asked for
	LeftRegistered int64 `json:"left_registered"` // register: the registrar's items after the run − before

	ServerCPU float64 `json:"server_cpu_cores,omitempty"` // with --admin
	HostSteal float64 `json:"host_steal,omitempty"`       // the machine's CPU time stolen by its hypervisor, 0-1 (Linux)

	// The empty call at the same concurrency, just before.
	EmptyPerS     float64 `json:"empty_per_s"`
	EmptyP50ms    float64 `json:"empty_p50_ms"`
	EmptyP99ms    float64 `json:"empty_p99_ms"`
	EmptyFraction float64 `json:"empty_fraction"` // calls/s ÷ empty calls/s
}

func (r lookupBenchRun) print(w io.Writer) {
	unit, lat := "cycles/s", "cycle"
	if r.Op != "register" {
		unit, lat = "lookups/s", "lookup"
	}
	verdict := ""
	if r.Op != "register" && r.Clients == lookupBenchTargetClients {
		verdict = mark(r.OpsPerS >= lookupBenchTargetLookups, fmt.Sprintf("target >= %d", lookupBenchTargetLookups))
	}
	fmt.Fprintf(w, "%-13s clients=%-3d %9.0f %s  %s p50 %7.3f ms  p99 %7.3f ms%s\n",
		r.Op, r.Clients, r.OpsPerS, unit, lat, r.P50ms, r.P99ms, verdict)
	cpu := ""
	if r.ServerCPU > 0 {
		cpu = fmt.Sprintf("; server CPU %.2f cores", r.ServerCPU)
	}
	if r.HostSteal >= 0.005 {
		cpu += fmt.Sprintf("; host steal %.0f%%", 100*r.HostSteal)
	}
	if r.Op == "register" {
		fmt.Fprintf(w, "    %d in %.2f s; register p50 %.3f / p99 %.3f ms, cancel p50 %.3f / p99 %.3f ms; left registered %d%s%s\n",
			r.Ops, r.Seconds, r.RegisterP50ms, r.RegisterP99ms, r.CancelP50ms, r.CancelP99ms, r.LeftRegistered, mark(r.LeftRegistered == 0, "must be 0"), cpu)
	} else {
		fmt.Fprintf(w, "    %d in %.2f s; mismatches %d%s%s\n", r.Ops, r.Seconds, r.Mismatches, mark(r.Mismatches == 0, "must be 0"), cpu)
	}
	fmt.Fprintf(w, "    %d calls/op: %.0f calls/s = %.0f%% of the empty call's %.0f/s (p50 %.3f ms, p99 %.3f ms)\n",
		r.CallsPerOp, r.CallsPerS, 100*r.EmptyFraction, r.EmptyPerS, r.EmptyP50ms, r.EmptyP99ms)
}

// lookupBenchItems is the lookup workload's loading of its items.
type lookupBenchItems struct {
	Items        int     `json:"items"`
	Loaders      int     `json:"loaders"` // concurrent register calls
	SetupSeconds float64 `json:"setup_seconds"`
	ItemsPerS    float64 `json:"items_per_s"`
	SetupCPU     float64 `json:"server_cpu_cores,omitempty"`
	RSSBeforeMB  float64 `json:"rss_before_mb,omitempty"`
	RSSAfterMB   float64 `json:"rss_after_mb,omitempty"`
	HeapInuseMB  float64 `json:"heap_inuse_mb,omitempty"`  // go_memstats_heap_inuse_bytes after, when exported
	BytesPerItem float64 `json:"bytes_per_item,omitempty"` // RSS after − before, per item
	// What a template on a service type matches: the type every item has,
	// and one of the 100 kinds (KindWant of the bench's items have it).
	TypeMatches int64 `json:"type_matches"`
	KindMatches int64 `json:"kind_matches"`
	KindWant    int64 `json:"kind_want"`
}

func (r *lookupBenchItems) print(w io.Writer) {
	cpu := ""
	if r.SetupCPU > 0 {
		cpu = fmt.Sprintf(", server CPU %.2f cores", r.SetupCPU)
	}
	fmt.Fprintf(w, "items     %d items (2 types, 5 entries each) registered in %.1f s by %d callers: %.0f items/s%s\n",
		r.Items, r.SetupSeconds, r.Loaders, r.ItemsPerS, cpu)
	if r.RSSAfterMB > 0 {
		heap := ""
		if r.HeapInuseMB > 0 {
			heap = fmt.Sprintf(", heap in use %.0f MB", r.HeapInuseMB)
		}
		fmt.Fprintf(w, "    server RSS %.0f MB before, %.0f MB with the items loaded%s: %.0f bytes per item\n",
			r.RSSBeforeMB, r.RSSAfterMB, heap, r.BytesPerItem)
	}
	fmt.Fprintf(w, "    a template on the shared type matches %d items, on one kind %d (of the bench's: %d); on one name: 1\n",
		r.TypeMatches, r.KindMatches, r.KindWant)
}

// lookupBenchNotify is the notify workload's result.
type lookupBenchNotify struct {
	Watchers     int     `json:"watchers"`
	SetupSeconds float64 `json:"setup_seconds"`
	WatchersPerS float64 `json:"watchers_per_s"`
	Rounds       int     `json:"rounds"` // completed
	// From the register call's start until the last watcher had its
	// event, and until the first did; the register call alone.
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	MinMs         float64 `json:"min_ms"`
	MaxMs         float64 `json:"max_ms"`
	FirstP50ms    float64 `json:"first_p50_ms"`
	RegisterP50ms float64 `json:"register_p50_ms"`
	EventsPerS    float64 `json:"events_per_s"` // watchers × rounds ÷ the rounds' fan-out times
	Events        int64   `json:"events"`       // of the rounds' items, duplicates included
	Duplicates    int64   `json:"duplicates"`   // a watcher's second event of one item
	Stray         int64   `json:"stray"`        // events of no current round (late or unknown)
	Missing       int64   `json:"missing"`      // watchers without their event when a round timed out
}

func (r *lookupBenchNotify) print(w io.Writer) {
	fmt.Fprintf(w, "notify    %d watchers on one type (registered in %.2f s, %.0f/s); %d rounds, one new matching item each\n",
		r.Watchers, r.SetupSeconds, r.WatchersPerS, r.Rounds)
	fmt.Fprintf(w, "    register start -> last watcher's event p50 %.3f ms  p99 %.3f ms  (min %.3f, max %.3f); first watcher's p50 %.3f ms; the register call p50 %.3f ms\n",
		r.P50ms, r.P99ms, r.MinMs, r.MaxMs, r.FirstP50ms, r.RegisterP50ms)
	fmt.Fprintf(w, "    %.0f events/s; events %d (duplicates %d, stray %d), missing %d%s\n",
		r.EventsPerS, r.Events, r.Duplicates, r.Stray, r.Missing, mark(r.Missing == 0, "must be 0"))
}

// lookupBenchDiscovery is the discovery workload's result.
type lookupBenchDiscovery struct {
	Rounds     int     `json:"rounds"`
	RetryMinMs float64 `json:"retry_min_ms"`
	RetryMaxMs float64 `json:"retry_max_ms"`
	// From the registrar's start to the client's Discovered event; the
	// registrar's start (NewRegistrar) alone.
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	MinMs       float64 `json:"min_ms"`
	MaxMs       float64 `json:"max_ms"`
	StartP50ms  float64 `json:"start_p50_ms"`
	Attempts    float64 `json:"attempts_per_round"` // the client's unicast attempts, per round
	FailedFirst uint64  `json:"failed_first"`       // failed attempts before each registrar started
}

func (r *lookupBenchDiscovery) print(w io.Writer) {
	fmt.Fprintf(w, "discovery %d rounds, loopback, unicast: registrar start -> Discovered p50 %.3f ms  p99 %.3f ms  (min %.3f, max %.3f)\n",
		r.Rounds, r.P50ms, r.P99ms, r.MinMs, r.MaxMs)
	fmt.Fprintf(w, "    the client retrying every %.3g-%.3g ms; the registrar started at a random point of its capped wait (after %d failures); NewRegistrar p50 %.3f ms; %.1f attempts per round\n",
		r.RetryMinMs, r.RetryMaxMs, r.FailedFirst, r.StartP50ms, r.Attempts)
}

// run runs the workloads, handing each result to out as it comes.
func (b *lookupBench) run(ctx context.Context, out func(lookupBenchPrinter)) (*lookupBenchReport, error) {
	rep := &lookupBenchReport{}
	for _, op := range b.ops {
		switch op {
		case "register":
			for _, n := range b.levels {
				r, err := b.measure(ctx, op, n, nil)
				if err != nil {
					return nil, fmt.Errorf("%s at %d clients: %w", op, n, err)
				}
				rep.Runs = append(rep.Runs, r)
				out(r)
			}
		case "lookup", "lookup-stream", "lookup-shared":
			if rep.Items != nil {
				continue // measured with the other, over the same items
			}
			if err := b.runLookup(ctx, rep, out); err != nil {
				return nil, fmt.Errorf("%s: %w", op, err)
			}
		case "notify":
			r, err := b.runNotify(ctx)
			if err != nil {
				return nil, fmt.Errorf("notify: %w", err)
			}
			rep.Notify = r
			out(r)
		case "discovery":
			r, err := b.runDiscovery(ctx)
			if err != nil {
				return nil, fmt.Errorf("discovery: %w", err)
			}
			rep.Discovery = r
			out(r)
		}
	}
	return rep, nil
}

// runLookup loads the items, measures lookups at every level, and cancels
// the items.
func (b *lookupBench) runLookup(ctx context.Context, rep *lookupBenchReport, out func(lookupBenchPrinter)) error {
	ids, cookies, items, err := b.loadItems(ctx)
	defer b.cancel(cookies)
	if err != nil {
		return err
	}
	rep.Items = items
	out(items)
	for _, op := range b.ops {
		if !strings.HasPrefix(op, "lookup") {
			continue
		}
		for _, n := range b.levels {
			r, err := b.measure(ctx, op, n, ids)
			if err != nil {
				return fmt.Errorf("%s at %d clients: %w", op, n, err)
			}
			rep.Runs = append(rep.Runs, r)
			out(r)
		}
	}
	return nil
}

// lookupBenchClient is what one client measured; only its goroutine writes
// it.
type lookupBenchClient struct {
	op, first, second []time.Duration // per op; its first and second call
	ops, mismatches   int64
}

// measure runs the empty call, then op at n clients; ids are the lookup
// workload's items, by index.
func (b *lookupBench) measure(ctx context.Context, op string, n int, ids [][]byte) (lookupBenchRun, error) {
	calls := &bencher{cc: b.ccs[0], conns: b.ccs, duration: b.duration}
	empty, err := calls.run(ctx, "empty", n)
	if err != nil {
		return lookupBenchRun{}, fmt.Errorf("empty: %w", err)
	}
	r := lookupBenchRun{Op: op, Clients: n, CallsPerOp: 1}
	var step func(ctx context.Context, c int, st *lookupBenchClient) error
	var before int64
	switch op {
	case "register":
		r.CallsPerOp = 2
		if before, err = b.registered(ctx); err != nil {
			return r, err
		}
		var seq atomic.Int64
		step = func(ctx context.Context, c int, st *lookupBenchClient) error {
			i := int(seq.Add(1))
			item := b.item(nil, fmt.Sprintf("reg-%s-%d", b.tag, i), i, lookupBenchType)
			t0 := time.Now()
			reg, err := b.ls(c).Register(ctx, &djinnpb.RegisterRequest{Item: item, LeaseDurationNanos: int64(lookupBenchLease)})
			if err != nil {
				return fmt.Errorf("register: %w", err)
			}
			t1 := time.Now()
			if _, err := b.ll(c).Cancel(ctx, &djinnpb.CancelRequest{Cookie: reg.GetLease().GetCookie()}); err != nil {
				return fmt.Errorf("cancel: %w", err)
			}
			t2 := time.Now()
			st.first = append(st.first, t1.Sub(t0))
			st.second = append(st.second, t2.Sub(t1))
			st.op = append(st.op, t2.Sub(t0))
			return nil
		}
	case "lookup":
		regs := make([]*client.Registrar, len(b.ccs))
		for i, cc := range b.ccs {
			regs[i] = client.NewRegistrar(fixedConn{cc}, djinn.Ref{Endpoint: cc.Target()})
		}
		step = func(ctx context.Context, c int, st *lookupBenchClient) error {
			k := rand.IntN(len(ids))
			t0 := time.Now()
			total, items, err := regs[c%len(regs)].LookupN(ctx, b.template(k), 1)
			if err != nil {
				return fmt.Errorf("lookup: %w", err)
			}
			st.op = append(st.op, time.Since(t0))
			if total != 1 || len(items) != 1 || !bytes.Equal(items[0].ID[:], ids[k]) {
				st.mismatches++
			}
			return nil
		}
	case "lookup-stream", "lookup-shared":
		count := n // a stream per client
		if op == "lookup-shared" {
			count = b.streams
		}
		streams, err := b.openStreams(ctx, count)
		if err != nil {
			return r, err
		}
		defer closeAll(streams)
		step = func(ctx context.Context, c int, st *lookupBenchClient) error {
			k := rand.IntN(len(ids))
			t0 := time.Now()
			total, items, err := streams[c%len(streams)].LookupN(ctx, b.template(k), 1)
			if err != nil {
				return fmt.Errorf("lookup stream: %w", err)
			}
			st.op = append(st.op, time.Since(t0))
			if total != 1 || len(items) != 1 || !bytes.Equal(items[0].ID[:], ids[k]) {
				st.mismatches++
			}
			return nil
		}
	default:
		return r, fmt.Errorf("workload %q: not measured by clients", op)
	}
	p0, err := b.process(ctx)
	if err != nil {
		return r, err
	}
	h0 := readHostCPU()
	cs, elapsed, err := b.loop(ctx, n, step)
	if err != nil {
		return r, err
	}
	r.HostSteal = readHostCPU().stealSince(h0)
	p1, err := b.process(ctx)
	if err != nil {
		return r, err
	}

	var all, first, second []time.Duration
	for _, st := range cs {
		all = append(all, st.op...)
		first = append(first, st.first...)
		second = append(second, st.second...)
		r.Ops += st.ops
		r.Mismatches += st.mismatches
	}
	r.Seconds = elapsed.Seconds()
	r.OpsPerS = float64(r.Ops) / r.Seconds
	r.CallsPerS = r.OpsPerS * float64(r.CallsPerOp)
	r.P50ms, r.P99ms = percentileMs(all, 0.50), percentileMs(all, 0.99)
	if op == "register" {
		r.RegisterP50ms, r.RegisterP99ms = percentileMs(first, 0.50), percentileMs(first, 0.99)
		r.CancelP50ms, r.CancelP99ms = percentileMs(second, 0.50), percentileMs(second, 0.99)
		after, err := b.registered(ctx)
		if err != nil {
			return r, err
		}
		r.LeftRegistered = after - before
	}
	if p0 != nil && p1 != nil {
		r.ServerCPU = (p1.cpu - p0.cpu) / elapsed.Seconds()
	}
	r.EmptyPerS, r.EmptyP50ms, r.EmptyP99ms = empty.OpsPerS, empty.P50ms, empty.P99ms
	if empty.OpsPerS > 0 {
		r.EmptyFraction = r.CallsPerS / empty.OpsPerS
	}
	return r, nil
}

// loop runs step at n clients, each in a loop, for the duration, and
// returns what each measured and how long it took. A step under way when
// the time is up is finished (its calls have lookupBenchSlack more) and
// counted.
func (b *lookupBench) loop(ctx context.Context, n int, step func(ctx context.Context, c int, st *lookupBenchClient) error) ([]lookupBenchClient, time.Duration, error) {
	cs := make([]lookupBenchClient, n)
	var firstErr atomic.Value
	rctx, stop := context.WithTimeout(ctx, b.duration)
	defer stop()
	cctx, abort := context.WithTimeout(ctx, b.duration+lookupBenchSlack)
	defer abort()
	var wg sync.WaitGroup
	start := time.Now()
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rctx.Err() == nil && cctx.Err() == nil {
				if err := step(cctx, c, &cs[c]); err != nil {
					firstErr.CompareAndSwap(nil, err)
					abort()
					return
				}
				cs[c].ops++
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		return nil, 0, err
	}
	return cs, elapsed, ctx.Err()
}

// openStreams opens n lookup streams, spread over the connections.
func (b *lookupBench) openStreams(ctx context.Context, n int) ([]*client.LookupStream, error) {
	streams := make([]*client.LookupStream, 0, n)
	for i := range n {
		cc := b.ccs[i%len(b.ccs)]
		s, err := client.NewRegistrar(fixedConn{cc}, djinn.Ref{Endpoint: cc.Target()}).Stream(ctx)
		if err != nil {
			closeAll(streams)
			return nil, fmt.Errorf("lookup stream: %w", err)
		}
		streams = append(streams, s)
	}
	return streams, nil
}

// template is the lookups' template: item k by its Name entry's name.
func (b *lookupBench) template(k int) client.ServiceTemplate {
	return client.ServiceTemplate{Entries: []client.EntryTemplate{{Type: lookupBenchName,
		Fields: []client.Field{{Name: "name", Value: client.NewString(b.name(k))}}}}}
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
func (b *lookupBench) registered(ctx context.Context) (int64, error) {
	info, err := b.ls(0).GetRegistrar(ctx, &djinnpb.GetRegistrarRequest{})
	if err != nil {
		return 0, fmt.Errorf("get registrar: %w", err)
	}
	return info.GetItems(), nil
}

// loadItems registers the lookup workload's items, lookupBenchLoaders calls
// at a time, and reads the server's memory before and after. It returns
// the items' service ids by index and the cookies of every lease granted,
// even on error.
func (b *lookupBench) loadItems(ctx context.Context) (ids, cookies [][]byte, r *lookupBenchItems, err error) {
	r = &lookupBenchItems{Items: b.items, Loaders: lookupBenchLoaders}
	ids = make([][]byte, b.items)
	leases := make([][]byte, b.items)
	defer func() {
		for _, c := range leases {
			if c != nil {
				cookies = append(cookies, c)
			}
		}
	}()
	p0, err := b.process(ctx)
	if err != nil {
		return ids, nil, nil, err
	}
	var done atomic.Int64
	start := time.Now()
	stopProgress := lookupBenchProgress(b.progress, "items", b.items, &done, start)
	err = lockBenchParallel(ctx, lookupBenchLoaders, b.items, func(ctx context.Context, c, i int) error {
		reg, err := b.ls(c).Register(ctx, &djinnpb.RegisterRequest{Item: b.item(nil, b.name(i), i, lookupBenchType), LeaseDurationNanos: int64(lookupBenchLease)})
		if err != nil {
			return fmt.Errorf("register item %d: %w", i, err)
		}
		ids[i], leases[i] = reg.GetServiceId(), reg.GetLease().GetCookie()
		done.Add(1)
		return nil
	})
	setup := time.Since(start)
	stopProgress()
	if err != nil {
		return ids, nil, nil, err
	}
	r.SetupSeconds = setup.Seconds()
	r.ItemsPerS = float64(b.items) / setup.Seconds()
	p1, err := b.process(ctx)
	if err != nil {
		return ids, nil, nil, err
	}
	if p0 != nil && p1 != nil {
		r.SetupCPU = (p1.cpu - p0.cpu) / setup.Seconds()
		r.RSSBeforeMB, r.RSSAfterMB = p0.rss/(1<<20), p1.rss/(1<<20)
		r.BytesPerItem = (p1.rss - p0.rss) / float64(b.items)
		if m, err := adminMetrics(ctx, b.admin, func(n string) bool { return n == "go_memstats_heap_inuse_bytes" }); err == nil {
			r.HeapInuseMB = m["go_memstats_heap_inuse_bytes"] / (1 << 20)
		}
	}
	// Templates on a type match many.
	const kind = 7
	for i := range b.items {
		if i%lookupBenchKinds == kind {
			r.KindWant++
		}
	}
	for _, q := range []struct {
		typ string
		n   *int64
	}{{lookupBenchType, &r.TypeMatches}, {fmt.Sprintf("bench.lookup.Kind%02d", kind), &r.KindMatches}} {
		resp, err := b.ls(0).Lookup(ctx, &djinnpb.LookupRequest{Template: &djinnpb.ServiceTemplate{Types: []string{q.typ}}})
		if err != nil {
			return ids, nil, nil, fmt.Errorf("lookup by type %s: %w", q.typ, err)
		}
		*q.n = resp.GetTotal()
	}
	return ids, nil, r, nil
}

// lookupBenchProgress writes how many of total are done every 5 seconds,
// until the function it returns is called.
func lookupBenchProgress(w io.Writer, what string, total int, done *atomic.Int64, start time.Time) (stop func()) {
	quit := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				d, s := done.Load(), time.Since(start).Seconds()
				fmt.Fprintf(w, "%s: %d of %d in %.0f s (%.0f/s)\n", what, d, total, s, float64(d)/s)
			}
		}
	}()
	return func() {
		close(quit)
		<-exited
	}
}

// cancel cancels the leases of the bench's items and notify registrations.
func (b *lookupBench) cancel(cookies [][]byte) {
	if len(cookies) == 0 {
		return
	}
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Minute)
	defer stop()
	for lo := 0; lo < len(cookies); lo += batch.MaxLeases {
		req := &djinnpb.CancelAllRequest{}
		for _, c := range cookies[lo:min(lo+batch.MaxLeases, len(cookies))] {
			req.Cookies = append(req.Cookies, c...)
		}
		resp, err := b.ll(0).CancelAll(ctx, req)
		if err != nil {
			fmt.Fprintf(b.progress, "cancel the bench's items and notify registrations: %v\n", err)
			return
		}
		if len(resp.GetErrors()) > 0 {
			fmt.Fprintf(b.progress, "cancel the bench's items and notify registrations: %d failed, the first: %s\n",
				len(resp.GetErrors()), resp.GetErrors()[0].GetError().GetMessage())
		}
	}
}

// process reads the server's CPU and memory from --admin; nil without it.
func (b *lookupBench) process(ctx context.Context) (*process, error) {
	if b.admin == "" {
		return nil, nil
	}
	p, err := readProcess(ctx, b.admin)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// lookupBenchRound is one round of the notify workload: one new item, and
// which watchers have had its event.
type lookupBenchRound struct {
	id    djinn.ID
	got   []atomic.Bool // by watcher
	left  atomic.Int64  // watchers still waiting
	first atomic.Int64  // when the first watcher had it, Unix nanoseconds
	last  time.Time     // when the last did; written before done is closed
	done  chan struct{}
}

// runNotify registers the watchers, then runs the rounds.
func (b *lookupBench) runNotify(ctx context.Context) (*lookupBenchNotify, error) {
	r := &lookupBenchNotify{Watchers: b.watchers}
	var cur atomic.Pointer[lookupBenchRound]
	var events, dups, stray atomic.Int64
	// watch is watcher w's listener; the host's own, w < 0, has no
	// registration.
	watch := func(w int) client.NotifyFunc {
		return func(_ context.Context, ev *client.RemoteEvent) error {
			now := time.Now()
			var se djinnpb.ServiceEvent
			rd := cur.Load()
			if w < 0 || ev.Payload == nil || ev.Payload.UnmarshalTo(&se) != nil || rd == nil || !bytes.Equal(se.GetServiceId(), rd.id[:]) {
				stray.Add(1)
				return nil
			}
			events.Add(1)
			if !rd.got[w].CompareAndSwap(false, true) {
				dups.Add(1)
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
	host, err := client.Listen(ctx, b.listen, watch(-1))
	if err != nil {
		return nil, err
	}
	defer host.Close()
	typ := "bench.lookup.Watched-" + b.tag
	tmpl := &djinnpb.ServiceTemplate{Types: []string{typ}}
	leases := make([][]byte, b.watchers)
	defer func() {
		var cookies [][]byte
		for _, c := range leases {
			if c != nil {
				cookies = append(cookies, c)
			}
		}
		b.cancel(cookies)
	}()
	start := time.Now()
	err = lockBenchParallel(ctx, lookupBenchLoaders, b.watchers, func(ctx context.Context, c, w int) error {
		l, err := host.AddListener(watch(w))
		if err != nil {
			return err
		}
		reg, err := b.ls(c).Notify(ctx, &djinnpb.LookupNotifyRequest{Template: tmpl, Transitions: uint32(djinnpb.Transition_TRANSITION_NOMATCH_MATCH),
			Listener: client.RefToProto(l.Ref()), Handback: []byte("bench"), LeaseDurationNanos: int64(lookupBenchLease)})
		if err != nil {
			return fmt.Errorf("notify %d: %w", w, err)
		}
		leases[w] = reg.GetLease().GetCookie()
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.SetupSeconds = time.Since(start).Seconds()
	r.WatchersPerS = float64(b.watchers) / r.SetupSeconds

	var last, first, regs []time.Duration
	var fanout time.Duration
	for i := range b.rounds {
		rd := &lookupBenchRound{id: djinn.NewID(), got: make([]atomic.Bool, b.watchers), done: make(chan struct{})}
		rd.left.Store(int64(b.watchers))
		cur.Store(rd)
		item := b.item(rd.id[:], fmt.Sprintf("watched-%s-%d", b.tag, i), i, typ)
		t0 := time.Now()
		reg, err := b.ls(0).Register(ctx, &djinnpb.RegisterRequest{Item: item, LeaseDurationNanos: int64(lookupBenchLease)})
		if err != nil {
			return nil, fmt.Errorf("round %d: register: %w", i, err)
		}
		regs = append(regs, time.Since(t0))
		timer := time.NewTimer(lookupBenchWait)
		select {
		case <-rd.done:
			timer.Stop()
		case <-timer.C:
			r.Missing = rd.left.Load()
		case <-ctx.Done():
			timer.Stop()
		}
		// The item goes; its removal is not among the watched transitions.
		b.cancel([][]byte{reg.GetLease().GetCookie()})
		if r.Missing > 0 {
			return nil, fmt.Errorf("round %d: %d of %d watchers had no event after %s", i, r.Missing, b.watchers, lookupBenchWait)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d := rd.last.Sub(t0)
		last = append(last, d)
		first = append(first, time.Unix(0, rd.first.Load()).Sub(t0))
		fanout += d
		r.Rounds++
	}
	r.P50ms, r.P99ms = percentileMs(last, 0.50), percentileMs(last, 0.99)
	r.MinMs, r.MaxMs = percentileMs(last, 0), percentileMs(last, 1)
	r.FirstP50ms, r.RegisterP50ms = percentileMs(first, 0.50), percentileMs(regs, 0.50)
	r.EventsPerS = float64(b.watchers*r.Rounds) / fanout.Seconds()
	r.Events, r.Duplicates, r.Stray = events.Load(), dups.Load(), stray.Load()
	return r, nil
}

// runDiscovery runs the discovery rounds.
func (b *lookupBench) runDiscovery(ctx context.Context) (*lookupBenchDiscovery, error) {
	r := &lookupBenchDiscovery{RetryMinMs: ms(b.retryMin), RetryMaxMs: ms(b.retryMax), FailedFirst: b.settled()}
	var found, started []time.Duration
	var attempts uint64
	for i := range b.rounds {
		f, s, a, err := b.discoverOnce(ctx)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", i, err)
		}
		found, started = append(found, f), append(started, s)
		attempts += a
		r.Rounds++
	}
	r.P50ms, r.P99ms = percentileMs(found, 0.50), percentileMs(found, 0.99)
	r.MinMs, r.MaxMs = percentileMs(found, 0), percentileMs(found, 1)
	r.StartP50ms = percentileMs(started, 0.50)
	r.Attempts = float64(attempts) / float64(r.Rounds)
	return r, nil
}

// settled is the number of failed attempts after which the client's wait
// between attempts has reached --retry-max: it doubles from --retry-min.
func (b *lookupBench) settled() uint64 {
	return 1 + uint64(min(62, math.Ceil(math.Log2(float64(b.retryMax)/float64(b.retryMin)))))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// discoverOnce starts a locator discovery client at a free loopback port,
// waits until it has failed there often enough to retry at its slowest,
// then, after a random part of --retry-max, starts a unicast-only
// registrar on that port. It returns the time
// from the registrar's start to the client's Discovered event, the time
// NewRegistrar took, and the client's attempts.
func (b *lookupBench) discoverOnce(ctx context.Context) (found, started time.Duration, attempts uint64, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, 0, err
	}
	addr := ln.Addr().String()
	ln.Close()
	_, portS, _ := net.SplitHostPort(addr)
	port, err := strconv.Atoi(portS)
	if err != nil {
		return 0, 0, 0, err
	}
	loc, err := discovery.NewLocator("127.0.0.1", port)
	if err != nil {
		return 0, 0, 0, err
	}
	d, err := discovery.NewLookupLocatorDiscovery(discovery.LookupLocatorDiscoveryConfig{
		Locators: []discovery.Locator{loc}, RetryMin: b.retryMin, RetryMax: b.retryMax})
	if err != nil {
		return 0, 0, 0, err
	}
	defer d.Close()
	deadline := time.NewTimer(lookupBenchWait)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for d.Stats().Failures < b.settled() {
		select {
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		case <-deadline.C:
			return 0, 0, 0, fmt.Errorf("the client failed %d times at %s in %s, want %d", d.Stats().Failures, loc, lookupBenchWait, b.settled())
		case <-tick.C:
		}
	}
	// Start the registrar at a random point of the client's wait, not just
	// after a failure, which would always leave the whole wait to go.
	phase := time.NewTimer(rand.N(b.retryMax))
	select {
	case <-ctx.Done():
		phase.Stop()
		return 0, 0, 0, ctx.Err()
	case <-phase.C:
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
				return 0, 0, 0, errors.New("the client's events ended")
			}
			if ev.Kind == discovery.Discovered && ev.Registrar.ServiceID == id {
				return time.Since(t0), started, d.Stats().Attempts, nil
			}
		case <-deadline.C:
			return 0, 0, 0, fmt.Errorf("registrar at %s not discovered in %s", loc, lookupBenchWait)
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		}
	}
}
