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

// BenchmarkEngineOneAtATime measures delivery one event at a time, as a
// listener fed by one client calling Notify sees it: each event is pushed
// after the one before was reported delivered, so every Push finds its
// key idle. The Sender grows its stack as a gRPC call does.
func BenchmarkEngineOneAtATime(b *testing.B) {
	delivered := make(chan struct{}, 1)
	e := New(Config{
		Sender:      deepSender{},
		OnDelivered: func(djinn.ID, uint64) { delivered <- struct{}{} },
	})
	defer e.Close()
	ev := &djinnpb.RemoteEvent{EventId: 1}
	key := keyN(1)
	b.ReportAllocs()
	for n := 0; b.Loop(); n++ {
		if err := e.Push(key, targetA, Item{Cursor: uint64(n + 1), Event: ev}); err != nil {
			b.Fatal(err)
		}
		<-delivered
	}
}

// deepSender accepts everything after using 16 KB of stack, about what a
// unary gRPC call uses.
type deepSender struct{}

func (deepSender) Send(_ context.Context, _ djinn.Ref, events []*djinnpb.RemoteEvent) (int, error) {
	return len(events) + deep(64), nil
}

//go:noinline
func deep(depth int) int {
	var pad [256]byte
	pad[depth%len(pad)] = byte(depth)
	if depth == 0 {
		return int(pad[0])
	}
	return deep(depth-1) + int(pad[depth%len(pad)]) - depth%256
}
