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
