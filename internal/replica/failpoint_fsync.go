//go:build djinn_failpoint_fsync

package replica

import (
	"os"
	"path/filepath"
	"time"
)

// stallFsyncFile, while present in a node's data directory, stalls each of
// the node's log writes (an append and its fsync) until it is removed: a
// disk whose fsync hangs. A failpoint for the robustness suite; never in a
// release.
const stallFsyncFile = "failpoint-stall-fsync"

func stallFsync(dir string) {
	for {
		if _, err := os.Stat(filepath.Join(dir, stallFsyncFile)); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
