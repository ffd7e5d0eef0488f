package server_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
)

// BenchmarkSessionTransaction measures a transaction as `djinn bench txn`
// makes one with the participant in the manager's process: create, two
// writes to the server's key/value participant under it, commit — four
// calls through the client's session, client and server in this process,
// 32 clients per core.
// allocs/op counts both sides of the calls, the manager's log appends and
// applies, the participant's prepare and roll forward, and the records of
// the outcome told (phase 2 runs behind the commits: the last few
// transactions' may fall after the timer stops).
//
//	go test -run XXX -bench SessionTransaction -benchmem ./internal/server
func BenchmarkSessionTransaction(b *testing.B) {
	srv := servertest.Start(b, servertest.Config(b))
	c := servertest.Dial(b, srv.Addr())
	ctx := context.Background()
	mgr, err := c.TransactionManager(ctx)
	if err != nil {
		b.Fatal(err)
	}
	kvc := kv.NewClient(c.ClientConn())
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
			for _, k := range []string{key + "/0", key + "/1"} {
				if err := kvc.Put(ctx, ptx, k, value); err != nil {
					b.Error(err)
					return
				}
			}
			if err := tx.Commit(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
