package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
)

// Txn measures two-phase commit end to end: each client, in a loop,
// creates a transaction at the manager of the server, writes two keys
// under it to key/value participants (the reference participant served by
// djinn serve), both writes at once, and commits. Each transaction writes keys no other
// transaction touches, so the participants' locks never conflict unless
// something is wrong; conflicts and other failures are counted apart from
// the committed transactions.
//
// The bench counts the calls it makes. The calls among the servers are
// derived from the protocol: every participant joins the manager once
// (TX.2.3), and gets prepare and then commit (TX.2.7); a participant in
// the manager's process is called in process, without gRPC. With the
// servers' admin endpoints the bench also reads the calls each server
// served from its /metrics, which checks the derivation.
type Txn struct {
	Levels   []int
	Duration time.Duration
	Conns    int           // per server
	KV       []string      // the participants' servers, one per write, each called itself (default: the server)
	Admin    string        // the manager's admin endpoint (optional)
	KVAdmins []string      // the participants' admin endpoints, in KV's order (optional)
	Lease    time.Duration // asked for each transaction
	// Lag is how long after the last commit of a run every participant
	// must have been told the outcome (default: a ninth of the run's time,
	// at least half a second).
	Lag time.Duration
}

// txnWrites is the number of key/value writes in each transaction: write i
// goes to the i-th KV address (the only one when there is one).
const txnWrites = 2

// txnValue is the value of every key the bench writes.
const txnValue = "djinn-bench-txn-value"

// txnMaxErrors ends a run once this many transactions failed with
// something other than a lock conflict or an abort: the servers are not
// healthy, and measuring on is pointless.
const txnMaxErrors = 100

// Check implements Bench.
func (b *Txn) Check() error {
	if err := checkCommon(b.Levels, b.Duration, b.Conns); err != nil {
		return err
	}
	if len(b.KV) > txnWrites {
		return fmt.Errorf("--kv %q: want at most %d addresses, one per write", strings.Join(b.KV, ","), txnWrites)
	}
	if len(b.KVAdmins) > 0 && len(b.KVAdmins) != max(1, len(b.KV)) {
		return fmt.Errorf("--kv-admin %q: want one admin address per --kv address (%d)", strings.Join(b.KVAdmins, ","), max(1, len(b.KV)))
	}
	if b.Lag < 0 {
		return fmt.Errorf("--lag %s: must not be negative (0: the default)", b.Lag)
	}
	return djinn.CheckLeaseDuration("--lease", b.Lease)
}

// txnRun is the bench's connections.
type txnRun struct {
	*Txn
	env    Env
	server string
	kvs    []string

	conns map[string]*Conns            // by server address
	mgrs  []*client.TransactionManager // client c uses mgrs[c%conns]
	kvcs  [txnWrites][]*kv.Client      // write i of client c uses kvcs[i][c%conns]
	close func()
}

// Run implements Bench.
func (b *Txn) Run(ctx context.Context, env Env) (Report, error) {
	var rep Report
	r := &txnRun{Txn: b, env: env, server: env.Server, kvs: b.KV}
	if len(r.kvs) == 0 {
		r.kvs = []string{env.Server}
	}
	if err := r.connect(ctx, env); err != nil {
		return rep, err
	}
	defer r.close()
	for _, n := range b.Levels {
		res, err := r.measure(ctx, n)
		if err != nil {
			return rep, fmt.Errorf("txn at %d clients: %w", n, err)
		}
		env.measured(&rep, res)
	}
	return rep, nil
}

// connect dials Conns connections to each server and finds the manager.
func (r *txnRun) connect(ctx context.Context, env Env) error {
	r.conns = map[string]*Conns{}
	r.close = func() {
		for _, c := range r.conns {
			c.Close()
		}
	}
	for _, addr := range append([]string{r.server}, r.kvs...) {
		if r.conns[addr] != nil {
			continue
		}
		c, err := dialConns(ctx, env, addr, r.Conns)
		if err != nil {
			r.close()
			return err
		}
		r.conns[addr] = c
	}
	m, err := r.conns[r.server].clients[0].TransactionManager(ctx)
	if err != nil {
		r.close()
		return err
	}
	// The other connections reach the same manager by its reference.
	for _, cl := range r.conns[r.server].clients {
		r.mgrs = append(r.mgrs, client.NewTransactionManager(cl, m.Ref()))
	}
	for i := range txnWrites {
		for _, cl := range r.conns[r.kvs[i%len(r.kvs)]].clients {
			cc, err := nodeConn(cl)
			if err != nil {
				r.close()
				return err
			}
			r.kvcs[i] = append(r.kvcs[i], kv.NewClient(cc))
		}
	}
	return nil
}

// nodeConn returns a connection to the very server cl was dialled to. A
// key/value store is each node's own, not replicated: its calls must not
// follow the cluster to its leader, as cl's own connection's do (they
// would write, and read back, the leader's store).
func nodeConn(cl *client.Client) (*grpc.ClientConn, error) {
	cc, err := cl.Conn(cl.Addr())
	if err != nil {
		return nil, fmt.Errorf("key/value store at %s: %w", cl.Addr(), err)
	}
	return cc, nil
}

// participants returns the number of distinct participants the writes go
// to (one per distinct server), and how many of them are in other
// processes than the manager.
func (r *txnRun) participants() (n, remote int) {
	seen := map[string]bool{}
	for i := range txnWrites {
		a := r.kvs[i%len(r.kvs)]
		if !seen[a] && a != r.server {
			remote++
		}
		seen[a] = true
	}
	return len(seen), remote
}

// serverCalls is the calls among the servers for one committed transaction
// whose participants all vote PREPARED (the reference participant does,
// having written), remote of them in other processes than the manager:
// each joins (participant to manager) and is told to prepare, then to
// commit. Those in the manager's process are called in process: no call.
func serverCalls(remote int) (joins, toParticipants int) {
	return remote, 2 * remote
}

// measure runs the empty call, the transactions at n clients, and at one
// client the register workload (one durable log append) to set the
// commit's latency beside a log append and the participants' round trips.
func (r *txnRun) measure(ctx context.Context, n int) (Result, error) {
	mgrConns := r.conns[r.server]
	plain, err := r.env.plainEmpty(ctx, n, r.Conns, r.Duration)
	if err != nil {
		return Result{}, err
	}
	empty, err := emptyCall(ctx, mgrConns, n, r.Duration)
	if err != nil {
		return Result{}, err
	}
	res, err := r.transactions(ctx, n)
	if err != nil {
		return Result{}, err
	}
	res = res.withBaseline(plain, res.CallsPerOp)
	res.Figures = append(res.Figures, fig("djinn empty call/s", empty.PerS, ""), fig("djinn empty call p50", empty.P50ms, "ms"),
		fig("djinn empty call p99", empty.P99ms, "ms"))
	if n != 1 {
		return res, nil
	}
	reg, err := (&Calls{Duration: r.Duration}).measure(ctx, Env{}, mgrConns, "register", 1)
	if err != nil {
		return Result{}, fmt.Errorf("register: %w", err)
	}
	// The commit call waits for the prepares, sent to every participant
	// at once, and the decision record; the phase-2 commits come after it
	// returns.
	ref := reg.P50ms + empty.P50ms
	commit := res.Phases[2].P50ms
	res.Figures = append(res.Figures, fig("register p50", reg.P50ms, "ms"), fig("commit reference", ref, "ms"))
	if ref > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("commit p50 %.3f ms vs register p50 %.3f + empty p50 %.3f = %.3f ms: %.2f×",
			commit, reg.P50ms, empty.P50ms, ref, commit/ref))
	}
	return res, nil
}

// txnErrors are the failures of a run other than conflicts and aborts.
type txnErrors struct {
	n     atomic.Int64
	once  sync.Once
	first error
}

// transactions runs the transactions at n clients for the duration. A
// transaction under way when the time is up is finished and counted. The
// run ends once every participant has been told its transaction's
// outcome (txn_phase2.go).
func (r *txnRun) transactions(ctx context.Context, n int) (Result, error) {
	before, err := r.served(ctx)
	if err != nil {
		return Result{}, err
	}
	base, err := r.unsettled(ctx)
	if err != nil {
		return Result{}, err
	}
	// Keys are distinct per transaction: a participant keeps its write
	// locks until the manager tells it the outcome, after commit returned.
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	done := make([][]txnDone, n)
	errs := &txnErrors{}
	backlog := r.sampleBacklog(ctx)
	m, err := Load{Clients: n, Duration: r.Duration, Finish: true, Slack: 30 * time.Second,
		Step: func(ctx context.Context, c int, rec *Recorder) error {
			key := fmt.Sprintf("bench/%s/%d/%d", run, c, len(done[c]))
			return r.step(ctx, c, key, rec, errs, &done[c])
		}}.Run(ctx)
	p2 := phase2{backlogMax: backlog()}
	if err != nil {
		return Result{}, err
	}
	p2.elapsed, p2.allowed = m.Elapsed, r.lagAllowed(m.Elapsed)
	if p2.lag, p2.drained, err = r.drain(ctx, base, p2.allowed); err != nil {
		return Result{}, err
	}
	after, err := r.served(ctx)
	if err != nil {
		return Result{}, err
	}
	all := slices.Concat(done...)
	if p2.out, err = r.outcomes(ctx, all); err != nil {
		return Result{}, err
	}
	if p2.drained && p2.out.untold == 0 {
		// A participant not told still holds the keys: a read would wait.
		if p2.read, p2.miss, err = r.readBack(ctx, all); err != nil {
			return Result{}, err
		}
	}
	res := r.result(m, errs)
	p2.apply(&res)
	res.Figures = append(res.Figures, servedFigures(before, after, m.Ops)...)
	return res, nil
}

// step runs one transaction and sorts its failure: a conflict or an abort
// is counted, another error too until there are too many. Each
// transaction created joins done.
func (r *txnRun) step(ctx context.Context, c int, key string, rec *Recorder, errs *txnErrors, done *[]txnDone) error {
	err := r.transact(ctx, c, key, rec, done)
	switch {
	case err == nil:
	case errors.Is(err, errConflict):
		rec.Count("conflicts", 1)
	case errors.Is(err, djinn.ErrCannotCommit):
		rec.Count("aborted", 1)
	case ctx.Err() != nil:
		return err
	default:
		errs.once.Do(func() { errs.first = err })
		if k := errs.n.Add(1); k >= txnMaxErrors {
			return fmt.Errorf("%d transactions failed; the first: %w", k, errs.first)
		}
	}
	return nil
}

// result is a run's result.
func (r *txnRun) result(m *Measurement, errs *txnErrors) Result {
	k, remote := r.participants()
	joins, toParts := serverCalls(remote)
	res := m.Result("txn", "transaction", "create", "writes", "commit")
	benchCalls := 0.0
	if m.Ops > 0 {
		benchCalls = float64(m.Count("calls")) / float64(m.Ops)
	}
	res.CallsPerOp = benchCalls + float64(joins+toParts)
	res.Notes = append(res.Notes, fmt.Sprintf("%d participants, %d in the manager's process (called in process); calls/tx: bench %.2f + join %d + manager→participant %d (prepare, commit)",
		k, k-remote, benchCalls, joins, toParts))
	res.Figures = append(res.Figures, fig("participants", float64(k), ""), fig("conflicts", float64(m.Count("conflicts")), ""),
		fig("aborted", float64(m.Count("aborted")), ""), fig("errors", float64(errs.n.Load()), ""))
	if errs.first != nil {
		res.Notes = append(res.Notes, "first error: "+errs.first.Error())
	}
	return res
}

// errConflict marks a write refused by a participant's lock.
var errConflict = errors.New("lock conflict")

// transact runs one transaction of client c, writing keys key+"/0" and
// key+"/1": create, the writes, commit. A failed write aborts the
// transaction.
func (r *txnRun) transact(ctx context.Context, c int, key string, rec *Recorder, done *[]txnDone) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	mgr := r.mgrs[c%len(r.mgrs)]
	t0 := time.Now()
	rec.Count("calls", 1)
	tx, err := mgr.Create(ctx, r.Lease)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	*done = append(*done, txnDone{id: tx.ID(), key: key})
	t1 := time.Now()
	if err := r.write(ctx, c, tx, key, rec); err != nil {
		return err
	}
	t2 := time.Now()
	rec.Count("calls", 1)
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	(*done)[len(*done)-1].committed = true
	t3 := time.Now()
	rec.Op(t3.Sub(t0))
	rec.Phase("create", t1.Sub(t0))
	rec.Phase("writes", t2.Sub(t1))
	rec.Phase("commit", t3.Sub(t2))
	return nil
}

// write puts the transaction's keys, all at once: the writes are
// independent (each its own key, each participant joining on its own
// first write), so a client has no reason to wait for one before sending
// the next. A failure aborts the transaction, once every write answered.
func (r *txnRun) write(ctx context.Context, c int, tx *client.Transaction, key string, rec *Recorder) error {
	ptx := participant.TxOf(tx)
	value := []byte(txnValue)
	var errs [txnWrites]error
	var wg sync.WaitGroup
	for i := range txnWrites {
		kc := r.kvcs[i][c%len(r.kvcs[i])]
		put := func() { errs[i] = kc.Put(ctx, ptx, key+"/"+strconv.Itoa(i), value) }
		if i == txnWrites-1 {
			put() // the last on this goroutine
			break
		}
		wg.Go(put)
	}
	wg.Wait()
	rec.Count("calls", txnWrites)
	err := errors.Join(errs[:]...)
	if err == nil {
		return nil
	}
	rec.Count("calls", 1)
	_ = tx.Abort(ctx)
	for _, e := range errs {
		if e != nil && djinn.KindOf(e) == djinn.Unavailable {
			// The reference participant refuses a write that meets
			// another transaction's lock at once, as Unavailable.
			return fmt.Errorf("put: %w: %w", errConflict, e)
		}
	}
	return fmt.Errorf("put: %w", err)
}

// servedCalls is what the servers' /metrics said at one time.
type servedCalls struct {
	at    time.Time
	calls map[string]float64 // by "server:method", every status code
	// streamed counts the messages received on streams, by
	// "server:method": each is a call, on a stream.
	streamed map[string]float64
	figures  map[string]float64 // perServer's, by "server:metric"
}

// perServer are the metrics read from each server, counted per
// transaction: CPU, the manager's log entries (its last applied index) and
// log writes (each fsynced), the key/value stores' batches and writes.
var perServer = map[string]bool{
	"process_cpu_seconds_total": true, "djinn_raft_applied_index": true, "djinn_raft_log_write_seconds_count": true,
	"djinn_kv_store_batches_total": true, "djinn_kv_store_writes_total": true,
}

// served reads the calls the servers served and their CPU, from the admin
// endpoints given; nil when none was.
func (r *txnRun) served(ctx context.Context) (*servedCalls, error) {
	if r.Admin == "" {
		return nil, nil
	}
	admins := [][2]string{{"mgr", r.Admin}}
	for i, a := range r.KVAdmins {
		if a != r.Admin {
			admins = append(admins, [2]string{"p" + strconv.Itoa(i+1), a})
		}
	}
	s := &servedCalls{at: time.Now(), calls: map[string]float64{}, streamed: map[string]float64{}, figures: map[string]float64{}}
	for _, a := range admins {
		m, err := adminMetrics(ctx, a[1], func(n string) bool {
			return strings.HasPrefix(n, "grpc_server_handled_total{") || strings.HasPrefix(n, "grpc_server_msg_received_total{") || perServer[n]
		})
		if err != nil {
			return nil, err
		}
		s.add(a[0], m)
	}
	return s, nil
}

// add sorts one server's metrics into s.
func (s *servedCalls) add(name string, m map[string]float64) {
	for metric, v := range m {
		if perServer[metric] {
			s.figures[name+":"+metric] = v
			continue
		}
		_, method, ok := strings.Cut(metric, `grpc_method="`)
		if !ok {
			continue
		}
		method, _, _ = strings.Cut(method, `"`)
		if strings.HasPrefix(metric, "grpc_server_msg_received_total{") {
			if strings.Contains(metric, `grpc_type="bidi_stream"`) || strings.Contains(metric, `grpc_type="client_stream"`) {
				s.streamed[name+":"+method] += v
			}
			continue
		}
		s.calls[name+":"+method] += v
	}
}

// bookkeeping are the calls that are not the transactions': the bench's
// own questions (how many transactions are left to tell) and the
// clients' following of the cluster.
var bookkeeping = map[string]bool{"Status": true, "Members": true}

// servedFigures are the calls each server served per committed
// transaction (a message on a stream counts as a call, marked "streamed"),
// its CPU, the manager's log entries and writes, and the key/value stores'
// batches and writes.
func servedFigures(before, after *servedCalls, committed int64) []Figure {
	if before == nil || after == nil || committed == 0 {
		return nil
	}
	per := func(d float64) float64 { return d / float64(committed) }
	var figs []Figure
	total := 0.0
	for _, set := range []struct {
		what          string
		before, after map[string]float64
	}{{"served/tx ", before.calls, after.calls}, {"streamed/tx ", before.streamed, after.streamed}} {
		for _, key := range slices.Sorted(maps.Keys(set.after)) {
			if _, method, _ := strings.Cut(key, ":"); bookkeeping[method] {
				continue
			}
			if d := set.after[key] - set.before[key]; d > 0 {
				figs = append(figs, fig(set.what+key, per(d), ""))
				total += per(d)
			}
		}
	}
	figs = append(figs, fig("served calls/tx", total, ""))
	secs := after.at.Sub(before.at).Seconds()
	for _, key := range slices.Sorted(maps.Keys(after.figures)) {
		server, metric, _ := strings.Cut(key, ":")
		d := after.figures[key] - before.figures[key]
		switch {
		case metric == "process_cpu_seconds_total":
			figs = append(figs, fig("CPU "+server, d/secs, "cores"))
		case metric == "djinn_raft_applied_index" && server == "mgr":
			figs = append(figs, fig("manager log entries/tx", per(d), ""))
		case metric == "djinn_raft_log_write_seconds_count" && server == "mgr":
			figs = append(figs, fig("manager log writes/tx", per(d), ""))
		case metric == "djinn_kv_store_batches_total":
			figs = append(figs, fig(server+" store batches/tx", per(d), ""))
		case metric == "djinn_kv_store_writes_total":
			figs = append(figs, fig(server+" store writes/tx", per(d), ""))
		}
	}
	return figs
}
