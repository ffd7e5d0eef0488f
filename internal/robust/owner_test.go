package robust

import (
	"net"
	"os"
	"testing"
)

// TestSocketOwner: the process holding a connection's dialling socket is
// found from the accepting end, and a process that holds none is not.
func TestSocketOwner(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	out, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	in, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if got := socketOwner(in.RemoteAddr(), in.LocalAddr(), map[int]string{os.Getpid(): "me"}); got != "me" {
		t.Errorf("the dialling process: got %q, want me", got)
	}
	if got := socketOwner(in.RemoteAddr(), in.LocalAddr(), map[int]string{os.Getppid(): "parent"}); got != "" {
		t.Errorf("a process holding no end: got %q, want none", got)
	}
}
