package replica

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// wantSaying checks that err says each of want.
func wantSaying(t *testing.T, err error, want ...string) {
	t.Helper()
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q:\n%v", w, err)
		}
	}
}

// TestWALMetaCut: the log's metadata file emptied or cut short is refused
// saying so (not with bbolt's error, nor a fault reading a page past its
// end).
func TestWALMetaCut(t *testing.T) {
	dir := writeHistory(t, 6, 10, 0, 0)
	meta := filepath.Join(dir, "raft", "wal", metadb.FileName)
	orig := readFile(t, meta)
	for _, tc := range []struct {
		size int
		want string
	}{
		{0, "is empty"},
		{100, "cut short"},
		{2 * os.Getpagesize(), "cut short"}, // its meta pages only
	} {
		writeFile(t, meta, orig[:tc.size])
		_, err := reopen(t, dir, 0)
		wantRefused(t, err, meta, -1)
		wantSaying(t, err, tc.want)
	}
}

// TestRepairWithoutWALMeta: with the log's metadata file gone, emptied or
// cut short beside its segments, repair rebuilds the log from the
// segments with nothing lost (raft's term taken from the log), and the
// node then serves every command.
func TestRepairWithoutWALMeta(t *testing.T) {
	const n = 150
	for _, tc := range []struct {
		name   string
		damage func(path string) error
	}{
		{"gone", os.Remove},
		{"empty", func(path string) error { return os.Truncate(path, 0) }},
		{"cut short", func(path string) error { return os.Truncate(path, int64(2*os.Getpagesize())) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeHistory(t, n, 1000, 0, smallSegments)
			segs := segments(t, dir)
			if len(segs) < 3 {
				t.Fatalf("%d segments, want several", len(segs))
			}
			_, last := servedRange(segs)
			meta := filepath.Join(dir, "raft", "wal", metadb.FileName)
			if err := tc.damage(meta); err != nil {
				t.Fatal(err)
			}
			if _, err := reopen(t, dir, smallSegments); err == nil {
				t.Fatal("started without the log's metadata")
			}
			rep, err := Repair(dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.LostFirst != 0 || rep.Last != last || !strings.Contains(rep.String(), meta) {
				t.Fatalf("report:\n%s\nwant %s found, the log kept to %d, nothing lost", rep, meta, last)
			}
			if term, logTerm := termOf(t, dir, last); term < logTerm {
				t.Errorf("the rebuilt log's current term is %d, before its last entry's, %d", term, logTerm)
			}
			if got, err := reopen(t, dir, smallSegments); err != nil || got != n {
				t.Fatalf("after repair: %d commands, %v; want %d", got, err, n)
			}
		})
	}
}

// TestRepairAfterTheLogsEndWasRewritten: a log whose end raft-wal cut and
// wrote again (a follower's entries a new leader overwrote) keeps the cut
// segment's file whole, its metadata alone saying where the segment now
// ends. Repaired — its metadata gone, or its last batch damaged — the log
// takes the entries from the cut on from the newer segments only.
func TestRepairAfterTheLogsEndWasRewritten(t *testing.T) {
	const n = 150
	for _, metaGone := range []bool{true, false} {
		t.Run(fmt.Sprintf("metadata gone %v", metaGone), func(t *testing.T) {
			dir := writeHistory(t, n, 1000, 0, smallSegments)
			segs := segments(t, dir)
			if len(segs) < 3 {
				t.Fatalf("%d segments, want several", len(segs))
			}
			cut := segs[1].info.BaseIndex + 5
			last := rewriteEnd(t, dir, cut)
			if !metaGone {
				crashed(t, dir)
				s := segments(t, dir)
				i := len(s) - 1
				for len(s[i].walk.entries) == 0 {
					i-- // a tail made after the batch filled the segment
				}
				lastRecord(t, s[i])
				rep, err := Repair(dir)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Last != last-1 || rep.LostFirst != last || rep.LostLast != last {
					t.Fatalf("report:\n%s\nwant the log kept to %d, %d lost", rep, last-1, last)
				}
				if _, err := reopen(t, dir, smallSegments); err != nil {
					t.Fatalf("after repair: %v", err)
				}
				return
			}
			if err := os.Remove(filepath.Join(dir, "raft", "wal", metadb.FileName)); err != nil {
				t.Fatal(err)
			}
			rep, err := Repair(dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.LostFirst != 0 || rep.Last != last {
				t.Fatalf("report:\n%s\nwant the log kept to %d, nothing lost", rep, last)
			}
			if got, err := reopen(t, dir, smallSegments); err != nil || got != n {
				t.Fatalf("after repair: %d commands, %v; want %d", got, err, n)
			}
		})
	}
}

// rewriteEnd cuts dir's log after entry cut and writes the same entries
// again (in two batches, the last entry alone in the second), as raft-wal
// does when a leader overwrites a follower's end; it returns the log's
// last index.
func rewriteEnd(t *testing.T, dir string, cut uint64) uint64 {
	t.Helper()
	w, err := wal.Open(filepath.Join(dir, "raft", "wal"), wal.WithSegmentSize(smallSegments))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	last, err := w.LastIndex()
	if err != nil {
		t.Fatal(err)
	}
	var again []*raft.Log
	for i := cut + 1; i <= last; i++ {
		e := new(raft.Log)
		if err := w.GetLog(i, e); err != nil {
			t.Fatal(err)
		}
		again = append(again, e)
	}
	if err := w.DeleteRange(cut+1, last); err != nil {
		t.Fatal(err)
	}
	for _, batch := range [][]*raft.Log{again[:len(again)-1], again[len(again)-1:]} {
		if err := w.StoreLogs(batch); err != nil {
			t.Fatal(err)
		}
	}
	// Done here, not through the node, which keeps its witness up to
	// date: without one, nothing is checked against it.
	if err := os.Remove(filepath.Join(dir, "raft", witnessName)); err != nil {
		t.Fatal(err)
	}
	return last
}

// setMeta changes the meta page of the metadata file b at off with fn
// (its bytes after the page header) and writes its checksum again: a
// meta page that checks out, saying what fn made it say.
func setMeta(b []byte, off int, fn func(m []byte)) {
	m := b[off+boltPageHeader : off+boltPageHeader+boltMetaLen]
	fn(m)
	h := fnv.New64a()
	h.Write(m[:56])
	binary.NativeEndian.PutUint64(m[56:], h.Sum64())
}

// leafElem returns the offset in the leaf page p of its element whose key
// is key: its flags, where its key is, its key's size and its value's.
func leafElem(t *testing.T, p []byte, key string) int {
	t.Helper()
	e := binary.NativeEndian
	for i := range int(e.Uint16(p[10:])) {
		at := boltPageHeader + i*boltElemLen
		pos, ksize := int(e.Uint32(p[at+4:])), int(e.Uint32(p[at+8:]))
		if string(p[at+pos:at+pos+ksize]) == key {
			return at
		}
	}
	t.Fatalf("no element %q in the page", key)
	return 0
}

// newestMeta returns the offset of the newer meta page of the metadata
// file b, as written on this machine.
func newestMeta(b []byte) int {
	ps := os.Getpagesize()
	m0, _ := readBoltMeta(bytes.NewReader(b), 0)
	if m1, _ := readBoltMeta(bytes.NewReader(b), int64(ps)); m1.txid > m0.txid {
		return ps
	}
	return 0
}

// TestWALMetaDamagedPages: a metadata file whose meta pages check out but
// give a page size no such file has, more pages in use than a file can
// hold, a root page past the file's end or not a page of the kind bbolt
// expects there, or a freelist that is not one (raft-wal opens the file
// to write: bbolt reads the freelist then), or pages that do not make a
// tree (a page of the wrong kind, naming another, reached twice, an
// element past its page) is refused as damage naming the file; bbolt,
// trusting such a file, panicked, faulted, ran out of memory, overflowed
// its stack, or would have written over a page it took for free.
func TestWALMetaDamagedPages(t *testing.T) {
	const n = 6
	written := writeHistory(t, n, 10, 0, 0)
	orig := readFile(t, filepath.Join(written, "raft", "wal", metadb.FileName))
	ps, newest := os.Getpagesize(), newestMeta(orig)
	e := binary.NativeEndian
	root := int(e.Uint64(orig[newest+boltPageHeader+16:]))
	free := int(e.Uint64(orig[newest+boltPageHeader+32:]))
	pages := e.Uint64(orig[newest+boltPageHeader+40:])
	if pages != 6 {
		t.Fatalf("the file has %d pages in use, want the 6 the rows name", pages)
	}
	for _, tc := range []struct {
		name   string
		damage func(b []byte)
		want   string
	}{
		{"page size 0", func(b []byte) { setMeta(b, 0, func(m []byte) { e.PutUint32(m[8:], 0) }) }, "page size 0"},
		{"page size not a power of two", func(b []byte) { setMeta(b, 0, func(m []byte) { e.PutUint32(m[8:], 4000) }) }, "page size 4000"},
		{"pages in use past 2^64 bytes", func(b []byte) { setMeta(b, newest, func(m []byte) { e.PutUint64(m[40:], 1<<62) }) }, "cut short"},
		{"root page past the file", func(b []byte) { setMeta(b, newest, func(m []byte) { e.PutUint64(m[16:], 1<<20) }) }, "not one of its 6 pages in use"},
		{"root page not a bucket's", func(b []byte) { e.PutUint16(b[root*ps+8:], 0x04) }, "not a branch or a leaf page"},
		{"a branch page pointing to itself", func(b []byte) {
			p := b[root*ps:]
			e.PutUint16(p[8:], boltBranchFlag)
			e.PutUint16(p[10:], 1)
			e.PutUint32(p[16:], 16) // its key after the element
			e.PutUint32(p[20:], 1)
			e.PutUint64(p[24:], uint64(root))
		}, "reached twice"},
		{"a bucket past its page", func(b []byte) {
			p := b[root*ps : root*ps+ps]
			e.PutUint32(p[leafElem(t, p, metadb.StableBucket)+12:], 0x7fffffff) // its value's size
		}, "a key or a value past its end"},
		{"a page saying it is another", func(b []byte) { e.PutUint64(b[root*ps:], 0) }, fmt.Sprintf("page %d says it is page 0", root)},
		{"a key of none", func(b []byte) {
			p := b[root*ps : root*ps+ps]
			e.PutUint32(p[leafElem(t, p, metadb.StableBucket)+8:], 0) // its key's size
		}, "a key of none"},
		{"no bucket of raft's term and vote", func(b []byte) {
			p := b[root*ps : root*ps+ps]
			at := leafElem(t, p, metadb.StableBucket)
			p[at+int(e.Uint32(p[at+4:]))] = 'S' // its key
		}, "no place for raft's term and vote"},
		{"a page in use listed free", func(b []byte) {
			e.PutUint16(b[free*ps+10:], 1)
			e.PutUint64(b[free*ps+boltPageHeader:], uint64(root))
		}, fmt.Sprintf("lists page %d as free, but its structure holds it", root)},
		// These bbolt reads only when it opens the file for writing, as
		// raft-wal does.
		{"freelist page past the file", func(b []byte) { setMeta(b, newest, func(m []byte) { e.PutUint64(m[32:], 1<<20) }) }, "freelist"},
		{"freelist at the root page", func(b []byte) { setMeta(b, newest, func(m []byte) { e.PutUint64(m[32:], uint64(root)) }) }, "is not a freelist page"},
		{"freelist at a meta page", func(b []byte) { setMeta(b, newest, func(m []byte) { e.PutUint64(m[32:], 1) }) }, "gives page 1 as its freelist"},
		{"freelist past the pages in use", func(b []byte) { setMeta(b, newest, func(m []byte) { e.PutUint64(m[32:], pages) }) }, "as its freelist"},
		{"freelist page a leaf's", func(b []byte) { e.PutUint16(b[free*ps+8:], 0x02) }, "is not a freelist page"},
		{"freelist running past the pages in use", func(b []byte) { e.PutUint32(b[free*ps+12:], 1<<20) }, "past its"},
		{"freelist count past its page", func(b []byte) {
			e.PutUint16(b[free*ps+10:], 0xFFFF)
			e.PutUint64(b[free*ps+boltPageHeader:], 1<<40)
		}, "more than the"},
		{"freelist listing a meta page", func(b []byte) {
			e.PutUint16(b[free*ps+10:], 1)
			e.PutUint64(b[free*ps+boltPageHeader:], 1)
		}, "lists page 1 as free"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.CopyFS(dir, os.DirFS(written)); err != nil {
				t.Fatal(err)
			}
			meta := filepath.Join(dir, "raft", "wal", metadb.FileName)
			b := bytes.Clone(orig)
			tc.damage(b)
			writeFile(t, meta, b)
			_, err := reopen(t, dir, 0)
			wantRefused(t, err, meta, -1)
			wantSaying(t, err, tc.want)
			// The next step the refusal gives: repair rebuilds the log
			// from its segments, nothing lost.
			rep, err := Repair(dir)
			if err != nil || rep.LostFirst != 0 || !strings.Contains(rep.String(), meta) {
				t.Fatalf("repair: %v, report:\n%s\nwant %s found, nothing lost", err, rep, meta)
			}
			if got, err := reopen(t, dir, 0); err != nil || got != n {
				t.Fatalf("after repair: %d commands, %v; want %d", got, err, n)
			}
		})
	}
	if got, err := reopen(t, written, 0); err != nil || got != n {
		t.Fatalf("the file as written: %d commands, %v; want %d", got, err, n)
	}
}

// TestWALMetaFreelistRepaired: a metadata file whose freelist page is not
// one, refused, is rebuilt by repair from the log's segments, with raft's
// term and vote from the term record; the node then serves everything.
func TestWALMetaFreelistRepaired(t *testing.T) {
	dir := writeHistory(t, 6, 10, 0, 0)
	meta := filepath.Join(dir, "raft", "wal", metadb.FileName)
	rec := termRecorded(t, filepath.Join(dir, "raft"))
	b := readFile(t, meta)
	ps := os.Getpagesize()
	free := int(binary.NativeEndian.Uint64(b[newestMeta(b)+boltPageHeader+32:]))
	b[free*ps+8] ^= boltFreelistFlag
	writeFile(t, meta, b)
	_, err := reopen(t, dir, 0)
	wantRefused(t, err, meta, int64(free*ps))
	rep, err := Repair(dir)
	if err != nil || rep.LostFirst != 0 || len(rep.Dropped) > 0 {
		t.Fatalf("repair: %v\n%s\nwant the log rebuilt, nothing lost", err, rep)
	}
	if got := stableIn(t, dir); !got.equal(rec) {
		t.Errorf("after repair the metadata holds %v, want the record's %v", got, rec)
	}
	if got, err := reopen(t, dir, 0); err != nil || got != 6 {
		t.Fatalf("after repair: %d commands, %v; want 6", got, err)
	}
}
