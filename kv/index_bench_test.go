package kv

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/participant/participanttest"
)

// benchDB opens a DB over a MemStore holding n committed keys k000000…,
// each with a value of 8 bytes, put straight into its memory.
func benchDB(b testing.TB, n int) *DB {
	b.Helper()
	d, err := Open(Config{Participant: participant.Config{Endpoint: "127.0.0.1:7", Store: participant.NewMemStore(), Managers: participanttest.NewManager()}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range n {
		d.applyLocked(nsKey("", fmt.Sprintf("k%06d", i)), change{value: []byte("valu0000")})
	}
	return d
}

// BenchmarkListPage lists one page of 100 entries from the middle of a
// store of 100,000 keys.
func BenchmarkListPage(b *testing.B) {
	d := benchDB(b, 100_000)
	pg := page{after: "k050000", max: 100, bytes: wire.MaxReply}
	b.ResetTimer()
	for b.Loop() {
		es, more, err := d.list(context.Background(), nil, "", "k", pg)
		if err != nil || len(es) != 100 || !more {
			b.Fatalf("page: %d entries, more %v, %v", len(es), more, err)
		}
	}
}

// BenchmarkHeapPerKey reports the live heap a committed key takes (a key
// of 7 bytes and a value of 8) in a store of 1,000,000; run it once
// (-benchtime=1x).
func BenchmarkHeapPerKey(b *testing.B) {
	const n = 1_000_000
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		d := benchDB(b, n)
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heapB/key")
		runtime.KeepAlive(d)
	}
}
