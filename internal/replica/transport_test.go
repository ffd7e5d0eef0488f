package replica

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/djinn-go/djinn/internal/testpki"
	"github.com/djinn-go/djinn/internal/testproxy"
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
	stream := &tlsStream{Listener: tls.NewListener(ln, cfg), config: func() *tls.Config { return cfg }, handshake: 10 * time.Second}
	defer stream.Close()
	go echo(stream)

	proxy := testproxy.New(t, ln.Addr().String())
	proxy.Set(testproxy.Swallow)

	if c, err := stream.Dial(raft.ServerAddress(proxy.Addr()), 300*time.Millisecond); err == nil {
		c.Close()
		t.Fatal("dial through a cut that swallows the ClientHello succeeded")
	}
	proxy.Heal()
	c, err := stream.Dial(raft.ServerAddress(proxy.Addr()), 10*time.Second)
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
