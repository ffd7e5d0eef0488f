package replica

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/djinn-go/djinn/internal/disk"
)

// recorded returns the index raftDir's log-end record holds.
func recorded(t *testing.T, raftDir string) uint64 {
	t.Helper()
	_, index, ok, err := readLogEnd(raftDir)
	if err != nil || !ok {
		t.Fatalf("log-end record: %v (there: %v)", err, ok)
	}
	return index
}

// TestLogEndTrailsTheLog: the record covers an append at most logEndEvery
// after it was acknowledged, with one write for the appends of an
// interval; a deletion of the log's end lowers it before the entries go,
// a deletion of its head does not.
func TestLogEndTrailsTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		e, err := openLogEnd(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		e.start(func(err error) { t.Errorf("record write failed: %v", err) })
		defer e.close()
		if got := recorded(t, dir); got != 0 {
			t.Fatalf("a new record holds %d, want 0", got)
		}
		e.appendedTo(5)
		synctest.Wait()
		if got := recorded(t, dir); got != 5 {
			t.Fatalf("after an append: %d, want 5", got)
		}
		seq := e.seq
		e.appendedTo(6)
		e.appendedTo(9)
		synctest.Wait()
		if got := recorded(t, dir); got != 5 {
			t.Fatalf("within the interval: %d, want still 5", got)
		}
		time.Sleep(logEndEvery)
		synctest.Wait()
		if got := recorded(t, dir); got != 9 || e.seq != seq+1 {
			t.Fatalf("after the interval: %d in %d writes, want 9 in one", got, e.seq-seq)
		}
		if err := e.deleting(1, 4); err != nil || recorded(t, dir) != 9 {
			t.Fatalf("compaction of the head: %v, record %d; want 9", err, recorded(t, dir))
		}
		if err := e.deleting(7, 9); err != nil || recorded(t, dir) != 6 {
			t.Fatalf("the end deleted: %v, record %d; want 6, written before", err, recorded(t, dir))
		}
		e.appendedTo(8)
		time.Sleep(logEndEvery)
		synctest.Wait()
		if got := recorded(t, dir); got != 8 {
			t.Fatalf("appends after the deletion: %d, want 8", got)
		}
	})
}

// endStore is a log store that reports the log-end record at each
// deletion.
type endStore struct {
	raft.LogStore
	dir  string
	seen []uint64
	t    *testing.T
}

func (s *endStore) DeleteRange(lo, hi uint64) error {
	s.seen = append(s.seen, recorded(s.t, s.dir))
	return s.LogStore.DeleteRange(lo, hi)
}

// TestFailStopLowersTheRecordFirst: raft deletes a follower's entries a
// new leader overwrites through the log store; the record is below them
// before they go, so that a crash then does not read as lost entries.
func TestFailStopLowersTheRecordFirst(t *testing.T) {
	dir := t.TempDir()
	e, err := openLogEnd(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	inner := &endStore{LogStore: raft.NewInmemStore(), dir: dir, t: t}
	f := newFailStop(inner, nil)
	f.end = e
	var logs []*raft.Log
	for i := uint64(1); i <= 10; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1})
	}
	if err := f.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := e.flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	if len(inner.seen) != 1 || inner.seen[0] != 7 {
		t.Fatalf("the record when the entries were deleted: %v, want 7", inner.seen)
	}
	// The whole log, as raft empties it once a snapshot is installed:
	// the record holds nothing, the snapshot holds what the log held.
	if err := f.DeleteRange(1, 7); err != nil {
		t.Fatal(err)
	}
	if len(inner.seen) != 2 || inner.seen[1] != 0 {
		t.Fatalf("the record when the whole log was deleted: %v, want 0", inner.seen)
	}
}

// TestLogEndSlots: a record is read from the newer slot that checks out,
// so a crash while one slot is written leaves the other; a record with
// neither is damage.
func TestLogEndSlots(t *testing.T) {
	rec := func(slots ...[]byte) []byte {
		b := make([]byte, logEndLen)
		for i, s := range slots {
			copy(b[i*logEndBlock:], s)
		}
		return b
	}
	torn := bytes.Repeat([]byte{0xa5}, logEndSlotLen)
	for _, tc := range []struct {
		name  string
		b     []byte
		index uint64
		bad   string
	}{
		{"newer in slot 1", rec(encodeLogEndSlot(4, 40), encodeLogEndSlot(5, 50)), 50, ""},
		{"newer in slot 0", rec(encodeLogEndSlot(6, 60), encodeLogEndSlot(5, 50)), 60, ""},
		{"slot 0 torn", rec(torn, encodeLogEndSlot(5, 50)), 50, ""},
		{"slot 1 torn", rec(encodeLogEndSlot(6, 60), torn), 60, ""},
		{"both torn", rec(torn, torn), 0, "no record that checks out"},
		{"cut", rec(encodeLogEndSlot(6, 60))[:logEndSlotLen], 0, "is 32 bytes"},
		{"empty", nil, 0, "is 0 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, logEndName), tc.b, 0o600); err != nil {
				t.Fatal(err)
			}
			_, index, _, err := readLogEnd(dir)
			if tc.bad == "" {
				if err != nil || index != tc.index {
					t.Fatalf("read %d, %v; want %d", index, err, tc.index)
				}
				return
			}
			var d *disk.DamageError
			if !errors.As(err, &d) || d.Path != filepath.Join(dir, logEndName) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("read %d, %v; want damage naming the record: %q", index, err, tc.bad)
			}
		})
	}
}

// TestNodeKeepsTheLogEndRecord: a node makes the record, brings it to the
// log's end when it stops cleanly, refuses a damaged one, and starts on a
// data directory from before the record.
func TestNodeKeepsTheLogEndRecord(t *testing.T) {
	dir := writeHistory(t, 5, 10, 0, 0)
	raftDir := filepath.Join(dir, "raft")
	_, last := servedRange(segments(t, dir))
	if got := recorded(t, raftDir); got != last {
		t.Fatalf("after a clean stop the record holds %d, want the log's end %d", got, last)
	}
	if err := os.Remove(filepath.Join(raftDir, logEndName)); err != nil {
		t.Fatal(err)
	}
	if got, err := reopen(t, dir, 0); err != nil || got != 5 {
		t.Fatalf("a directory without the record: %d, %v; want 5 served", got, err)
	}
	if _, _, ok, err := readLogEnd(raftDir); err != nil || !ok {
		t.Fatalf("the record was not made: %v", err)
	}
	damageFile(t, filepath.Join(raftDir, logEndName), 0, func(b []byte) { clear(b) })
	_, err := reopen(t, dir, 0)
	wantRefused(t, err, filepath.Join(raftDir, logEndName), -1)
}
