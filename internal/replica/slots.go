package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/djinn-go/djinn/internal/disk"
)

// The log-end record (logend.go) and the term record (termvote.go) are
// small files of two slots, each in its own disk block, each holding a
// checksummed copy of the record and a sequence number. A write goes in
// place into the older slot and is fsynced, so that a crash while one slot
// is written leaves the other; a read takes the newer slot that checks out.

// newerSlot decodes the two slots b0 and b1 and returns the newer that
// checks out, or an error when neither does.
func newerSlot[T any](b0, b1 []byte, decode func([]byte) (uint64, T, bool)) (seq uint64, v T, err error) {
	s0, v0, ok0 := decode(b0)
	s1, v1, ok1 := decode(b1)
	switch {
	case ok0 && ok1 && s1 > s0, !ok0 && ok1:
		return s1, v1, nil
	case ok0:
		return s0, v0, nil
	}
	return 0, v, errors.New("holds no record that checks out")
}

// writeSlot writes slot, the record's copy of sequence seq, into slot
// seq%2 of f (block bytes apart), the older one, and fsyncs it. what names
// the record in errors.
func writeSlot(f *os.File, what string, seq uint64, slot []byte, block int64) error {
	if _, err := f.WriteAt(slot, int64(seq%2)*block); err != nil {
		return fmt.Errorf("%s %s: %w", what, f.Name(), err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s %s: %w", what, f.Name(), err)
	}
	return nil
}

// readSlots reads the two-slot record name in raftDir with decode: ok is
// false when there is none (a first start, or a data directory from before
// the record). A record that does not decode is damage; what names it.
func readSlots[T any](raftDir, name, what string, decode func([]byte) (uint64, T, error)) (seq uint64, v T, ok bool, err error) {
	path := filepath.Join(raftDir, name)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, v, false, nil
	}
	if err != nil {
		return 0, v, false, err
	}
	if seq, v, err = decode(b); err != nil {
		return 0, v, false, &disk.DamageError{Path: path, Offset: -1, Problem: what + " " + err.Error()}
	}
	return seq, v, true, nil
}
