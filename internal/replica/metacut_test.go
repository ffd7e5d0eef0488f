package replica

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft-wal/metadb"
)

func readFile(t *testing.T, path string) []byte {
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
