package replica

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// How commands reach the log.
//
// Every caller of Propose hands its command, encoded, to the node's
// proposer and waits for its result; nothing is started per proposal. The
// proposer appends the commands waiting as one log entry — one append, one
// fsync, one round of replication for all of them — with at most
// maxInFlight entries on their way at once. So with one caller at a time a
// command is appended at once, as it would be alone, and under load entries
// grow rather than multiply: whatever arrives while entries are in flight
// goes in the next. An entry of several commands is a Command whose batch
// field holds them (state.proto); an entry of one is that command.
//
// The leader applies its own entries from the commands it holds — the fsm
// finds them by the entry's data (own) — rather than decoding what it has
// just encoded. Every other member, and the leader itself after a restart,
// decodes the entry. Both apply the same commands: proto's decoding gives
// back what its encoding was given, and Apply may not keep a command it was
// given past its return except as state (StateMachine).
//
// A proposal's outcome is its entry's: a result for each command when the
// entry applies, one error for all of them when it does not. An entry the
// fsm applies from the commands it holds answers its proposals from the
// apply itself (the entry is committed, and applied): the callers do not
// wait for raft to answer the entry's future and complete to hear it.
// Whichever of the fsm and complete takes the entry out of own answers
// its proposals: complete answers them only when the fsm did not. A
// caller that gives up before its command is taken into an entry gets a
// definite error (the change was not made); after that, an indefinite
// one.
//
// A rider (ProposeRider) is a command that need not be written at once: it
// starts no entry of its own, but rides in the next entry the proposer
// forms for another proposal, or goes alone once it has waited the node's
// RiderDelay with none coming. Its caller waits for its result as any
// proposal's, and its outcomes are a proposal's: abandoned before it is
// taken, it is definitely not made; the node closing or losing its
// leadership answers it as it answers the others. It saves an entry of its
// own — an append, an fsync, a round of replication — and, at low
// concurrency, a wait: a command proposed right after another's apply is
// written just as that caller's next command arrives, and whichever comes
// second waits a whole write. The mailbox records deliveries so (its
// deliverer): a delivery recorded a little later is at worst delivered
// again after a crash, which delivery at least once allows. Riders keep
// their place in the queue: nothing proposed after a rider is applied
// before it.

// The proposer's bounds.
const (
	// maxInFlight bounds the entries appended and not yet applied: while
	// one is written, the next gathers what arrives meanwhile.
	maxInFlight = 2
	// maxEntryCommands and maxEntryBytes bound an entry of several
	// commands; a command larger than maxEntryBytes is an entry alone.
	maxEntryCommands = 1024
	maxEntryBytes    = 1 << 20
	// defaultRiderDelay bounds how long a rider waits for another
	// proposal's entry before it is appended alone. It is longer than a
	// client's round trip between two calls, even loaded (a notify's p99
	// at one client is about 2ms on a shared two-core machine), so at low
	// concurrency a rider nearly always finds the next call's entry; it is
	// short against what waits on a rider: a delivery stream tells its
	// client of recorded acknowledgements after 20ms of quiet (TellDelay),
	// and a crash redelivers what was delivered in the last few ms.
	defaultRiderDelay = 5 * time.Millisecond
)

// batchTag is the key of the Command's batch field (100, bytes) on the
// wire: an entry of several commands is each command's encoding after it.
var batchTag = protowire.AppendTag(nil, 100, protowire.BytesType)

// A proposal's states: queued until the proposer takes it into an entry,
// unless its caller abandons it first.
const (
	queued int32 = iota
	taken
	abandoned
)

// proposal is one command on its way to the log.
type proposal struct {
	cmd   *statepb.Command
	rider bool    // waits for another proposal's entry (ProposeRider)
	data  []byte  // cmd encoded, in buf
	buf   *[]byte // the pooled buffer data is in, put back as it came
	state atomic.Int32
	// done is sent one value once res and err are set.
	done chan struct{}
	res  any
	err  error
}

// entry is one log entry of proposals.
type entry struct {
	props  []*proposal
	cmds   []*statepb.Command // the commands, as the fsm applies them
	data   []byte
	buf    *[]byte // the entry's own pooled buffer holding data; nil when data is its one proposal's
	future raft.ApplyFuture
	// applied is set, under the proposer's ownMu, when the fsm takes the
	// entry to apply: the fsm answers its proposals, complete does not.
	applied bool
}

// proposer gathers proposals into log entries. It runs two goroutines,
// owned by the node: submit (appends entries) and complete (waits for them
// in order, answers the proposals the fsm did not, and lets the entries
// go).
type proposer struct {
	raft  applier
	fail  func(error) error // a raft error as the caller sees it
	delay time.Duration     // how long a rider waits for another proposal

	mu       sync.Mutex
	queue    []*proposal // guarded by mu: waiting for an entry
	inFlight int         // guarded by mu: entries appended, not yet done
	stopped  bool        // guarded by mu: no new proposals
	// riders counts the riders in queue; due is set once the oldest of
	// them has waited delay (timer fired), until none is left: the
	// proposer then forms an entry for them alone. timer runs while riders
	// wait and none is due. All guarded by mu.
	riders int
	due    bool
	timer  *time.Timer
	timing uint64 // the timer's arming while it runs; 0 when stopped
	armed  uint64 // armings so far

	// own holds the entries in flight by the address of their data's first
	// byte, for the fsm (guarded by ownMu).
	ownMu sync.Mutex
	own   map[*byte]*entry

	// proposals are the node's finished proposals, for reuse: each
	// node's own, so that its channels stay with it (and with a test's
	// bubble).
	proposals sync.Pool

	wake      chan struct{} // 1-buffered: submit has work
	appended  chan *entry   // to complete, in log order
	stop      chan struct{}
	submitted chan struct{} // closed when submit has returned
	completed chan struct{} // closed when complete has returned
}

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// applier appends a log entry: the node's raft.
type applier interface {
	Apply(data []byte, timeout time.Duration) raft.ApplyFuture
}

func newProposer(r applier, fail func(error) error, riderDelay time.Duration) *proposer {
	p := &proposer{raft: r, fail: fail, delay: riderDelay, own: map[*byte]*entry{},
		wake: make(chan struct{}, 1), appended: make(chan *entry, maxInFlight),
		stop: make(chan struct{}), submitted: make(chan struct{}), completed: make(chan struct{})}
	go p.submit()
	go p.complete()
	return p
}

// errShutdown answers proposals the node will not append: it is closing.
var errShutdown = djinn.Errorf(djinn.Unavailable, "server shutting down: the change was not made")

// propose appends cmd, waits for it to be applied and returns its result.
// A rider waits for another proposal's entry, or delay.
func (p *proposer) propose(ctx context.Context, cmd *statepb.Command, rider bool) (any, error) {
	bp := buffers.Get().(*[]byte)
	data, err := proto.MarshalOptions{}.MarshalAppend((*bp)[:0], cmd)
	if err != nil {
		buffers.Put(bp)
		return nil, djinn.Errorf(djinn.Internal, "encode command: %v", err)
	}
	pr, _ := p.proposals.Get().(*proposal)
	if pr == nil {
		pr = &proposal{done: make(chan struct{}, 1)}
	}
	pr.cmd, pr.data, pr.buf, pr.rider = cmd, data, bp, rider
	pr.state.Store(queued)
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		p.release(pr)
		return nil, errShutdown
	}
	p.queue = append(p.queue, pr)
	kick := p.inFlight < maxInFlight
	if rider {
		p.riders++
		kick = kick && p.due
		if !p.due && p.timing == 0 {
			p.armed++
			arming := p.armed
			p.timing = arming
			p.timer = time.AfterFunc(p.delay, func() { p.riderDue(arming) })
		}
	}
	p.mu.Unlock()
	if kick {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	select {
	case <-pr.done:
	case <-ctx.Done():
		if pr.state.CompareAndSwap(queued, abandoned) {
			// Never taken: the proposer drops it, and whoever holds it
			// last lets it go to the collector.
			return nil, errors.Join(ctx.Err(), djinn.Errorf(djinn.Unavailable, "gave up waiting for the log: the change was not made"))
		}
		select {
		case <-pr.done:
		default:
			// Taken into an entry that is on its way: the proposal stays
			// with it, and is not reused.
			return nil, errors.Join(ctx.Err(), djinn.Errorf(djinn.Unavailable, "gave up waiting for the log: the change may or may not have been made"))
		}
	}
	res, perr := pr.res, pr.err
	p.release(pr)
	return res, perr
}

// riderDue lets the riders waiting go in an entry of their own: the
// oldest has waited delay since the timer's arming.
func (p *proposer) riderDue(arming uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timing != arming {
		return // stopped as it fired: the riders it was for are taken
	}
	p.timing = 0
	if p.riders > 0 {
		p.due = true
		p.kickLocked()
	}
}

// release returns a finished proposal and its buffer to their pools.
func (p *proposer) release(pr *proposal) {
	putBuffer(pr.buf, pr.data)
	*pr = proposal{done: pr.done}
	p.proposals.Put(pr)
}

// putBuffer puts a pooled buffer back, holding b (which grew from it):
// the pointer taken from the pool goes back, so a put allocates nothing.
func putBuffer(bp *[]byte, b []byte) {
	*bp = b[:0]
	buffers.Put(bp)
}

// submit appends entries while there are proposals and room in flight.
func (p *proposer) submit() {
	defer close(p.submitted)
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		}
		for {
			e := p.take()
			if e == nil {
				break
			}
			p.append(e)
		}
	}
}

// take takes the proposals waiting, up to an entry's bounds, into an
// entry counted in flight; nil when none wait, when only riders wait and
// none is due, or when the entries in flight are at their bound.
func (p *proposer) take() *entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight >= maxInFlight || p.stopped {
		return nil
	}
	if p.riders > 0 && !p.due && !p.othersWaitLocked() {
		return nil // riders alone, not yet due: they wait for another proposal
	}
	e := &entry{}
	size, n := 0, 0
	for _, pr := range p.queue {
		if len(e.props) > 0 && (len(e.props) == maxEntryCommands || size+len(pr.data) > maxEntryBytes) {
			break
		}
		n++
		if pr.rider {
			p.riders--
		}
		if !pr.state.CompareAndSwap(queued, taken) {
			continue // abandoned by its caller
		}
		e.props = append(e.props, pr)
		size += len(pr.data)
	}
	rest := copy(p.queue, p.queue[n:])
	clear(p.queue[rest:])
	p.queue = p.queue[:rest]
	if p.riders == 0 {
		// No rider is left waiting: the next one waits its own delay.
		p.due = false
		p.stopTimerLocked()
	}
	if len(e.props) == 0 {
		if rest > 0 {
			p.kickLocked()
		}
		return nil
	}
	p.inFlight++
	if rest > 0 && p.inFlight < maxInFlight {
		p.kickLocked()
	}
	return e
}

func (p *proposer) stopTimerLocked() {
	if p.timing != 0 {
		p.timing = 0
		p.timer.Stop()
	}
}

// othersWaitLocked reports whether a proposal other than a rider waits.
func (p *proposer) othersWaitLocked() bool {
	for _, pr := range p.queue {
		if !pr.rider && pr.state.Load() == queued {
			return true
		}
	}
	return false
}

func (p *proposer) kickLocked() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// append encodes e, hands it to raft and on to complete.
func (p *proposer) append(e *entry) {
	e.cmds = make([]*statepb.Command, len(e.props))
	for i, pr := range e.props {
		e.cmds[i] = pr.cmd
	}
	if len(e.props) == 1 {
		e.data = e.props[0].data
	} else {
		bp := buffers.Get().(*[]byte)
		b := (*bp)[:0]
		for _, pr := range e.props {
			b = append(b, batchTag...)
			b = protowire.AppendBytes(b, pr.data)
		}
		e.data, e.buf = b, bp
	}
	p.ownMu.Lock()
	p.own[&e.data[0]] = e
	p.ownMu.Unlock()
	e.future = p.raft.Apply(e.data, 0)
	p.appended <- e // room for maxInFlight: never blocks
}

// complete waits for each entry appended, in order, and finishes it. It returns once submit has and every entry in flight
// is done.
func (p *proposer) complete() {
	defer close(p.completed)
	for {
		select {
		case e := <-p.appended:
			p.finish(e)
		case <-p.submitted:
			for {
				select {
				case e := <-p.appended:
					p.finish(e)
				default:
					return
				}
			}
		}
	}
}

// finish waits for e, answers its proposals unless the fsm did, and
// counts it out of those in flight.
func (p *proposer) finish(e *entry) {
	err := e.future.Error()
	p.ownMu.Lock()
	delete(p.own, &e.data[0]) // the fsm took it, unless it never applied
	applied := e.applied
	p.ownMu.Unlock()
	if !applied {
		p.answerAll(e, err)
	}
	if e.buf != nil {
		putBuffer(e.buf, e.data)
	}
	p.mu.Lock()
	p.inFlight--
	if len(p.queue) > 0 {
		p.kickLocked()
	}
	p.mu.Unlock()
}

// answerAll answers the proposals of an entry the fsm did not apply from
// the commands it holds: with err, or with the results raft has for it.
func (p *proposer) answerAll(e *entry, err error) {
	var results []any
	if err != nil {
		err = p.fail(err)
	} else if len(e.props) == 1 {
		results = []any{e.future.Response()}
	} else if rs, ok := e.future.Response().([]any); ok && len(rs) == len(e.props) {
		results = rs
	} else {
		err = djinn.Errorf(djinn.Internal, "log entry %d: %d results for %d commands", e.future.Index(), len(rs), len(e.props))
	}
	for i, pr := range e.props {
		if err != nil {
			pr.err = err
		} else if rerr, ok := results[i].(error); ok {
			pr.err = rerr
		} else {
			pr.res = results[i]
		}
		pr.done <- struct{}{}
	}
}

// takeOwn returns the entry whose data is data, if this node proposed it and
// it is in flight, and forgets it: the fsm applies its commands instead of
// decoding data, and answers its proposals (answer).
func (p *proposer) takeOwn(data []byte) (*entry, bool) {
	if len(data) == 0 {
		return nil, false
	}
	p.ownMu.Lock()
	defer p.ownMu.Unlock()
	e, ok := p.own[&data[0]]
	if !ok {
		return nil, false
	}
	delete(p.own, &data[0])
	e.applied = true
	return e, true
}

// answer hands each of e's proposals its command's result: res, the
// entry's result as the fsm's applyAll gave it (one result, or one for
// each command).
func (e *entry) answer(res any) {
	rs, _ := res.([]any)
	for i, pr := range e.props {
		r := res
		if len(e.props) > 1 {
			r = rs[i]
		}
		if rerr, ok := r.(error); ok {
			pr.err = rerr
		} else {
			pr.res = r
		}
		pr.done <- struct{}{}
	}
}

// close stops taking proposals, fails those waiting, and waits until every
// entry in flight is done: raft, still running, answers each (applied, or
// refused when this node no longer leads).
func (p *proposer) close() {
	p.mu.Lock()
	p.stopped = true
	waiting := p.queue
	p.queue, p.riders = nil, 0
	p.stopTimerLocked()
	p.mu.Unlock()
	close(p.stop)
	for _, pr := range waiting {
		if pr.state.CompareAndSwap(queued, taken) {
			pr.err = errShutdown
			pr.done <- struct{}{}
		}
	}
	<-p.submitted
	<-p.completed
}
