//go:build djinn_failpoint_snapshot

package replica

import (
	"os"
	"path/filepath"
	"time"
)

// stallSnapshotFile, while present in a node's data directory, stalls the
// node's next snapshot write (one it takes, or one the leader sends it)
// after its first bytes, until it is removed; the node announces the
// stall by creating snapshotStalledFile, so that the robustness suite can
// kill it in the middle of the write. A failpoint for the suite; never in
// a release.
const (
	stallSnapshotFile   = "failpoint-stall-snapshot"
	snapshotStalledFile = "failpoint-snapshot-stalled"
)

const snapshotFailpoint = true

func stallSnapshot(dataDir string) {
	if _, err := os.Stat(filepath.Join(dataDir, stallSnapshotFile)); err != nil {
		return
	}
	_ = os.WriteFile(filepath.Join(dataDir, snapshotStalledFile), nil, 0o600)
	for {
		if _, err := os.Stat(filepath.Join(dataDir, stallSnapshotFile)); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
