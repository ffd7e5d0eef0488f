package server_test

import (
	"testing"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestCallsInFlightOverTheWire (DESIGN.md 7): a server under mutual TLS
// bounds each principal's calls in flight as its [quota] calls-in-flight
// says. A principal whose one call waits (a lock request behind another's
// lock) has its next unary call refused RESOURCE_EXHAUSTED naming the
// quota, while another principal's call is served. TestCallsInFlight has
// a row for each rule; this one is the server as configured.
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
	_, err := djinnpb.NewLockServiceClient(alice).CreateOwner(testContext(t), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: minute})
	wantErr(t, "alice's call beside her waiting one", err, djinn.ErrResourceExhausted, "quota calls-in-flight")
	if _, err := djinnpb.NewLockServiceClient(as("bob")).CreateOwner(testContext(t), &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: minute}); err != nil {
		t.Fatalf("bob's call beside alice's full bound: %v", err)
	}
}
