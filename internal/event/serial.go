package event

import (
	"sync"

	"github.com/djinn-go/djinn"
)

// Serial runs functions in the order they are added for each key, and the
// functions of different keys concurrently: what a service's deliverer
// needs to apply its state machine's changes to an Engine in log order per
// registration, without one registration's slow Drop (which waits for its
// listener to confirm it stopped) holding up the others.
//
// Like the Engine, a key holds a goroutine only while it has work, taken
// from the idle workers kept for the next key. The zero Serial is ready
// to use.
type Serial struct {
	mu sync.Mutex
	// pending holds each busy key's functions not yet started; a key is
	// in it exactly while a worker runs it. Guarded by mu, as is workers,
	// made by the first Add after New or Wait.
	pending map[djinn.ID][]func()
	workers *pool[djinn.ID]
}

// Add queues fn to run after the functions added before it for key.
func (s *Serial) Add(key djinn.ID, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[djinn.ID][]func(){}
	}
	fns, busy := s.pending[key]
	s.pending[key] = append(fns, fn)
	if !busy {
		if s.workers == nil {
			s.workers = newPool(s.run)
		}
		s.workers.start(key)
	}
}

// Do runs fn at once, on the caller's goroutine, when key has no function
// queued or running; otherwise it queues fn as Add does. Functions added
// for key while fn runs run after it. It is for short functions that do
// not block: the common case then costs no hand-off to a worker.
func (s *Serial) Do(key djinn.ID, fn func()) {
	s.mu.Lock()
	if s.pending == nil {
		s.pending = map[djinn.ID][]func(){}
	}
	if _, busy := s.pending[key]; busy {
		s.pending[key] = append(s.pending[key], fn)
		s.mu.Unlock()
		return
	}
	s.pending[key] = nil // busy: later functions queue behind fn
	s.mu.Unlock()
	fn()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending[key]) == 0 {
		delete(s.pending, key)
		return
	}
	if s.workers == nil {
		s.workers = newPool(s.run)
	}
	s.workers.start(key)
}

func (s *Serial) run(key djinn.ID) {
	for {
		s.mu.Lock()
		fns := s.pending[key]
		if len(fns) == 0 {
			delete(s.pending, key)
			s.mu.Unlock()
			return
		}
		s.pending[key] = fns[:0:0] // still busy, nothing pending
		s.mu.Unlock()
		for i, fn := range fns {
			fns[i] = nil
			fn()
		}
	}
}

// Wait waits until every function added has returned and ends the idle
// workers. Call it once nothing more is added.
func (s *Serial) Wait() {
	s.mu.Lock()
	p := s.workers
	s.workers = nil
	s.mu.Unlock()
	if p != nil {
		p.stop()
	}
}
