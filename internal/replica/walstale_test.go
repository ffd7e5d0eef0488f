package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/proto/statepb"
)

// metaFirst and metaMore are how many commands the log holds when its
// metadata is copied, and how many more it takes after.
const metaFirst, metaMore = 10, 150

// TestWALMetaOlderThanSegments: the log's metadata restored from a copy
// taken before its last listed segment was sealed — the log having moved
// on to newer segments since, or (a crash as the log moved on) sealed it
// only — is refused naming the metadata file, before raft-wal would serve
// the log cut at that segment and delete the newer ones; repair rebuilds
// the log from its segments with nothing lost. Segment files older than
// the metadata's last one, which raft-wal deletes at open, are no damage.
func TestWALMetaOlderThanSegments(t *testing.T) {
	// prepare returns a log of several segments, and its metadata and
	// the records beside the log (log-end, witness, term) as they were when it
	// had only its first.
	prepare := func(t *testing.T) (dir, meta string, old []byte, records map[string][]byte, segs []segCheck) {
		dir = writeHistory(t, metaFirst, 1000, 0, smallSegments)
		meta = filepath.Join(dir, "raft", "wal", metadb.FileName)
		if n := len(segments(t, dir)); n != 1 {
			t.Fatalf("%d segments after %d commands, want 1", n, metaFirst)
		}
		old, records = readFile(t, meta), map[string][]byte{}
		for _, name := range []string{logEndName, witnessName, termName} {
			records[name] = readFile(t, filepath.Join(dir, "raft", name))
		}
		appendHistory(t, dir, metaMore, 1000, smallSegments)
		segs = segments(t, dir)
		if len(segs) < 3 {
			t.Fatalf("%d segments, want several", len(segs))
		}
		return dir, meta, old, records, segs
	}

	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("newer segments, clean %v", clean), func(t *testing.T) { olderThanNewer(t, clean, prepare) })
	}

	t.Run("tail sealed, no newer segment", func(t *testing.T) {
		// As a crash leaves the log after its first segment was sealed,
		// before the metadata said so and the next segment was made (the
		// records beside the log then said no more than they did then).
		dir := sealedTail(t, prepare, true)
		// Nothing is lost: the start records the seal and a new segment,
		// as raft-wal would have, and the node leads (it appends).
		got, err := reopen(t, dir, smallSegments)
		if err != nil || got <= metaFirst {
			t.Fatalf("%d commands, %v; want the node to start with more than %d", got, err, metaFirst)
		}
		if segs := segments(t, dir); len(segs) < 2 || segs[0].info.SealTime.IsZero() {
			t.Fatalf("the seal is not recorded: %d segments", len(segs))
		}
		if got, err := reopen(t, dir, smallSegments); err != nil || got <= metaFirst {
			t.Fatalf("restarted again: %d commands, %v", got, err)
		}
	})

	t.Run("tail sealed, newer segments gone, records kept", func(t *testing.T) {
		// The same files, but the records beside the log say more was
		// acknowledged: an old metadata file and newer segments lost, not
		// a crash. The seal is recorded, and the start refuses the log
		// that lost the newer segments' entries.
		dir := sealedTail(t, prepare, false)
		_, err := reopen(t, dir, smallSegments)
		var d *disk.DamageError
		if !errors.As(err, &d) || !strings.Contains(err.Error(), "acknowledged") {
			t.Fatalf("started, or refused without saying acknowledged entries are gone: %v", err)
		}
	})

	t.Run("older segment files left over", func(t *testing.T) {
		dir := writeSnapshots(t, metaMore, 1000, smallSegments, metaMore)
		segs := segments(t, dir)
		leftover := readFile(t, segs[0].path)
		// What raft-wal does when raft compacts the log behind a snapshot:
		// it drops the segment from its metadata, then deletes the file —
		// here put back, as a crash between the two leaves it.
		w, err := wal.Open(filepath.Join(dir, "raft", "wal"), wal.WithSegmentSize(smallSegments))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.DeleteRange(segs[0].info.MinIndex, segs[0].info.MaxIndex); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		writeFile(t, segs[0].path, leftover)
		if got, err := reopen(t, dir, smallSegments); err != nil || got != metaMore {
			t.Fatalf("with a leftover segment file: %d commands, %v; want %d", got, err, metaMore)
		}
	})
}

// sealedTail makes prepare's log look as it did when its first segment
// was sealed on disk, before the metadata said so: the newer segments
// gone, the metadata from then, and (restore) the records beside the log
// from then too; as after a crash.
func sealedTail(t *testing.T, prepare func(*testing.T) (string, string, []byte, map[string][]byte, []segCheck), restore bool) string {
	t.Helper()
	dir, meta, old, records, segs := prepare(t)
	for _, s := range segs[1:] {
		if err := os.Remove(s.path); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, meta, old)
	if restore {
		for name, b := range records {
			writeFile(t, filepath.Join(dir, "raft", name), b)
		}
	}
	crashed(t, dir)
	return dir
}

// olderThanNewer is TestWALMetaOlderThanSegments with segments newer than
// the metadata, after a clean stop or a crash.
func olderThanNewer(t *testing.T, clean bool, prepare func(*testing.T) (string, string, []byte, map[string][]byte, []segCheck)) {
	dir, meta, old, _, segs := prepare(t)
	writeFile(t, meta, old)
	if !clean {
		crashed(t, dir)
	}
	_, err := reopen(t, dir, smallSegments)
	wantRefused(t, err, meta, -1)
	wantSaying(t, err, "the log's metadata is older than its segments", filepath.Base(segs[1].path))
	for _, s := range segs {
		if _, err := os.Stat(s.path); err != nil {
			t.Fatalf("a segment is gone after the refusal: %v", err)
		}
	}
	rep, err := Repair(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, last := servedRange(segs)
	if rep.LostFirst != 0 || rep.Last != last || !strings.Contains(rep.String(), "older than its segments") {
		t.Fatalf("report:\n%s\nwant the metadata's age found, the log kept to %d, nothing lost", rep, last)
	}
	if term, logTerm := termOf(t, dir, last); term < logTerm {
		t.Errorf("the rebuilt log's current term is %d, before its last entry's, %d", term, logTerm)
	}
	if got, err := reopen(t, dir, smallSegments); err != nil || got != metaFirst+metaMore {
		t.Fatalf("after repair: %d commands, %v; want %d", got, err, metaFirst+metaMore)
	}
}

// termOf returns raft's current term in dir's log, and the term of its
// entry last.
func termOf(t *testing.T, dir string, last uint64) (current, term uint64) {
	t.Helper()
	w, err := wal.Open(filepath.Join(dir, "raft", "wal"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var e raft.Log
	if err := w.GetLog(last, &e); err != nil {
		t.Fatal(err)
	}
	current, err = w.GetUint64([]byte("CurrentTerm"))
	if err != nil {
		t.Fatal(err)
	}
	return current, e.Term
}

// TestTornSealAfterACrash: a crash while the append that sealed the tail
// segment was written — its index frame on disk, its commit not — leaves
// that batch out (never acknowledged), and the node leads and writes on;
// before, raft-wal took the segment for sealed and refused every append,
// and the node never led.
func TestTornSealAfterACrash(t *testing.T) {
	// The log as a crash leaves it after the append that sealed its first
	// segment was written, before the metadata said so and the next
	// segment was made (the records beside the log saying no more than
	// they did before that append).
	dir := writeHistory(t, metaFirst, 1000, 0, smallSegments)
	meta := filepath.Join(dir, "raft", "wal", metadb.FileName)
	old := readFile(t, meta)
	records := map[string][]byte{}
	for _, name := range []string{logEndName, witnessName, termName} {
		records[name] = readFile(t, filepath.Join(dir, "raft", name))
	}
	appendHistory(t, dir, metaMore, 1000, smallSegments)
	segs := segments(t, dir)
	for _, s := range segs[1:] {
		if err := os.Remove(s.path); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, meta, old)
	for name, b := range records {
		writeFile(t, filepath.Join(dir, "raft", name), b)
	}
	crashed(t, dir)
	s := segs[0]
	last := s.walk.commits[len(s.walk.commits)-1]
	if s.walk.indexAt < 0 || s.walk.indexAt > last.off {
		t.Fatalf("the first segment's last batch holds no index frame (index at %d, last commit at %d)", s.walk.indexAt, last.off)
	}
	damageFile(t, s.path, last.off, func(b []byte) { clear(b[:segFrameLen]) }) // the commit never written

	leading := make(chan struct{}, 1)
	c := newCounter()
	node, err := openSized(dir, smallSegments, c, leading)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	select {
	case <-leading:
	case <-time.After(20 * time.Second):
		t.Fatal("the node does not lead")
	}
	held := c.get()
	if held < metaFirst {
		t.Fatalf("%d commands served, want at least the %d of the first start", held, metaFirst)
	}
	cmd := &statepb.Command{Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: "x"}}}
	if _, err := node.Propose(context.Background(), cmd); err != nil {
		t.Fatalf("a write after the start: %v", err)
	}
}
