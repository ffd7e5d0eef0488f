package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	rawfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/proto/statepb"
)

// witnessHistory writes, once per test, a history of n commands of 1000
// bytes over several small segments, left as a crash leaves it; each call
// returns a copy of it.
func witnessHistory(t *testing.T, n int) func() string {
	t.Helper()
	orig := writeHistory(t, n, 1000, 0, smallSegments)
	crashed(t, orig)
	return func() string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.CopyFS(dir, os.DirFS(orig)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
}

// witnessOf returns the witness in dir's raft directory.
func witnessOf(t *testing.T, dir string) witness {
	t.Helper()
	w, ok, err := readWitness(filepath.Join(dir, "raft"))
	if err != nil || !ok {
		t.Fatalf("no witness of the log: %v", err)
	}
	return w
}

func witnessFor(info types.SegmentInfo) witness {
	return witness{BaseIndex: info.BaseIndex, ID: info.ID}
}

// TestWitnessedSegmentLost: a log whose last segment held acknowledged
// entries and is gone, cut to nothing or short of its first batch, or
// whose whole directory is gone, is refused, naming the file and the
// first entry lost — not started short, or empty as a new node — even
// where the log-end record does not cover the segment yet. Before the
// witness, raft-wal took each for a segment made just before a crash and
// the node started without those entries, saying nothing.
func TestWitnessedSegmentLost(t *testing.T) {
	history := witnessHistory(t, 150)
	for _, tc := range []struct {
		name string
		// damage damages dir, whose last segment is tail, and returns the
		// file the refusal must name.
		damage func(t *testing.T, dir string, tail segCheck) string
	}{
		{"last segment removed", func(t *testing.T, _ string, tail segCheck) string {
			if err := os.Remove(tail.path); err != nil {
				t.Fatal(err)
			}
			return tail.path
		}},
		{"last segment cut to 0 bytes", func(t *testing.T, _ string, tail segCheck) string {
			cutAt(t, tail, 0)
			return tail.path
		}},
		{"last segment cut inside its first batch", func(t *testing.T, _ string, tail segCheck) string {
			cutAt(t, tail, tail.walk.commits[0].off)
			return tail.path
		}},
		{"log directory removed", func(t *testing.T, dir string, tail segCheck) string {
			if err := os.RemoveAll(filepath.Join(dir, "raft", "wal")); err != nil {
				t.Fatal(err)
			}
			return tail.path
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := history()
			segs := segments(t, dir)
			tail := segs[len(segs)-1]
			if len(segs) < 3 || tail.kept == 0 {
				t.Fatalf("%d segments, the last holding %d entries: want several, the last holding some", len(segs), tail.kept)
			}
			if got := witnessOf(t, dir); got != witnessFor(tail.info) {
				t.Fatalf("the witness names %+v, want the last segment %+v", got, witnessFor(tail.info))
			}
			// The log-end record, trailing the log, had not reached the
			// last segment: only the witness tells of its entries.
			setLogEnd(t, filepath.Join(dir, "raft"), tail.info.BaseIndex-1)
			path := tc.damage(t, dir, tail)
			_, err := reopen(t, dir, smallSegments)
			wantRefused(t, err, path, -1)
			if want := fmt.Sprintf("entries from index %d on", tail.info.BaseIndex); !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal does not say %q:\n%v", want, err)
			}
		})
	}
}

// createdFS tells of every file raft-wal creates.
type createdFS struct {
	types.VFS
	created chan<- string
}

func (c *createdFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := c.VFS.Create(dir, name, size)
	c.created <- name
	return f, err
}

// TestCrashBeforeANewSegmentsFirstBatch: a crash after the log made its
// next segment and before that segment's first batch leaves the segment
// empty (or, its directory entry not yet durable, gone) and the witness
// naming the segment before it: the node starts and serves every entry.
func TestCrashBeforeANewSegmentsFirstBatch(t *testing.T) {
	const n = 20
	dir := writeHistory(t, n, 1000, 0, smallSegments)
	crashed(t, dir)
	raftDir, walDir := filepath.Join(dir, "raft"), filepath.Join(dir, "raft", "wal")
	w, ok, err := readWitness(raftDir)
	if err != nil || !ok {
		t.Fatalf("no witness: %v", err)
	}
	created := make(chan string, 1)
	log, err := wal.Open(walDir, wal.WithSegmentSize(smallSegments),
		wal.WithSegmentFiler(segment.NewFiler(walDir, &createdFS{VFS: newWitnessFS(raftDir, rawfs.New(), w, ok), created: created})))
	if err != nil {
		t.Fatal(err)
	}
	// Append copies of the last command until the log seals its segment;
	// then wait for the next one to be made and stop: Close waits for the
	// rotation, as a crash right after it leaves the files.
	last, _ := log.LastIndex()
	var e raft.Log
	if err := log.GetLog(last, &e); err != nil || e.Type != raft.LogCommand {
		t.Fatalf("the last entry: %v, type %v; want a command", err, e.Type)
	}
	tail := newestSegment(t, walDir)
	appended := 0
	for sealed := false; !sealed; {
		appended++
		e.Index = last + uint64(appended)
		if err := log.StoreLogs([]*raft.Log{&e}); err != nil {
			t.Fatal(err)
		}
		sealed = tailSealed(t, walDir, tail)
	}
	next := <-created
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, dir)
	if tail := segs[len(segs)-1]; segment.FileName(tail.info) != next || tail.kept != 0 {
		t.Fatalf("the last segment is %s holding %d entries, want %s, empty", filepath.Base(tail.path), tail.kept, next)
	}
	if got, want := witnessOf(t, dir), witnessFor(segs[len(segs)-2].info); got != want {
		t.Fatalf("the witness names %+v, want the segment before the new one, %+v", got, want)
	}
	gone := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(gone, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(gone, "raft", "wal", next)); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]string{"empty": dir, "gone": gone} {
		got, err := reopen(t, d, smallSegments)
		if err != nil || got != uint64(n+appended) {
			t.Errorf("new segment %s: %d commands served, %v; want all %d", name, got, err, n+appended)
		}
	}
}

// tailSealed reports whether the segment file name in walDir is sealed:
// holds its index frame.
func tailSealed(t *testing.T, walDir, name string) bool {
	t.Helper()
	var base, id uint64
	if _, err := fmt.Sscanf(name, segNamePattern, &base, &id); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(walDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return walkSegment(bytes.NewReader(b), int64(len(b)), base).indexAt >= 0
}

// newestSegment returns the name of the newest segment file in walDir.
func newestSegment(t *testing.T, walDir string) string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no segments in %s: %v", walDir, err)
	}
	slices.Sort(names)
	return filepath.Base(names[len(names)-1])
}

// TestWitnessDamaged: a witness that does not decode is refused, naming
// it; repair writes it again from the log, losing nothing.
func TestWitnessDamaged(t *testing.T) {
	const n = 12
	dir := writeHistory(t, n, 10, 0, 0)
	crashed(t, dir)
	path := filepath.Join(dir, "raft", witnessName)
	flipBit(t, path, 30)
	_, err := reopen(t, dir, 0)
	wantRefused(t, err, path, -1)
	rep, err := Repair(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LostFirst != 0 || len(rep.Found) != 1 || !strings.Contains(rep.Found[0], path) {
		t.Fatalf("report:\n%s\nwant the witness found damaged, nothing lost", rep)
	}
	if got, err := reopen(t, dir, 0); err != nil || got != n {
		t.Fatalf("after repair: %d, %v; want %d", got, err, n)
	}
}

// TestRepairWitnessedSegmentLost: repair of a log whose last segment,
// witnessed, is gone keeps the segments before it, reports the entries
// from the lost segment's first on as acknowledged and lost (where the
// log-end record does not reach them yet), and leaves a
// directory that starts (its witness naming the rewritten log, whose
// segments' ids start again).
func TestRepairWitnessedSegmentLost(t *testing.T) {
	const n = 150
	dir := writeHistory(t, n, 1000, 0, smallSegments)
	crashed(t, dir)
	segs := segments(t, dir)
	tail := segs[len(segs)-1]
	// The log-end record had not reached the segment: only the witness
	// tells of its entries.
	setLogEnd(t, filepath.Join(dir, "raft"), tail.info.BaseIndex-1)
	if err := os.Remove(tail.path); err != nil {
		t.Fatal(err)
	}
	rep, err := Repair(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := tail.info.BaseIndex
	if rep.LostFirst != b || rep.Last != b-1 || !strings.Contains(rep.String(), "acknowledged: lost to this node") {
		t.Fatalf("report:\n%s\nwant entries from %d on lost, kept up to %d", rep, b, b-1)
	}
	if got, err := reopen(t, dir, smallSegments); err != nil || got != uint64(n-tail.kept) {
		t.Fatalf("after repair: %d, %v; want the %d commands before the lost segment", got, err, n-tail.kept)
	}
	segs = segments(t, dir)
	if got, want := witnessOf(t, dir), witnessFor(segs[len(segs)-1].info); got != want {
		t.Errorf("after repair and a start the witness names %+v, want the last segment %+v", got, want)
	}
}

// TestWitnessFromBefore: a data directory from before the witness (none
// in it) starts with everything, and its first append writes one.
func TestWitnessFromBefore(t *testing.T) {
	const n = 12
	dir := writeHistory(t, n, 10, 0, 0)
	crashed(t, dir)
	if err := os.Remove(filepath.Join(dir, "raft", witnessName)); err != nil {
		t.Fatal(err)
	}
	if got, err := reopen(t, dir, 0); err != nil || got != n {
		t.Fatalf("%d, %v; want %d", got, err, n)
	}
	segs := segments(t, dir)
	if got, want := witnessOf(t, dir), witnessFor(segs[len(segs)-1].info); got != want {
		t.Errorf("the witness names %+v, want the last segment %+v", got, want)
	}
}

// TestWitnessWriteFails: a witness that cannot be written fails the
// fsync it follows, so the append is not acknowledged and the node fails
// as for any log write that fails; opened again it serves every
// acknowledged entry.
func TestWitnessWriteFails(t *testing.T) {
	dir := writeHistory(t, 2, 1000, 0, smallSegments)
	// A directory where the witness's temporary file goes: writing it fails.
	if err := os.Mkdir(filepath.Join(dir, "raft", witnessName+".tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	leading := make(chan struct{}, 1)
	node, err := openSized(dir, smallSegments, newCounter(), leading)
	if err != nil {
		t.Fatal(err)
	}
	<-leading
	acked := 2
	cmd := &statepb.Command{Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: strings.Repeat("x", 1000)}}}
	var failed error
	for i := 0; i < 200 && failed == nil; i++ {
		if _, failed = node.Propose(context.Background(), cmd); failed == nil {
			acked++
		}
	}
	if failed == nil {
		t.Fatal("200 commands of 1000 bytes acknowledged, 64 KiB segments, and no witness could be written")
	}
	select {
	case err := <-node.Failed():
		if !strings.Contains(err.Error(), witnessName) {
			t.Errorf("the node failed with %v, want the witness named", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the node did not fail")
	}
	node.Close()
	if err := os.Remove(filepath.Join(dir, "raft", witnessName+".tmp")); err != nil {
		t.Fatal(err)
	}
	if got, err := reopen(t, dir, smallSegments); err != nil || got < uint64(acked) {
		t.Fatalf("opened again: %d, %v; want the %d acknowledged", got, err, acked)
	}
}

// FuzzWitness: the witness decodes only from the bytes its own encoding
// makes, and a witness file holding anything else is damage naming it.
func FuzzWitness(f *testing.F) {
	f.Add(witness{BaseIndex: 7, ID: 3}.encode())
	f.Add([]byte(witnessMagic))
	f.Add(cleanStop{LastIndex: 42, LastTerm: 3}.encode())
	f.Add([]byte{})
	raftDir := f.TempDir()
	path := filepath.Join(raftDir, witnessName)
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := decodeWitness(b)
		if err == nil && !bytes.Equal(w.encode(), b) {
			t.Fatalf("% x decodes to %+v, which encodes otherwise", b, w)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		got, ok, rerr := readWitness(raftDir)
		var d *disk.DamageError
		switch {
		case err == nil && (rerr != nil || !ok || got != w):
			t.Fatalf("% x: read %+v, %v, %v; want %+v", b, got, ok, rerr, w)
		case err != nil && (!errors.As(rerr, &d) || d.Path != path):
			t.Fatalf("% x: read %v, want damage naming %s", b, rerr, path)
		}
	})
}

// TestRestoredNodeRestarts: a node seeded from another's snapshot (the
// restore of a backup), which empties its log and starts it again at the
// snapshot's index, writes its witness for the new log: killed and started
// again, it serves the snapshot's state and every command after it.
func TestRestoredNodeRestarts(t *testing.T) {
	const n = 12
	src := writeHistory(t, n, 10, 0, 0)
	leading := make(chan struct{}, 1)
	a, err := openSized(src, 0, newCounter(), leading)
	if err != nil {
		t.Fatal(err)
	}
	<-leading
	index, term, rc, err := a.OpenSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := io.ReadAll(rc)
	rc.Close()
	a.Close()
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	b, err := openSized(dir, 0, newCounter(), leading)
	if err != nil {
		t.Fatal(err)
	}
	<-leading
	ctx := context.Background()
	if err := b.Restore(ctx, index, term, bytes.NewReader(snap), int64(len(snap))); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := propose(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	crashed(t, dir)
	if got, err := reopen(t, dir, 0); err != nil || got != n+3 {
		t.Fatalf("restored, then started again: %d, %v; want %d", got, err, n+3)
	}
}

// TestHasLogWithTheLogGone: a data directory whose log's directory is
// gone still held a log, as its witness says: a key/value store lost
// beside it is refused, not started empty, and a lost node id is not
// replaced by a new one.
func TestHasLogWithTheLogGone(t *testing.T) {
	dir := writeHistory(t, 2, 10, 0, 0)
	if err := os.RemoveAll(filepath.Join(dir, "raft", "wal")); err != nil {
		t.Fatal(err)
	}
	if !HasLog(dir) {
		t.Error("HasLog: false with the witness of a log there")
	}
}
