package txn_test

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/proto/statepb"
)

// settler applies, straight to the replicated state, top-level
// transactions that two participants join, that commit and whose
// participants are told: what a manager's log holds for each, decoded as
// a log entry is (each with its own participant references and
// principal).
type settler struct {
	log   statetest.Service[*txn.State]
	index uint64
	next  uint64
}

func newSettler() *settler {
	return &settler{log: statetest.For(newTxnState), index: 1}
}

func (s *settler) apply(tb testing.TB, cmd *statepb.Command) {
	tb.Helper()
	b, err := proto.Marshal(cmd)
	if err != nil {
		tb.Fatal(err)
	}
	var decoded statepb.Command
	if err := proto.Unmarshal(b, &decoded); err != nil {
		tb.Fatal(err)
	}
	s.index++
	if err, ok := s.log.M.Apply(s.index, &decoded).(error); ok {
		tb.Fatalf("log entry %d: %v", s.index, err)
	}
}

// settle settles n more transactions of principal.
func (s *settler) settle(tb testing.TB, n int, principal string) {
	tb.Helper()
	now := time.Now().UnixNano()
	exp := now + int64(time.Hour)
	for range n {
		s.next++
		id := s.next
		var cookie, secret [16]byte
		binary.BigEndian.PutUint64(cookie[8:], id)
		binary.BigEndian.PutUint64(secret[:8], id)
		secret[15] = 's'
		s.apply(tb, &statepb.Command{NowUnixNanos: now, Op: &statepb.Command_TxnCreate{TxnCreate: &statepb.TxnCreate{
			Id: id, Cookie: cookie[:], Secret: secret[:], Principal: principal, ExpiresUnixNanos: exp, HorizonUnixNanos: exp,
		}}})
		for _, p := range []string{"a", "b"} {
			s.apply(tb, &statepb.Command{NowUnixNanos: now, Op: &statepb.Command_TxnJoin{TxnJoin: &statepb.TxnJoin{Id: id, Participant: part(p), CrashCount: 1}}})
		}
		s.apply(tb, &statepb.Command{NowUnixNanos: now, Op: &statepb.Command_TxnDecide{TxnDecide: &statepb.TxnDecide{
			Id: id, Commit: true, Version: 3, Prepared: []uint32{0, 1}, Votes: []int32{int32(txn.Prepared), int32(txn.Prepared)},
		}}})
		s.apply(tb, &statepb.Command{NowUnixNanos: now, Op: &statepb.Command_TxnNotified{TxnNotified: &statepb.TxnNotified{
			Entries: []*statepb.TxnParticipantRef{{Id: id, Participant: 0}, {Id: id, Participant: 1}},
		}}})
	}
}

// settledBytes returns the heap a settled transaction holds while it is
// remembered: the live heap after n are settled, less before, over n.
func settledBytes(tb testing.TB, n int) float64 {
	s := newSettler()
	s.settle(tb, 1, "cn:warm-up") // the maps and the lease table exist
	before := liveHeap()
	s.settle(tb, n, "cn:client.example.org")
	after := liveHeap()
	if all, _ := s.log.State.Len(); all != n+1 {
		tb.Fatalf("%d transactions remembered, want %d", all, n+1)
	}
	runtime.KeepAlive(s)
	return float64(after-before) / float64(n)
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestSettledTransactionIsCompact: a settled transaction is remembered
// for the retention time (up to [txn] max-remembered of them), so what it
// holds bounds the manager's memory: its participants' references are
// shared, its channels the one closed channel, its principal interned.
// Before, one with two participants held 847 bytes; compact, 215; with
// its id in its principal's ordered ids (List's), 234; in every
// principal's ordered ids too (ListEvery's, Highest's), 253 (BENCHMARKS.md,
// "Memory of a remembered transaction"). The bound here leaves room for
// the runtime's and the maps' growth.
func TestSettledTransactionIsCompact(t *testing.T) {
	const most = 400
	if per := settledBytes(t, 20_000); per > most {
		t.Fatalf("a settled transaction holds %.0f bytes of heap, want at most %d", per, most)
	}
}

// BenchmarkSettledMemory reports the heap one settled top-level
// transaction with two participants holds while the manager remembers it
// (B/settled): the figure [txn] max-remembered multiplies.
func BenchmarkSettledMemory(b *testing.B) {
	var per float64
	for b.Loop() {
		per = settledBytes(b, 20_000)
	}
	b.ReportMetric(per, "B/settled")
}
