package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
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
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
)

// The txn bench measures two-phase commit end to end: each client, in a
// loop, creates a transaction at the manager of --server, writes two keys
// under it to key/value participants (the reference participant served by
// djinn serve), and commits. Each transaction writes keys no other
// transaction touches, so the participants' locks never conflict unless
// something is wrong; conflicts and other failures are counted apart from
// the committed transactions.
//
// The bench counts the calls it makes. The calls among the servers are
// derived from the protocol: every participant joins the manager once
// (TX.2.3); two participants that both vote PREPARED get prepare and then
// commit each, one participant alone gets prepareAndCommit (TX.2.7). With
// the servers' admin endpoints (--admin, --kv-admin) the bench also reads
// the calls each server served from its /metrics, which checks the
// derivation.

// txnWrites is the number of key/value writes in each transaction: write i
// goes to the i-th --kv address (the only one when there is one).
const txnWrites = 2

// txnMaxErrors ends a run once this many transactions failed with
// something other than a lock conflict or an abort: the servers are not
// healthy, and measuring on is pointless.
const txnMaxErrors = 100

func newBenchTxn(g *globals) *cobra.Command {
	b := &txnBench{}
	var clients, kvAddrs, kvAdmins string
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "Measure transactions: two key/value writes under one transaction, then commit",
		Long: `Measure transactions through the transaction manager of --server.

Each client, in a loop for --duration: create a transaction, put two keys
under it to key/value participants, commit. Reports committed
transactions/s, p50/p99 per transaction and per commit call, the calls per
transaction, and the rate as a fraction of the empty gRPC call's, which it
measures on --server at the same concurrency just before. At one client it
also measures the register workload (one durable log append) to compare
the commit's latency with a log append and the participants' round trips.

--kv P1,P2 puts the first key on the key/value participant of the djinn
server at P1 and the second on P2's (their transaction managers are not
used): three processes, two participants, prepare and commit to each.
Without --kv both keys go to --server's own participant: one participant,
which gets prepareAndCommit.

--admin and --kv-admin, when given, name the servers' admin endpoints:
the bench then reads the calls each served from /metrics, and their CPU.

  djinn bench txn --server MGR --kv P1,P2 --admin MGRADMIN --kv-admin P1ADMIN,P2ADMIN
  djinn bench txn --server MGR --admin MGRADMIN`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if b.levels, err = parseClientLevels(clients); err != nil {
				return err
			}
			if b.conns <= 0 {
				return fmt.Errorf("conns %d: want at least 1", b.conns)
			}
			if b.duration <= 0 {
				return fmt.Errorf("duration %s: want positive", b.duration)
			}
			b.server = g.server
			b.kvAddrs = splitList(kvAddrs)
			if len(b.kvAddrs) == 0 {
				b.kvAddrs = []string{g.server}
			}
			if len(b.kvAddrs) > txnWrites {
				return fmt.Errorf("kv %q: want at most %d addresses, one per write", kvAddrs, txnWrites)
			}
			b.kvAdmins = splitList(kvAdmins)
			if len(b.kvAdmins) > 0 && len(b.kvAdmins) != len(b.kvAddrs) {
				return fmt.Errorf("kv-admin %q: want one admin address per --kv address (%d)", kvAdmins, len(b.kvAddrs))
			}
			if err := b.connect(cmd.Context(), g); err != nil {
				return err
			}
			defer b.close()
			var results []txnBenchResult
			for _, n := range b.levels {
				r, err := b.measure(cmd.Context(), n)
				if err != nil {
					return fmt.Errorf("txn at %d clients: %w", n, err)
				}
				results = append(results, r)
				if g.output != "json" {
					r.print(cmd.OutOrStdout())
				}
			}
			if g.output == "json" {
				return g.print(cmd.OutOrStdout(), results, nil)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&clients, "clients", "1,16,64", "concurrent clients")
	f.DurationVar(&b.duration, "duration", 5*time.Second, "time per measurement")
	f.IntVar(&b.conns, "conns", 4, "gRPC connections per server that the clients share")
	f.StringVar(&kvAddrs, "kv", "", "gRPC addresses of the key/value participants, one per write (default: --server)")
	f.StringVar(&b.admin, "admin", "", "admin address of --server, to read the calls it served (optional)")
	f.StringVar(&kvAdmins, "kv-admin", "", "admin addresses of the --kv servers, in the same order (optional)")
	f.DurationVar(&b.lease, "lease", time.Minute, "lease asked for each transaction")
	return cmd
}

// parseClientLevels parses --clients.
func parseClientLevels(s string) ([]int, error) {
	var levels []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("clients %q: want a comma-separated list of positive numbers", s)
		}
		levels = append(levels, n)
	}
	return levels, nil
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// txnBench is the txn bench: its flags, then its connections.
type txnBench struct {
	levels   []int
	duration time.Duration
	conns    int
	server   string
	kvAddrs  []string
	admin    string
	kvAdmins []string
	lease    time.Duration

	dialled []*client.Client              // every connection, to close
	mgrs    []*client.TransactionManager  // client c uses mgrs[c%conns]
	kvs     [txnWrites][]*kv.Client       // write i of client c uses kvs[i][c%conns]
	mgrCCs  []*grpc.ClientConn            // the manager's connections, for the empty and register workloads
	byAddr  map[string][]*grpc.ClientConn // connections by server address
}

// connect dials --conns connections to each server and finds the manager.
func (b *txnBench) connect(ctx context.Context, g *globals) error {
	b.byAddr = map[string][]*grpc.ClientConn{}
	for _, addr := range append([]string{b.server}, b.kvAddrs...) {
		if _, ok := b.byAddr[addr]; ok {
			continue
		}
		ga := *g
		ga.server = addr
		for range b.conns {
			cl, err := ga.dial(ctx)
			if err != nil {
				b.close()
				return err
			}
			b.dialled = append(b.dialled, cl)
			b.byAddr[addr] = append(b.byAddr[addr], cl.ClientConn())
			if addr == b.server {
				b.mgrCCs = append(b.mgrCCs, cl.ClientConn())
				if len(b.mgrs) == 0 {
					m, err := cl.TransactionManager(ctx)
					if err != nil {
						b.close()
						return err
					}
					b.mgrs = append(b.mgrs, m)
					continue
				}
				// Another connection to the same manager: the same
				// reference, reached through this client's own connection.
				b.mgrs = append(b.mgrs, client.NewTransactionManager(cl, b.mgrs[0].Ref()))
			}
		}
	}
	for i := range txnWrites {
		for _, cc := range b.byAddr[b.kvAddrs[i%len(b.kvAddrs)]] {
			b.kvs[i] = append(b.kvs[i], kv.NewClient(cc))
		}
	}
	return nil
}

func (b *txnBench) close() {
	for _, cl := range b.dialled {
		cl.Close()
	}
	b.dialled = nil
}

// participants returns the number of distinct participants the writes go
// to (one per distinct --kv server), and whether all of them are in the
// manager's process.
func (b *txnBench) participants() (n int, inProcess bool) {
	seen := map[string]bool{}
	inProcess = true
	for i := range txnWrites {
		a := b.kvAddrs[i%len(b.kvAddrs)]
		seen[a] = true
		inProcess = inProcess && a == b.server
	}
	return len(seen), inProcess
}

// serverCalls is the calls among the servers for one committed transaction
// with k participants that all vote PREPARED (the reference participant
// does, having written): k joins (participant to manager), then prepare and
// commit to each, or prepareAndCommit alone for one participant.
func serverCalls(k int) (joins, toParticipants int) {
	if k == 1 {
		return 1, 1
	}
	return k, 2 * k
}

// txnBenchResult is one measured concurrency.
type txnBenchResult struct {
	Layout       string  `json:"layout"` // "separate" or "in-process"
	Participants int     `json:"participants"`
	Clients      int     `json:"clients"`
	Committed    int64   `json:"committed"`
	Conflicts    int64   `json:"conflicts"` // a write refused by a participant's lock (Unavailable)
	Aborted      int64   `json:"aborted"`   // commit answered CannotCommit
	Errors       int64   `json:"errors"`    // any other failure
	FirstError   string  `json:"first_error,omitempty"`
	Seconds      float64 `json:"seconds"`
	TxPerS       float64 `json:"committed_per_s"`
	P50ms        float64 `json:"p50_ms"` // whole transaction: create, writes, commit
	P99ms        float64 `json:"p99_ms"`
	CreateP50ms  float64 `json:"create_p50_ms"`
	WritesP50ms  float64 `json:"writes_p50_ms"` // both writes
	CommitP50ms  float64 `json:"commit_p50_ms"`
	CommitP99ms  float64 `json:"commit_p99_ms"`

	// Calls per committed transaction: made by the bench (measured), and
	// among the servers (derived from the protocol).
	BenchCalls  float64 `json:"bench_calls_per_tx"`
	Joins       int     `json:"joins_per_tx"`
	ToParts     int     `json:"manager_to_participant_calls_per_tx"`
	CallsPerTx  float64 `json:"calls_per_tx"`
	ServedCalls float64 `json:"served_calls_per_tx,omitempty"` // from the servers' /metrics, when read
	// Served is the calls each server served per committed transaction,
	// by "server:method", when read from /metrics.
	Served    map[string]float64 `json:"served,omitempty"`
	ServerCPU map[string]float64 `json:"server_cpu_cores,omitempty"`
	// LogEntries is the manager's Raft log entries per committed
	// transaction (every fsynced state change), when read from /metrics.
	LogEntries float64 `json:"manager_log_entries_per_tx,omitempty"`

	// The empty gRPC call on --server at the same concurrency.
	EmptyPerS     float64 `json:"empty_per_s"`
	EmptyP50ms    float64 `json:"empty_p50_ms"`
	EmptyFraction float64 `json:"empty_fraction"` // committed/s × calls per tx ÷ empty/s

	// At one client: the register workload (a durable log append), and
	// the commit call against one append plus the participant round trips
	// on its path.
	RegisterP50ms   float64 `json:"register_p50_ms,omitempty"`
	CriticalCalls   int     `json:"commit_participant_round_trips,omitempty"`
	ReferenceMs     float64 `json:"reference_ms,omitempty"`
	CommitReference float64 `json:"commit_vs_reference,omitempty"`
}

func (r *txnBenchResult) print(w io.Writer) {
	fmt.Fprintf(w, "txn %s participants=%d clients=%-3d %8.0f committed/s  p50 %7.3f ms  p99 %7.3f ms  (create %.3f, writes %.3f, commit %.3f / p99 %.3f ms)\n",
		r.Layout, r.Participants, r.Clients, r.TxPerS, r.P50ms, r.P99ms, r.CreateP50ms, r.WritesP50ms, r.CommitP50ms, r.CommitP99ms)
	fmt.Fprintf(w, "    committed %d in %.2f s; conflicts %d, aborted %d, errors %d\n", r.Committed, r.Seconds, r.Conflicts, r.Aborted, r.Errors)
	if r.FirstError != "" {
		fmt.Fprintf(w, "    first error: %s\n", r.FirstError)
	}
	vote := "prepare, commit"
	if r.Participants == 1 {
		vote = "prepareAndCommit"
	}
	fmt.Fprintf(w, "    calls/tx %.2f: bench %.2f + join %d + manager→participant %d (%s)\n", r.CallsPerTx, r.BenchCalls, r.Joins, r.ToParts, vote)
	if r.Served != nil {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.Served)) {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, r.Served[k]))
		}
		fmt.Fprintf(w, "    served/tx %.2f (from /metrics): %s\n", r.ServedCalls, strings.Join(parts, ", "))
	}
	if r.ServerCPU != nil {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.ServerCPU)) {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, r.ServerCPU[k]))
		}
		fmt.Fprintf(w, "    server CPU (cores): %s; manager log entries/tx %.2f\n", strings.Join(parts, ", "), r.LogEntries)
	}
	fmt.Fprintf(w, "    empty call %.0f/s (p50 %.3f ms) at %d clients: %.0f calls/s is %.0f%% of it\n",
		r.EmptyPerS, r.EmptyP50ms, r.Clients, r.TxPerS*r.CallsPerTx, 100*r.EmptyFraction)
	if r.RegisterP50ms > 0 {
		fmt.Fprintf(w, "    commit p50 %.3f ms vs register p50 %.3f + %d × empty p50 %.3f = %.3f ms: %.2f×\n",
			r.CommitP50ms, r.RegisterP50ms, r.CriticalCalls, r.EmptyP50ms, r.ReferenceMs, r.CommitReference)
	}
}

// measure runs the empty call, at one client the register workload, and
// the transactions at n clients.
func (b *txnBench) measure(ctx context.Context, n int) (txnBenchResult, error) {
	calls := &bencher{cc: b.mgrCCs[0], conns: b.mgrCCs, duration: b.duration}
	empty, err := calls.run(ctx, "empty", n)
	if err != nil {
		return txnBenchResult{}, fmt.Errorf("empty: %w", err)
	}
	r, err := b.run(ctx, n)
	if err != nil {
		return txnBenchResult{}, err
	}
	r.EmptyPerS, r.EmptyP50ms = empty.OpsPerS, empty.P50ms
	if empty.OpsPerS > 0 {
		r.EmptyFraction = r.TxPerS * r.CallsPerTx / empty.OpsPerS
	}
	if n == 1 {
		reg, err := calls.run(ctx, "register", 1)
		if err != nil {
			return txnBenchResult{}, fmt.Errorf("register: %w", err)
		}
		// The commit call waits for the VOTING record, one prepare (or
		// prepareAndCommit) per participant, one after the other, and the
		// decision record; the phase-2 commits come after it returns.
		r.RegisterP50ms = reg.P50ms
		r.CriticalCalls = r.Participants
		r.ReferenceMs = reg.P50ms + float64(r.CriticalCalls)*empty.P50ms
		if r.ReferenceMs > 0 {
			r.CommitReference = r.CommitP50ms / r.ReferenceMs
		}
	}
	return r, nil
}

// txnClient is what one client measured; only its goroutine writes it.
type txnClient struct {
	total, create, writes, commit []time.Duration
	committed, conflicts, aborted int64
	calls                         int64
}

// run runs the transactions at n clients for the duration. A transaction
// under way when the time is up is finished and counted.
func (b *txnBench) run(ctx context.Context, n int) (txnBenchResult, error) {
	k, inProcess := b.participants()
	joins, toParts := serverCalls(k)
	r := txnBenchResult{Layout: "separate", Participants: k, Clients: n, Joins: joins, ToParts: toParts}
	if inProcess {
		r.Layout = "in-process"
	}
	before, err := b.served(ctx)
	if err != nil {
		return r, err
	}
	// Keys are distinct per transaction: a participant keeps its write
	// locks until the manager tells it the outcome, after commit returned.
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	value := []byte("djinn-bench-txn-value")
	cs := make([]txnClient, n)
	var errs atomic.Int64
	var firstErr atomic.Value
	rctx, cancel := context.WithTimeout(ctx, b.duration)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &cs[c]
			prefix := fmt.Sprintf("bench/%s/%d/", run, c)
			for seq := 0; rctx.Err() == nil; seq++ {
				err := b.transact(ctx, c, prefix+strconv.Itoa(seq), value, st)
				switch {
				case err == nil:
				case errors.Is(err, errConflict):
					st.conflicts++
				case errors.Is(err, djinn.ErrCannotCommit):
					st.aborted++
				case ctx.Err() != nil:
					return
				default:
					firstErr.CompareAndSwap(nil, err)
					if errs.Add(1) >= txnMaxErrors {
						cancel()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return r, err
	}
	var total, create, writes, commit []time.Duration
	for _, st := range cs {
		total = append(total, st.total...)
		create = append(create, st.create...)
		writes = append(writes, st.writes...)
		commit = append(commit, st.commit...)
		r.Committed += st.committed
		r.Conflicts += st.conflicts
		r.Aborted += st.aborted
		r.BenchCalls += float64(st.calls)
	}
	r.Errors = errs.Load()
	if err, _ := firstErr.Load().(error); err != nil {
		r.FirstError = err.Error()
	}
	if r.Errors >= txnMaxErrors {
		return r, fmt.Errorf("%d transactions failed; the first: %s", r.Errors, r.FirstError)
	}
	r.Seconds = elapsed
	r.TxPerS = float64(r.Committed) / elapsed
	r.P50ms, r.P99ms = percentileMs(total, 0.50), percentileMs(total, 0.99)
	r.CreateP50ms = percentileMs(create, 0.50)
	r.WritesP50ms = percentileMs(writes, 0.50)
	r.CommitP50ms, r.CommitP99ms = percentileMs(commit, 0.50), percentileMs(commit, 0.99)
	if r.Committed > 0 {
		r.BenchCalls /= float64(r.Committed)
	}
	r.CallsPerTx = r.BenchCalls + float64(joins+toParts)
	after, err := b.served(ctx)
	if err != nil {
		return r, err
	}
	if before != nil && r.Committed > 0 {
		r.Served = map[string]float64{}
		for key, v := range after.calls {
			if d := v - before.calls[key]; d > 0 {
				r.Served[key] = d / float64(r.Committed)
				r.ServedCalls += d / float64(r.Committed)
			}
		}
		r.ServerCPU = map[string]float64{}
		for name, cpu := range after.cpu {
			r.ServerCPU[name] = (cpu - before.cpu[name]) / after.at.Sub(before.at).Seconds()
		}
		r.LogEntries = (after.applied - before.applied) / float64(r.Committed)
	}
	return r, nil
}

// errConflict marks a write refused by a participant's lock.
var errConflict = errors.New("lock conflict")

// transact runs one transaction of client c, writing keys key+"/0" and
// key+"/1": create, the writes, commit. A failed write aborts the
// transaction.
func (b *txnBench) transact(ctx context.Context, c int, key string, value []byte, st *txnClient) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	mgr := b.mgrs[c%len(b.mgrs)]
	t0 := time.Now()
	st.calls++
	tx, err := mgr.Create(ctx, b.lease)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	t1 := time.Now()
	ptx := &participant.Tx{Manager: mgr.Ref(), ID: tx.ID()}
	for i := range txnWrites {
		st.calls++
		kc := b.kvs[i][c%len(b.kvs[i])]
		if err := kc.Put(ctx, ptx, key+"/"+strconv.Itoa(i), value); err != nil {
			st.calls++
			_ = tx.Abort(ctx)
			if djinn.KindOf(err) == djinn.Unavailable {
				// The reference participant refuses a write that meets
				// another transaction's lock at once, as Unavailable.
				return fmt.Errorf("put: %w: %w", errConflict, err)
			}
			return fmt.Errorf("put: %w", err)
		}
	}
	t2 := time.Now()
	st.calls++
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	t3 := time.Now()
	st.committed++
	st.total = append(st.total, t3.Sub(t0))
	st.create = append(st.create, t1.Sub(t0))
	st.writes = append(st.writes, t2.Sub(t1))
	st.commit = append(st.commit, t3.Sub(t2))
	return nil
}

func percentileMs(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[int(float64(len(ds)-1)*p)]) / float64(time.Millisecond)
}

// servedCalls is what the servers' /metrics said at one time.
type servedCalls struct {
	at      time.Time
	calls   map[string]float64 // by "server:method", every status code
	cpu     map[string]float64 // CPU seconds by server
	applied float64            // the manager's last applied log index
}

// served reads the calls the servers served and their CPU, from the admin
// endpoints given; nil when none was.
func (b *txnBench) served(ctx context.Context) (*servedCalls, error) {
	if b.admin == "" {
		return nil, nil
	}
	admins := []struct{ name, admin string }{{"mgr", b.admin}}
	for i, a := range b.kvAdmins {
		if a != b.admin {
			admins = append(admins, struct{ name, admin string }{"p" + strconv.Itoa(i+1), a})
		}
	}
	s := &servedCalls{at: time.Now(), calls: map[string]float64{}, cpu: map[string]float64{}}
	for _, a := range admins {
		m, err := adminMetrics(ctx, a.admin, func(n string) bool {
			return strings.HasPrefix(n, "djinn_rpc_total{") || n == "process_cpu_seconds_total" || n == "djinn_raft_applied_index"
		})
		if err != nil {
			return nil, err
		}
		for name, v := range m {
			switch name {
			case "process_cpu_seconds_total":
				s.cpu[a.name] = v
				continue
			case "djinn_raft_applied_index":
				if a.admin == b.admin {
					s.applied = v
				}
				continue
			}
			_, method, ok := strings.Cut(name, `method="`)
			if !ok {
				continue
			}
			method, _, _ = strings.Cut(method, `"`)
			s.calls[a.name+":"+method] += v
		}
	}
	return s, nil
}
