package replica

import (
	"context"
	"testing"
	"time"

	"github.com/djinn-go/djinn/proto/statepb"
)

// BenchmarkPropose measures commands committed (fsynced) and applied per
// second on a single node, with b.N spread over parallel proposers
// (-cpu sets GOMAXPROCS; SetParallelism(32) gives 32 proposers per P).
func BenchmarkPropose(b *testing.B) {
	leading := make(chan struct{}, 1)
	n, err := Open(Config{
		DataDir: b.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: true,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		OnLeader: func(ctx context.Context) { leading <- struct{}{}; <-ctx.Done() },
	}, newCounter())
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	<-leading
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := n.Propose(context.Background(), &statepb.Command{Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: "x"}}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
