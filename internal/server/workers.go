package server

import (
	"sync"
	"sync/atomic"
)

// How many goroutines the server keeps for calls: gRPC's stream workers,
// which serve unary calls and open streams, and the idle workers kept for
// sessions' calls. A call that finds none pays for a new goroutine and its
// stack's growth; idle ones cost a parked goroutine each.
const (
	streamWorkers  = 256
	maxIdleWorkers = 512
)

// workers runs tasks on goroutines it keeps for the next task, so that a
// task does not pay for a new goroutine and for growing its stack again:
// a task finds an idle worker, or a new one starts. Workers beyond
// maxIdle idle ones end when their task does, so a burst leaves no more
// than maxIdle behind. No task waits for another: a task that blocks (a
// call waiting for a lock) holds its worker only.
type workers struct {
	work    chan func() // unbuffered: a send succeeds only to an idle worker
	quit    chan struct{}
	idle    atomic.Int32
	maxIdle int32
	wg      sync.WaitGroup

	mu      sync.Mutex
	stopped bool // guarded by mu: run starts no worker
}

func newWorkers(maxIdle int) *workers {
	return &workers{work: make(chan func()), quit: make(chan struct{}), maxIdle: int32(maxIdle)}
}

// run runs task on a worker. After stop it runs task itself: only a
// server shutting down gets there, whose tasks end at once.
func (w *workers) run(task func()) {
	select {
	case w.work <- task:
		return
	default:
	}
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		task()
		return
	}
	w.wg.Add(1)
	w.mu.Unlock()
	go w.loop(task)
}

// loop runs task, then the tasks handed to it while it is idle.
func (w *workers) loop(task func()) {
	defer w.wg.Done()
	for {
		task()
		if w.idle.Add(1) > w.maxIdle {
			w.idle.Add(-1)
			return
		}
		select {
		case task = <-w.work:
			w.idle.Add(-1)
		case <-w.quit:
			w.idle.Add(-1)
			return
		}
	}
}

// stop ends the idle workers and waits for every task under way.
func (w *workers) stop() {
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		close(w.quit)
	}
	w.mu.Unlock()
	w.wg.Wait()
}

// HTTP/2 flow control windows of the server's connections: set, not
// estimated. gRPC's estimation answers data with a window update and a
// ping whenever no ping is out, and the client acknowledges each: on a
// connection of small calls, about three control frames per message each
// way. A stream may have streamWindow bytes unread (a session the server
// stopped reading, at maxSessionCalls, holds at most that), a connection
// connWindow.
const (
	streamWindow = 1 << 20
	connWindow   = 4 << 20
)
