package server_test

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/pingtest"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/internal/testproxy"
)

// TestSilentConnectionsAreClosed: a connection to the client port or the
// Raft port that never starts its TLS handshake is closed once the
// handshake timeout has passed, instead of being held open; clients that
// do handshake are served.
func TestSilentConnectionsAreClosed(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA}
	cfg.HandshakeTimeout = server.Duration(200 * time.Millisecond)
	srv := servertest.Start(t, cfg)

	for _, port := range []struct{ name, addr string }{{"client port", srv.Addr()}, {"raft port", srv.RaftAddr()}} {
		conn, err := net.Dial("tcp", port.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		// The deadline only stops the test from hanging if the server
		// never closes: the read returns when the server closes.
		if err := conn.SetReadDeadline(time.Now().Add(servertest.Timeout)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(make([]byte, 1))
		if errors.Is(err, os.ErrDeadlineExceeded) || err == nil {
			t.Errorf("%s: a connection that never handshakes is still open (read %d bytes, %v)", port.name, n, err)
		}
	}

	c := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.ClientTLS()))
	if _, err := c.Mailbox().Register(testContext(t), time.Minute); err != nil {
		t.Fatalf("a client that handshakes is not served: %v", err)
	}
}

// TestServerAcceptsKeepalivePings: the gRPC port accepts a client's
// keepalive pings, with no call in flight, at keepalive-min-time apart
// (the members' own keepalive-time is at least that), and sends GOAWAY
// ("too_many_pings") to a client pinging more often. The interval is
// short here, so that the test does not wait out the default.
func TestServerAcceptsKeepalivePings(t *testing.T) {
	t.Parallel()
	const minTime = 50 * time.Millisecond
	cfg := servertest.Config(t)
	cfg.KeepaliveMinTime = server.Duration(minTime)
	srv := servertest.Start(t, cfg)
	rows := []struct {
		name       string
		every      time.Duration
		wantGoAway string
	}{
		{"pings at keepalive-min-time, no call in flight", minTime, ""},
		{"pings back to back", 0, "too_many_pings"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			const n = 6 // a server strikes the third ping too many
			res, err := pingtest.Ping(srv.Addr(), nil, n, r.every, servertest.Timeout)
			if err != nil {
				t.Fatal(err)
			}
			if res.GoAway != r.wantGoAway || (r.wantGoAway == "" && res.Acked != n) {
				t.Errorf("GOAWAY %q after %d of %d pings acknowledged, want %q", res.GoAway, res.Acked, n, r.wantGoAway)
			}
		})
	}
}

// TestServerPingsSilentClients: a client connection that goes silent (its
// host died: the server's pings are never answered) is closed after
// keepalive-time and keepalive-timeout, so its streams are released; the
// client here does not ping itself.
func TestServerPingsSilentClients(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	cfg.KeepaliveTime = server.Duration(client.MinKeepaliveTime)
	cfg.KeepaliveTimeout = server.Duration(time.Second)
	srv := servertest.Start(t, cfg)
	proxy := testproxy.New(t, srv.Addr())
	cc, err := grpc.NewClient(proxy.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), servertest.Timeout+time.Duration(cfg.KeepaliveTime)+time.Duration(cfg.KeepaliveTimeout))
	defer cancel()
	cc.Connect()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("the client never connected: %v", s)
		}
	}
	proxy.Set(testproxy.Swallow) // the client's answers to the pings are lost
	if !cc.WaitForStateChange(ctx, connectivity.Ready) {
		t.Fatal("a client that answers no ping is still connected after keepalive-time and keepalive-timeout")
	}
}
