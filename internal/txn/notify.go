package txn

import (
	"context"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// maxCalls bounds the outcome calls in flight.
const maxCalls = 256

// forgetBatch bounds the transactions one TxnForget forgets.
const forgetBatch = 4096

// Run drives transactions while this node leads, until ctx ends: it
// resumes the votes of VOTING transactions (a transaction that was voting
// when a leader failed is voted again: a participant answers a repeated
// prepare with its vote, TX.2.6), tells participants the outcome of
// decided transactions until each has been told (TX.2.7: at reasonable
// intervals, for as long as it takes), and forgets settled transactions
// after the retention time, or once more than MaxRemembered are
// remembered, the oldest first.
//
// Run returns once the votes it ran have stopped: a vote still waiting
// for participants when the term ends stops undecided, and the next leader
// votes again.
func (s *Service) Run(ctx context.Context) {
	termCtx, endTerm := context.WithCancel(context.Background())
	work := newWorkers(s.cfg.Workers)
	s.mu.Lock()
	term := s.term
	s.running, s.work, s.termCtx = true, work, termCtx
	s.mu.Unlock()
	n := &notifier{s: s, work: work, done: make(chan notified, maxCalls), recorded: make(chan error, 1), forgot: make(chan struct{}, 1)}
	defer func() {
		s.mu.Lock()
		s.running = false
		s.term = make(chan struct{})
		s.mu.Unlock()
		close(term)
		endTerm()
		n.stop()
		work.close()
		s.voting.Wait()
	}()
	for _, id := range s.state.Voting() {
		s.startVote(id, true)
	}
	n.run(ctx)
}

type notified struct {
	key callKey
	err error
}

// outcomeCall is a participant due to be told its transaction's outcome.
type outcomeCall struct {
	key    callKey
	commit bool
	ref    *djinnpb.Ref
	secret djinn.ID // the transaction's, which participants check
}

// notifier tells participants outcomes, at most maxCalls at a time. Its
// loop owns queue and inflight. It never blocks while calls are in flight
// except in its select, which reads done: a call's goroutine sends its
// outcome on done, whose capacity is maxCalls, so that send never blocks,
// and the calls due beyond maxCalls wait in queue, not in a goroutine. So
// no pass can stall however many calls are due.
type notifier struct {
	s    *Service
	work *workers
	// queue holds the calls due and not yet started (marked busy, so no
	// scan adds them twice); inflight counts those started and not yet
	// received on done.
	queue    []outcomeCall
	untold   []Untold // scan's, kept between scans
	inflight int
	done     chan notified
	wg       sync.WaitGroup
	// recording is set while a record of participants told is being
	// logged, on a worker: it reports on recorded. Those told meanwhile
	// wait in told for the next record. forgetting likewise, on forgot.
	recording, forgetting bool
	told                  []*statepb.TxnParticipantRef
	recorded              chan error
	forgot                chan struct{}
}

func (n *notifier) run(ctx context.Context) {
	s := n.s
	tick := time.NewTicker(s.cfg.MinRetry)
	defer tick.Stop()
	forget := time.NewTicker(max(s.cfg.Retention/10, time.Second))
	defer forget.Stop()
	for {
		if len(n.told) > 0 && !n.recording {
			n.record(ctx)
		}
		n.dispatch(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.state.wake:
		case <-tick.C:
			if s.state.Remembered() > s.cfg.MaxRemembered {
				n.startForget(ctx)
			}
		case r := <-n.done:
			n.took(r)
			for more := true; more; {
				select {
				case r := <-n.done:
					n.took(r)
				default:
					more = false
				}
			}
		case err := <-n.recorded:
			n.recording = false
			if err != nil && ctx.Err() != nil {
				return
			}
		case <-forget.C:
			n.startForget(ctx)
		case <-n.forgot:
			n.forgetting = false
		}
	}
}

// startForget forgets on a worker, unless a forget runs already.
func (n *notifier) startForget(ctx context.Context) {
	if n.forgetting {
		return
	}
	n.forgetting = true
	n.wg.Add(1)
	n.work.Go(func() {
		defer n.wg.Done()
		n.forget(ctx)
		n.forgot <- struct{}{} // never blocks: one forgetting at a time
	})
}

// forget forgets the transactions settled before the retention time and
// the oldest beyond MaxRemembered, in batches, until none is left.
func (n *notifier) forget(ctx context.Context) {
	s := n.s
	for ctx.Err() == nil {
		ids := s.state.Settled(s.now().Add(-s.cfg.Retention).UnixNano(), s.cfg.MaxRemembered, forgetBatch)
		if len(ids) == 0 {
			return
		}
		if _, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_TxnForget{TxnForget: &statepb.TxnForget{Ids: ids}}}); err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("transaction: forgetting settled transactions failed", "err", err)
			}
			return
		}
	}
}

// record logs the participants told so far, on a worker; it reports on
// recorded. Until recorded, a participant told stays busy so that it is
// not told again; if the record fails, it is told again.
func (n *notifier) record(ctx context.Context) {
	told := n.told
	n.told = nil
	n.recording = true
	s := n.s
	n.wg.Add(1)
	n.work.Go(func() {
		defer n.wg.Done()
		_, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_TxnNotified{TxnNotified: &statepb.TxnNotified{Entries: told}}})
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("transaction: recording outcomes delivered failed; will tell again", "err", err)
		}
		s.mu.Lock()
		for _, e := range told {
			delete(s.calls, callKey{e.GetId(), int(e.GetParticipant())})
		}
		s.mu.Unlock()
		n.recorded <- err // never blocks: one record at a time
	})
}

// stop waits for the calls in flight, then frees every call this run
// marked busy (queued, in flight, or told and not recorded), so that the
// next run as leader tells them again. A node that no longer leads calls
// no participant: none counts as unreachable from it (the next run counts
// again those still failing).
func (n *notifier) stop() {
	n.wg.Wait()
	s := n.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		c.busy, c.unreachable = false, false
	}
	s.Unreachable.Store(0)
}

// dispatch starts the calls due, up to maxCalls in flight. It scans the
// transactions only once the queue of due calls has drained, so each due
// call costs one scan among many rather than one scan each.
func (n *notifier) dispatch(ctx context.Context) {
	if len(n.queue) == 0 {
		n.scan()
	}
	for n.inflight < maxCalls && len(n.queue) > 0 {
		c := n.queue[0]
		n.queue[0] = outcomeCall{}
		n.queue = n.queue[1:]
		n.start(ctx, c)
	}
	if len(n.queue) == 0 {
		n.queue = nil // let the drained array go
	}
}

// scan queues a call for each participant due to be told, marking it busy.
func (n *notifier) scan() {
	s := n.s
	now := s.now()
	n.untold = s.state.Untold(n.untold[:0])
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range n.untold {
		k := callKey{u.ID, u.Part}
		c, ok := s.calls[k]
		if !ok {
			c = &callState{}
			s.calls[k] = c
		}
		if c.busy || now.Before(c.next) {
			continue
		}
		c.busy = true
		n.queue = append(n.queue, outcomeCall{key: k, commit: u.Commit, ref: u.Ref, secret: u.Secret})
	}
	clear(n.untold)
}

// start calls one participant, on a worker; its answer comes on done.
func (n *notifier) start(ctx context.Context, c outcomeCall) {
	s := n.s
	mgr := s.self()
	n.inflight++
	n.wg.Add(1)
	n.work.Go(func() {
		op := OpAbort
		if c.commit {
			op = OpCommit
		}
		s.cfg.Participants.Call(ctx, s.cfg.CallTimeout, op, c.ref, mgr, c.key.id, c.secret, func(_ djinnpb.TransactionState, err error) {
			n.done <- notified{c.key, s.told(c, err)} // never blocks: see notifier
			n.wg.Done()
		})
	})
}

// told sorts a participant's answer to its outcome call: nil once there is
// nothing more to tell it.
func (s *Service) told(c outcomeCall, err error) error {
	id := c.key.id
	if c.commit {
		if djinn.KindOf(err) == djinn.UnknownTransaction {
			err = nil // it rolled forward already (TX.2.7)
		}
		return err
	}
	if djinn.KindOf(err) == djinn.CannotAbort {
		// The participant says it committed what the manager aborted: a
		// broken participant, and a mixed outcome an operator must see.
		s.MixedOutcomes.Add(1)
		s.cfg.Logger.Error("transaction: participant refused an abort as already committed: mixed outcome", "id", id, "participant", c.ref.GetEndpoint(), "err", err)
	}
	if err != nil && djinn.IsDefinite(err) {
		err = nil // nothing more to tell it
	}
	return err
}

// took notes a call's outcome: a participant told joins told; a failed
// one is tried again after a backoff, and reported once it has failed for
// longer than Abandon.
func (n *notifier) took(r notified) {
	n.inflight--
	s := n.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls[r.key]
	if c == nil {
		return
	}
	if r.err == nil {
		if c.unreachable {
			s.Unreachable.Add(-1)
		}
		n.told = append(n.told, &statepb.TxnParticipantRef{Id: r.key.id, Participant: uint32(r.key.part)})
		return
	}
	c.busy = false
	now := s.now()
	if c.since.IsZero() {
		c.since = now
	}
	c.attempts++
	c.lastErr = r.err
	c.next = now.Add(s.backoff(c.attempts))
	if !c.unreachable && now.Sub(c.since) > s.cfg.Abandon {
		c.unreachable = true
		s.Unreachable.Add(1)
		s.cfg.Logger.Warn("transaction: participant unreachable past the abandon time; still trying", "id", r.key.id, "participant", r.key.part, "since", c.since, "err", r.err)
	}
}
