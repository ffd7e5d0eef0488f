package txn_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/proto/statepb"
)

// BenchmarkListPageAmongOthers measures one page of a principal's 1,000
// transactions while another principal's 1,000,000 settled ones are
// remembered: what the page costs, all of it with the state locked.
func BenchmarkListPageAmongOthers(b *testing.B) {
	st := statetest.For(newTxnState).State
	now := time.Now().UnixNano()
	exp := now + int64(time.Hour)
	id := uint64(0)
	create := func(principal string) {
		id++
		var cookie [16]byte
		binary.BigEndian.PutUint64(cookie[8:], id)
		if _, err := st.ApplyCreate(&statepb.TxnCreate{Id: id, Cookie: cookie[:], Principal: principal, ExpiresUnixNanos: exp, HorizonUnixNanos: exp}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 1_001_000 {
		if i%1001 == 500 {
			create("cn:me")
			continue
		}
		create("cn:other")
		if _, err := st.ApplyDecide(now, &statepb.TxnDecide{Id: id}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ins, _ := st.List("cn:me", 0, 100, 0)
		if len(ins) != 100 {
			b.Fatalf("a page of %d, want 100", len(ins))
		}
	}
}

// BenchmarkListEveryPage measures one page of 100 of every principal's
// transactions (an operator's Resources.List), from the middle of
// 1,000,000 settled ones: what the page costs, with the state locked for
// at most a page of it at a time.
func BenchmarkListEveryPage(b *testing.B) {
	st := statetest.For(newTxnState).State
	now := time.Now().UnixNano()
	exp := now + int64(time.Hour)
	for id := uint64(1); id <= 1_000_000; id++ {
		var cookie [16]byte
		binary.BigEndian.PutUint64(cookie[8:], id)
		if _, err := st.ApplyCreate(&statepb.TxnCreate{Id: id, Cookie: cookie[:], Principal: "cn:other", ExpiresUnixNanos: exp, HorizonUnixNanos: exp}); err != nil {
			b.Fatal(err)
		}
		if _, err := st.ApplyDecide(now, &statepb.TxnDecide{Id: id}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ins, _ := st.ListEvery(500_000, 100, 0)
		if len(ins) != 100 {
			b.Fatalf("a page of %d, want 100", len(ins))
		}
	}
}
