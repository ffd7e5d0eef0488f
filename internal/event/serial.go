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
// Like the Engine, a key costs a goroutine only while it has work. The
// zero Serial is ready to use.
type Serial struct {
	mu sync.Mutex
	// pending holds each busy key's functions not yet started; a key is
	// in it exactly while its goroutine runs. Guarded by mu.
	pending map[djinn.ID][]func()
	wg      sync.WaitGroup
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
		s.wg.Add(1)
		go s.run(key)
	}
}

func (s *Serial) run(key djinn.ID) {
	defer s.wg.Done()
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

// Wait waits until every function added has returned. Call it once
// nothing more is added.
func (s *Serial) Wait() { s.wg.Wait() }
