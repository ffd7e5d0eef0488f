package participant

import (
	"errors"
	"os"
	"syscall"
)

// extend makes f, of size bytes, to bytes long, the new space zero-filled
// and allocated (fallocate), so that writing into it does not run out of
// space; where the file system cannot allocate, it is made sparse.
func extend(f *os.File, size, to int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, size, to-size)
	if errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS) {
		return f.Truncate(to)
	}
	return err
}
