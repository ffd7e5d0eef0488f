//go:build djinn_failpoint_snapshot

package replica

import (
	"os"
	"path/filepath"
	"time"
)

// stallSnapshotFile, while present in a node's data directory, stalls the
// node's next snapshot write after its first bytes, until it is removed:
// one of the kind the file names ("persist": a snapshot the node takes of
// its own state; "install": one the leader sends it), or either when it is
// empty. The node announces the stall by writing the kind to
// snapshotStalledFile, so that the robustness suite can kill it in the
// middle of the write. A failpoint for the suite; never in a release.
const (
	stallSnapshotFile   = "failpoint-stall-snapshot"
	snapshotStalledFile = "failpoint-snapshot-stalled"
)

const snapshotFailpoint = true

func stallSnapshot(dataDir, kind string) {
	want, err := os.ReadFile(filepath.Join(dataDir, stallSnapshotFile))
	if err != nil || len(want) > 0 && string(want) != kind {
		return
	}
	_ = os.WriteFile(filepath.Join(dataDir, snapshotStalledFile), []byte(kind), 0o600)
	for {
		if _, err := os.Stat(filepath.Join(dataDir, stallSnapshotFile)); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
