package event

import (
	"sync"
	"sync/atomic"
	"time"
)

// Idle workers: how many the Engine and a Serial keep each, and how long
// one waits for work before it ends.
const (
	maxIdleWorkers = 128
	idleTimeout    = 10 * time.Second
)

// pool runs do(v) for each v started, each on its own goroutine, and keeps
// up to maxIdle of those goroutines for the next start once do returns:
// the delivery of one event at a time then does not pay for a new
// goroutine and for growing its stack again through a listener call.
// A start finds an idle worker or starts a new one, so no start waits for
// another's work (a worker blocked in a Send or a backoff holds only its
// own key) and order within a key stays the caller's business, as before.
// An idle worker ends after idleTimeout, or at stop.
type pool[T any] struct {
	do      func(T)
	work    chan T // unbuffered: a send succeeds only to an idle worker
	quit    chan struct{}
	maxIdle int32
	idle    atomic.Int32
	wg      sync.WaitGroup // every worker, busy or idle
	once    sync.Once      // closes quit
}

func newPool[T any](do func(T)) *pool[T] {
	return &pool[T]{do: do, work: make(chan T), quit: make(chan struct{}), maxIdle: maxIdleWorkers}
}

// start runs do(v) on a worker. The caller must not call it once stop
// has been called.
func (p *pool[T]) start(v T) {
	select {
	case p.work <- v:
		return
	default:
	}
	p.wg.Add(1)
	go p.loop(v)
}

// loop runs do(v), then the values handed to it while it is idle.
func (p *pool[T]) loop(v T) {
	defer p.wg.Done()
	var timer *time.Timer
	for {
		p.do(v)
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		if timer == nil {
			timer = time.NewTimer(idleTimeout)
		} else {
			timer.Reset(idleTimeout)
		}
		select {
		case v = <-p.work:
			p.idle.Add(-1)
			timer.Stop()
		case <-timer.C:
			p.idle.Add(-1)
			return
		case <-p.quit:
			p.idle.Add(-1)
			timer.Stop()
			return
		}
	}
}

// stop ends the idle workers and waits until every worker has ended; busy
// ones end when their do returns. It may be called more than once.
func (p *pool[T]) stop() {
	p.once.Do(func() { close(p.quit) })
	p.wg.Wait()
}
