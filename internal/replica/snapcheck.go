package replica

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/djinn-go/djinn/internal/disk"
)

// raft's FileSnapshotStore layout: snapshots/<term>-<index>-<msec>/ with
// meta.json and state.bin; a directory ending in .tmp is one being written.
const (
	snapDirName   = "snapshots"
	snapMetaName  = "meta.json"
	snapStateName = "state.bin"
	snapTmpSuffix = ".tmp"
)

// snapFile is one snapshot on disk.
type snapFile struct {
	dir    string
	meta   *raft.SnapshotMeta
	crc    []byte // the CRC-64 of state.bin that meta.json records
	damage *disk.DamageError
}

// snapCheck is what checking the snapshots found: every snapshot, newest
// first (raft's order: term, index, id).
type snapCheck struct {
	snaps []snapFile
}

// newest returns the newest snapshot, or nil.
func (c snapCheck) newest() *snapFile {
	if len(c.snaps) == 0 {
		return nil
	}
	return &c.snaps[0]
}

// damage returns the first damage found, or nil.
func (c snapCheck) damage() *disk.DamageError {
	for _, s := range c.snaps {
		if s.damage != nil {
			return s.damage
		}
	}
	return nil
}

// checkSnapshots reads the snapshots in raftDir. Every snapshot's
// meta.json must decode and agree with its directory's name; the newest
// snapshot's data (with full, every snapshot's) must agree with it in size
// and header, and with full its CRC must match (raft checks the newest's
// when it restores it).
func checkSnapshots(raftDir string, full bool) (snapCheck, error) {
	var c snapCheck
	base := filepath.Join(raftDir, snapDirName)
	ents, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), snapTmpSuffix) {
			continue
		}
		c.snaps = append(c.snaps, readSnapMeta(filepath.Join(base, e.Name())))
	}
	slices.SortFunc(c.snaps, func(a, b snapFile) int { return -compareSnaps(a, b) })
	for i := range c.snaps {
		if s := &c.snaps[i]; s.damage == nil && (full || i == 0) {
			s.damage = s.checkData(full)
		}
	}
	return c, nil
}

// compareSnaps orders snapshots as raft does, those whose meta.json does
// not decode by their directory's name.
func compareSnaps(a, b snapFile) int {
	ta, ia := snapOrder(a)
	tb, ib := snapOrder(b)
	switch {
	case ta != tb:
		return cmp(ta, tb)
	case ia != ib:
		return cmp(ia, ib)
	}
	return strings.Compare(filepath.Base(a.dir), filepath.Base(b.dir))
}

func cmp(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func snapOrder(s snapFile) (term, index uint64) {
	if s.meta != nil {
		return s.meta.Term, s.meta.Index
	}
	term, index, _ = parseSnapName(filepath.Base(s.dir))
	return term, index
}

// parseSnapName reads the term and index from a snapshot's name.
func parseSnapName(name string) (term, index uint64, ok bool) {
	var msec int64
	if _, err := fmt.Sscanf(name, "%d-%d-%d", &term, &index, &msec); err != nil {
		return 0, 0, false
	}
	return term, index, fmt.Sprintf("%d-%d-%d", term, index, msec) == name
}

// readSnapMeta reads a snapshot's meta.json and checks it against the
// directory's name.
func readSnapMeta(dir string) snapFile {
	s := snapFile{dir: dir}
	path := filepath.Join(dir, snapMetaName)
	b, err := os.ReadFile(path)
	if err != nil {
		s.damage = &disk.DamageError{Path: path, Offset: -1, Problem: "the snapshot's metadata cannot be read: " + err.Error()}
		return s
	}
	var m struct {
		raft.SnapshotMeta
		CRC []byte
	}
	if err := json.Unmarshal(b, &m); err != nil {
		s.damage = &disk.DamageError{Path: path, Offset: -1, Problem: "the snapshot's metadata does not decode: " + err.Error()}
		return s
	}
	s.meta, s.crc = &m.SnapshotMeta, m.CRC
	name := filepath.Base(dir)
	term, index, ok := parseSnapName(name)
	if !ok || m.ID != name || term != m.Term || index != m.Index {
		s.damage = &disk.DamageError{Path: path, Offset: -1, Problem: fmt.Sprintf("the snapshot's metadata says id %q, index %d, term %d, but the snapshot is %s", m.ID, m.Index, m.Term, name)}
	}
	return s
}

// checkData checks state.bin against the metadata: its size, its header
// and, with sum, its CRC.
func (s *snapFile) checkData(sum bool) *disk.DamageError {
	path := filepath.Join(s.dir, snapStateName)
	damaged := func(format string, args ...any) *disk.DamageError {
		return &disk.DamageError{Path: path, Offset: -1, Problem: fmt.Sprintf(format, args...)}
	}
	f, err := os.Open(path)
	if err != nil {
		return damaged("the snapshot's data cannot be read: %v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return damaged("the snapshot's data cannot be read: %v", err)
	}
	if st.Size() != s.meta.Size {
		return damaged("the snapshot's data is %d bytes, its meta.json says %d", st.Size(), s.meta.Size)
	}
	head := make([]byte, snapHeaderLen)
	n, _ := io.ReadFull(f, head)
	h, err := decodeSnapHeader(head[:n])
	if err == nil {
		err = h.agrees(s.meta)
	}
	if err != nil && !errors.Is(err, errNoHeader) {
		return damaged("the snapshot does not agree with its meta.json: %v", err)
	}
	if !sum {
		return nil
	}
	hash := crc64.New(crc64.MakeTable(crc64.ECMA))
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return damaged("the snapshot's data cannot be read: %v", err)
	}
	if _, err := io.Copy(hash, f); err != nil {
		return damaged("the snapshot's data cannot be read: %v", err)
	}
	if !bytes.Equal(hash.Sum(nil), s.crc) {
		return damaged("the snapshot's data fails its checksum")
	}
	return nil
}

// againstLog checks that the newest snapshot and the log, which serves
// first to last (0, 0: nothing), together hold every entry: the log must
// start no later than just after the snapshot. stale is true when the
// whole log is older than the snapshot — a snapshot from the leader whose
// install a crash interrupted before the old log was dropped — and the log
// must be emptied before raft starts.
func (c snapCheck) againstLog(walDir string, first, last uint64) (stale bool, err *disk.DamageError) {
	if last == 0 {
		return false, nil
	}
	var at uint64
	where := walDir
	if s := c.newest(); s != nil {
		at, where = s.meta.Index, s.dir
	}
	switch {
	case first > at+1 && at == 0:
		return false, &disk.DamageError{Path: walDir, Offset: -1, Problem: fmt.Sprintf("the log starts at index %d and no snapshot holds the entries before it", first)}
	case first > at+1:
		return false, &disk.DamageError{Path: where, Offset: -1, Problem: fmt.Sprintf("the newest snapshot ends at index %d but the log starts at index %d: entries %d to %d are missing", at, first, at+1, first-1)}
	}
	return last < at, nil
}

// removeUnfinishedSnapshots removes the snapshot directories a process
// that stopped while writing them left behind (named .tmp until they are
// complete): nothing finishes them, raft ignores them (warning on every
// snapshot), and each holds up to a whole state's bytes.
func removeUnfinishedSnapshots(raftDir string, logger *slog.Logger) error {
	base := filepath.Join(raftDir, snapDirName)
	ents, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), snapTmpSuffix) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(base, e.Name())); err != nil {
			return fmt.Errorf("remove the unfinished snapshot %s: %w", filepath.Join(base, e.Name()), err)
		}
		logger.Warn("removed a snapshot left unfinished when the node stopped", "snapshot", e.Name())
	}
	return nil
}
