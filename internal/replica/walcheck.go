package replica

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
	"go.etcd.io/bbolt"

	"github.com/djinn-go/djinn/internal/disk"
)

// walCheck is what checking the log found.
type walCheck struct {
	segs []segCheck // in index order, up to the first damaged one
	// damage is the first damage found in what the log serves.
	damage *disk.DamageError
	// first and last are the indexes the log serves (0, 0: none).
	first, last uint64
	// stale is the damage of a metadata file older than the segments
	// (walstale.go); segs are then as the files tell them.
	stale *disk.DamageError
	// sealedOpen is set when stale is only that the segment the metadata
	// has open is sealed on disk, nothing newer (finishRotation).
	sealedOpen bool
}

// segCheck is what checking one segment found.
type segCheck struct {
	info types.SegmentInfo
	path string
	tail bool
	walk segWalk
	// kept is how many entries, from BaseIndex on, the log serves from
	// this segment; keptEnd is where their batches end.
	kept    int
	keptEnd int64
	// cut is how many entries of a torn last write, never acknowledged,
	// are left out after keptEnd; cutFrom is set when bytes are.
	cut     int
	cutFrom int64
	// valid is how many entries, from BaseIndex on, are in batches that
	// check out before any damage.
	valid int
	// damage is damage in what the log serves.
	damage *disk.DamageError
	// held is, with damage in the tail, the last entry found in batches
	// that check out after it (0: none).
	held uint64
	// after is damage after the last batch served: a last batch written
	// whole that fails its checksum. It loses an acknowledged write unless
	// the node stopped cleanly at the last index served (then it is what
	// an earlier crash left behind).
	after *disk.DamageError
}

// metaTimeout bounds the wait for the log's metadata file, which a
// running node holds locked.
const metaTimeout = 2 * time.Second

// readWALMeta reads the log's metadata in dir: its segments. ok is false
// when there is no log yet. A file without the bucket of raft's term and
// vote is damage too.
func readWALMeta(dir string) (st types.PersistentState, ok bool, err error) {
	path := filepath.Join(dir, metadb.FileName)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return st, false, nil
	}
	err = withMeta(path, true, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(metadb.MetaBucket))
		if b == nil {
			return &disk.DamageError{Path: path, Offset: -1, Problem: "the log's metadata has no segment list"}
		}
		if tx.Bucket([]byte(metadb.StableBucket)) == nil { // raft-wal takes it for there
			return &disk.DamageError{Path: path, Offset: -1, Problem: "the log's metadata has no place for raft's term and vote"}
		}
		raw := b.Get([]byte(metadb.MetaKey))
		if raw == nil {
			return nil
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			return &disk.DamageError{Path: path, Offset: -1, Problem: "the log's segment list does not decode: " + err.Error()}
		}
		return nil
	})
	return st, err == nil, err
}

// withMeta runs fn in a transaction of the metadata file at path. bbolt
// trusts the file's structure: it panics on a page that is not of the
// kind the structure says, and faults on one past the memory it mapped.
// Either is damage. The structure is checked first (metaCut; metaTree
// once bbolt holds the file's lock) for what bbolt does not survive: a
// page that loops back overflows its stack, a fatal error no recover
// catches.
func withMeta(path string, readOnly bool, fn func(*bbolt.Tx) error) (err error) {
	if d := metaCut(path); d != nil {
		return d
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = &disk.DamageError{Path: path, Offset: -1, Problem: fmt.Sprintf(
				"the log's metadata does not read: a page is not what the file's structure says (%v)", r)}
		}
	}()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: readOnly, Timeout: metaTimeout})
	if errors.Is(err, bbolt.ErrTimeout) {
		return fmt.Errorf("%s is locked: is a djinn server running on this data directory? stop it first", path)
	}
	if err != nil {
		return &disk.DamageError{Path: path, Offset: -1, Problem: "the log's metadata cannot be opened: " + err.Error()}
	}
	defer db.Close()
	if d := metaTree(path); d != nil {
		return d
	}
	if readOnly {
		return db.View(fn)
	}
	return db.Update(fn)
}

// checkWAL checks every segment of the log in dir, up to the first
// damaged one, or with all every one.
func checkWAL(dir string, all bool) (walCheck, error) {
	var c walCheck
	segs, ok, stale, err := segmentsOf(dir, all)
	if err != nil || !ok {
		return c, err
	}
	if stale != nil {
		c.stale, c.damage = stale, stale
		if !all {
			return c, nil
		}
	}
	for i, info := range segs {
		tail := info.SealTime.IsZero()
		if tail && i != len(segs)-1 {
			return c, &disk.DamageError{Path: filepath.Join(dir, metadb.FileName), Offset: -1, Problem: "the log's metadata lists an unsealed segment before others"}
		}
		s, err := checkSegment(filepath.Join(dir, segment.FileName(info)), info, tail)
		if err != nil {
			return c, err
		}
		c.segs = append(c.segs, s)
		if s.damage != nil && c.damage == nil {
			c.damage = s.damage
		}
		if c.damage != nil && !all {
			return c, nil
		}
	}
	if err := c.sealedTail(dir, all); err != nil {
		return c, err
	}
	if c.damage == nil {
		c.first, c.last = servedRange(c.segs)
	}
	return c, nil
}

// servedRange returns the first and last index the checked segments
// serve, as raft-wal reckons them.
func servedRange(segs []segCheck) (first, last uint64) {
	if len(segs) == 0 {
		return 0, 0
	}
	t := segs[len(segs)-1]
	switch {
	case !t.tail:
		last = t.info.MaxIndex
	case t.kept > 0:
		last = t.info.BaseIndex + uint64(t.kept) - 1
	case len(segs) > 1:
		last = t.info.BaseIndex - 1
	}
	if last == 0 || last < segs[0].info.MinIndex {
		return 0, 0
	}
	return segs[0].info.MinIndex, last
}

func checkSegment(path string, info types.SegmentInfo, tail bool) (segCheck, error) {
	s := segCheck{info: info, path: path, tail: tail, cutFrom: -1}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if tail {
			return s, nil // made after a crash before its first write; raft-wal makes it again
		}
		s.damage = &disk.DamageError{Path: path, Offset: -1, Problem: fmt.Sprintf("the log segment holding entries %d to %d is missing", info.MinIndex, info.MaxIndex)}
		return s, nil
	}
	if err != nil {
		return s, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return s, err
	}
	s.walk = walkSegment(f, st.Size(), info.BaseIndex)
	if tail {
		return s, s.checkTail(f, st.Size())
	}
	s.checkSealed()
	return s, nil
}

// batchStart is where the batch ending in commit j starts.
func (w *segWalk) batchStart(j int) int64 {
	if j == 0 {
		return 0
	}
	return w.commits[j-1].off + segFrameLen
}

// firstFailed returns the first commit up to upto whose batch fails its
// checksum, or -1.
func (w *segWalk) firstFailed(upto int) int {
	for j := 0; j <= upto && j < len(w.commits); j++ {
		if !w.commits[j].ok {
			return j
		}
	}
	return -1
}

func (s *segCheck) damaged(off int64, format string, args ...any) {
	s.damage = &disk.DamageError{Path: s.path, Offset: off, Problem: fmt.Sprintf(format, args...)}
}

func (s *segCheck) checkSealed() {
	w := &s.walk
	if j := w.firstFailed(len(w.commits) - 1); j >= 0 {
		if j > 0 {
			s.valid = w.commits[j-1].entries
		}
		s.damaged(w.batchStart(j), "a batch of log entries fails its checksum")
		return
	}
	if len(w.commits) > 0 {
		s.valid = w.commits[len(w.commits)-1].entries
	}
	if !headerMatches(w.header, s.info) {
		s.damaged(0, "the segment's header does not match the log's metadata")
		return
	}
	want := int(s.info.MaxIndex - s.info.BaseIndex + 1)
	sealed := w.indexAt >= 0 && uint64(w.indexAt)+segFrameLen == s.info.IndexStart &&
		len(w.commits) > 0 && w.commits[len(w.commits)-1].off > w.indexAt
	if !sealed || s.valid < want {
		end := int64(segHeaderLen)
		if len(w.commits) > 0 {
			end = w.commits[len(w.commits)-1].off + segFrameLen
		}
		s.damaged(end, "the sealed segment ends after %d of its %d entries, before its index: the frames from here on do not check out", s.valid, want)
		return
	}
	s.kept, s.keptEnd = want, w.commits[len(w.commits)-1].off+segFrameLen
}

// checkTail checks the segment being appended to. raft-wal serves its
// batches up to the last commit, or the one before if the last fails its
// checksum. Every batch served must check out; what follows the last one
// served must be a write a crash interrupted (disk.Torn), with no batch
// after it that checks out.
func (s *segCheck) checkTail(r io.ReaderAt, size int64) error {
	w := &s.walk
	acc := len(w.commits) - 1
	if acc >= 0 && len(w.entries) == w.commits[acc].entries && !w.commits[acc].ok {
		acc--
	}
	if j := w.firstFailed(acc); j >= 0 {
		if j > 0 {
			s.valid = w.commits[j-1].entries
		}
		s.damaged(w.batchStart(j), "a batch of log entries fails its checksum, and later batches were written after it")
		return nil
	}
	if acc >= 0 {
		s.kept, s.keptEnd = w.commits[acc].entries, w.commits[acc].off+segFrameLen
		if !headerMatches(w.header, s.info) {
			s.damaged(0, "the segment's header does not match the log's metadata")
			return nil
		}
	}
	s.valid = s.kept
	if acc >= 0 && size < int64(s.info.SizeLimit) {
		// raft-wal makes a segment at its full size and fsyncs it with its
		// first batch: a crash never leaves one shorter.
		s.damaged(size, "the segment file is %d bytes, short of the %d it was made with: it was cut short, and batches written after offset %d may be lost", size, s.info.SizeLimit, s.keptEnd)
		return nil
	}
	if at := laterBatch(r, size, s.keptEnd); at >= 0 {
		s.held = lastHeld(r, size, at)
		s.damaged(s.keptEnd, "a batch of log entries does not check out, and a later batch at offset %d does", at)
		return nil
	}
	written := w.bad || len(w.entries) > s.kept || acc < len(w.commits)-1 || (acc < 0 && !zeros(w.header))
	if !written {
		return nil
	}
	torn := true
	var end int64
	switch {
	case acc < len(w.commits)-1:
		end = w.commits[acc+1].off + segFrameLen
	case w.bad:
		end = w.seen
	}
	if end > s.keptEnd {
		b := make([]byte, end-s.keptEnd)
		if _, err := r.ReadAt(b, s.keptEnd); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		torn = disk.Torn(b, s.keptEnd)
	}
	s.cut, s.cutFrom = len(w.entries)-s.kept, s.keptEnd
	if !torn {
		s.after = &disk.DamageError{Path: s.path, Offset: s.keptEnd, Problem: "the last batch of log entries fails its checksum but was written whole, so it is not a write a crash interrupted"}
	}
	return nil
}

func headerMatches(h []byte, info types.SegmentInfo) bool {
	return len(h) == segHeaderLen && binary.LittleEndian.Uint32(h) == segMagic && h[7] == 0 &&
		binary.LittleEndian.Uint64(h[8:]) == info.BaseIndex &&
		binary.LittleEndian.Uint64(h[16:]) == info.ID &&
		binary.LittleEndian.Uint64(h[24:]) == info.Codec
}

func zeros(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func checksOut(r io.ReaderAt, size, start int64) bool {
	_, _, ok := readBatch(r, size, start)
	return ok
}

// laterBatch looks after from for a batch that checks out: one that
// starts after a commit frame and whose own commit frame's CRC matches.
// It returns the batch's offset, or -1.
func laterBatch(r io.ReaderAt, size, from int64) int64 {
	from += (segFrameLen - from%segFrameLen) % segFrameLen
	buf := make([]byte, min(max(size-from, segFrameLen), 1<<20))
	for base := from; base < size; base += int64(len(buf)) {
		n, _ := r.ReadAt(buf, base)
		n -= n % segFrameLen
		for i := 0; i < n; i += segFrameLen {
			if buf[i] != frameCommit || buf[i+1]|buf[i+2]|buf[i+3] != 0 {
				continue
			}
			if at := base + int64(i) + segFrameLen; checksOut(r, size, at) {
				return at
			}
		}
		if n < len(buf) {
			return -1
		}
	}
	return -1
}

// readBatch reads the batch at start: whether it has at least one frame
// and ends in a commit frame whose CRC matches, where the next batch
// starts, and the index of its last entry (0: none).
func readBatch(r io.ReaderAt, size, start int64) (next int64, last uint64, ok bool) {
	br := bufio.NewReaderSize(io.NewSectionReader(r, start, size-start), int(min(max(size-start, 16), 64<<10)))
	var crc uint32
	var fh [segFrameLen]byte
	var buf []byte
	off := start
	for frames := 0; ; frames++ {
		if _, err := io.ReadFull(br, fh[:]); err != nil {
			return 0, 0, false
		}
		l := binary.LittleEndian.Uint32(fh[4:])
		switch fh[0] {
		case frameCommit:
			return off + segFrameLen, last, frames > 0 && crc == l
		case frameEntry, frameIndex:
		default:
			return 0, 0, false
		}
		if l > maxEntry {
			return 0, 0, false
		}
		need := int(l) + padLen(int(l))
		if cap(buf) < need {
			buf = make([]byte, need)
		}
		if _, err := io.ReadFull(br, buf[:need]); err != nil {
			return 0, 0, false
		}
		if fh[0] == frameEntry {
			last, _ = binary.Uvarint(buf[:l])
		}
		crc = crc32.Update(crc, castagnoli, fh[:])
		crc = crc32.Update(crc, castagnoli, buf[:need])
		off += segFrameLen + int64(need)
	}
}

// lastHeld returns the index of the last entry in the batches from start
// on that check out, one after the other.
func lastHeld(r io.ReaderAt, size, start int64) uint64 {
	var held uint64
	for {
		next, last, ok := readBatch(r, size, start)
		if !ok {
			return held
		}
		held, start = max(held, last), next
	}
}
