package server

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/wire"
)

// busyLockSet is a set with an owner holding three locks, a transaction
// holding one, and waiters owners waiting in queue order (request ids 1,
// 2, …).
func busyLockSet(waiters int) lock.SetView {
	v := lock.SetView{ID: djinn.NewID(), Fence: 4, Holders: []lock.HolderView{
		{Owner: djinn.NewID(), Locks: []lock.Lock{{Mode: lock.R, Fence: 1}, {Mode: lock.R, Fence: 2}, {Mode: lock.IW, Fence: 3}}},
		{IsTxn: true, Txn: lock.TxnKey{ID: 7}, Locks: []lock.Lock{{Mode: lock.IR, Fence: 4}}},
	}}
	for i := range waiters {
		v.Waiters = append(v.Waiters, lock.WaiterView{HolderView: lock.HolderView{Owner: djinn.NewID()}, Mode: lock.W, Request: uint64(i + 1)})
	}
	return v
}

// TestDescribeLockSetBounded: a lock set whose waiters pass what a client
// receives by default (4 MiB) is described to a partial request by its
// holders and first waiters, in queue order, within 4 MiB less 64 KiB,
// the totals counting them all; a request without partial (a client's
// before the totals) is refused ResourceExhausted naming the counts and
// to ask with partial; a description that fits is answered whole either
// way. Before, the description carried every waiter and the client failed
// to receive it.
func TestDescribeLockSetBounded(t *testing.T) {
	const waiters = 200_000 // about 30 bytes each
	v := busyLockSet(waiters)
	_, err := describeLockSet(v, nil, wire.MaxReply, false)
	if djinn.KindOf(err) != djinn.ResourceExhausted || !strings.Contains(err.Error(), "2 holders (of 4 locks) and 200000 waiters") || !strings.Contains(err.Error(), "partial") {
		t.Errorf("a description of %d waiters without partial: %v; want ResourceExhausted naming the counts and partial", waiters, err)
	}
	d, err := describeLockSet(v, nil, wire.MaxReply, true)
	if err != nil {
		t.Fatalf("a partial description of %d waiters: %v", waiters, err)
	}
	if size := proto.Size(d); size > wire.MaxReply || len(d.GetHolders()) != 2 || d.GetHoldersTotal() != 2 || d.GetWaitersTotal() != waiters ||
		len(d.GetWaiters()) == 0 || len(d.GetWaiters()) == waiters {
		t.Fatalf("partial description: %d bytes, %d holders of %d, %d waiters of %d; want within %d, every holder, some waiters and the totals",
			size, len(d.GetHolders()), d.GetHoldersTotal(), len(d.GetWaiters()), d.GetWaitersTotal(), wire.MaxReply)
	}
	for i, w := range d.GetWaiters() {
		if w.GetRequestId() != uint64(i+1) {
			t.Fatalf("waiter %d is request %d: want the first waiters in queue order", i, w.GetRequestId())
		}
	}
	if fences := d.GetHolders()[0].GetFences(); len(fences) != 3 || d.GetHolders()[0].GetCounts()[lock.R] != 2 {
		t.Errorf("first holder: fences %v counts %v, want its three grants", fences, d.GetHolders()[0].GetCounts())
	}

	small := busyLockSet(3)
	for _, partial := range []bool{false, true} {
		d, err := describeLockSet(small, nil, wire.MaxReply, partial)
		if err != nil || len(d.GetHolders()) != 2 || len(d.GetWaiters()) != 3 || d.GetHoldersTotal() != 2 || d.GetWaitersTotal() != 3 {
			t.Errorf("a small set, partial %v: %v, %v; want every holder and waiter", partial, d, err)
		}
	}
	// A holder whose grants alone pass the bound is counted, not listed.
	d, err = describeLockSet(small, nil, 40, true)
	if err != nil || len(d.GetHolders()) != 0 || d.GetHoldersTotal() != 2 || d.GetWaitersTotal() != 3 || proto.Size(d) > 40 {
		t.Errorf("a description bounded at 40 bytes: %v, %v; want no holder listed, the totals, within 40 bytes", d, err)
	}
}
