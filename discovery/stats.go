package discovery

import "sync"

// counters holds a struct of counters that can be read whole and waited on:
// every change closes the channel that watch handed out. Discovery traffic
// is a few packets a second, so a mutex and a channel per change cost
// nothing that matters.
type counters[T any] struct {
	mu      sync.Mutex
	v       T             // guarded by mu
	changed chan struct{} // guarded by mu; closed and replaced on each change
}

// add applies f to the counters.
func (c *counters[T]) add(f func(*T)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.v)
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// get returns a copy of the counters.
func (c *counters[T]) get() T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.v
}

// watch returns a copy of the counters and a channel closed at the next
// change.
func (c *counters[T]) watch() (T, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.v, c.changed
}
