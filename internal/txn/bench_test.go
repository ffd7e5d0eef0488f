package txn_test

import (
	"context"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// BenchmarkTransaction measures the manager's own cost of one top-level
// transaction with two participants that vote PREPARED — create, two
// joins, commit, and its share of telling them — over an in-memory log
// and participants answering at once: allocations and CPU per
// transaction, nothing of gRPC, Raft or disks.
func BenchmarkTransaction(b *testing.B) {
	log := statetest.For(newTxnState)
	parts := &fakeParts{vote: map[string]djinnpb.TransactionState{"a": txn.Prepared, "b": txn.Prepared},
		fail: map[string]error{}, opErr: map[string]error{}, slow: map[string]time.Duration{}}
	lessor := lease.NewLessor(log.M.Leases, log, lease.Config{Slack: 10 * time.Second})
	self := djinn.Ref{Endpoint: "127.0.0.1:4161", Service: log.M.ServiceID(), Object: djinn.ID{'t'}}
	svc, err := txn.New(log.State, lessor, log, time.Now, func() djinn.Ref { return self }, txn.Config{Participants: txn.Blocking(parts)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go lessor.Run(ctx)
	go svc.Run(ctx)
	<-lessor.Ready()
	a, bb := part("a"), part("b")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c, err := svc.Create(ctx, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := svc.Join(ctx, c.ID, c.Secret, a, 1); err != nil {
			b.Fatal(err)
		}
		if err := svc.Join(ctx, c.ID, c.Secret, bb, 1); err != nil {
			b.Fatal(err)
		}
		parts.mu.Lock()
		parts.calls, parts.byID = parts.calls[:0], parts.byID[:0]
		parts.mu.Unlock()
		if err := svc.Commit(ctx, c.ID, nil); err != nil {
			b.Fatal(err)
		}
	}
}
