package server_test

import (
	"testing"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestCallsInFlightOverTheWire (DESIGN.md 7): a server under mutual TLS
// bounds each principal's calls in flight as its [quota] calls-in-flight
// says, and a lock request waiting behind another's lock holds no place
// under that bound: with a bound of one call, alice's request waits and
// her next calls are still served (before, her one waiting request had
// every later call of hers refused until the holder let go — her unlock
// of another lock among them). TestCallsInFlight has a row for each rule.
func TestCallsInFlightOverTheWire(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
	cfg.Quota.CallsInFlight = 1
	cfg.Quota.Principals = map[string]map[string]int64{"cn:carol": {"calls-in-flight": 100}} // the helper
	srv := servertest.Start(t, cfg)
	as := func(cn string) *grpc.ClientConn {
		return servertest.Conn(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, cn))), client.WithoutSession())
	}
	alice := as("alice")
	if err := lockWaiter(t, alice, as("carol"))(testContext(t)); err != nil {
		t.Fatalf("alice's lock request, waiting: %v", err)
	}
	for i := range 3 {
		if _, err := djinnpb.NewLockServiceClient(alice).CreateOwner(testContext(t), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: minute}); err != nil {
			t.Fatalf("alice's call %d beside her waiting lock request: %v", i+1, err)
		}
	}
	if _, err := djinnpb.NewLockServiceClient(as("bob")).CreateOwner(testContext(t), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: minute}); err != nil {
		t.Fatalf("bob's call: %v", err)
	}
}
