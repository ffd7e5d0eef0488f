package discovery

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// netnsEnv marks the test process that runs inside the private network
// namespace.
const netnsEnv = "DJINN_DISCOVERY_TEST_NETNS"

// TestMain runs every test of the package in a network namespace of its
// own, made for the run: the test binary runs itself again under
// `unshare --net`, and the copy inside brings loopback up with multicast on,
// routes 224.0.0.0/4 to it and adds a veth pair (dv0 10.77.0.1, dv1
// 10.77.0.2), so that the tests use real multicast sockets, the real port
// 4160 and real interfaces without touching the host's network, and without
// sending a packet onto a real one. Where no namespace can be made the run
// fails, saying why; it never skips.
func TestMain(m *testing.M) {
	if os.Getenv(netnsEnv) != "1" {
		os.Exit(runInNetns())
	}
	if err := setupNetns(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: setting up the test network namespace: %v\n", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}
