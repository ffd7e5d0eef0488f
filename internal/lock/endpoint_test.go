package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// TestLooseManagerFromBeforeStillLocks (DESIGN.md 2, tightening what is
// accepted): a transaction that locked before endpoints were checked
// strictly, its manager named at an endpoint taken then (a name in
// brackets, port 0), is in the log and the snapshots as a holder. After
// the upgrade it still locks, unlocks and drops its locks as that holder
// (CC 1.5: a transaction acquires and releases its locks on its own
// behalf; CC 2.2 drop_locks), its reference read as stored. A
// transaction new to the service naming its manager so, or the known one
// without its secret, is refused InvalidArgument naming the endpoint, and
// nobody is joined for it.
func TestLooseManagerFromBeforeStillLocks(t *testing.T) {
	for _, endpoint := range []string{"[manager]:4161", "manager.example:0"} {
		t.Run(endpoint, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { looseManagerStillLocks(t, endpoint) })
		})
	}
}

func looseManagerStillLocks(t *testing.T, endpoint string) {
	j := &joiner{}
	f := start(t, statetest.For(newLockState), j)
	ctx := context.Background()
	set, other := f.set(true), f.set(true)
	loose := &djinnpb.Ref{Endpoint: endpoint, ServiceId: manager.Service[:], ObjectId: manager.Object[:]}
	secret := djinn.NewID()
	holder := func(id uint64, secret djinn.ID) *djinnpb.LockHolder {
		return &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: loose, Id: id, Secret: secret[:]}}
	}
	// The entry the leader of before wrote as transaction 40 locked,
	// replayed as written.
	if _, err := f.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LockAcquire{LockAcquire: &statepb.LockAcquire{
		SetId: set, Holder: &statepb.LockHolderState{Manager: loose, Txn: 40, Secret: secret[:]}, Mode: int32(lock.W), RequestId: 1,
	}}}); err != nil {
		t.Fatalf("the entry of before: %v", err)
	}
	g := f.restart() // upgraded: restored from its snapshot
	defer func() { g.stop() }()

	if err := g.svc.CheckHolder(holder(40, secret)); err != nil {
		t.Errorf("the holder's form, as the server checks it before the set: %v", err)
	}
	g.lock(other, holder(40, secret), lock.R, 2)
	if err := g.svc.Unlock(ctx, set, holder(40, secret), lock.W); err != nil {
		t.Errorf("unlock of the lock taken before: %v", err)
	}
	if err := g.svc.DropLocks(ctx, other, loose, 40, secret[:]); err != nil {
		t.Errorf("drop_locks of the transaction of before: %v", err)
	}
	for _, s := range [][]byte{set, other} {
		if v, _, err := g.svc.Describe(ctx, s); err != nil || len(v.Holders) != 0 {
			t.Errorf("after the unlock and drop_locks: holders %+v %v, want none", v.Holders, err)
		}
	}
	joins := j.joins

	for _, c := range []struct {
		name string
		call func() error
	}{
		{"a new transaction's lock", func() error {
			_, _, err := g.svc.Lock(ctx, set, holder(41, secret), lock.R, 0, false, 3)
			return err
		}},
		{"a new transaction's unlock", func() error { return g.svc.Unlock(ctx, set, holder(41, secret), lock.R) }},
		{"a new transaction's form", func() error { return g.svc.CheckHolder(holder(41, secret)) }},
		{"a new transaction's drop_locks", func() error { return g.svc.DropLocks(ctx, set, loose, 41, secret[:]) }},
		{"the known one's lock without its secret", func() error {
			_, _, err := g.svc.Lock(ctx, set, holder(40, djinn.NewID()), lock.R, 0, false, 4)
			return err
		}},
	} {
		if err := c.call(); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), strconv.Quote(endpoint)) {
			t.Errorf("%s, its manager at %q: %v, want InvalidArgument naming the endpoint", c.name, endpoint, err)
		}
	}
	if j.joins != joins {
		t.Errorf("%d joins for the refused transactions, want none", j.joins-joins)
	}
	if v, _, err := g.svc.Describe(ctx, set); err != nil || len(v.Holders)+len(v.Waiters) != 0 {
		t.Errorf("after the refusals: holders %+v, waiters %+v, %v; want none", v.Holders, v.Waiters, err)
	}
}
