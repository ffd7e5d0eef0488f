package replica

import (
	"net"
	"sync"

	"github.com/hashicorp/raft"
)

// Raft's network transport runs each accepted connection's handler in a
// goroutine of its own that outlives Raft's shutdown, and a heartbeat's
// handler calls into Raft there: a heartbeat from a newer term writes the
// term to the stable store. A heartbeat accepted just before shutdown, past
// Raft's own check, can therefore write after the stores are closed, and
// Raft panics on a failed term write. trackedStream keeps count of the
// connections it accepted; closing it closes them too, and drained tells
// when every handler has let go of its connection — after which no handler
// can touch the stores.

// trackedStream is a raft.StreamLayer that tracks its accepted connections.
type trackedStream struct {
	raft.StreamLayer

	mu     sync.Mutex
	conns  map[*handlerConn]struct{} // accepted, not yet closed by their handler
	closed bool                      // set by Close: accepted conns are closed at once
	// empty is closed once closed is set and conns is empty.
	empty chan struct{}
	// onDrain, in tests, runs when drained begins to wait.
	onDrain func()
	// strangers, when set, checks what accepted connections send first
	// (memberConn).
	strangers *strangers
}

func newTrackedStream(s raft.StreamLayer) *trackedStream {
	return &trackedStream{StreamLayer: s, conns: make(map[*handlerConn]struct{}), empty: make(chan struct{})}
}

// Accept implements net.Listener: the connection is tracked until its
// handler closes it.
func (t *trackedStream) Accept() (net.Conn, error) {
	c, err := t.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	if t.strangers != nil {
		c = &memberConn{Conn: c, strangers: t.strangers}
	}
	hc := &handlerConn{Conn: c, stream: t}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.conns[hc] = struct{}{}
	if t.closed { // accepted as the stream closed: its handler will find it closed
		c.Close()
	}
	return hc, nil
}

// Close implements net.Listener: it stops accepting and closes every
// accepted connection, so that their handlers end at their next read or
// write.
func (t *trackedStream) Close() error {
	err := t.StreamLayer.Close()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return err
	}
	t.closed = true
	for c := range t.conns {
		c.Conn.Close()
	}
	t.emptyLocked()
	return err
}

// drained waits until the stream is closed and every handler has returned
// from its connection.
func (t *trackedStream) drained() {
	if t.onDrain != nil {
		t.onDrain()
	}
	<-t.empty
}

func (t *trackedStream) release(c *handlerConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, c)
	t.emptyLocked()
}

func (t *trackedStream) emptyLocked() {
	if t.closed && len(t.conns) == 0 {
		select {
		case <-t.empty:
		default:
			close(t.empty)
		}
	}
}

// handlerConn is an accepted connection; its handler closes it when it
// returns.
type handlerConn struct {
	net.Conn
	stream *trackedStream
	once   sync.Once
}

func (c *handlerConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.stream.release(c) })
	return err
}
