package server_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
)

// BenchmarkSessionTransaction measures a transaction as `djinn bench txn`
// makes one with the participant in the manager's process: create, two
// writes to the server's key/value participant under it (sent at once),
// commit — four calls through the client's session, client and server in
// this process, 32 clients per core.
// allocs/op counts both sides of the calls, the manager's log appends and
// applies, the participant's prepare and roll forward, and the records of
// the outcome told (phase 2 runs behind the commits: the last few
// transactions' may fall after the timer stops).
//
//	go test -run XXX -bench SessionTransaction -benchmem ./internal/server
func BenchmarkSessionTransaction(b *testing.B) {
	srv := servertest.Start(b, servertest.Config(b))
	c := servertest.Dial(b, srv.Addr())
	kvc := kv.NewClient(c.ClientConn())
	benchTransactions(b, c, kvc, kvc)
}

// BenchmarkSessionTransactionThreeServers is BenchmarkSessionTransaction
// with the two writes on the key/value participants of two other servers,
// as `djinn bench txn --kv P1,P2` makes them: each participant joins the
// manager, and the manager prepares and commits each over its stream of
// participant calls. All three servers and the client are in this
// process: allocs/op counts everything.
//
//	go test -run XXX -bench SessionTransactionThreeServers -benchmem ./internal/server
func BenchmarkSessionTransactionThreeServers(b *testing.B) {
	srv := servertest.Start(b, servertest.Config(b))
	c := servertest.Dial(b, srv.Addr())
	var kvcs [2]*kv.Client
	for i := range kvcs {
		p := servertest.Start(b, servertest.Config(b))
		kvcs[i] = kv.NewClient(servertest.Dial(b, p.Addr()).ClientConn())
	}
	benchTransactions(b, c, kvcs[0], kvcs[1])
}

// benchTransactions runs the transactions of the benchmarks above: the
// manager of c, the first write on kv0, the second on kv1.
func benchTransactions(b *testing.B, c *client.Client, kv0, kv1 *kv.Client) {
	ctx := context.Background()
	mgr, err := c.TransactionManager(ctx)
	if err != nil {
		b.Fatal(err)
	}
	value := []byte("bench-value")
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(32) // 64 clients on 2 cores, as the load generator's
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tx, err := mgr.Create(ctx, time.Minute)
			if err != nil {
				b.Error(err)
				return
			}
			key := "bench/" + strconv.FormatInt(next.Add(1), 10)
			ptx := participant.TxOf(tx)
			var err0 error
			var wg sync.WaitGroup
			wg.Go(func() { err0 = kv0.Put(ctx, ptx, key+"/0", value) })
			err1 := kv1.Put(ctx, ptx, key+"/1", value)
			wg.Wait()
			if err := errors.Join(err0, err1); err != nil {
				b.Error(err)
				return
			}
			if err := tx.Commit(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
