package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/djinn-go/djinn/internal/disk"
)

// The log's witness. raft-wal records a new segment in its metadata
// first, then makes its file, and makes the file durable (its bytes and
// its directory entry) only with its first batch. So after a crash the
// last segment may be missing, short or empty, its metadata being all
// that reached the disk: no batch of it was acknowledged. Damage — a
// file removed, cut to nothing, a directory lost — leaves the same, after
// batches were acknowledged. The witness tells the two apart: a small
// checksummed file in the raft directory (beside wal/, so that losing the
// log's directory does not lose it) naming the newest segment a batch was
// made durable in. It is written once per segment, after that segment's
// first fsync and before the append returns (witnessFS), so it never
// names a segment whose batch is not on disk, and every acknowledged
// batch is in the segment it names or an older one.
//
// At start (checkLog, witness.check): a witness naming the last segment while that
// segment serves no entry, or naming a segment newer than every one the
// log's metadata lists, means acknowledged entries are gone, and the node
// refuses. A witness naming an older segment is what compaction and a
// crash between a segment's creation and its first batch leave. No
// witness (a new node, or a data directory from before the witness) is no
// check; the first append then writes one.

// witnessName is the witness file in the raft directory.
const witnessName = "wal-witness"

// witnessMagic starts the file; its last byte is the format's version.
const witnessMagic = "djinn log witness\x00\x01"

// witness names a log segment: its first index and its id.
type witness struct {
	BaseIndex uint64
	ID        uint64
}

func (w witness) encode() []byte { return encodeRecord(witnessMagic, w.BaseIndex, w.ID) }

// decodeWitness reads a witness file's bytes.
func decodeWitness(b []byte) (witness, error) {
	base, id, err := decodeRecord(witnessMagic, "log witness", b)
	if err != nil {
		return witness{}, err
	}
	if base == 0 {
		return witness{}, errors.New("names a segment starting at index 0")
	}
	return witness{BaseIndex: base, ID: id}, nil
}

// readWitness reads the witness in raftDir: ok is false when there is
// none. A witness that does not decode is a *disk.DamageError.
func readWitness(raftDir string) (w witness, ok bool, err error) {
	path := filepath.Join(raftDir, witnessName)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return witness{}, false, nil
	}
	if err != nil {
		return witness{}, false, err
	}
	if w, err = decodeWitness(b); err != nil {
		return witness{}, false, &disk.DamageError{Path: path, Offset: -1, Problem: "the log's witness (the record of its newest segment holding acknowledged entries) " + err.Error()}
	}
	return w, true, nil
}

// writeWitness writes the witness in raftDir, durably.
func writeWitness(raftDir string, w witness) error {
	return disk.WriteFile(filepath.Join(raftDir, witnessName), w.encode())
}

// removeWitness removes the witness in raftDir, durably.
func removeWitness(raftDir string) error {
	return disk.Remove(filepath.Join(raftDir, witnessName))
}

// check checks the checked log of raftDir against the witness. It
// returns damage when the log lost acknowledged entries — lost is then
// true: entries from w.BaseIndex on — or when the witness disagrees with
// the log's metadata.
func (w witness) check(raftDir string, wc walCheck) (d *disk.DamageError, lost bool) {
	walDir := filepath.Join(raftDir, "wal")
	named := filepath.Join(walDir, segment.FileName(types.SegmentInfo{BaseIndex: w.BaseIndex, ID: w.ID}))
	by := fmt.Sprintf("the log's witness %s records that entries from index %d on were written to it and acknowledged", filepath.Join(raftDir, witnessName), w.BaseIndex)
	var newest *segCheck
	for i := range wc.segs {
		s := &wc.segs[i]
		if newest == nil || s.info.ID > newest.info.ID {
			newest = s
		}
		if s.info.ID != w.ID {
			continue
		}
		switch {
		case s.info.BaseIndex != w.BaseIndex:
			return &disk.DamageError{Path: filepath.Join(raftDir, witnessName), Offset: -1, Problem: fmt.Sprintf(
				"the log's witness names segment %d as starting at index %d, but the log's metadata says %d", w.ID, w.BaseIndex, s.info.BaseIndex)}, false
		case s.tail && s.kept == 0:
			return &disk.DamageError{Path: s.path, Offset: -1, Problem: fmt.Sprintf(
				"the log's last segment %s, but %s: they are lost", segState(s.path), by)}, true
		}
		return nil, false
	}
	switch {
	case newest == nil:
		return &disk.DamageError{Path: named, Offset: -1, Problem: fmt.Sprintf(
			"the log is gone (its metadata lists no segment), but %s: they are lost", by)}, true
	case w.ID > newest.info.ID:
		return &disk.DamageError{Path: named, Offset: -1, Problem: fmt.Sprintf(
			"the log's metadata does not list this segment (its newest is %s), but %s: they are lost", filepath.Base(newest.path), by)}, true
	}
	return nil, false // a segment compaction removed
}

// segState says how a segment file that serves no entry looks.
func segState(path string) string {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "is gone"
	case err != nil:
		return "cannot be read (" + err.Error() + ")"
	case fi.Size() == 0:
		return "is empty (0 bytes)"
	}
	return fmt.Sprintf("holds no whole batch of entries (%d bytes)", fi.Size())
}

// rewriteWitness makes the witness in raftDir name the newest segment of
// its log that serves an entry, or removes it when none does: for a log
// rewritten whole, whose segments' ids start again.
func rewriteWitness(raftDir string) error {
	wc, err := checkWAL(filepath.Join(raftDir, "wal"), false)
	if err != nil {
		return err
	}
	for i := len(wc.segs) - 1; i >= 0; i-- {
		if s := wc.segs[i]; s.kept > 0 && s.damage == nil {
			return writeWitness(raftDir, witness{BaseIndex: s.info.BaseIndex, ID: s.info.ID})
		}
	}
	return removeWitness(raftDir)
}

// witnessFS is the file system raft-wal writes the log through: its own,
// with the witness written after a segment file's first fsync that
// succeeds, before that fsync returns. An fsync whose witness cannot be
// written fails, as a log write that fails: the append is not
// acknowledged and the node stops (failStop).
type witnessFS struct {
	types.VFS
	raftDir string
	mu      sync.Mutex
	last    witness // guarded by mu: the witness on disk
	has     bool    // guarded by mu: there is one
}

func newWitnessFS(raftDir string, vfs types.VFS, w witness, ok bool) *witnessFS {
	return &witnessFS{VFS: vfs, raftDir: raftDir, last: w, has: ok}
}

// Create implements types.VFS.
func (v *witnessFS) Create(dir, name string, size uint64) (types.WritableFile, error) {
	f, err := v.VFS.Create(dir, name, size)
	if err != nil {
		return nil, err
	}
	return v.wrap(f, name)
}

// OpenWriter implements types.VFS.
func (v *witnessFS) OpenWriter(dir, name string) (types.WritableFile, error) {
	f, err := v.VFS.OpenWriter(dir, name)
	if err != nil {
		return nil, err
	}
	return v.wrap(f, name)
}

func (v *witnessFS) wrap(f types.WritableFile, name string) (types.WritableFile, error) {
	var seg witness
	if _, err := fmt.Sscanf(name, segNamePattern, &seg.BaseIndex, &seg.ID); err != nil || segment.FileName(types.SegmentInfo{BaseIndex: seg.BaseIndex, ID: seg.ID}) != name {
		f.Close()
		return nil, fmt.Errorf("log segment %s: not named as raft-wal names segments", name)
	}
	wf := &witnessedFile{WritableFile: f, fs: v, seg: seg}
	wf.done.Store(v.covers(seg))
	return wf, nil
}

// segNamePattern is how raft-wal names a segment's file: base index, id.
const segNamePattern = "%020d-%016x.wal"

// covers reports whether the witness names seg or a newer segment.
func (v *witnessFS) covers(seg witness) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.has && v.last.ID >= seg.ID
}

// witness makes the witness name seg, unless it names it or a newer
// segment already.
func (v *witnessFS) witness(seg witness) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.has && v.last.ID >= seg.ID {
		return nil
	}
	if err := writeWitness(v.raftDir, seg); err != nil {
		return fmt.Errorf("record in %s that log segment %s holds entries: %w", filepath.Join(v.raftDir, witnessName), segment.FileName(types.SegmentInfo{BaseIndex: seg.BaseIndex, ID: seg.ID}), err)
	}
	v.last, v.has = seg, true
	return nil
}

// witnessedFile is a segment file whose first fsync that succeeds is
// witnessed.
type witnessedFile struct {
	types.WritableFile
	fs   *witnessFS
	seg  witness
	done atomic.Bool // the witness names this segment or a newer one
}

// Sync implements types.WritableFile: the file's fsync, then, the first
// time, the witness.
func (f *witnessedFile) Sync() error {
	if err := f.WritableFile.Sync(); err != nil {
		return err
	}
	if f.done.Load() {
		return nil
	}
	if err := f.fs.witness(f.seg); err != nil {
		return err
	}
	f.done.Store(true)
	return nil
}

var (
	_ types.VFS          = (*witnessFS)(nil)
	_ types.WritableFile = (*witnessedFile)(nil)
)
