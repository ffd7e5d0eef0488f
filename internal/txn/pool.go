package txn

import "sync"

// workers run the leader's tasks — the steps of votes, calls to
// participants, the records of outcomes told — on at most max goroutines,
// started as the work needs them and kept until the term ends, so that a
// goroutine, and the stack it grew, serves task after task. A task that
// finds every worker busy waits in the queue, never in a goroutine of its
// own. Run owns the workers: close waits for them.
type workers struct {
	max int

	mu   sync.Mutex
	cond *sync.Cond // signalled when a task is queued or the workers close
	// Guarded by mu.
	queue   []func()
	idle    int // workers waiting for a task
	started int // workers running
	closed  bool
	wg      sync.WaitGroup
}

func newWorkers(max int) *workers {
	w := &workers{max: max}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// Go runs task on a worker. Once the workers are closed it runs task
// itself: tasks then only wind down what the term left.
func (w *workers) Go(task func()) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		task()
		return
	}
	w.queue = append(w.queue, task)
	switch {
	case w.idle > 0:
		w.cond.Signal()
	case w.started < w.max:
		w.started++
		w.wg.Add(1)
		go w.work()
	}
	w.mu.Unlock()
}

func (w *workers) work() {
	defer w.wg.Done()
	w.mu.Lock()
	for {
		for len(w.queue) == 0 && !w.closed {
			w.idle++
			w.cond.Wait()
			w.idle--
		}
		if len(w.queue) == 0 {
			w.started--
			w.mu.Unlock()
			return
		}
		task := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		if len(w.queue) == 0 {
			w.queue = nil // let the drained array go
		}
		w.mu.Unlock()
		task()
		w.mu.Lock()
	}
}

// close lets the workers finish the tasks queued, and waits for them.
func (w *workers) close() {
	w.mu.Lock()
	w.closed = true
	w.cond.Broadcast()
	w.mu.Unlock()
	w.wg.Wait()
}
