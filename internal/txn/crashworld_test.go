package txn_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// A manager that crashes at chosen points, for the crash-point sweep
// (sweep_test.go): each run of it is a generation whose log and calls to
// participants stop dead at the crash, and the next generation starts
// from a snapshot of what the log held then.

// crashPoint names where a generation of the manager dies: at the k-th
// event of a kind — a log record ("voting", "decide", "notified"), before
// or after it is applied, or a participant call ("prepare", "phase2")
// after it reached the participant.
type crashPoint struct {
	kind   string
	k      int
	before bool
}

func (c crashPoint) String() string {
	if c.kind == "" {
		return "no crash"
	}
	when := "after"
	if c.before {
		when = "before"
	}
	return fmt.Sprintf("%s %s #%d", when, c.kind, c.k)
}

// gen is one run of the manager, from a start to its crash.
type gen struct {
	log statetest.Service[*txn.State]
	svc *txn.Service
	// ctx is for the clients' calls to this run: it ends at the crash, as
	// a connection to a killed process does.
	ctx    context.Context
	cancel context.CancelFunc
	stop   func()

	mu sync.Mutex
	// Guarded by mu.
	dead    bool
	point   crashPoint
	counts  map[string]int
	crashed chan struct{}
	fired   crashPoint
}

func (g *gen) arm(p crashPoint) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.point, g.counts = p, map[string]int{}
}

func (g *gen) isDead() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dead
}

func (g *gen) crashLocked() {
	if !g.dead {
		g.dead, g.fired = true, g.point
		close(g.crashed)
		g.cancel()
	}
}

// countLocked counts an event of kind and reports whether the crash point
// is there.
func (g *gen) countLocked(kind string, before bool) bool {
	if before {
		return g.point.kind == kind && g.point.before && g.counts[kind]+1 == g.point.k
	}
	g.counts[kind]++
	return g.point.kind == kind && !g.point.before && g.counts[kind] == g.point.k
}

func crashedErr() error { return djinn.Errorf(djinn.Unavailable, "manager crashed") }

// faultLog is the manager's log in one generation: every record is applied
// or not as a whole, none after the crash.
type faultLog struct{ g *gen }

func opKind(cmd *statepb.Command) string {
	switch cmd.Op.(type) {
	case *statepb.Command_TxnVoting:
		return "voting"
	case *statepb.Command_TxnDecide:
		return "decide"
	case *statepb.Command_TxnNotified:
		return "notified"
	}
	return ""
}

func (f faultLog) Propose(ctx context.Context, cmd *statepb.Command) (any, error) {
	g := f.g
	g.mu.Lock()
	defer g.mu.Unlock()
	kind := opKind(cmd)
	if g.dead {
		return nil, crashedErr()
	}
	if g.countLocked(kind, true) {
		g.crashLocked()
		return nil, crashedErr()
	}
	res, err := g.log.Propose(ctx, cmd)
	if g.countLocked(kind, false) {
		g.crashLocked()
		return nil, crashedErr() // applied, but the answer is lost
	}
	return res, err
}

func (f faultLog) LeaderLease() bool { return !f.g.isDead() }

func (f faultLog) VerifyLeader() error {
	if f.g.isDead() {
		return crashedErr()
	}
	return nil
}

// genParts are the model participants as one generation of the manager
// reaches them: not at all after its crash.
type genParts struct {
	g *gen
	m *model
	n int // the generation's number
}

var _ txn.BlockingParticipants = genParts{}

func (gp genParts) call(op string, id uint64, ref *djinnpb.Ref, f func(p *modelPart) (djinnpb.TransactionState, error)) (djinnpb.TransactionState, error) {
	kind := "phase2"
	if op == "prepare" || op == "prepareAndCommit" {
		kind = "prepare"
	}
	if gp.g.isDead() {
		return 0, crashedErr()
	}
	gp.m.mu.Lock()
	p := gp.m.parts[name(ref)]
	if !gp.m.upLocked(p, time.Now()) {
		gp.m.trace[id] = append(gp.m.trace[id], fmt.Sprintf("%v manager %d: %s %s: down", time.Now().Format("15:04:05.000"), gp.n, p.name, op))
		gp.m.mu.Unlock()
		return 0, djinn.Errorf(djinn.Unavailable, "participant %s: down", p.name)
	}
	v, err := f(p)
	lost := p.lose > 0 || (p.lossy && rand.IntN(3) == 0)
	p.lose = max(p.lose-1, 0)
	gp.m.trace[id] = append(gp.m.trace[id], fmt.Sprintf("%v manager %d: %s %s: %s %v (answer lost %v)", time.Now().Format("15:04:05.000"), gp.n, p.name, op, stateName(v), err, lost))
	gp.m.mu.Unlock()
	if lost {
		return 0, djinn.Errorf(djinn.Unavailable, "participant %s: answer lost", p.name)
	}
	gp.g.mu.Lock()
	defer gp.g.mu.Unlock()
	if gp.g.countLocked(kind, false) {
		gp.g.crashLocked()
		return 0, crashedErr() // the participant has it; the answer is lost
	}
	return v, err
}

func (gp genParts) Prepare(_ context.Context, ref *djinnpb.Ref, _ djinn.Ref, id uint64, _ djinn.ID) (djinnpb.TransactionState, error) {
	return gp.call("prepare", id, ref, func(p *modelPart) (djinnpb.TransactionState, error) { return gp.m.prepareLocked(p, id, false) })
}

func (gp genParts) PrepareAndCommit(_ context.Context, ref *djinnpb.Ref, _ djinn.Ref, id uint64, _ djinn.ID) (djinnpb.TransactionState, error) {
	return gp.call("prepareAndCommit", id, ref, func(p *modelPart) (djinnpb.TransactionState, error) { return gp.m.prepareLocked(p, id, true) })
}

func (gp genParts) Commit(_ context.Context, ref *djinnpb.Ref, _ djinn.Ref, id uint64, _ djinn.ID) error {
	_, err := gp.call("commit", id, ref, func(p *modelPart) (djinnpb.TransactionState, error) { return 0, gp.m.commitLocked(p, id) })
	return err
}

func (gp genParts) Abort(_ context.Context, ref *djinnpb.Ref, _ djinn.Ref, id uint64, _ djinn.ID) error {
	_, err := gp.call("abort", id, ref, func(p *modelPart) (djinnpb.TransactionState, error) { return 0, gp.m.abortLocked(p, id) })
	return err
}

// world is the manager across its crashes, and its model participants.
type world struct {
	t    *testing.T
	m    *model
	g    *gen
	gens []*gen
	// restartArm, if set, arms each restarted manager.
	restartArm func() crashPoint
	// beforeRestart, if set, runs while the manager is down.
	beforeRestart func()
}

// start runs a generation of the manager over log (nil: a new one).
func (w *world) start(log *statetest.Service[*txn.State]) *gen {
	w.t.Helper()
	g := &gen{counts: map[string]int{}, crashed: make(chan struct{})}
	if log == nil {
		g.log = statetest.For(newTxnState)
	} else {
		g.log = *log
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	l := faultLog{g}
	lessor := lease.NewLessor(g.log.M.Leases, l, lease.Config{Slack: 10 * time.Second})
	self := djinn.Ref{Endpoint: "127.0.0.1:4161", Service: g.log.M.ServiceID(), Object: djinn.ID{'t'}}
	svc, err := txn.New(g.log.State, lessor, l, time.Now, func() djinn.Ref { return self }, sweepConfig(txn.Blocking(genParts{g, w.m, len(w.gens) + 1})))
	if err != nil {
		w.t.Fatal(err)
	}
	g.svc = svc
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); lessor.Run(ctx) }()
	go func() { defer wg.Done(); svc.Run(ctx) }()
	var once sync.Once
	g.stop = func() { once.Do(func() { cancel(); wg.Wait(); g.cancel() }) }
	w.t.Cleanup(g.stop)
	synctest.Wait()
	w.g = g
	w.gens = append(w.gens, g)
	return g
}

// restart stops the current generation, dead or not, and starts the next
// from a snapshot of what its log holds: what a killed process finds on
// its disk.
func (w *world) restart() {
	w.t.Helper()
	old := w.g
	old.mu.Lock()
	old.crashLocked() // if it did not crash, it does now
	old.mu.Unlock()
	old.stop()
	log, err := statetest.Restart(old.log.Log, newTxnState)
	if err != nil {
		w.t.Fatal(err)
	}
	if w.beforeRestart != nil {
		w.beforeRestart()
	}
	g := w.start(&log)
	if w.restartArm != nil {
		g.arm(w.restartArm())
	}
}
