package txn_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The crash-point sweep (issue 3, section 5): the manager is "killed" at
// each step of a commit — after its VOTING record (a vote that turned slow,
// or whose lease ends soon, records one), after k of n prepares reached
// their participants, before and after its decision record, after k of n
// phase-2 calls, before and after its record of the participants told —
// and started again from a snapshot of what its log held at that moment,
// over hundreds of transactions whose 2–5 model participants vote at
// random, fail for a while, and crash too. Some transactions have leases
// too short for a vote without a VOTING record; into some a participant
// joins while the vote is under way (its join reaches the log: the race
// the leader's own refusal of such joins cannot close). After recovery no
// transaction may have a mixed outcome, every commit that returned nil is
// committed at every participant that voted PREPARED, a participant whose
// join the log took is committed whenever the transaction is, and no
// participant applies an outcome twice or applies the other one.

// sweepConfig is the managers' configuration in the sweep: short retry
// times, so that fake time moves in few steps.
func sweepConfig(p txn.Participants) txn.Config {
	return txn.Config{
		Participants: p, CallTimeout: 2 * time.Second, VoteTimeout: 5 * time.Second,
		MinRetry: 500 * time.Millisecond, MaxRetry: 5 * time.Second,
		Abandon: time.Minute, Retention: 24 * time.Hour,
	}
}

// sweepTxn is one transaction of the sweep and what its client saw.
type sweepTxn struct {
	id    uint64
	parts []string
	abort bool // the client aborts it instead of committing
	// lost names the participants that lost it to a crash after they
	// joined and before they prepared: it must abort (TX.2.3).
	lost []string
	// late names a participant that joins once the vote asked the first
	// one; lateJoined, guarded by the model's lock, that the log took its
	// join.
	late       string
	lateJoined bool
	// pending: the client still has to call (first time, or again after
	// an answer lost in a crash).
	pending  bool
	okCommit bool // a Commit returned nil
	okAbort  bool // an Abort returned nil
	refused  bool // a Commit returned CannotCommit
}

type sweep struct {
	*world
	rng   *rand.Rand
	txns  []*sweepTxn
	fired map[string]int
	// shortLeases, when set, gives every transaction begun a lease too
	// short for a vote without a VOTING record.
	shortLeases bool
}

var allVotes = []djinnpb.TransactionState{txn.Prepared, txn.Prepared, txn.Prepared, txn.NotChanged, txn.NotChanged, txn.Aborted}

// begin creates a transaction with n random participants, scripts their
// votes and, sometimes, crashes one of them after it joined.
func (s *sweep) begin(n int) *sweepTxn {
	s.t.Helper()
	g := s.g
	// One in four has a lease too short for a vote without a VOTING record
	// (under two calls' time left when it begins).
	d := time.Minute
	if s.rng.IntN(4) == 0 || s.shortLeases {
		d = 3 * time.Second
	}
	c, err := g.svc.Create(context.Background(), d)
	if err != nil {
		s.t.Fatal(err)
	}
	tx := &sweepTxn{id: c.ID, abort: s.rng.IntN(10) == 0, pending: true}
	names := slices.Clone(s.m.names)
	s.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	tx.parts = names[:n]
	if n < len(names) && s.rng.IntN(8) == 0 {
		s.joinLate(tx, names[n])
	}
	// One in four changes one participant only: the others vote NOTCHANGED
	// and the last gets prepareAndCommit.
	readMostly := s.rng.IntN(4) == 0
	for i, pn := range tx.parts {
		s.m.mu.Lock()
		p := s.m.parts[pn]
		crash := p.crash
		p.mem[tx.id] = txn.Active
		p.votes[tx.id] = allVotes[s.rng.IntN(len(allVotes))]
		if readMostly && i < n-1 {
			p.votes[tx.id] = txn.NotChanged
		}
		s.m.mu.Unlock()
		if err := g.svc.Join(context.Background(), tx.id, txn.SecretOf(g.svc, tx.id), part(pn), crash); err != nil {
			s.t.Fatalf("join %s to %d: %v", pn, tx.id, err)
		}
	}
	s.txns = append(s.txns, tx)
	return tx
}

// joinLate has participant late join tx as the vote asks tx's first
// participant: its join goes straight to the log (the leader refuses joins
// while it votes, but one it let through a moment before the vote began
// reaches the log after).
func (s *sweep) joinLate(tx *sweepTxn, late string) {
	tx.late = late
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	first := s.m.parts[tx.parts[0]]
	first.beforePrepareID = tx.id
	first.beforePrepare = func() {
		// Called with s.m.mu held.
		g := s.g
		if g.isDead() {
			return
		}
		p := s.m.parts[late]
		_, err := g.log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_TxnJoin{TxnJoin: &statepb.TxnJoin{
			Id: tx.id, Participant: part(late), CrashCount: p.crash}}})
		if err == nil {
			tx.lateJoined = true
			p.mem[tx.id] = txn.Active
			p.votes[tx.id] = txn.Prepared
		}
	}
}

// crashParticipant crashes participant pn now: the transactions it had
// joined and not prepared are lost, and must abort. Half the time it then
// rejoins one of them with its new crash count, as a client that goes on
// using it would make it do, and must be refused.
func (s *sweep) crashParticipant(pn string, batch []*sweepTxn) {
	s.t.Helper()
	s.m.mu.Lock()
	p := s.m.parts[pn]
	s.m.crashLocked(p)
	crash := p.crash
	s.m.mu.Unlock()
	var mine []*sweepTxn
	for _, tx := range batch {
		if slices.Contains(tx.parts, pn) {
			tx.lost = append(tx.lost, pn)
			mine = append(mine, tx)
		}
	}
	if len(mine) > 0 && s.rng.IntN(2) == 0 {
		tx := mine[s.rng.IntN(len(mine))]
		s.m.mu.Lock()
		p.mem[tx.id] = txn.Active // the new join's state
		s.m.mu.Unlock()
		err := s.g.svc.Join(context.Background(), tx.id, txn.SecretOf(s.g.svc, tx.id), part(pn), crash)
		if djinn.KindOf(err) != djinn.CrashCount {
			s.t.Fatalf("TX.2.3: join of %s to %d with a new crash count: %v, want CrashCount", pn, tx.id, err)
		}
		s.m.mu.Lock()
		delete(p.mem, tx.id) // refused: it keeps nothing
		s.m.mu.Unlock()
	}
}

// faults plans participant failures for a batch: some lose answers, some
// go down a while, half of those crashing as they do.
func (s *sweep) faults() {
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	now := time.Now()
	for _, n := range s.m.names {
		p := s.m.parts[n]
		p.lossy = s.rng.IntN(6) == 0
		if s.rng.IntN(7) != 0 {
			continue
		}
		p.down.from = now.Add(time.Duration(s.rng.Int64N(int64(4 * time.Second))))
		p.down.until = p.down.from.Add(time.Second + time.Duration(s.rng.Int64N(int64(25*time.Second))))
		p.down.crash = s.rng.IntN(2) == 0
	}
}

// call makes each pending transaction's client call on the current
// generation, concurrently, and records what came back. An answer lost in
// a crash leaves the outcome unknown: the client calls again after the
// restart, or gives up and lets the lease end.
func (s *sweep) call(batch []*sweepTxn) {
	g := s.g
	type result struct {
		tx  *sweepTxn
		err error
	}
	results := make(chan result)
	n := 0
	for _, tx := range batch {
		if !tx.pending {
			continue
		}
		tx.pending = false
		n++
		go func() {
			var err error
			if tx.abort {
				err = g.svc.Abort(g.ctx, tx.id, nil)
			} else {
				err = g.svc.Commit(g.ctx, tx.id, nil)
			}
			results <- result{tx, err}
		}()
	}
	for range n {
		r := <-results
		switch k := djinn.KindOf(r.err); {
		case r.err == nil && r.tx.abort:
			r.tx.okAbort = true
		case r.err == nil:
			r.tx.okCommit = true
		case k == djinn.CannotCommit && !r.tx.abort:
			r.tx.refused = true
		case g.isDead():
			r.tx.pending = s.rng.IntN(4) != 0
		default:
			s.t.Errorf("transaction %d: client call: %v", r.tx.id, r.err)
		}
	}
}

// settled reports whether every transaction of the batch is decided, every
// participant told, and no model participant holds one still undecided.
func (s *sweep) settled(batch []*sweepTxn) bool {
	for _, tx := range batch {
		d, err := s.g.svc.Describe(context.Background(), tx.id)
		if err != nil || (d.State != txn.Committed && d.State != txn.Aborted) {
			return false
		}
		for _, p := range d.Participants {
			if !p.Notified {
				return false
			}
		}
		s.m.mu.Lock()
		parts := tx.parts
		if tx.lateJoined {
			parts = append(slices.Clip(parts), tx.late)
		}
		for _, n := range parts {
			if st, ok := s.m.parts[n].mem[tx.id]; ok && (st == txn.Active || st == txn.Prepared) {
				s.m.mu.Unlock()
				return false
			}
		}
		s.m.mu.Unlock()
	}
	return true
}

// run commits (or aborts) a batch with the current generation armed at
// point, restarting the manager whenever it crashes, until everything is
// settled.
func (s *sweep) run(batch []*sweepTxn, point crashPoint) {
	s.t.Helper()
	s.g.arm(point)
	start := time.Now()
	for {
		s.call(batch)
		for !s.g.isDead() && !s.settled(batch) {
			if time.Since(start) > 30*time.Minute {
				s.t.Fatalf("batch %v (crash point %v) not settled after %v:\n%s", ids(batch), point, time.Since(start), s.dump(batch))
			}
			s.m.recover(s.g.svc)
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if !s.g.isDead() {
			break
		}
		s.g.mu.Lock()
		s.fired[s.g.fired.kind]++
		s.g.mu.Unlock()
		s.restart()
	}
	s.g.arm(crashPoint{})
}

// dump describes a batch, at the manager and at its participants.
func (s *sweep) dump(batch []*sweepTxn) string {
	var b strings.Builder
	for _, tx := range batch {
		d, err := s.g.svc.Describe(context.Background(), tx.id)
		fmt.Fprintf(&b, "transaction %d: %v %v\n", tx.id, d, err)
		s.m.mu.Lock()
		for _, n := range tx.parts {
			p := s.m.parts[n]
			st, ok := p.mem[tx.id]
			fmt.Fprintf(&b, "  %s: vote %s, state %s (%v), applied %s, recovered %v, down %v..%v\n", n, stateName(p.votes[tx.id]), stateName(st), ok,
				stateName(p.applied[tx.id]), p.recovered[tx.id], p.down.from, p.down.until)
		}
		s.m.mu.Unlock()
	}
	return b.String()
}

func ids(batch []*sweepTxn) []uint64 {
	var out []uint64
	for _, tx := range batch {
		out = append(out, tx.id)
	}
	return out
}

// check checks every transaction of the sweep against what its
// participants applied and what its client was told.
func (s *sweep) check() (committed, aborted int) {
	s.t.Helper()
	for _, b := range s.m.bad {
		s.t.Error(b)
	}
	for _, g := range s.gens {
		if n := g.svc.MixedOutcomes.Load(); n != 0 {
			s.t.Errorf("a manager counted %d mixed outcomes", n)
		}
	}
	s.m.mu.Lock()
	defer s.m.mu.Unlock()
	for _, tx := range s.txns {
		in, err := s.g.log.State.Get(tx.id)
		if err != nil {
			s.t.Errorf("transaction %d: %v", tx.id, err)
			continue
		}
		st := in.State
		var commits, aborts, unrolled []string
		for _, n := range s.m.names {
			p := s.m.parts[n]
			switch p.applied[tx.id] {
			case txn.Committed:
				commits = append(commits, n)
			case txn.Aborted:
				aborts = append(aborts, n)
			}
			if p.prepared[tx.id] && p.applied[tx.id] != txn.Committed {
				unrolled = append(unrolled, n)
			}
		}
		what := fmt.Sprintf("transaction %d (participants %v, lost by %v; manager says %s; commit ok %v, abort ok %v)",
			tx.id, tx.parts, tx.lost, stateName(st), tx.okCommit, tx.okAbort)
		var problem string
		switch {
		case len(commits) > 0 && len(aborts) > 0:
			problem = fmt.Sprintf("MIXED OUTCOME: committed at %v, aborted at %v", commits, aborts)
		case st != txn.Committed && st != txn.Aborted:
			problem = "not decided after recovery"
		case st == txn.Committed && len(unrolled) > 0:
			problem = fmt.Sprintf("participants %v voted PREPARED and never committed", unrolled)
		case st == txn.Committed && len(aborts) > 0:
			problem = fmt.Sprintf("participants %v aborted", aborts)
		case st == txn.Aborted && len(commits) > 0:
			problem = fmt.Sprintf("participants %v committed", commits)
		case tx.okCommit && st != txn.Committed:
			problem = "a commit returned OK"
		case (tx.okAbort || tx.refused) && st != txn.Aborted:
			problem = "the client was told it aborted"
		case len(tx.lost) > 0 && st != txn.Aborted:
			problem = "TX.2.3: a participant lost it between join and prepare, so it must abort"
		case tx.lateJoined && st == txn.Committed && s.m.parts[tx.late].applied[tx.id] != txn.Committed:
			problem = fmt.Sprintf("%s joined during the vote and the log took it, yet the transaction committed without it", tx.late)
		}
		if problem != "" {
			s.t.Errorf("%s: %s; calls:\n\t%s", what, problem, strings.Join(s.m.trace[tx.id], "\n\t"))
		}
		if st == txn.Committed {
			committed++
		} else {
			aborted++
		}
	}
	return committed, aborted
}

// sweepPoints lists the crash points of a transaction with n participants.
func sweepPoints(n int) []crashPoint {
	ps := []crashPoint{{}, {kind: "voting", k: 1}, {kind: "decide", k: 1, before: true}, {kind: "decide", k: 1},
		{kind: "notified", k: 1, before: true}, {kind: "notified", k: 1}}
	for k := 1; k <= n; k++ {
		ps = append(ps, crashPoint{kind: "prepare", k: k}, crashPoint{kind: "phase2", k: k})
	}
	return ps
}

func newSweep(t *testing.T, seed uint64) *sweep {
	s := &sweep{world: &world{t: t, m: newModel("a", "b", "c", "d", "e", "f")}, rng: rand.New(rand.NewPCG(seed, 7)), fired: map[string]int{}}
	s.start(nil)
	return s
}

func (s *sweep) finish() (committed, aborted int) {
	s.g.stop()
	// Votes of crashed managers run on until their vote timeout.
	time.Sleep(time.Minute)
	synctest.Wait()
	committed, aborted = s.check()
	late := 0
	for _, tx := range s.txns {
		if tx.lateJoined {
			late++
		}
	}
	var kinds []string
	for k, n := range s.fired {
		kinds = append(kinds, fmt.Sprintf("%s:%d", k, n))
	}
	sort.Strings(kinds)
	s.t.Logf("%d transactions (%d committed, %d aborted, %d joined by a participant during the vote), %d manager crashes by kind %v",
		len(s.txns), committed, aborted, late, len(s.gens)-1, kinds)
	return committed, aborted
}

// finishSweep finishes a sweep, which should see both outcomes.
func (s *sweep) finishSweep() {
	if committed, aborted := s.finish(); committed == 0 || aborted == 0 {
		s.t.Errorf("the sweep should see both outcomes: %d committed, %d aborted", committed, aborted)
	}
}

// TestCrashSweep kills the manager at every step of one transaction's
// commit, for 2 to 5 participants, several times over with random votes
// and participant failures; one time in three the restarted manager is
// killed again at a random step of its recovery.
func TestCrashSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSweep(t, 1)
		s.restartArm = func() crashPoint {
			if s.rng.IntN(3) != 0 {
				return crashPoint{}
			}
			ps := sweepPoints(5)[1:]
			return ps[s.rng.IntN(len(ps))]
		}
		for range 4 {
			for n := 2; n <= 5; n++ {
				for _, pt := range sweepPoints(n) {
					// A vote records VOTING for a short lease: the crash
					// after that record needs one.
					s.shortLeases = pt.kind == "voting"
					tx := s.begin(n)
					if s.rng.IntN(8) == 0 {
						s.crashParticipant(tx.parts[s.rng.IntN(n)], []*sweepTxn{tx})
					}
					s.faults()
					s.run([]*sweepTxn{tx}, pt)
				}
			}
		}
		s.finishSweep()
	})
}

// TestCrashSweepConcurrent kills the manager at random steps while several
// transactions commit at once, so that one crash catches each at another
// step.
func TestCrashSweepConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSweep(t, 2)
		kinds := []string{"voting", "prepare", "decide", "phase2", "notified"}
		random := func() crashPoint {
			k := kinds[s.rng.IntN(len(kinds))]
			pt := crashPoint{kind: k, k: 1 + s.rng.IntN(8)}
			if k == "voting" || k == "decide" || k == "notified" {
				pt.before = s.rng.IntN(2) == 0
			}
			return pt
		}
		s.restartArm = func() crashPoint {
			if s.rng.IntN(3) != 0 {
				return crashPoint{}
			}
			return random()
		}
		for range 40 {
			var batch []*sweepTxn
			for range 2 + s.rng.IntN(5) {
				batch = append(batch, s.begin(2+s.rng.IntN(4)))
			}
			if s.rng.IntN(4) == 0 {
				s.crashParticipant(s.m.names[s.rng.IntN(len(s.m.names))], batch)
			}
			s.faults()
			s.run(batch, random())
		}
		s.finishSweep()
	})
}

// A participant that rolled forward on prepareAndCommit holds the outcome:
// a manager that lost its answer, to the network or in a crash, must hear
// it again before deciding, whatever the NOTCHANGED participant answers
// when the vote is taken again. The manager sends prepareAndCommit only in
// a vote taken again for an older manager's VOTING record (one without
// the prepare-only mark), which these transactions start from.
func TestPrepareAndCommitAnswerLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		// crash: the manager crashes once prepareAndCommit reached the
		// last participant; lost: its answer is lost, then it is down.
		crash bool
		// then runs while the manager is down (after a crash) or as the
		// answer is lost.
		then func(s *sweep, notChanged, last *modelPart)
	}{
		{"manager crash; then the NOTCHANGED participant is down past the vote timeout", true, func(s *sweep, nc, _ *modelPart) {
			nc.down.from, nc.down.until = time.Now(), time.Now().Add(20*time.Second)
		}},
		{"manager crash; then the NOTCHANGED participant crashes and forgets it", true, func(s *sweep, nc, _ *modelPart) {
			s.m.crashLocked(nc)
		}},
		{"manager crash; then the last participant is down past the vote timeout", true, func(s *sweep, _, last *modelPart) {
			last.down.from, last.down.until = time.Now(), time.Now().Add(20*time.Second)
		}},
		{"no crash: the answer is lost, then the last participant is down past the vote timeout", false, func(s *sweep, _, last *modelPart) {
			last.lose = 1
			last.down.from, last.down.until = time.Now().Add(time.Millisecond), time.Now().Add(20*time.Second)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSweep(t, 3)
				tx := s.begin(2)
				s.m.mu.Lock()
				nc, last := s.m.parts[tx.parts[0]], s.m.parts[tx.parts[1]]
				nc.votes[tx.id], last.votes[tx.id] = txn.NotChanged, txn.Prepared
				s.m.mu.Unlock()
				olderVoting(t, s.g, tx.id)
				then := func() {
					s.m.mu.Lock()
					defer s.m.mu.Unlock()
					tc.then(s, nc, last)
				}
				point := crashPoint{}
				if tc.crash {
					point = crashPoint{kind: "prepare", k: 2}
					s.beforeRestart = then
				} else {
					then()
				}
				s.run([]*sweepTxn{tx}, point)
				if committed, _ := s.finish(); committed != 1 {
					t.Fatalf("the last participant committed on prepareAndCommit: the transaction must be COMMITTED")
				}
			})
		})
	}
}

// olderVoting logs a VOTING record for transaction id as an older manager
// wrote it: without the prepare-only mark.
func olderVoting(t *testing.T, g *gen, id uint64) {
	t.Helper()
	if _, err := g.log.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_TxnVoting{TxnVoting: &statepb.TxnVoting{Id: id}}}); err != nil {
		t.Fatal(err)
	}
}
