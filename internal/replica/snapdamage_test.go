package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djinn-go/djinn/internal/disk"
)

// snapshotsOf returns the snapshots in dir, newest first.
func snapshotsOf(t *testing.T, dir string) []snapFile {
	t.Helper()
	c, err := checkSnapshots(filepath.Join(dir, "raft"), true)
	if err != nil || c.damage() != nil {
		t.Fatalf("check of undamaged snapshots: %v %v", err, c.damage())
	}
	return c.snaps
}

// editMeta rewrites a snapshot's meta.json through fn.
func editMeta(t *testing.T, snapDir string, fn func(m map[string]any)) {
	t.Helper()
	path := filepath.Join(snapDir, snapMetaName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotDamage: a snapshot whose metadata disagrees with its name,
// its data or the log, or whose data fails its checksum, stops the node
// with an error naming the file, instead of wedging it or serving a wrong
// state.
func TestSnapshotDamage(t *testing.T) {
	const n = 12
	for _, tc := range []struct {
		name string
		// damage damages the snapshots (newest first) and returns the
		// file the refusal must name, or "" when the node must start.
		damage func(t *testing.T, snaps []snapFile) string
	}{
		{"meta.json with a wrong index", func(t *testing.T, s []snapFile) string {
			editMeta(t, s[0].dir, func(m map[string]any) { m["Index"] = m["Index"].(float64) + 3 })
			return filepath.Join(s[0].dir, snapMetaName)
		}},
		{"meta.json and its name moved to another index", func(t *testing.T, s []snapFile) string {
			msec := strings.SplitN(filepath.Base(s[0].dir), "-", 3)[2]
			id := fmt.Sprintf("%d-%d-%s", s[0].meta.Term, s[0].meta.Index+10, msec)
			editMeta(t, s[0].dir, func(m map[string]any) { m["Index"] = m["Index"].(float64) + 10; m["ID"] = id })
			moved := filepath.Join(filepath.Dir(s[0].dir), id)
			if err := os.Rename(s[0].dir, moved); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(moved, snapStateName)
		}},
		{"meta.json that does not decode", func(t *testing.T, s []snapFile) string {
			path := filepath.Join(s[0].dir, snapMetaName)
			if err := os.WriteFile(path, []byte(`{"Version":1,"ID":`), 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}},
		{"an older snapshot's meta.json with a wrong term", func(t *testing.T, s []snapFile) string {
			editMeta(t, s[1].dir, func(m map[string]any) { m["Term"] = m["Term"].(float64) + 1 })
			return filepath.Join(s[1].dir, snapMetaName)
		}},
		{"state.bin data flipped", func(t *testing.T, s []snapFile) string {
			path := filepath.Join(s[0].dir, snapStateName)
			flipBit(t, path, s[0].meta.Size-3)
			return path
		}},
		{"state.bin header flipped", func(t *testing.T, s []snapFile) string {
			path := filepath.Join(s[0].dir, snapStateName)
			flipBit(t, path, int64(len(snapMagic))+7)
			return path
		}},
		{"state.bin cut short", func(t *testing.T, s []snapFile) string {
			path := filepath.Join(s[0].dir, snapStateName)
			if err := os.Truncate(path, s[0].meta.Size-1); err != nil {
				t.Fatal(err)
			}
			return path
		}},
		{"no damage", func(*testing.T, []snapFile) string { return "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeSnapshots(t, n, 10, 0, 5, 9)
			want := tc.damage(t, snapshotsOf(t, dir))
			got, err := reopen(t, dir, 0)
			if want != "" {
				wantRefused(t, err, want, -1)
				return
			}
			if err != nil || got != n {
				t.Fatalf("served %d, %v; want %d", got, err, n)
			}
		})
	}
}

// TestSnapshotThatDoesNotRestore: a snapshot that checks out but that the
// state machine refuses stops the node, naming it.
func TestSnapshotThatDoesNotRestore(t *testing.T) {
	dir := writeSnapshots(t, 6, 10, 0, 4)
	snaps := snapshotsOf(t, dir)
	c := newCounter()
	c.refuse = true
	_, err := reopenWith(t, dir, 0, c)
	if err == nil || errors.Is(err, disk.ErrDamaged) {
		t.Fatalf("started, or called it damage: %v", err)
	}
	if !strings.Contains(err.Error(), filepath.Join(snaps[0].dir, snapStateName)) || !strings.Contains(err.Error(), "does not take it") {
		t.Errorf("the error does not name the snapshot and say why:\n%v", err)
	}
}

// replaceLog rewrites dir's log with its entries first..last only.
func replaceLog(t *testing.T, dir string, first, last uint64) {
	t.Helper()
	walDir := filepath.Join(dir, "raft", "wal")
	wc, err := checkWAL(walDir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := rebuildLog(walDir, wc, first, last); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(walDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(walDir+".repair", walDir); err != nil {
		t.Fatal(err)
	}
	if err := rewriteWitness(filepath.Join(dir, "raft")); err != nil {
		t.Fatal(err)
	}
	crashed(t, dir)
}

// TestSnapshotAndLogAgree: a log that starts after the snapshot leaves a
// gap and is refused; a log that ends before it — a snapshot from the
// leader whose install a crash interrupted before the old log was dropped
// — is dropped, and the snapshot's state served.
func TestSnapshotAndLogAgree(t *testing.T) {
	const n = 12
	t.Run("log ends before the snapshot", func(t *testing.T) {
		dir := writeSnapshots(t, n, 10, 0, n)
		at := snapshotsOf(t, dir)[0].meta.Index
		replaceLog(t, dir, 1, at-4)
		if got, err := reopen(t, dir, 0); err != nil || got != n {
			t.Fatalf("served %d, %v; want the snapshot's %d", got, err, n)
		}
	})
	t.Run("log starts after the snapshot", func(t *testing.T) {
		dir := writeSnapshots(t, n, 10, 0, 4)
		snap := snapshotsOf(t, dir)[0]
		replaceLog(t, dir, snap.meta.Index+3, snap.meta.Index+5)
		_, err := reopen(t, dir, 0)
		wantRefused(t, err, snap.dir, -1)
	})
	t.Run("log starts after 1 and no snapshot", func(t *testing.T) {
		dir := writeSnapshots(t, n, 10, 0)
		replaceLog(t, dir, 4, 9)
		_, err := reopen(t, dir, 0)
		wantRefused(t, err, filepath.Join(dir, "raft", "wal"), -1)
	})
}

// TestUnfinishedSnapshotRemoved: a snapshot directory left unfinished by a
// node killed while writing it (raft names it .tmp until it is complete)
// is removed when the node starts, which serves everything from its
// complete snapshots and log.
func TestUnfinishedSnapshotRemoved(t *testing.T) {
	const n = 12
	dir := writeSnapshots(t, n, 10, 0, 5, 9)
	tmp := filepath.Join(dir, "raft", snapDirName, "9-99-1.tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, snapStateName), []byte("half a snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := reopen(t, dir, 0)
	if err != nil || got != n {
		t.Fatalf("served %d, %v; want %d", got, err, n)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unfinished snapshot %s is still there (%v)", tmp, err)
	}
}
