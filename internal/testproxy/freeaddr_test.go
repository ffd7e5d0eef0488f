package testproxy

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddrs: the addresses are distinct, below the ephemeral range,
// and free: a server can listen on each.
func TestFreeAddrs(t *testing.T) {
	addrs, err := FreeAddrs(8)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := strconv.Atoi(port); p < 10000 || p >= ephemeralFrom || seen[a] {
			t.Fatalf("%s: want distinct ports in [10000, %d)", a, ephemeralFrom)
		}
		seen[a] = true
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("%s is not free: %v", a, err)
		}
		defer l.Close()
	}
}
