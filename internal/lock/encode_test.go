package lock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// The snapshot's streamed encoding: the same bytes as json.Marshal of
// the exported state, cut into the same records as wire.Records cuts
// them, restoring the same state; and never the whole document in memory.

// builder drives a State through its apply calls at random: sets (some
// related, some transactional), owners, transactions with ancestors and
// secrets, grants, waiters, releases, outcomes and ended set leases.
type builder struct {
	t      testing.TB
	s      *State
	rnd    *rand.Rand
	sets   [][]byte
	owners [][]byte
	next   uint64
}

func newBuilder(t testing.TB, seed uint64) *builder {
	return &builder{t: t, s: NewState(lease.NewTable(), nil), rnd: rand.New(rand.NewPCG(seed, 1))}
}

func (b *builder) id() []byte {
	b.next++
	id := djinn.ID{byte(b.next >> 16), byte(b.next >> 8), byte(b.next), 0xd}
	return id[:]
}

func mgr(n uint64) *djinnpb.Ref {
	return &djinnpb.Ref{Endpoint: "m", ServiceId: []byte{byte(n), 1}, ObjectId: []byte{byte(n), 2}}
}

func (b *builder) holder() *statepb.LockHolderState {
	if len(b.owners) > 0 && b.rnd.IntN(2) == 0 {
		return &statepb.LockHolderState{Owner: b.owners[b.rnd.IntN(len(b.owners))]}
	}
	h := &statepb.LockHolderState{Manager: mgr(b.rnd.Uint64N(2)), Txn: 1 + b.rnd.Uint64N(8)}
	if b.rnd.IntN(3) == 0 {
		h.AncestorIds, h.AncestorManagers = []uint64{100 + b.rnd.Uint64N(3)}, []*djinnpb.Ref{mgr(0)}
	}
	if b.rnd.IntN(2) == 0 {
		h.Secret = bytes.Repeat([]byte{byte(h.Txn)}, 16)
	}
	return h
}

// step applies one random command; refusals (a conflict, a transaction
// on a plain set) are part of the run.
func (b *builder) step() {
	switch k := b.rnd.IntN(10); {
	case k < 2 || len(b.sets) == 0:
		c := &statepb.LockCreateSet{SetId: b.id(), Cookie: b.id(), ExpiresUnixNanos: 1, Transactional: b.rnd.IntN(3) == 0, Principal: "p"}
		if len(b.sets) > 0 && b.rnd.IntN(3) == 0 {
			c.Related = b.sets[b.rnd.IntN(len(b.sets))]
		}
		if b.s.ApplyCreateSet(c) == nil {
			b.sets = append(b.sets, c.SetId)
		}
	case k < 3:
		c := &statepb.LockCreateOwner{Cookie: b.id(), ExpiresUnixNanos: 1, Principal: "p"}
		if err := b.s.ApplyCreateOwner(c); err != nil {
			b.t.Fatal(err)
		}
		b.owners = append(b.owners, c.Cookie)
	case k < 7:
		b.next++
		_, _ = b.s.ApplyAcquire(&statepb.LockAcquire{SetId: b.set(), Holder: b.holder(), Mode: int32(1 + b.rnd.IntN(5)), RequestId: b.next, Principal: fmt.Sprint("p", b.rnd.IntN(3))})
	case k < 8:
		_ = b.s.ApplyRelease(&statepb.LockRelease{SetId: b.set(), Holder: b.holder(), Mode: int32(1 + b.rnd.IntN(5))})
	case k < 9:
		// A third are the service's rollbacks as it votes ABORTED,
		// which keep the vote (with a secret or none).
		c := &statepb.LockTxnEnd{Manager: mgr(b.rnd.Uint64N(2)), Txn: 1 + b.rnd.Uint64N(8), Commit: b.rnd.IntN(2) == 0}
		if b.rnd.IntN(3) == 0 {
			c.Commit, c.VotedAborted = false, true
			if b.rnd.IntN(2) == 0 {
				c.Secret = bytes.Repeat([]byte{byte(c.Txn)}, 16)
			}
		}
		b.s.ApplyTxnEnd(int64(b.next), c)
	default:
		i := b.rnd.IntN(len(b.sets))
		var id djinn.ID
		copy(id[:], b.sets[i])
		b.s.LeaseEnded(lease.Owner{Kind: SetLeaseKind, ID: id})
		b.sets = append(b.sets[:i], b.sets[i+1:]...)
	}
}

func (b *builder) set() []byte { return b.sets[b.rnd.IntN(len(b.sets))] }

// streamed returns snap's records as encode makes them.
func streamed(t testing.TB, snap snapshot, size int) []*statepb.LockRecord {
	var out []*statepb.LockRecord
	if err := snap.encode(size, func(r *statepb.LockRecord) error { out = append(out, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// cut is wire.Records with pieces of size bytes.
func cut(b []byte, size int) []*statepb.LockRecord {
	var out []*statepb.LockRecord
	for len(b) > size {
		out = append(out, &statepb.LockRecord{Table: b[:size]})
		b = b[size:]
	}
	return append(out, &statepb.LockRecord{Table: b, Last: true})
}

func sameRecords(t testing.TB, got, want []*statepb.LockRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i].Table, want[i].Table) || got[i].Last != want[i].Last {
			t.Fatalf("record %d: %d bytes last=%v, want %d bytes last=%v:\n%q\n%q", i, len(got[i].Table), got[i].Last, len(want[i].Table), want[i].Last, got[i].Table, want[i].Table)
		}
	}
}

// checkEncoding: at the real record size and at sizes around and
// dividing the document's length, the streamed records are json.Marshal's
// document cut as wire.Records cuts it.
func checkEncoding(t *testing.T, snap snapshot) []byte {
	t.Helper()
	doc, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	sameRecords(t, streamed(t, snap, wire.RecordSize), wire.Records(doc, func(c []byte, last bool) *statepb.LockRecord { return &statepb.LockRecord{Table: c, Last: last} }))
	sizes := []int{1, 2, 3, 7, 64, len(doc) - 1, len(doc), len(doc) + 1}
	for _, d := range []int{2, 3, 4, 5, 8, 16} { // exact multiples
		if len(doc)%d == 0 {
			sizes = append(sizes, len(doc)/d)
		}
	}
	for _, size := range sizes {
		if size < 1 || (size < 8 && len(doc) > 1<<16) {
			continue
		}
		sameRecords(t, streamed(t, snap, size), cut(doc, size))
	}
	return doc
}

// TestEncodeSameAsMarshal: for varied states — empty, one set, and
// random runs of every command — the streamed records are the marshalled
// document's, and a restore from them is the same state, answering the
// same commands the same way.
func TestEncodeSameAsMarshal(t *testing.T) {
	oneSet := newBuilder(t, 0)
	oneSet.rnd = rand.New(rand.NewPCG(0, 0))
	for len(oneSet.sets) == 0 {
		oneSet.step()
	}
	states := map[string]*builder{"empty": newBuilder(t, 0), "one set": oneSet}
	for seed := range uint64(40) {
		b := newBuilder(t, seed)
		for range 1 + b.rnd.IntN(400) {
			b.step()
		}
		states[fmt.Sprint("seed ", seed)] = b
	}
	for name, b := range states {
		t.Run(name, func(t *testing.T) {
			doc := checkEncoding(t, b.s.export())
			got := NewState(lease.NewTable(), nil)
			got.Reset()
			for _, r := range streamed(t, b.s.export(), 97) {
				if err := got.Restore(r); err != nil {
					t.Fatal(err)
				}
			}
			if again, _ := json.Marshal(got.export()); !bytes.Equal(again, doc) {
				t.Fatalf("restored state differs:\n%s\n%s", again, doc)
			}
			// The same commands after the restore get the same answers.
			seed := b.rnd.Uint64()
			a, c := *b, *b
			a.rnd, c.rnd = rand.New(rand.NewPCG(seed, 2)), rand.New(rand.NewPCG(seed, 2))
			a.sets, c.sets = append([][]byte(nil), b.sets...), append([][]byte(nil), b.sets...)
			c.s = got
			if len(b.sets) == 0 {
				return
			}
			for i := range 50 {
				a.next++
				c.next++
				h := a.holder()
				c.holder()
				set, cset := a.set(), c.set()
				ra, ea := a.s.ApplyAcquire(&statepb.LockAcquire{SetId: set, Holder: h, Mode: int32(W), RequestId: a.next, Principal: "p"})
				rc, ec := c.s.ApplyAcquire(&statepb.LockAcquire{SetId: cset, Holder: h, Mode: int32(W), RequestId: c.next, Principal: "p"})
				if !reflect.DeepEqual(ra, rc) || fmt.Sprint(ea) != fmt.Sprint(ec) {
					t.Fatalf("command %d: original %+v %v, restored %+v %v", i, ra, ea, rc, ec)
				}
			}
		})
	}
}

// TestEncodeOmitsAndNulls: json.Marshal's rules for nil and empty slices
// and omitempty fields hold in the streamed encoding.
func TestEncodeOmitsAndNulls(t *testing.T) {
	for _, snap := range []snapshot{
		{},
		{Table: Snapshot{Sets: []SetState{}}, Sets: []snapSet{}, FreeSets: []uint64{}, Holders: []snapHolder{}, Recent: []uint64{}, Waiting: map[uint64]string{}},
		{FreeSets: []uint64{3, 1}, Recent: []uint64{7, 9}, Waiting: map[uint64]string{10: "a", 9: "<b>", 1 << 63: "c"}, NextSet: 3, NextID: 1<<64 - 1,
			Holders: []snapHolder{{ID: 2, Secret: &djinn.ID{1}, Txn: &TxnKey{ID: 3}, Holder: 9}, {ID: 1, Owner: djinn.ID{2}}},
			Aborted: []snapVote{{Txn: TxnKey{ID: 4}, Endpoint: "m:1", Secret: &djinn.ID{5}, At: -1}, {Txn: TxnKey{Manager: [32]byte{1}, ID: 1<<64 - 1}}}},
		{Aborted: []snapVote{}},
	} {
		checkEncoding(t, snap)
	}
}

// TestEncodeFields: the encoder writes the snapshot's fields itself, so
// a field added to snapshot or Snapshot must be added to encode too.
func TestEncodeFields(t *testing.T) {
	names := func(v any) []string {
		var out []string
		for f := range reflect.TypeOf(v).Fields() {
			out = append(out, f.Name+" "+string(f.Tag))
		}
		return out
	}
	want := []string{"Table ", "Sets ", "NextSet ", `FreeSets json:",omitempty"`, "Holders ", "NextID ", "Recent ", `Waiting json:",omitempty"`, `Aborted json:",omitempty"`}
	if got := names(snapshot{}); !reflect.DeepEqual(got, want) {
		t.Errorf("snapshot's fields %q: encode writes %q; update it", got, want)
	}
	if got := names(Snapshot{}); !reflect.DeepEqual(got, []string{"Sets "}) {
		t.Errorf("Snapshot's fields %q: encode writes only Sets; update it", got)
	}
}

// TestEncodeEmitError: emit's error stops the encoding and is returned.
func TestEncodeEmitError(t *testing.T) {
	b := newBuilder(t, 3)
	for range 200 {
		b.step()
	}
	stop := fmt.Errorf("disk full")
	n := 0
	err := b.s.export().encode(16, func(*statepb.LockRecord) error { n++; return stop })
	if err != stop || n != 1 {
		t.Fatalf("error %v after %d records, want %v after 1", err, n, stop)
	}
}

// bigState is a State of n sets, each locked by an owner of its own.
func bigState(t testing.TB, n int) *State {
	b := newBuilder(t, 0)
	for range n {
		set := &statepb.LockCreateSet{SetId: b.id(), Cookie: b.id(), ExpiresUnixNanos: 1, Principal: "p"}
		owner := &statepb.LockCreateOwner{Cookie: b.id(), ExpiresUnixNanos: 1, Principal: "p"}
		if err := b.s.ApplyCreateSet(set); err != nil {
			t.Fatal(err)
		}
		if err := b.s.ApplyCreateOwner(owner); err != nil {
			t.Fatal(err)
		}
		b.next++
		if _, err := b.s.ApplyAcquire(&statepb.LockAcquire{SetId: set.SetId, Holder: &statepb.LockHolderState{Owner: owner.Cookie}, Mode: int32(W), RequestId: b.next, Principal: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	return b.s
}

// peakEncoding returns the most heap in use, beyond what was in use
// before, at any record encode emits of snap (records of size bytes),
// and the document's length.
func peakEncoding(t testing.TB, snap snapshot, size int) (peak uint64, doc int) {
	base := heapBytes()
	err := snap.encode(size, func(r *statepb.LockRecord) error {
		doc += len(r.Table)
		if h := heapBytes(); h > base {
			peak = max(peak, h-base)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return peak, doc
}

// TestEncodeMemoryBounded: encoding 100,000 sets holds a few records in
// memory, never the document. (json.Marshal of the snapshot held the
// whole document and its encoder's buffer.)
func TestEncodeMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100,000 sets")
	}
	s := bigState(t, 100_000)
	snap := s.export()
	const size = 256 << 10
	peak, doc := peakEncoding(t, snap, size)
	t.Logf("document %d bytes; at most %d bytes in use beyond the exported state while encoding in records of %d", doc, peak, size)
	if peak > 4*size {
		t.Errorf("%d bytes in use while encoding, want at most 4 records (%d); the document is %d", peak, 4*size, doc)
	}
	runtime.KeepAlive(snap)
}

// BenchmarkSnapshotEncode reports the bytes allocated to encode a
// snapshot of 100,000 sets (B/op), and the most heap in use beyond the
// exported state at a record (peak-B), streamed at the real record size
// and as one marshalled document.
//
//	go test -run XXX -bench SnapshotEncode -benchmem ./internal/lock
func BenchmarkSnapshotEncode(b *testing.B) {
	snap := bigState(b, 100_000).export()
	b.Run("streamed", func(b *testing.B) {
		for range b.N {
			if err := snap.encode(wire.RecordSize, func(*statepb.LockRecord) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
		peak, _ := peakEncoding(b, snap, wire.RecordSize)
		b.ReportMetric(float64(peak), "peak-B")
	})
	b.Run("document", func(b *testing.B) {
		var peak uint64
		for range b.N {
			base := heapBytes()
			doc, err := json.Marshal(snap)
			if err != nil {
				b.Fatal(err)
			}
			recs := wire.Records(doc, func(c []byte, last bool) *statepb.LockRecord { return &statepb.LockRecord{Table: c, Last: last} })
			peak = max(peak, heapBytes()-base)
			runtime.KeepAlive(recs)
		}
		b.ReportMetric(float64(peak), "peak-B")
	})
}
