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
const maxCalls = 64

// Run drives transactions while this node leads, until ctx ends: it
// resumes the votes of VOTING transactions (a transaction that was voting
// when a leader failed is voted again: a participant answers a repeated
// prepare with its vote, TX.2.6), tells participants the outcome of
// decided transactions until each has been told (TX.2.7: at reasonable
// intervals, for as long as it takes), and forgets settled transactions
// after the retention time.
//
// Run returns once the votes it ran have stopped: a vote still waiting
// for participants when the term ends stops undecided, and the next leader
// votes again.
func (s *Service) Run(ctx context.Context) {
	s.mu.Lock()
	term := s.term
	s.running = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.term = make(chan struct{})
		s.mu.Unlock()
		close(term)
		s.voting.Wait()
	}()
	for _, id := range s.state.Voting() {
		s.startVote(id, true)
	}
	n := &notifier{s: s, done: make(chan notified, maxCalls)}
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
}

// notifier tells participants outcomes, at most maxCalls at a time. Its
// loop owns queue and inflight. It never blocks while calls are in flight
// except in its select, which reads done: a call's goroutine sends its
// outcome on done, whose capacity is maxCalls, so that send never blocks,
// and the calls due beyond maxCalls wait in queue, not in a goroutine. So
// no pass can stall however many calls are due.
type notifier struct {
	s *Service
	// queue holds the calls due and not yet started (marked busy, so no
	// scan adds them twice); inflight counts those started and not yet
	// received on done.
	queue    []outcomeCall
	inflight int
	done     chan notified
	wg       sync.WaitGroup
}

func (n *notifier) run(ctx context.Context) {
	defer n.stop()
	s := n.s
	tick := time.NewTicker(s.cfg.MinRetry)
	defer tick.Stop()
	forget := time.NewTicker(max(s.cfg.Retention/10, time.Second))
	defer forget.Stop()
	var told []*statepb.TxnParticipantRef
	for {
		if len(told) > 0 {
			if !n.recordTold(ctx, told) {
				return
			}
			told = nil
		}
		n.dispatch(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.state.wake:
		case <-tick.C:
		case r := <-n.done:
			told = n.record(r, told)
			for more := true; more; {
				select {
				case r := <-n.done:
					told = n.record(r, told)
				default:
					more = false
				}
			}
		case <-forget.C:
			if ids := s.state.Settled(s.now().Add(-s.cfg.Retention).UnixNano(), 4096); len(ids) > 0 {
				if _, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_TxnForget{TxnForget: &statepb.TxnForget{Ids: ids}}}); err != nil && ctx.Err() == nil {
					s.cfg.Logger.Warn("transaction: forgetting settled transactions failed", "err", err)
				}
			}
		}
	}
}

// recordTold records the participants told; false if ctx ended first.
// Until recorded, a participant told stays busy so that it is not told
// again; if the record fails, it is told again.
func (n *notifier) recordTold(ctx context.Context, told []*statepb.TxnParticipantRef) bool {
	s := n.s
	_, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_TxnNotified{TxnNotified: &statepb.TxnNotified{Entries: told}}})
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		s.cfg.Logger.Warn("transaction: recording outcomes delivered failed; will tell again", "err", err)
	}
	s.mu.Lock()
	for _, e := range told {
		delete(s.calls, callKey{e.GetId(), int(e.GetParticipant())})
	}
	s.mu.Unlock()
	return true
}

// stop waits for the calls in flight, then frees every call this run
// marked busy (queued, in flight, or told and not recorded), so that the
// next run as leader tells them again.
func (n *notifier) stop() {
	n.wg.Wait()
	s := n.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		c.busy = false
	}
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
	unsettled := s.state.Unsettled()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range unsettled {
		for i, p := range in.Parts {
			if p.Notified {
				continue
			}
			k := callKey{in.ID, i}
			c, ok := s.calls[k]
			if !ok {
				c = &callState{}
				s.calls[k] = c
			}
			if c.busy || now.Before(c.next) {
				continue
			}
			c.busy = true
			n.queue = append(n.queue, outcomeCall{key: k, commit: in.State == Committed, ref: p.Ref})
		}
	}
}

// start calls one participant in a goroutine that reports on done.
func (n *notifier) start(ctx context.Context, c outcomeCall) {
	s := n.s
	mgr := s.self()
	n.inflight++
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
		err := s.tell(cctx, c, mgr)
		cancel()
		n.done <- notified{c.key, err} // never blocks: see notifier
	}()
}

// tell tells one participant the outcome; nil once there is nothing more
// to tell it.
func (s *Service) tell(ctx context.Context, c outcomeCall, mgr djinn.Ref) error {
	id := c.key.id
	if c.commit {
		err := s.cfg.Participants.Commit(ctx, c.ref, mgr, id)
		if djinn.KindOf(err) == djinn.UnknownTransaction {
			err = nil // it rolled forward already (TX.2.7)
		}
		return err
	}
	err := s.cfg.Participants.Abort(ctx, c.ref, mgr, id)
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

// record notes a call's outcome: a participant told joins told; a failed
// one is tried again after a backoff, and reported once it has failed for
// longer than Abandon.
func (n *notifier) record(r notified, told []*statepb.TxnParticipantRef) []*statepb.TxnParticipantRef {
	n.inflight--
	s := n.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls[r.key]
	if c == nil {
		return told
	}
	if r.err == nil {
		if !c.since.IsZero() && s.now().Sub(c.since) > s.cfg.Abandon {
			s.Unreachable.Add(-1)
		}
		return append(told, &statepb.TxnParticipantRef{Id: r.key.id, Participant: uint32(r.key.part)})
	}
	c.busy = false
	now := s.now()
	if c.since.IsZero() {
		c.since = now
	}
	wasAbandoned := now.Sub(c.since) > s.cfg.Abandon && c.attempts > 0
	c.attempts++
	c.lastErr = r.err
	c.next = now.Add(s.backoff(c.attempts))
	if !wasAbandoned && now.Sub(c.since) > s.cfg.Abandon {
		s.Unreachable.Add(1)
		s.cfg.Logger.Warn("transaction: participant unreachable past the abandon time; still trying", "id", r.key.id, "participant", r.key.part, "since", c.since, "err", r.err)
	}
	return told
}
