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

// The position record (PositionName) keeps, beside the log, how far the
// store had got: where the log's frames ended, its crash count and its last
// batch's sequence number, in one checksummed frame, fsynced. Those three
// only grow while a store lives (a compaction shortens the log, but only
// after a batch numbered higher), so a log that holds less than a record
// says is older than the store it belongs to, or cut short.
//
//   - Close writes a clean-close record: exactly where the store ended. The
//     next open refuses a log that is not exactly that.
//   - Open, once the log checks out, writes an open record: the least the
//     store holds from then on — first as it found the log, then, once the
//     new crash count is on disk, with that count. A crash leaves it there,
//     and the next open refuses a log that holds less: a copy from before
//     the last opening put back after a crash is caught.
//
// A record is replaced whole (a temporary file, fsynced, renamed, the
// directory fsynced), so a crash leaves the old one or the new one.

// PositionName is the file in a FileStore's directory that records how
// far the store had got (see OpenFileStore). Whoever replaces a store's log
// by hand, or removes it to start an empty store, removes this file too.
const PositionName = "position"

const (
	frameClosed    = 'K' // a clean close: exactly where the store ended
	frameOpened    = 'O' // an opening: the least the store holds
	positionVer    = 1
	positionLength = 2 + 8 + 8 + 8
)

// storePos is a position record.
type storePos struct {
	closed bool   // a clean close, not an opening
	end    int64  // where the log's frames ended
	crash  int64  // the crash count
	seq    uint64 // the last batch's sequence number
}

func (c storePos) encode() []byte {
	p := []byte{frameOpened, positionVer}
	if c.closed {
		p[0] = frameClosed
	}
	p = binary.BigEndian.AppendUint64(p, uint64(c.end))
	p = binary.BigEndian.AppendUint64(p, uint64(c.crash))
	p = binary.BigEndian.AppendUint64(p, c.seq)
	return appendFrame(nil, p)
}

// decodePos reads a position record.
func decodePos(b []byte) (storePos, error) {
	p, n, ok := readFrame(b)
	switch {
	case !ok:
		return storePos{}, fmt.Errorf("its %d bytes are not one checksummed frame", len(b))
	case n != len(b):
		return storePos{}, fmt.Errorf("%d bytes follow its frame", len(b)-n)
	case len(p) != positionLength || p[0] != frameClosed && p[0] != frameOpened:
		return storePos{}, fmt.Errorf("its frame is not a position record (%d bytes, type %q)", len(p), p[0])
	case p[1] != positionVer:
		return storePos{}, fmt.Errorf("version %d, written by a newer djinn", p[1])
	}
	c := storePos{
		closed: p[0] == frameClosed,
		end:    int64(binary.BigEndian.Uint64(p[2:])),
		crash:  int64(binary.BigEndian.Uint64(p[10:])),
		seq:    binary.BigEndian.Uint64(p[18:]),
	}
	if c.end < 0 || c.end > 1<<62 {
		return storePos{}, fmt.Errorf("a log end of %d bytes", c.end)
	}
	return c, nil
}

// readPos reads dir's position record; ok is false when there is none. An
// unreadable record is damage.
func readPos(dir string) (c storePos, ok bool, err error) {
	path := filepath.Join(dir, PositionName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("participant store %s: %w", dir, err)
	}
	if c, err = decodePos(b); err != nil {
		return c, false, &disk.DamageError{Path: path, Offset: -1, Problem: fmt.Sprintf(
			"the record of how far the store had got is unreadable: %v, so %s cannot be checked against it (if %[2]s is known to be whole, remove this record)", err, logName)}
	}
	return c, true, nil
}

// writePos writes c as dir's position record, durably (disk.WriteFile).
func writePos(dir string, c storePos) error {
	return disk.WriteFile(filepath.Join(dir, PositionName), c.encode())
}

// removePos removes dir's position record, if any, and fsyncs the
// directory.
func removePos(dir string) error {
	return disk.Remove(filepath.Join(dir, PositionName))
}

// before reports whether a log at (crash, seq, end) holds less than c.
func (c storePos) before(crash int64, seq uint64, end int64) bool {
	if crash != c.crash {
		return crash < c.crash
	}
	if seq != c.seq {
		return seq < c.seq
	}
	return end < c.end
}

// check compares a log, whose frames end at end (a torn frame of torn
// bytes after them) and whose last crash count and batch sequence are
// crash and seq, with the record c: nil if the log is the one c speaks
// for, else the damage.
func (c storePos) check(dir string, end, torn int, crash int64, seq uint64) error {
	path := filepath.Join(dir, logName)
	now := fmt.Sprintf("it now ends at offset %d with batch %d (crash count %d)", end, seq, crash)
	if !c.closed {
		if c.before(crash, seq, int64(end)) {
			return &disk.DamageError{Path: path, Offset: int64(end), Problem: fmt.Sprintf(
				"%s is older than this store was when last opened, or cut short: then it ended at offset %d with batch %d (crash count %d), but %s", logName, c.end, c.seq, c.crash, now)}
		}
		return nil
	}
	then := fmt.Sprintf("at its last clean close it ended at offset %d with batch %d (crash count %d)", c.end, c.seq, c.crash)
	switch {
	case c.before(crash, seq, int64(end)):
		return &disk.DamageError{Path: path, Offset: int64(end), Problem: fmt.Sprintf(
			"%s is older than this store's last clean close, or cut short: %s, but %s", logName, then, now)}
	case crash != c.crash || seq != c.seq || int64(end) != c.end:
		return &disk.DamageError{Path: filepath.Join(dir, PositionName), Offset: -1, Problem: fmt.Sprintf(
			"the record of the store's last clean close is older than %s: %s, but %s (if %[1]s is known to be whole, remove this record)", logName, then, now)}
	case torn > 0:
		return &disk.DamageError{Path: path, Offset: int64(end), Problem: fmt.Sprintf(
			"%d bytes follow where the frames ended at the store's last clean close", torn)}
	}
	return nil
}
