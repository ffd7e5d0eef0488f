//go:build !unix

package participant

import "os"

// lockDir takes no lock where flock is not available: one FileStore per
// directory is then the caller's to ensure.
func lockDir(dir string) (*os.File, error) { return nil, nil }
