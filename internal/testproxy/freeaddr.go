package testproxy

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// ephemeralFrom is where Linux's default ephemeral port range starts.
const ephemeralFrom = 32768

// FreeAddrs returns n distinct loopback addresses no one listens on now,
// for a server started later (a process of its own, or one restarted on
// the same address). Their ports are drawn below the kernel's ephemeral
// range, so that no outgoing connection — of this test or another — is
// given one of them before the server listens on it; each stays taken
// until all are chosen, so that no two are one port.
func FreeAddrs(n int) ([]string, error) {
	out := make([]string, 0, n)
	for tries := 0; len(out) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("no free loopback port below %d in %d tries", ephemeralFrom, tries)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", 10000+rand.IntN(ephemeralFrom-10000)))
		if err != nil {
			continue
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out, nil
}
