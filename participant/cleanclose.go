package participant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/djinn-go/djinn/internal/disk"
)

// The clean-close record: a FileStore that closes cleanly writes, beside
// its log, where the log's frames end, its crash count and its last batch
// sequence number, in one checksummed frame, fsynced. The next open checks
// the log against it — a log shorter or older than the store that closed
// is refused, however whole it looks — and removes it, fsyncing the
// directory, before taking writes: the record speaks only for a store
// that has not been written since.

// CleanCloseName is the file a FileStore's Close writes in its directory
// (see OpenFileStore). Whoever replaces a store's log by hand, or removes
// it to start an empty store, removes this file too.
const CleanCloseName = "clean-close"

const (
	frameClean   = 'K'
	cleanVersion = 1
	cleanLen     = 2 + 8 + 8 + 8
)

// cleanClose is what a clean close recorded.
type cleanClose struct {
	end   int64  // where the log's frames ended
	crash int64  // the crash count
	seq   uint64 // the last batch's sequence number
}

func (c cleanClose) encode() []byte {
	p := []byte{frameClean, cleanVersion}
	p = binary.BigEndian.AppendUint64(p, uint64(c.end))
	p = binary.BigEndian.AppendUint64(p, uint64(c.crash))
	p = binary.BigEndian.AppendUint64(p, c.seq)
	return appendFrame(nil, p)
}

// decodeCleanClose reads a clean-close record.
func decodeCleanClose(b []byte) (cleanClose, error) {
	p, n, ok := readFrame(b)
	switch {
	case !ok:
		return cleanClose{}, fmt.Errorf("its %d bytes are not one checksummed frame", len(b))
	case n != len(b):
		return cleanClose{}, fmt.Errorf("%d bytes follow its frame", len(b)-n)
	case len(p) != cleanLen || p[0] != frameClean:
		return cleanClose{}, fmt.Errorf("its frame is not a clean-close record (%d bytes, type %q)", len(p), p[0])
	case p[1] != cleanVersion:
		return cleanClose{}, fmt.Errorf("version %d, written by a newer djinn", p[1])
	}
	c := cleanClose{
		end:   int64(binary.BigEndian.Uint64(p[2:])),
		crash: int64(binary.BigEndian.Uint64(p[10:])),
		seq:   binary.BigEndian.Uint64(p[18:]),
	}
	if c.end < 0 || c.end > 1<<62 {
		return cleanClose{}, fmt.Errorf("a log end of %d bytes", c.end)
	}
	return c, nil
}

// readCleanClose reads dir's clean-close record; ok is false when there is
// none. An unreadable record is damage.
func readCleanClose(dir string) (c cleanClose, ok bool, err error) {
	path := filepath.Join(dir, CleanCloseName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("participant store %s: %w", dir, err)
	}
	if c, err = decodeCleanClose(b); err != nil {
		return c, false, &disk.DamageError{Path: path, Offset: -1, Problem: fmt.Sprintf(
			"the record of the store's last clean close is unreadable: %v, so %s cannot be checked against it (if %[2]s is known to be whole, remove this record)", err, logName)}
	}
	return c, true, nil
}

// writeCleanClose writes c as dir's clean-close record: to a temporary
// file, fsynced, renamed into place, the directory fsynced.
func writeCleanClose(dir string, c cleanClose) error {
	path := filepath.Join(dir, CleanCloseName)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(c.encode())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

// removeCleanClose removes dir's clean-close record, if any, and fsyncs
// the directory.
func removeCleanClose(dir string) error {
	err := os.Remove(filepath.Join(dir, CleanCloseName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

// check compares a log, whose frames end at end and whose last crash count
// and batch sequence are crash and seq, with the clean close c: it returns
// nil if the log is the one that closed, else the damage.
func (c cleanClose) check(dir string, end, torn int, crash int64, seq uint64) error {
	path := filepath.Join(dir, logName)
	now := fmt.Sprintf("it now ends at offset %d with batch %d (crash count %d)", end, seq, crash)
	then := fmt.Sprintf("at its last clean close it ended at offset %d with batch %d (crash count %d)", c.end, c.seq, c.crash)
	switch {
	case crash < c.crash || crash == c.crash && (seq < c.seq || seq == c.seq && int64(end) < c.end):
		return &disk.DamageError{Path: path, Offset: int64(end), Problem: fmt.Sprintf(
			"%s is older than this store's last clean close, or cut short: %s, but %s", logName, then, now)}
	case crash != c.crash || seq != c.seq || int64(end) != c.end:
		return &disk.DamageError{Path: filepath.Join(dir, CleanCloseName), Offset: -1, Problem: fmt.Sprintf(
			"the record of the store's last clean close is older than %s: %s, but %s (if %[1]s is known to be whole, remove this record)", logName, then, now)}
	case torn > 0:
		return &disk.DamageError{Path: path, Offset: int64(end), Problem: fmt.Sprintf(
			"%d bytes follow where the frames ended at the store's last clean close", torn)}
	}
	return nil
}
