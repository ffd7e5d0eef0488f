package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestLearnFollowsTheCluster: DESIGN.md 7a — once Learn has asked a
// cluster's member, and returned, the pool follows the cluster: a
// reference naming that member reaches the others after it is stopped
// (here the leader, so a new one is elected), with no background answer
// to wait for.
func TestLearnFollowsTheCluster(t *testing.T) {
	t.Parallel()
	ss := servertest.StartCluster(t, 3, servertest.Steady)
	named := servertest.ServingLeader(t, ss...)
	svc := servertest.Dial(t, named.Addr()).ServiceID()
	p := client.NewPool()
	t.Cleanup(func() { p.Close() })
	ref := djinn.Ref{Endpoint: named.Addr(), Service: svc, Object: djinn.NewID()}
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	if err := p.Learn(ctx, ref); err != nil {
		t.Fatalf("Learn at a member: %v", err)
	}
	if !p.Follows(svc) {
		t.Fatal("after Learn at a member, the pool does not follow its cluster")
	}
	if err := named.Close(); err != nil {
		t.Fatal(err)
	}
	cc, err := p.ConnFor(ref)
	if err != nil {
		t.Fatal(err)
	}
	servertest.EventuallyWithin(t, servertest.Failover, "a transaction created through the reference after its member stopped", func() bool {
		cctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err := djinnpb.NewTransactionManagerClient(cc).Create(cctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute)})
		if err != nil && !errors.Is(err, djinn.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("create after the member left: %v", err)
		}
		return err == nil
	})
}
