package client

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/djinn-go/djinn/internal/testpki"
)

// Under a network fault a member's connection to a peer (the pool's
// per-endpoint connection that delivers events and renews leases) may
// fail its TLS handshake: the peer's side of the network swallows the
// ClientHello (a one-way cut), or closes the connection at once (the
// peer down). Once the network heals, the connection must come back by
// itself within gRPC's connect timeout and backoff: no failed handshake
// is kept, and no dial waits for ever on a ClientHello that never
// arrived. Both kinds of connection are shown: the per-endpoint one and a
// cluster's (leader-first balancing, keepalive). Each case asserts
// recovery (the connection up again, its mutual TLS handshake done, and
// an event delivered after the heal), not how long it took.
func TestConnRecoversAfterHandshakeFault(t *testing.T) {
	faults := []struct {
		name  string
		fault proxyMode
		// faulted: the proxy's signal that the fault has hit a handshake.
		faulted func(p *faultProxy) <-chan struct{}
	}{
		{"a cut swallows the ClientHello", swallow, func(p *faultProxy) <-chan struct{} { return p.swallowed }},
		{"the peer closes during the handshake (EOF) three times", refuse, func(p *faultProxy) <-chan struct{} { return p.refusedN(3) }},
	}
	conns := []struct {
		name string
		conn func(p *Pool, endpoint string) (*grpc.ClientConn, error)
	}{
		{"endpoint connection", (*Pool).Conn},
		{"cluster connection", func(p *Pool, endpoint string) (*grpc.ClientConn, error) {
			cl, err := p.follow([]string{endpoint})
			if err != nil {
				return nil, err
			}
			return cl.cc, nil
		}},
	}
	for _, f := range faults {
		for _, c := range conns {
			t.Run(c.name+": "+f.name, func(t *testing.T) {
				t.Parallel()
				serverTLS, clientTLS := mutualTLS(t)
				var rec recorder
				l := startListener(t, rec.notify, WithServerTLS(serverTLS))
				p := newFaultProxy(t, l.Addr())
				ref := l.Ref()
				ref.Endpoint = p.addr()

				pool := NewPool(WithTLS(clientTLS))
				defer pool.Close()
				p.set(f.fault)
				cc, err := c.conn(pool, ref.Endpoint)
				if err != nil {
					t.Fatal(err)
				}
				cc.Connect()
				<-f.faulted(p)
				p.set(pass) // the network heals

				awaitReady(t, cc)
				if err := Notify(t.Context(), pool, ref, testEvent(1, "after heal")); err != nil {
					t.Fatalf("notify after the heal: %v", err)
				}
				if got := len(rec.events()); got != 1 {
					t.Errorf("listener got %d events after the heal, want 1", got)
				}
			})
		}
	}
}

// awaitReady waits until cc is connected, asking an idle connection to
// connect; only the test's own deadline bounds it.
func awaitReady(t *testing.T, cc *grpc.ClientConn) {
	t.Helper()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if s == connectivity.Idle {
			cc.Connect()
		}
		if !cc.WaitForStateChange(t.Context(), s) {
			t.Fatalf("connection never recovered: still %v", s)
		}
	}
}

// mutualTLS returns a server and a client configuration for mutual TLS
// on 127.0.0.1, both signed by a CA made for the test.
func mutualTLS(t *testing.T) (server, client *tls.Config) {
	p := testpki.NewPKI(t)
	server = &tls.Config{
		Certificates: []tls.Certificate{p.Server},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: p.Roots,
	}
	return server, p.ClientTLS()
}

type proxyMode int

const (
	pass    proxyMode = iota
	swallow           // bytes from the dialler never arrive; the connection stays open
	refuse            // connections are closed as soon as accepted
)

// faultProxy is a TCP proxy in front of one server whose dialler-to-server
// direction can be cut.
type faultProxy struct {
	ln     net.Listener
	target string

	mu        sync.Mutex
	mode      proxyMode     // guarded by mu
	refused   int           // guarded by mu
	waitN     int           // guarded by mu: signal refusedC at this count
	refusedC  chan struct{} // guarded by mu
	swallowed chan struct{} // closed when the first bytes are swallowed
	once      sync.Once
	conns     []net.Conn // guarded by mu
	closed    bool       // guarded by mu
	wg        sync.WaitGroup
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: target, swallowed: make(chan struct{})}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) set(m proxyMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = m
}

func (p *faultProxy) current() proxyMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode
}

// refusedN returns a channel closed once n connections were refused.
func (p *faultProxy) refusedN(n int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitN, p.refusedC = n, make(chan struct{})
	if p.refused >= n {
		close(p.refusedC)
	}
	return p.refusedC
}

func (p *faultProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.handle(in) })
	}
}

func (p *faultProxy) handle(in net.Conn) {
	p.mu.Lock()
	if p.mode == refuse {
		p.refused++
		if p.refused == p.waitN && p.refusedC != nil {
			close(p.refusedC)
		}
		p.mu.Unlock()
		in.Close()
		return
	}
	p.mu.Unlock()
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
	wg.Go(func() { io.Copy(in, out); in.Close() })
	wg.Wait()
}

// track keeps the connection's two sides to close them at the end; false
// (both closed) when the proxy is closed.
func (p *faultProxy) track(in, out net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		in.Close()
		out.Close()
		return false
	}
	p.conns = append(p.conns, in, out)
	return true
}

// forward copies the dialler's bytes to the server, swallowing those read
// while the mode is swallow.
func (p *faultProxy) forward(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.current() == swallow {
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

func (p *faultProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns, p.closed = nil, true
	p.mu.Unlock()
	p.wg.Wait()
}
