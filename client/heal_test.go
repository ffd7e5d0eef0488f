package client

import (
	"crypto/tls"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/djinn-go/djinn/internal/testpki"
	"github.com/djinn-go/djinn/internal/testproxy"
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
		fault testproxy.Mode
		// faulted: the proxy's signal that the fault has hit a handshake.
		faulted func(p *testproxy.Proxy) <-chan struct{}
	}{
		{"a cut swallows the ClientHello", testproxy.Swallow, (*testproxy.Proxy).Swallowed},
		{"the peer closes during the handshake (EOF) three times", testproxy.CloseAtAccept, func(p *testproxy.Proxy) <-chan struct{} { return p.ClosedAtAccept(3) }},
	}
	conns := []struct {
		name string
		conn func(p *Pool, endpoint string) (*grpc.ClientConn, error)
	}{
		{"endpoint connection", (*Pool).Conn},
		{"cluster connection", func(p *Pool, endpoint string) (*grpc.ClientConn, error) {
			cl, err := p.follow([]string{endpoint}, true)
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
				p := testproxy.New(t, l.Addr())
				ref := l.Ref()
				ref.Endpoint = p.Addr()

				pool := NewPool(WithTLS(clientTLS))
				defer pool.Close()
				p.Set(f.fault)
				cc, err := c.conn(pool, ref.Endpoint)
				if err != nil {
					t.Fatal(err)
				}
				cc.Connect()
				<-f.faulted(p)
				p.Heal()

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
