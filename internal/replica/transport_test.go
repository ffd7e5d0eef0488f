package replica

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/djinn-go/djinn/internal/testpki"
)

// A one-way cut that swallows a Raft connection's ClientHello must not
// hold the dial: the dial's timeout bounds the TLS handshake as well as
// the TCP connect, so the dial fails, and the next one after the heal
// connects (Raft dials afresh for every failed connection).
func TestRaftDialRecoversAfterSwallowedHandshake(t *testing.T) {
	cfg := peerTLS(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stream := &tlsStream{Listener: tls.NewListener(ln, cfg), config: cfg, handshake: 10 * time.Second}
	defer stream.Close()
	go echo(stream)

	var swallowing atomic.Bool
	swallowing.Store(true)
	proxy := startCutProxy(t, ln.Addr().String(), &swallowing)

	if c, err := stream.Dial(raft.ServerAddress(proxy), 300*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("dial through a cut that swallows the ClientHello succeeded")
	}
	swallowing.Store(false) // the network heals
	c, err := stream.Dial(raft.ServerAddress(proxy), 10*time.Second)
	if err != nil {
		t.Fatalf("dial after the heal: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil || b[0] != 'x' {
		t.Fatalf("echo after the heal: %q, %v", b[:], err)
	}
}

// echo serves each accepted connection by sending back what it reads.
func echo(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// startCutProxy forwards connections to target; while swallowing, the
// dialler's bytes are read and dropped, the connection left open.
func startCutProxy(t *testing.T, target string, swallowing *atomic.Bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Go(func() { cutCopy(out, in, swallowing) })
			wg.Go(func() { _, _ = io.Copy(in, out); in.Close() })
		}
	})
	return ln.Addr().String()
}

func cutCopy(dst, src net.Conn, swallowing *atomic.Bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !swallowing.Load() {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// peerTLS returns a member's mutual TLS configuration on 127.0.0.1: a
// certificate for both ends signed by a CA made for the test, which it
// trusts.
func peerTLS(t *testing.T) *tls.Config {
	t.Helper()
	p := testpki.NewPKI(t)
	return &tls.Config{
		Certificates: []tls.Certificate{p.Server},
		RootCAs:      p.Roots, ClientCAs: p.Roots, ClientAuth: tls.RequireAndVerifyClientCert,
	}
}
