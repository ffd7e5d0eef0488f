package participant

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// recoverLoop makes the roll decision for a transaction restored from its
// prepared record (TX.2.8.1): it asks the manager, and after a pause asks
// again, until the transaction is rolled forward or back — by this loop or
// by the manager's own commit or abort — or ctx ends.
func (p *Participant) recoverLoop(ctx context.Context, e *entry) {
	defer func() {
		p.mu.Lock()
		e.checking = false
		p.mu.Unlock()
	}()
	for attempt := 0; ; attempt++ {
		select {
		case p.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		done := p.roll(ctx, e)
		<-p.sem
		if done {
			return
		}
		t := time.NewTimer(p.backoff(attempt))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// roll asks e's manager for the state of e's transaction and acts on the
// answer. A PREPARED transaction rolls forward when the manager says
// COMMITTED and back when it says ABORTED or does not know it
// (UnknownTransaction, NoSuchObject); an ACTIVE or VOTING one rolls back in
// the latter cases (TX.2.6). Any other answer, or a failed call, changes
// nothing. roll reports whether the transaction is settled here.
func (p *Participant) roll(ctx context.Context, e *entry) bool {
	st, tx := p.look(e)
	if st.final() {
		return true
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	ms, err := p.cfg.Managers.GetState(cctx, tx)
	cancel()
	switch {
	case err == nil && ms == Committed && st == Prepared:
		err = p.commitEntry(ctx, e)
	case isGone(err) || (err == nil && ms == Aborted):
		err = p.abortEntry(ctx, e)
	default:
		if err != nil {
			p.cfg.Logger.Debug("participant: asking the manager failed; will ask again", "tx", tx, "state", st, "err", err)
		}
		return false
	}
	if err != nil {
		p.cfg.Logger.Warn("participant: rolling the transaction as its manager decided failed; will try again", "tx", tx, "err", err)
		return false
	}
	st, _ = p.look(e)
	return st.final()
}

func (p *Participant) backoff(attempt int) time.Duration {
	d := p.cfg.MinRetry << min(attempt, 20)
	if d <= 0 || d > p.cfg.MaxRetry {
		d = p.cfg.MaxRetry
	}
	return d/2 + rand.N(d/2+1)
}

// sweepLoop sweeps every quarter of the shorter of Remember and Idle.
func (p *Participant) sweepLoop(ctx context.Context) {
	every := max(min(p.cfg.Remember, p.cfg.Idle)/4, time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.sweep(ctx)
		t.Reset(every)
	}
}

// sweepWorkers bounds the background calls of one sweep.
const sweepWorkers = 16

// sweep forgets transactions settled longer ago than Remember (those
// committed by prepareAndCommit once their manager confirms it decided),
// finishes roll backs an abort left undone, and asks managers about
// transactions idle for longer than Idle. It returns when that work is
// done.
func (p *Participant) sweep(ctx context.Context) {
	now := p.cfg.Now()
	var work, marked []*entry
	p.mu.Lock()
	for k, e := range p.txs {
		if e.ops > 0 || e.checking {
			continue
		}
		switch {
		case e.state == Aborted && !e.undone:
			e.checking = true
			work = append(work, e)
		case e.state.final() && e.marked:
			if now.Sub(e.ended) >= p.cfg.Remember {
				e.checking = true
				marked = append(marked, e)
			}
		case e.state.final():
			if now.Sub(e.ended) >= p.cfg.Remember {
				p.forgetLocked(k, e)
			}
		case now.Sub(e.last) >= p.cfg.Idle:
			e.checking = true
			work = append(work, e)
		}
	}
	p.mu.Unlock()
	if len(marked) > 0 {
		p.unmark(ctx, marked)
	}
	if len(work) == 0 {
		return
	}
	ch := make(chan *entry)
	var wg sync.WaitGroup
	for range min(len(work), sweepWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range ch {
				p.sweepOne(ctx, e)
			}
		}()
	}
	for _, e := range work {
		ch <- e
	}
	close(ch)
	wg.Wait()
}

func (p *Participant) sweepOne(ctx context.Context, e *entry) {
	defer func() {
		p.mu.Lock()
		e.checking = false
		e.last = p.cfg.Now() // ask again only after another Idle
		p.mu.Unlock()
	}()
	if st, _ := p.look(e); st == Aborted {
		if err := p.abortEntry(ctx, e); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn("participant: finishing a roll back failed", "err", err)
		}
		return
	}
	p.roll(ctx, e)
}

// unmark asks the managers of transactions committed by prepareAndCommit
// whether they decided; the markers of those that did (COMMITTED, or
// forgotten after their outcome) are deleted in one write and the
// transactions forgotten. The others are asked again at the next sweep.
func (p *Participant) unmark(ctx context.Context, es []*entry) {
	var (
		mu   sync.Mutex
		done []*entry
		wg   sync.WaitGroup
	)
	ch := make(chan *entry)
	for range min(len(es), sweepWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range ch {
				_, tx := p.look(e)
				cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
				ms, err := p.cfg.Managers.GetState(cctx, tx)
				cancel()
				switch {
				case err == nil && ms == Aborted:
					p.cfg.Logger.Error("participant: committed by prepareAndCommit, but the manager says ABORTED", "tx", tx)
				case err == nil && ms != Committed, err != nil && !isGone(err):
					continue // undecided, or not answering: ask again later
				}
				mu.Lock()
				done = append(done, e)
				mu.Unlock()
			}
		}()
	}
	for _, e := range es {
		ch <- e
	}
	close(ch)
	wg.Wait()
	var b Batch
	for _, e := range done {
		_, tx := p.look(e)
		b.Delete(committedKey(tx))
	}
	err := error(nil)
	if b.Len() > 0 {
		err = p.cfg.Store.Apply(ctx, &b)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range es {
		e.checking = false
	}
	if err != nil {
		p.cfg.Logger.Warn("participant: deleting committed markers failed; will try again", "err", err)
		return
	}
	for _, e := range done {
		e.marked = false
		if p.txs[e.tx.Key()] == e {
			p.forgetLocked(e.tx.Key(), e)
		}
	}
}
