package robust

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// A leader frozen while its successor is elected and cancels a lease
// believes, once it runs again, that it still leads and holds the lease in
// its table: its answer to a renewal must not be OK (it was answered from
// memory before the leader lease), but Unavailable — or UnknownLease
// should it hear of its successor first.
func TestDeposedLeaderRenewsNoCancelledLease(t *testing.T) {
	c := startCluster(t, binary(t, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	old, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := djinnpb.NewLockServiceClient(old.Direct()).CreateOwner(ctx, &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	cookie := owner.Lease.Cookie
	renew := func(n *Node) error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := djinnpb.NewLandlordClient(n.Direct()).Renew(cctx, &djinnpb.RenewRequest{Cookie: cookie, DurationNanos: int64(time.Minute)})
		return grpcerr.FromStatus(err)
	}
	if err := renew(old); err != nil {
		t.Fatalf("renewal at the leader before the failover: %v", err)
	}

	old.Freeze()
	thawed := false
	thaw := func() {
		if !thawed {
			old.Thaw()
			thawed = true
		}
	}
	defer thaw()
	var successor *Node
	if err := poll(ctx, "a successor", func() bool {
		successor = c.Leader(ctx)
		return successor != nil && successor != old
	}); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, "the successor cancels the lease", func() bool {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := djinnpb.NewLandlordClient(successor.Direct()).Cancel(cctx, &djinnpb.CancelRequest{Cookie: cookie})
		return err == nil
	}); err != nil {
		t.Fatal(err)
	}

	thaw()
	err = renew(old)
	switch {
	case err == nil:
		t.Fatal("the deposed leader renewed a lease its successor cancelled")
	case errors.Is(err, djinn.ErrUnavailable), errors.Is(err, djinn.ErrUnknownLease):
		t.Logf("the deposed leader answered: %v", err)
	default:
		t.Fatalf("the deposed leader answered %v, want Unavailable", err)
	}
	if err := renew(successor); !errors.Is(err, djinn.ErrUnknownLease) {
		t.Fatalf("renewal at the successor = %v, want UnknownLease", err)
	}
}
