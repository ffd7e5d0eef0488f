//go:build unix

package participant

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/djinn-go/djinn"
)

// lockDir takes the store directory's lock: an exclusive flock on its lock
// file, held until the returned file is closed (or the process ends, kill -9
// included). A second FileStore in the same directory — in this process or
// another — would interleave its frames with the first's, and its open
// would remove the first's compaction in progress: it is refused instead.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("participant store %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, djinn.Errorf(djinn.Unavailable,
				"participant store %s: in use by another FileStore, in this process or another: close it, or give this one a directory of its own", dir)
		}
		return nil, fmt.Errorf("participant store %s: locking %s: %w", dir, lockName, err)
	}
	return f, nil
}
