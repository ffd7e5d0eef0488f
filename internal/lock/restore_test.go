package lock

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/proto/statepb"
)

// A snapshot is restored as its records come, into the state's own
// structures: never the whole document in memory, nor its plain values.

// TestRestoreDecodesAsRecordsCome: each record pushed is decoded as far
// as it goes — by the time the last comes, every set is in the table
// being built and most sets' names are in place — and what waits
// undecoded in a list is never more than a record and an element (a
// field's value, such as the recent grants, is decoded whole).
func TestRestoreDecodesAsRecordsCome(t *testing.T) {
	const n, size = 5_000, 4 << 10
	recs := streamed(t, bigState(t, n).export(), size)
	d := newDocDecoder()
	for i, r := range recs {
		if i == len(recs)-1 {
			t.Logf("%d records; at the last, %d sets in the table and %d named", len(recs), d.st.im.t.sets.len(), d.st.nSets)
			if d.st.im.t.sets.len() != n || d.st.nSets < n/2 {
				t.Errorf("at the last of %d records the table held %d sets (want %d) and %d were named (want at least %d)", len(recs), d.st.im.t.sets.len(), n, d.st.nSets, n/2)
			}
		}
		if err := d.push(r.Table, r.Last); err != nil {
			t.Fatal(err)
		}
		if held := len(d.buf) - d.off; held > size+1024 && d.at == atElem {
			t.Fatalf("after record %d, %d bytes of a list wait undecoded", i, held)
		}
	}
	if err := d.st.finish(); err != nil {
		t.Fatal(err)
	}
}

// restoreAll restores recs into a new state.
func restoreAll(t testing.TB, recs []*statepb.LockRecord) *State {
	t.Helper()
	s := NewState(lease.NewTable(), nil)
	s.Reset()
	for _, r := range recs {
		if err := s.Restore(r); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func exported(t testing.TB, s *State) []byte {
	t.Helper()
	b, err := json.Marshal(s.export())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRestoreResetMidway: a restore cut short by Reset (a new snapshot
// comes) leaves nothing behind, and the next restore is whole; so does
// one that failed on a damaged record.
func TestRestoreResetMidway(t *testing.T) {
	b := newBuilder(t, 7)
	for range 300 {
		b.step()
	}
	recs := streamed(t, b.s.export(), 97)
	want := exported(t, b.s)
	s := NewState(lease.NewTable(), nil)
	for _, r := range recs[:len(recs)/2] {
		if err := s.Restore(r); err != nil {
			t.Fatal(err)
		}
	}
	s.Reset()
	if got := exported(t, s); !bytes.Equal(got, exported(t, NewState(lease.NewTable(), nil))) {
		t.Fatalf("after Reset: %s", got)
	}
	damaged := append([]*statepb.LockRecord{{Table: []byte(`{"Table":{"Sets":[{"ID":"x"`)}}, recs[1:]...)
	var err error
	for _, r := range damaged {
		if err = s.Restore(r); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("a damaged document restored")
	}
	t.Logf("damaged: %v", err)
	s.Reset()
	for _, r := range recs {
		if err := s.Restore(r); err != nil {
			t.Fatal(err)
		}
	}
	if got := exported(t, s); !bytes.Equal(got, want) {
		t.Fatalf("restored state differs:\n%s\n%s", got, want)
	}
}

// TestRestoreMemoryBounded: restoring 100,000 sets (a document of 130
// records) holds, between records, no more than the state restored so
// far and a few records' worth of the decoder's buffer: nothing of the
// document is kept.
func TestRestoreMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100,000 sets")
	}
	const size = 256 << 10
	recs := streamed(t, bigState(t, 100_000).export(), size)
	s := NewState(lease.NewTable(), nil)
	s.Reset()
	base := heapBytes()
	var peak uint64
	for _, r := range recs {
		if err := s.Restore(r); err != nil {
			t.Fatal(err)
		}
		if h := heapBytes(); h > base {
			peak = max(peak, h-base)
		}
	}
	final := heapBytes() - base
	runtime.KeepAlive(recs)
	t.Logf("%d records of %d bytes; the restored state %d bytes; at most %d bytes in use at a record", len(recs), size, final, peak)
	if peak > final+4*size {
		t.Errorf("%d bytes in use while restoring, want at most the restored state (%d) and 4 records (%d)", peak, final, 4*size)
	}
	runtime.KeepAlive(s)
}

// FuzzRestoreDocument: any document, cut into records of any size, is
// restored or refused with an error — no panic, no hang — and a state
// restored from one exports a document that restores to the same state.
func FuzzRestoreDocument(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3} {
		b := newBuilder(f, seed)
		for range 40 {
			b.step()
		}
		f.Add(exported(f, b.s), uint16(97))
	}
	voted := NewState(lease.NewTable(), nil)
	for id := range uint64(3) {
		voted.ApplyTxnEnd(int64(id), &statepb.LockTxnEnd{Manager: mgr(id), Txn: 1 + id, VotedAborted: true, Secret: bytes.Repeat([]byte{byte(id)}, int(16*id%32))})
	}
	f.Add(exported(f, voted), uint16(33))
	f.Add([]byte(`{"Table":{"Sets":null},"Sets":null,"NextSet":0,"Holders":null,"NextID":0,"Recent":null}`), uint16(5))
	f.Fuzz(func(t *testing.T, doc []byte, size uint16) {
		s := NewState(lease.NewTable(), nil)
		s.Reset()
		var err error
		for _, r := range cut(doc, 1+int(size%4096)) {
			if err = s.Restore(r); err != nil {
				break
			}
		}
		if err != nil {
			s.Reset()
			return
		}
		want := exported(t, s)
		again := restoreAll(t, streamed(t, s.export(), 1+int(size%4096)))
		if got := exported(t, again); !bytes.Equal(got, want) {
			t.Fatalf("restored again, the state differs:\n%s\n%s", got, want)
		}
	})
}

// TestRestoreDocumentEdges: the decoder reads what json.Unmarshal reads —
// a value cut anywhere between records, fields in any order and case,
// unknown fields skipped — and refuses the rest, naming the fault.
func TestRestoreDocumentEdges(t *testing.T) {
	const empty = `"Table":{"Sets":[]},"Sets":null,"NextSet":0,"Holders":null,"Recent":null`
	for _, tc := range []struct {
		name, doc, err string
		nextID         uint64
	}{
		{name: "a number cut between records", doc: `{` + empty + `,"NextID":123456789}`, nextID: 123456789},
		{name: "fields in another order and case, unknown ones skipped", doc: `{"nextid":7,"Extra":{"a":[1,{"b":2}]},"table":{"sets":[],"Other":[]},"SETS":null,"nextSet":0,"holders":null,"recent":null}`, nextID: 7},
		{name: "a comma before the end", doc: `{` + empty + `,"NextID":0,}`, err: "invalid character"},
		{name: "a field twice", doc: `{` + empty + `,"NextID":1,"nextID":2}`, err: "appears twice"},
		{name: "the document cut short", doc: `{` + empty + `,"NextID":1`, err: "ends early"},
		{name: "data after the document", doc: `{` + empty + `,"NextID":1} {}`, err: "data after the document"},
		{name: "a list where none is", doc: `{"Table":{"Sets":7}}`, err: "where a list was expected"},
		{name: "no colon after a name", doc: `{"NextID" 1}`, err: "where : was expected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, size := range []int{1, 2, 3, 7, len(tc.doc)} {
				s := NewState(lease.NewTable(), nil)
				s.Reset()
				var err error
				for _, r := range cut([]byte(tc.doc), size) {
					if err = s.Restore(r); err != nil {
						break
					}
				}
				switch {
				case tc.err == "" && err != nil:
					t.Fatalf("records of %d bytes: %v", size, err)
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
					t.Fatalf("records of %d bytes: error %v, want one saying %q", size, err, tc.err)
				case tc.err == "" && s.nextID != tc.nextID:
					t.Fatalf("records of %d bytes: NextID %d, want %d", size, s.nextID, tc.nextID)
				}
			}
		})
	}
}

// TestRestoredSaysCutShort: Restored, told the snapshot's records are all
// read, refuses a lock document whose last record never came, and
// accepts a whole one (and a snapshot with no lock records at all).
func TestRestoredSaysCutShort(t *testing.T) {
	b := newBuilder(t, 3)
	for range 200 {
		b.step()
	}
	recs := streamed(t, b.s.export(), 97)
	if len(recs) < 2 {
		t.Fatalf("%d records: the test needs a document in several", len(recs))
	}
	s := NewState(lease.NewTable(), nil)
	if err := s.Restored(); err != nil {
		t.Fatalf("no lock records: %v", err)
	}
	for _, r := range recs[:len(recs)-1] {
		if err := s.Restore(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Restored(); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("the last record missing: %v, want a refusal", err)
	}
	s.Reset()
	for _, r := range recs {
		if err := s.Restore(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Restored(); err != nil {
		t.Fatalf("a whole document: %v", err)
	}
	if got, want := exported(t, s), exported(t, b.s); !bytes.Equal(got, want) {
		t.Fatalf("restored state differs:\n%s\n%s", got, want)
	}
}
