package txn

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// A vote (TX.2.7) asks each participant to prepare and decides: ABORTED
// at the first ABORTED vote, UnknownTransaction or definite error, or when
// a participant stays unreachable past VoteTimeout; otherwise COMMITTED.
//
// It runs on the workers as a chain of short tasks and never waits for a
// participant on a worker: a call reports its answer to a callback, a
// retry waits in a timer, and the answer that completes the vote queues
// the decision. A vote holds a reference for each call in flight, timer
// armed and task queued or running, and ends when the last is released:
// decided, or stopped undecided by the end of the term.
//
// Forms:
//
//   - A top-level transaction's vote asks every participant to prepare at
//     once, without a VOTING record: the decision (TxnDecide with the
//     participant list's version) commits the ACTIVE transaction, or
//     aborts it if the list changed meanwhile. A vote that turns slow —
//     a participant to ask again, or still undecided CallTimeout after it
//     began — records VOTING (prepare only) then and goes on; so does one
//     whose lease ends within two calls' time, before it asks anyone, so
//     that the lease cannot end a transaction whose commit was received
//     (TX.2.1). If this node stops leading before the decision, the
//     transaction is still ACTIVE: its client commits again, or its lease
//     ends it; the participants answer a repeated prepare with their vote.
//   - A nested transaction's vote follows its VOTING record (prepare
//     only) and asks every participant at once.
//   - A vote taken again after a failover, of a transaction whose VOTING
//     record says prepare only, is the same. Without that mark (a record
//     from an older manager) the last participant is asked after the
//     others: prepareAndCommit when they all voted NOTCHANGED, and,
//     having maybe rolled forward on an earlier leader's prepareAndCommit,
//     it must answer, however long that takes, unless another
//     participant's PREPARED or ABORTED shows it was never sent one.
type vote struct {
	s    *Service
	work *workers
	in   Info
	mgr  djinn.Ref
	n    int
	// top: a top-level transaction of this manager. resumed: a vote taken
	// again after another leader's. parallel: every participant is asked
	// at once, none must answer past the vote timeout.
	top, resumed, parallel bool
	// ctx ends at the vote timeout plus a call, or with the term; termCtx
	// with the term, for calls that must be answered.
	ctx     context.Context
	cancel  context.CancelFunc
	termCtx context.Context
	// deadline: past it a participant that fails counts as ABORTED.
	deadline time.Time
	done     chan struct{}
	// unwatch stops watching the term for its end.
	unwatch func() bool

	mu sync.Mutex
	// Guarded by mu.
	votes []djinnpb.TransactionState
	// silent marks the participants that never answered: one may have
	// prepared and lost the answer, so it is told the outcome. answered
	// marks those that voted PREPARED or ABORTED.
	silent, answered []bool
	left             int  // participants of the round not yet answered for good
	lastAsked        bool // the last participant's round began (not parallel)
	fast             bool // no VOTING record: the decision commits an ACTIVE transaction
	escalating       bool // the VOTING record is asked for
	refs             int
	timers           []voteTimer // armed
	nextTimer        uint64
	stopped          bool
}

// newVote prepares the vote of in, which is ACTIVE (top-level: a fast
// vote) or VOTING.
func (s *Service) newVote(in Info, resumed bool, work *workers, termCtx context.Context) *vote {
	n := len(in.Parts)
	top := in.Parent == 0 && in.Remote == nil
	v := &vote{s: s, work: work, in: in, mgr: s.self(), n: n, top: top, resumed: resumed,
		parallel: !resumed || in.PrepareOnly || in.State == Active, termCtx: termCtx, done: make(chan struct{}),
		votes: make([]djinnpb.TransactionState, n), silent: make([]bool, n), answered: make([]bool, n),
		fast: in.State == Active}
	v.ctx, v.cancel = context.WithTimeout(termCtx, s.cfg.VoteTimeout+s.cfg.CallTimeout)
	v.deadline = s.now().Add(s.cfg.VoteTimeout)
	v.refs = 1 // the start, released by begin's task
	v.unwatch = context.AfterFunc(termCtx, v.abandon)
	return v
}

// begin starts the vote on a worker.
func (v *vote) begin() {
	v.work.Go(func() {
		v.start()
		v.release(1)
	})
}

// over reports whether the vote stopped: the term ended.
func (v *vote) over() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.stopped || v.termCtx.Err() != nil
}

func (v *vote) hold() {
	v.mu.Lock()
	v.refs++
	v.mu.Unlock()
}

// release drops n references; the last ends the vote.
func (v *vote) release(n int) {
	if n == 0 {
		return
	}
	v.mu.Lock()
	v.refs -= n
	last := v.refs == 0
	v.mu.Unlock()
	if last {
		v.end()
	}
}

// end is the vote's end: it leaves the service's votes and tells Run and
// the committers.
func (v *vote) end() {
	v.unwatch()
	v.cancel()
	s := v.s
	s.mu.Lock()
	if s.votes[v.in.ID] == v {
		delete(s.votes, v.in.ID)
	}
	s.mu.Unlock()
	close(v.done)
	s.voting.Done()
}

// goTask runs f on a worker, holding a reference meanwhile.
func (v *vote) goTask(f func()) {
	v.hold()
	v.work.Go(func() {
		f()
		v.release(1)
	})
}

// afterLocked runs f on a worker after d, unless the vote stops first.
func (v *vote) afterLocked(d time.Duration, f func()) {
	v.refs++
	k := v.nextTimer
	v.nextTimer++
	v.timers = append(v.timers, voteTimer{k, time.AfterFunc(d, func() {
		v.mu.Lock()
		armed := v.disarmLocked(k)
		v.mu.Unlock()
		if armed {
			v.goTask(f)
			v.release(1)
		}
	})})
}

// voteTimer is a timer a vote armed, with its key.
type voteTimer struct {
	k uint64
	t *time.Timer
}

// disarmLocked forgets the timer of key k; false if it was not armed.
func (v *vote) disarmLocked(k uint64) bool {
	for j, t := range v.timers {
		if t.k == k {
			v.timers = slices.Delete(v.timers, j, j+1)
			return true
		}
	}
	return false
}

// stopTimersLocked stops the timers armed and returns the references
// they held.
func (v *vote) stopTimersLocked() int {
	n := 0
	v.timers = slices.DeleteFunc(v.timers, func(t voteTimer) bool {
		if t.t.Stop() {
			n++
			return true
		}
		return false
	})
	return n
}

// abandon stops the vote when the term ends: no call, retry or decision
// starts any more, and the calls in flight end with their contexts.
func (v *vote) abandon() {
	v.mu.Lock()
	v.stopped = true
	n := v.stopTimersLocked()
	v.mu.Unlock()
	v.cancel()
	v.release(n)
}

// start begins the vote: the first round of calls, and for a fast vote
// the time after which it records VOTING (before anything else when the
// lease ends too soon for a vote without the record).
func (v *vote) start() {
	if v.over() {
		return
	}
	s := v.s
	if v.fast {
		until := s.now().Add(s.cfg.CallTimeout)
		if li, ok := s.lessor.Table().Lookup(v.in.Cookie, s.now()); !ok {
			until = s.now()
		} else if end := li.Expires.Add(-2 * s.cfg.CallTimeout); end.Before(until) {
			until = end
		}
		if !until.After(s.now()) {
			v.mu.Lock()
			v.escalating = true
			v.mu.Unlock()
			if !v.escalate() {
				return
			}
		} else {
			v.mu.Lock()
			v.afterLocked(until.Sub(s.now()), v.slow)
			v.mu.Unlock()
		}
	}
	if v.n == 0 {
		v.finish()
		return
	}
	first := v.n
	if !v.parallel {
		first = v.n - 1 // the last after the others
	}
	v.mu.Lock()
	v.left = first
	v.mu.Unlock()
	if first == 0 {
		v.askLast()
		return
	}
	for i := range first {
		v.ask(i, OpPrepare, false, 0)
	}
}

// slow records VOTING for a fast vote still undecided, once.
func (v *vote) slow() {
	v.mu.Lock()
	now := v.fast && !v.escalating && !v.stopped
	v.escalating = v.escalating || now
	v.mu.Unlock()
	if now {
		v.escalate()
	}
}

// escalate records VOTING (prepare only) for a fast vote; false when the
// vote must stop: the transaction was decided meanwhile, or this node
// stopped leading.
func (v *vote) escalate() bool {
	s := v.s
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
	defer cancel()
	res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_TxnVoting{TxnVoting: &statepb.TxnVoting{Id: v.in.ID, PrepareOnly: true}}})
	v.mu.Lock()
	defer v.mu.Unlock()
	v.escalating = false
	switch {
	case err != nil:
		// The vote goes on without the record: its decision still holds
		// only for the participants it asked.
		s.cfg.Logger.Warn("transaction: recording VOTING for a slow vote failed", "id", v.in.ID, "err", err)
		return true
	case res.(Info).State != Voting:
		// Decided meanwhile (an abort, the lease, a crash count): nothing
		// is left to vote on.
		v.stopped = true
		v.cancel()
		return false
	}
	v.fast = false
	return true
}

// ask makes participant i's call op, attempt attempt; must: no vote
// deadline, the term alone stops it.
func (v *vote) ask(i int, op Op, must bool, attempt int) {
	if v.over() {
		return
	}
	s := v.s
	parent := v.ctx
	if must {
		parent = v.termCtx
	}
	v.hold()
	// A participant in this process answers before Call returns, on this
	// goroutine, a worker: what its answer starts (the decision, the next
	// participant) runs here after Call, not as a task handed to another
	// worker. An answer that comes later, from elsewhere, queues it.
	var (
		mu       sync.Mutex
		returned bool
		inline   []func()
	)
	s.cfg.Participants.Call(parent, s.cfg.CallTimeout, op, v.in.Parts[i].Ref, v.mgr, v.in.ID, v.in.Secret, func(st djinnpb.TransactionState, err error) {
		next := v.answer(i, op, must, attempt, st, err)
		mu.Lock()
		if !returned && len(next) > 0 {
			inline, next = next, nil
			v.hold() // released once they ran
		}
		mu.Unlock()
		for _, f := range next {
			v.goTask(f)
		}
		v.release(1)
	})
	mu.Lock()
	returned = true
	run := inline
	mu.Unlock()
	if len(run) > 0 {
		for _, f := range run {
			f()
		}
		v.release(1)
	}
}

// answer takes participant i's answer to op. It returns what runs next on
// a worker: a retry's escalation, the last participant's call, or the
// decision.
func (v *vote) answer(i int, op Op, must bool, attempt int, st djinnpb.TransactionState, err error) (next []func()) {
	s := v.s
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.stopped || v.termCtx.Err() != nil {
		return
	}
	switch {
	case err == nil && (st == Prepared || st == NotChanged || st == Aborted || (!v.parallel && i == v.n-1 && st == Committed)):
		// COMMITTED: the last participant rolled forward on a
		// prepareAndCommit, this one or an earlier leader's.
		v.votes[i], v.answered[i] = st, st == Prepared || st == Aborted
	case err == nil:
		s.cfg.Logger.Warn("transaction: participant answered prepare with a state that is not a vote", "id", v.in.ID, "vote", st)
		v.votes[i] = Aborted
	case djinn.IsDefinite(err):
		// UnknownTransaction: the participant lost its state.
		v.votes[i] = Aborted
	case !must && (!s.now().Before(v.deadline) || v.ctx.Err() != nil):
		v.votes[i], v.silent[i] = Aborted, true
	default:
		// Try again after a pause; a fast vote is no longer fast.
		if v.fast && !v.escalating {
			v.escalating = true
			next = append(next, func() { v.escalate() })
		}
		v.afterLocked(s.backoff(attempt), func() { v.ask(i, op, must, attempt+1) })
		return
	}
	v.left--
	switch {
	case v.left > 0:
	case !v.parallel && !v.lastAsked:
		next = append(next, v.askLast)
	default:
		next = append(next, v.finish)
	}
	return next
}

// askLast asks the last participant, after the others (a vote taken again
// without the prepare-only mark).
func (v *vote) askLast() {
	last := v.n - 1
	v.mu.Lock()
	onlyLast, shown := true, false
	for i := range last {
		onlyLast = onlyLast && v.votes[i] == NotChanged
		shown = shown || v.answered[i]
	}
	v.left, v.lastAsked = 1, true
	v.mu.Unlock()
	// Not for a nested transaction: its participants are promoted into
	// the parent, and one that prepareAndCommit rolled forward into it
	// would still have to join it.
	andCommit := onlyLast && v.top
	op := OpPrepare
	if andCommit {
		op = OpPrepareAndCommit
	}
	v.ask(last, op, andCommit || (v.resumed && !shown && v.top), 0)
}

// finish decides, once every participant answered for good.
func (v *vote) finish() {
	if v.over() {
		return
	}
	s := v.s
	v.mu.Lock()
	n := v.stopTimersLocked()
	v.fast = false // deciding: no VOTING record any more
	votes, silent := v.votes, v.silent
	v.mu.Unlock()
	defer v.release(n)
	commit := true
	var prepared []uint32
	for i, vt := range votes {
		switch vt {
		case Aborted:
			commit = false
		case Prepared:
			prepared = append(prepared, uint32(i))
		}
	}
	if v.n > 0 && votes[v.n-1] == Committed {
		commit = true // the others voted NOTCHANGED when it was sent
	}
	if commit && v.in.Remote != nil && len(prepared) > 0 {
		// Nested in another manager's transaction: its participants become
		// the parent's, all at once, before it commits (TX.2.7).
		ok, stop := s.promoteRemote(v.ctx, v.in, prepared, v.deadline, v.termCtx.Done())
		if stop {
			return
		}
		commit = ok
	}
	dec := &statepb.TxnDecide{Id: v.in.ID, Commit: commit, Prepared: prepared, Version: v.in.Version + 1, Votes: make([]int32, 0, len(votes))}
	for i, vt := range votes {
		if silent[i] {
			vt = 0 // no vote: told the outcome like one not yet asked
		}
		dec.Votes = append(dec.Votes, int32(vt))
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.CallTimeout)
	defer cancel()
	if _, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: s.now().UnixNano(), Op: &statepb.Command_TxnDecide{TxnDecide: dec}}); err != nil &&
		djinn.KindOf(err) != djinn.CannotCommit && djinn.KindOf(err) != djinn.CannotAbort {
		s.cfg.Logger.Warn("transaction: recording the outcome failed; the next leader votes again", "id", v.in.ID, "err", err)
	}
}
