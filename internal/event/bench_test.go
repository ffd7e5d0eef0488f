package event

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// nopSender accepts everything at once.
type nopSender struct{}

var _ Sender = nopSender{}

func (nopSender) Send(_ context.Context, _ djinn.Ref, events []*djinnpb.RemoteEvent) (int, error) {
	return len(events), nil
}

// BenchmarkEngine measures delivery throughput to a listener that accepts
// at once: one op is one event pushed and reported delivered, spread round
// robin over the keys.
func BenchmarkEngine(b *testing.B) {
	for _, keys := range []int{1, 64, 4096} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			ids := make([]djinn.ID, keys)
			index := make(map[djinn.ID]int, keys)
			for i := range ids {
				ids[i] = keyN(i)
				index[ids[i]] = i
			}
			// last[i] is written only by key i's worker, one at a time.
			last := make([]uint64, keys)
			var delivered atomic.Int64
			done := make(chan struct{})
			total := int64(b.N)
			e := New(Config{
				Sender: nopSender{},
				OnDelivered: func(key djinn.ID, through uint64) {
					i := index[key]
					n := int64(through - last[i])
					last[i] = through
					if delivered.Add(n) == total {
						close(done)
					}
				},
			})
			defer e.Close()
			ev := &djinnpb.RemoteEvent{EventId: 1}
			b.ReportAllocs()
			b.ResetTimer()
			for n := range b.N {
				k := n % keys
				if err := e.Push(ids[k], targetA, Item{Cursor: uint64(n/keys + 1), Event: ev}); err != nil {
					b.Fatal(err)
				}
			}
			<-done
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
