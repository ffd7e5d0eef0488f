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

// shutdownLen is the file's length: magic, last index, last term, CRC.
const shutdownLen = len(shutdownMagic) + 8 + 8 + 4

// cleanStop is what the clean-shutdown file records.
type cleanStop struct {
	LastIndex uint64 // the log's last index when the node stopped
	LastTerm  uint64 // that entry's term
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (c cleanStop) encode() []byte {
	b := make([]byte, 0, shutdownLen)
	b = append(b, shutdownMagic...)
	b = binary.BigEndian.AppendUint64(b, c.LastIndex)
	b = binary.BigEndian.AppendUint64(b, c.LastTerm)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeCleanStop reads a clean-shutdown file's bytes.
func decodeCleanStop(b []byte) (cleanStop, error) {
	if len(b) != shutdownLen {
		return cleanStop{}, fmt.Errorf("%d bytes, want %d", len(b), shutdownLen)
	}
	body, sum := b[:shutdownLen-4], binary.BigEndian.Uint32(b[shutdownLen-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return cleanStop{}, errors.New("fails its checksum")
	}
	if string(body[:len(shutdownMagic)]) != shutdownMagic {
		return cleanStop{}, errors.New("not a clean-shutdown record of this version")
	}
	body = body[len(shutdownMagic):]
	return cleanStop{LastIndex: binary.BigEndian.Uint64(body), LastTerm: binary.BigEndian.Uint64(body[8:])}, nil
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
	return writeDurably(dir, shutdownName, c.encode())
}

// removeCleanStop removes the clean-shutdown file, durably, so that a
// crash from now on is not taken for a clean stop.
func removeCleanStop(dir string) error {
	return removeDurably(dir, shutdownName)
}

// writeDurably writes b as the file name in dir: to a temporary file,
// fsynced, renamed, and the directory fsynced. A crash leaves the old
// file or the new one, whole.
func writeDurably(dir, name string, b []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
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

// removeDurably removes the file name in dir, if there, and fsyncs the
// directory.
func removeDurably(dir, name string) error {
	err := os.Remove(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
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
