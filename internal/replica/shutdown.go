package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/djinn-go/djinn/internal/disk"
)

// A node that stops cleanly writes where its log ended into a small
// checksummed file beside the log; the next start reads it, checks the log
// against it and removes it before anything is written. A log that ends
// earlier than the file says lost acknowledged entries to damage, not to a
// crash: a torn last write can only follow an unclean stop.

// shutdownName is the clean-shutdown file in the raft directory.
const shutdownName = "clean-shutdown"

// shutdownMagic starts the file; its last byte is the format's version.
const shutdownMagic = "djinn clean shutdown\x00\x01"

// cleanStop is what the clean-shutdown file records.
type cleanStop struct {
	LastIndex uint64 // the log's last index when the node stopped
	LastTerm  uint64 // that entry's term
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (c cleanStop) encode() []byte { return encodeRecord(shutdownMagic, c.LastIndex, c.LastTerm) }

// decodeCleanStop reads a clean-shutdown file's bytes.
func decodeCleanStop(b []byte) (cleanStop, error) {
	index, term, err := decodeRecord(shutdownMagic, "clean-shutdown record", b)
	return cleanStop{LastIndex: index, LastTerm: term}, err
}

// encodeRecord encodes a record file of two numbers: magic (whose last
// byte is the format's version), x, y, and a CRC-32C of them.
func encodeRecord(magic string, x, y uint64) []byte {
	b := make([]byte, 0, len(magic)+20)
	b = append(b, magic...)
	b = binary.BigEndian.AppendUint64(b, x)
	b = binary.BigEndian.AppendUint64(b, y)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeRecord reads the bytes of a record file encodeRecord made with
// magic; what names the record in the error.
func decodeRecord(magic, what string, b []byte) (x, y uint64, err error) {
	n := len(magic) + 20
	if len(b) != n {
		return 0, 0, fmt.Errorf("is %d bytes, want %d", len(b), n)
	}
	body, sum := b[:n-4], binary.BigEndian.Uint32(b[n-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return 0, 0, errors.New("fails its checksum")
	}
	if string(body[:len(magic)]) != magic {
		return 0, 0, fmt.Errorf("is not a %s of this version", what)
	}
	body = body[len(magic):]
	return binary.BigEndian.Uint64(body), binary.BigEndian.Uint64(body[8:]), nil
}

// readCleanStop reads the clean-shutdown file in dir: ok is false when
// there is none (the last stop was not clean, or this is a first start).
func readCleanStop(dir string) (c cleanStop, ok bool, err error) {
	path := filepath.Join(dir, shutdownName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cleanStop{}, false, nil
	}
	if err != nil {
		return cleanStop{}, false, err
	}
	if c, err = decodeCleanStop(b); err != nil {
		return cleanStop{}, false, &disk.DamageError{Path: path, Offset: -1, Problem: "the record of the last clean shutdown " + err.Error()}
	}
	return c, true, nil
}

// writeCleanStop writes the clean-shutdown file in dir, durably.
func writeCleanStop(dir string, c cleanStop) error {
	return disk.WriteFile(filepath.Join(dir, shutdownName), c.encode())
}

// removeCleanStop removes the clean-shutdown file, durably, so that a
// crash from now on is not taken for a clean stop.
func removeCleanStop(dir string) error {
	return disk.Remove(filepath.Join(dir, shutdownName))
}

// staleCleanStop is the damage of a clean-shutdown record older than the
// log beside it, whose tail segment is at walFile: the log goes on after
// the index the record says it ended at (or its entry there is of a later
// term), so the node ran after that stop.
func staleCleanStop(walFile string, clean cleanStop, last, term uint64) *disk.DamageError {
	path := filepath.Join(filepath.Dir(filepath.Dir(walFile)), shutdownName)
	what := fmt.Sprintf("the log goes on to index %d", last)
	if last == clean.LastIndex {
		what = fmt.Sprintf("the log's entry %d is of term %d, not %d", last, term, clean.LastTerm)
	}
	return &disk.DamageError{Path: path, Offset: -1, Problem: fmt.Sprintf(
		"the record of the last clean shutdown says the log ended at index %d, but %s: the record is older than the log "+
			"(restored from an older copy?); if the log is intact, remove %s and start again (the log is then checked as after a crash)",
		clean.LastIndex, what, path)}
}
