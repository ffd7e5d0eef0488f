package testproxy

import (
	"io"
	"net"
	"testing"
)

// echoServer serves each connection by sending back what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
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
	}()
	return ln.Addr().String()
}

// echoes reports whether a byte sent on c comes back.
func echoes(t *testing.T, c net.Conn) bool {
	t.Helper()
	if _, err := c.Write([]byte("x")); err != nil {
		return false
	}
	var b [1]byte
	_, err := io.ReadFull(c, b[:])
	return err == nil && b[0] == 'x'
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestForwardSwallowHeal: a proxy forwards; swallowing, the dialler's
// bytes never arrive (the connection stays open, and Swallowed says the
// fault hit); healed, the same connection forwards again.
func TestForwardSwallowHeal(t *testing.T) {
	p := New(t, echoServer(t))
	c := dial(t, p.Addr())
	if !echoes(t, c) {
		t.Fatal("no echo through a forwarding proxy")
	}
	p.Set(Swallow)
	if _, err := c.Write([]byte("l")); err != nil { // one byte: swallowed whole
		t.Fatal(err)
	}
	<-p.Swallowed()
	p.Heal()
	if !echoes(t, c) {
		t.Fatal("no echo after the heal")
	}
}

// TestCloseAtAccept: new connections are closed at once, and counted;
// healed, a new connection forwards.
func TestCloseAtAccept(t *testing.T) {
	p := New(t, echoServer(t))
	p.Set(CloseAtAccept)
	closed := p.ClosedAtAccept(2)
	for range 2 {
		c := dial(t, p.Addr())
		var b [1]byte
		if _, err := c.Read(b[:]); err == nil {
			t.Fatal("a connection closed at accept read a byte")
		}
	}
	<-closed
	p.Heal()
	if !echoes(t, dial(t, p.Addr())) {
		t.Fatal("no echo after the heal")
	}
}
