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

// TestLearnWhenThePoolFollowsItsMost: a pool that follows as many clusters
// as it may (client.MaxClusters) follows no other, so Learn at another
// cluster's member makes no cluster connection for it, and the answer is
// kept: asking again makes none either, and the reference's calls go to
// its endpoint. Before, each question (one every few seconds a reference
// was used) made a cluster connection, and its refresh loop, that the
// pool never adopted and kept until Close.
func TestLearnWhenThePoolFollowsItsMost(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	svc := servertest.Dial(t, srv.Addr()).ServiceID()
	p := client.NewPool()
	t.Cleanup(func() { p.Close() })
	client.FollowMade(p, client.MaxClusters)
	ref := djinn.Ref{Endpoint: srv.Addr(), Service: svc, Object: djinn.NewID()}
	for i := range 3 {
		ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
		err := p.Learn(ctx, ref)
		cancel()
		if err != nil {
			t.Fatalf("Learn %d with the pool at its most: %v, want nil (calls go to the endpoint)", i+1, err)
		}
		if p.Follows(svc) {
			t.Fatalf("Learn %d: the pool follows a cluster past its most", i+1)
		}
		if n := client.Owned(p); n != 0 {
			t.Fatalf("Learn %d: the pool made %d cluster connections it does not follow, want 0", i+1, n)
		}
	}
	cc, err := p.ConnFor(ref)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	if _, err := djinnpb.NewTransactionManagerClient(cc).Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute)}); err != nil {
		t.Fatalf("a call through the reference, at its endpoint: %v", err)
	}
}
