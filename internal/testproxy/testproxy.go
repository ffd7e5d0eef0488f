// Package testproxy is a TCP proxy for tests that puts a network fault
// between a dialler and one server on loopback: it forwards, swallows
// what the dialler sends (a one-way cut: a TLS ClientHello never arrives,
// the connection stays open), or closes each connection as soon as it is
// accepted (the peer down); setting it back to Forward heals it. It
// imports nothing of djinn, so any package's tests may use it.
package testproxy

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Mode is what the proxy does to the connections it carries.
type Mode int

const (
	// Forward carries bytes both ways: the network is healthy.
	Forward Mode = iota
	// Swallow reads and drops the dialler's bytes, the connection left
	// open; the server's bytes still arrive.
	Swallow
	// CloseAtAccept closes each new connection as soon as it is accepted;
	// open connections are left alone.
	CloseAtAccept
)

// Proxy is a TCP proxy on 127.0.0.1 in front of one server.
type Proxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	mode      Mode          // guarded by mu
	closedN   int           // connections closed at accept, guarded by mu
	waitN     int           // guarded by mu: close closedC at this count
	closedC   chan struct{} // guarded by mu
	conns     []net.Conn    // guarded by mu
	stopped   bool          // guarded by mu
	swallowed chan struct{} // closed when the first bytes are swallowed
	once      sync.Once
	wg        sync.WaitGroup
}

// New starts a proxy to target, forwarding; the test's cleanup stops it
// and closes every connection it carries.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, swallowed: make(chan struct{})}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

// Addr is the address to dial instead of the server's.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set sets what the proxy does from now on: to the bytes of the
// connections it carries, and to new ones.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
}

// Heal is Set(Forward): the network heals.
func (p *Proxy) Heal() { p.Set(Forward) }

func (p *Proxy) current() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// Swallowed is closed once the proxy has swallowed a dialler's first
// bytes: the fault has hit.
func (p *Proxy) Swallowed() <-chan struct{} { return p.swallowed }

// ClosedAtAccept returns a channel closed once n connections in all were
// closed at accept.
func (p *Proxy) ClosedAtAccept(n int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitN, p.closedC = n, make(chan struct{})
	if p.closedN >= n {
		close(p.closedC)
	}
	return p.closedC
}

func (p *Proxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.handle(in) })
	}
}

func (p *Proxy) handle(in net.Conn) {
	if p.closeAtAccept() {
		in.Close()
		return
	}
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		in.Close()
		return
	}
	if !p.track(in, out) {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { p.forward(out, in) })
	wg.Go(func() { _, _ = io.Copy(in, out); in.Close() })
	wg.Wait()
}

// closeAtAccept reports whether a connection just accepted is to be
// closed, counting it.
func (p *Proxy) closeAtAccept() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode != CloseAtAccept {
		return false
	}
	p.closedN++
	if p.closedN == p.waitN && p.closedC != nil {
		close(p.closedC)
	}
	return true
}

// track keeps a connection's two sides to close them when the proxy
// stops; false (both closed) when it has stopped.
func (p *Proxy) track(in, out net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		in.Close()
		out.Close()
		return false
	}
	p.conns = append(p.conns, in, out)
	return true
}

// forward copies the dialler's bytes to the server, swallowing those read
// while the mode is Swallow.
func (p *Proxy) forward(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.current() == Swallow {
				p.once.Do(func() { close(p.swallowed) })
			} else if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns, p.stopped = nil, true
	p.mu.Unlock()
	p.wg.Wait()
}
