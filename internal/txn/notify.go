package txn

import (
	"context"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
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
func (s *Service) Run(ctx context.Context) {
	s.mu.Lock()
	term := s.term
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.term = make(chan struct{})
		s.mu.Unlock()
		close(term)
	}()
	for _, id := range s.state.Voting() {
		s.startVote(id, true)
	}
	n := &notifier{s: s, sem: make(chan struct{}, maxCalls), done: make(chan notified, maxCalls)}
	n.run(ctx)
}

type notified struct {
	key callKey
	err error
}

type notifier struct {
	s    *Service
	sem  chan struct{}
	done chan notified
	wg   sync.WaitGroup
}

func (n *notifier) run(ctx context.Context) {
	defer n.wg.Wait()
	s := n.s
	tick := time.NewTicker(s.cfg.MinRetry)
	defer tick.Stop()
	forget := time.NewTicker(max(s.cfg.Retention/10, time.Second))
	defer forget.Stop()
	var told []*statepb.TxnParticipantRef
	for {
		if len(told) > 0 {
			// Until recorded, a participant told stays busy so that it is
			// not told again; if the record fails, it is told again.
			_, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_TxnNotified{TxnNotified: &statepb.TxnNotified{Entries: told}}})
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.cfg.Logger.Warn("transaction: recording outcomes delivered failed; will tell again", "err", err)
			}
			s.mu.Lock()
			for _, e := range told {
				delete(s.calls, callKey{e.GetId(), int(e.GetParticipant())})
			}
			s.mu.Unlock()
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

// dispatch starts a call to each participant that is due to be told.
func (n *notifier) dispatch(ctx context.Context) {
	s := n.s
	now := s.now()
	mgr := s.self()
	for _, in := range s.state.Unsettled() {
		for i, p := range in.Parts {
			if p.Notified {
				continue
			}
			k := callKey{in.ID, i}
			s.mu.Lock()
			c, ok := s.calls[k]
			if !ok {
				c = &callState{}
				s.calls[k] = c
			}
			if c.busy || now.Before(c.next) {
				s.mu.Unlock()
				continue
			}
			c.busy = true
			s.mu.Unlock()
			select {
			case n.sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			commit, ref, id := in.State == Committed, p.Ref, in.ID
			n.wg.Add(1)
			go func() {
				defer func() {
					<-n.sem
					n.wg.Done()
				}()
				cctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
				var err error
				if commit {
					err = s.cfg.Participants.Commit(cctx, ref, mgr, id)
					if djinn.KindOf(err) == djinn.UnknownTransaction {
						err = nil // it rolled forward already (TX.2.7)
					}
				} else {
					err = s.cfg.Participants.Abort(cctx, ref, mgr, id)
					if djinn.KindOf(err) == djinn.CannotAbort {
						// The participant says it committed what the
						// manager aborted: a broken participant, and a
						// mixed outcome an operator must see.
						s.MixedOutcomes.Add(1)
						s.cfg.Logger.Error("transaction: participant refused an abort as already committed: mixed outcome", "id", id, "participant", ref.GetEndpoint(), "err", err)
					}
					if err != nil && djinn.IsDefinite(err) {
						err = nil // nothing more to tell it
					}
				}
				cancel()
				select {
				case n.done <- notified{k, err}:
				case <-ctx.Done():
				}
			}()
		}
	}
}

// record notes a call's outcome: a participant told joins told; a failed
// one is tried again after a backoff, and reported once it has failed for
// longer than Abandon.
func (n *notifier) record(r notified, told []*statepb.TxnParticipantRef) []*statepb.TxnParticipantRef {
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
