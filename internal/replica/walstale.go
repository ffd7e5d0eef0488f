package replica

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"

	"github.com/djinn-go/djinn/internal/disk"
)

// The log's metadata file, wal-meta.db, lists the log's segments: raft-wal
// reads only those, and deletes every other segment file when it opens the
// log. It commits a new segment's id to the list before it makes the file,
// and drops a segment from the list before it deletes the file. So a file
// the list does not hold whose id is below the last listed one is a
// leftover of a dropped segment that a crash kept from being deleted; one
// above can only have been made after the list was written: the list is
// older than the segments (the file restored from an older copy). So is a
// list whose last segment, the one being appended to, is sealed on disk:
// raft-wal writes a segment's index when it seals it, and only then
// commits the list saying so (a crash between the two leaves the same
// state, nothing lost). With such a list raft-wal would serve the log only
// to the end of that segment, refuse every append to it, and delete the
// newer segments: the node refuses it, and repair rebuilds the log from
// the segments.

// segFile is a segment file in the log's directory.
type segFile struct {
	base, id uint64
	path     string
}

// segFiles returns the segment files in dir, by id.
func segFiles(dir string) ([]segFile, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []segFile
	for _, e := range ents {
		var f segFile
		name := e.Name()
		if filepath.Ext(name) != ".wal" {
			continue
		}
		if _, err := fmt.Sscanf(name, "%d-%x.wal", &f.base, &f.id); err != nil ||
			segment.FileName(types.SegmentInfo{BaseIndex: f.base, ID: f.id}) != name {
			continue // not raft-wal's name: it refuses such a log itself
		}
		f.path = filepath.Join(dir, name)
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b segFile) int { return cmp(a.id, b.id) })
	return files, nil
}

// segmentsOf returns the segments of the log in dir to check (ok false:
// there is no log), and the damage to report on its metadata file when it
// is older than the segments. Checking all of it (repair), a metadata
// file gone or damaged beside segment files gives the segments as the
// files tell them, with that damage; raft's term and vote, which the file
// held, are lost with it.
func segmentsOf(dir string, all bool) (segs []types.SegmentInfo, ok bool, stale *disk.DamageError, err error) {
	st, ok, err := readWALMeta(dir)
	var d *disk.DamageError
	if all && (errors.As(err, &d) || (err == nil && !ok)) {
		files, ferr := segFiles(dir)
		if ferr != nil && !errors.Is(ferr, fs.ErrNotExist) {
			return nil, false, nil, ferr
		}
		if len(files) == 0 {
			return nil, ok, nil, err
		}
		if d == nil {
			d = &disk.DamageError{Path: filepath.Join(dir, metadb.FileName), Offset: -1, Problem: "the log's metadata file is gone but its segments are there"}
		}
		d = &disk.DamageError{Path: d.Path, Offset: d.Offset, Problem: d.Problem + "; raft's term and vote were in it"}
		segs, err := fromFiles(files)
		return segs, true, d, err
	}
	if err != nil || !ok {
		return nil, ok, nil, err
	}
	segs, stale, err = onDisk(dir, st)
	return segs, true, stale, err
}

// fromFiles returns the segments of a log whose metadata is lost, as the
// files tell them: the newest file, and before it each older one that
// starts before the next one and holds the entry just before it (a
// leftover of a segment raft-wal dropped from the log's end starts after).
func fromFiles(files []segFile) ([]types.SegmentInfo, error) {
	var segs []types.SegmentInfo
	for i := len(files) - 1; i >= 0; i-- {
		f := files[i]
		w, err := walkFile(f.path, f.base)
		if err != nil {
			return nil, err
		}
		info := types.SegmentInfo{ID: f.id, BaseIndex: f.base, MinIndex: f.base, Codec: wal.CodecBinaryV1}
		if len(segs) > 0 || w.sealedEntries() >= 0 {
			info = sealInfo(info, w)
		}
		if len(segs) > 0 {
			next := segs[0].BaseIndex
			if info.BaseIndex >= next || info.MaxIndex+1 < next {
				continue
			}
			// raft-wal lowers a segment's last index, not its file, when
			// the log's end is cut and written again.
			info.MaxIndex = next - 1
		}
		segs = append([]types.SegmentInfo{info}, segs...)
	}
	return segs, nil
}

// onDisk returns the segments of the log in dir: st's list, or, when the
// directory holds segments newer than st lists, the list as the files
// tell it, with the damage to report on the metadata file.
func onDisk(dir string, st types.PersistentState) ([]types.SegmentInfo, *disk.DamageError, error) {
	files, err := segFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	segs := slices.Clone(st.Segments)
	var newer []segFile
	for _, f := range files {
		if f.id >= st.NextSegmentID || (len(segs) > 0 && f.id > segs[len(segs)-1].ID) {
			newer = append(newer, f)
		}
	}
	if len(newer) == 0 {
		return segs, nil, nil
	}
	d := staleMeta(dir, fmt.Sprintf("segment %s holds entries from %d on, and the metadata does not list it",
		filepath.Base(newer[0].path), newer[0].base))
	like := types.SegmentInfo{Codec: wal.CodecBinaryV1}
	if n := len(segs); n > 0 {
		like.Codec, like.SizeLimit = segs[n-1].Codec, segs[n-1].SizeLimit
		if segs[n-1].SealTime.IsZero() {
			w, err := walkFile(filepath.Join(dir, segment.FileName(segs[n-1])), segs[n-1].BaseIndex)
			if err != nil {
				return nil, nil, err
			}
			segs[n-1] = sealInfo(segs[n-1], w)
		}
	}
	for i, f := range newer {
		if n := len(segs); n > 0 && f.base != segs[n-1].MaxIndex+1 {
			d.Problem += fmt.Sprintf("; segment %s and any after it do not follow on from the segments before (entry %d)",
				filepath.Base(f.path), segs[n-1].MaxIndex+1)
			break
		}
		info := like
		info.ID, info.BaseIndex, info.MinIndex = f.id, f.base, f.base
		w, err := walkFile(f.path, f.base)
		if err != nil {
			return nil, nil, err
		}
		if i < len(newer)-1 || w.sealedEntries() >= 0 {
			info = sealInfo(info, w)
		}
		segs = append(segs, info)
	}
	return segs, d, nil
}

// sealedTail reports, on a log whose metadata lists no segment newer than
// its files, a last segment the metadata has open that is sealed on disk.
// Checking the whole log (all), the segment is checked again as sealed.
func (c *walCheck) sealedTail(dir string, all bool) error {
	if c.stale != nil || len(c.segs) == 0 {
		return nil
	}
	s := &c.segs[len(c.segs)-1]
	n := s.walk.sealedEntries()
	if !s.tail || n < 0 {
		return nil
	}
	c.sealedOpen = true
	c.stale = staleMeta(dir, fmt.Sprintf("segment %s, which it lists as the one being written, is sealed on disk after entry %d: "+
		"the metadata was restored from an older copy, or a crash came as the log moved on to a new segment",
		filepath.Base(s.path), s.info.BaseIndex+uint64(n)-1))
	if c.damage == nil {
		c.damage = c.stale
	}
	if !all {
		return nil
	}
	sealed, err := checkSegment(s.path, sealInfo(s.info, s.walk), false)
	if err != nil {
		return err
	}
	*s = sealed
	return nil
}

func staleMeta(dir, why string) *disk.DamageError {
	return &disk.DamageError{Path: filepath.Join(dir, metadb.FileName), Offset: -1,
		Problem: "the log's metadata is older than its segments (" + why + ")"}
}

// sealedEntries returns how many entries a segment whose walk is w holds
// when it is sealed on disk — an index frame, then a commit that checks
// out — or -1.
func (w *segWalk) sealedEntries() int {
	if w.indexAt < 0 {
		return -1
	}
	for _, c := range w.commits {
		if c.off > w.indexAt {
			if !c.ok {
				return -1
			}
			return c.entries
		}
	}
	return -1
}

// sealInfo returns info as that of a sealed segment whose walk is w: its
// entries up to its index, or, with none, every entry read (its check
// then finds it is not sealed).
func sealInfo(info types.SegmentInfo, w segWalk) types.SegmentInfo {
	n := w.sealedEntries()
	if n >= 0 {
		info.IndexStart = uint64(w.indexAt) + segFrameLen
	} else {
		n = len(w.entries)
	}
	info.MaxIndex = info.BaseIndex + uint64(n) - 1
	info.SealTime = time.Unix(0, 0)
	return info
}

// walkFile walks the segment file at path, whose first entry is index
// base; a file that is not there holds nothing.
func walkFile(path string, base uint64) (segWalk, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return segWalk{indexAt: -1}, nil
	}
	if err != nil {
		return segWalk{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return segWalk{}, err
	}
	return walkSegment(f, st.Size(), base), nil
}

// termAtLeast raises raft's current term in w to the term of its entry
// last when it is below it: the metadata a log is rebuilt with may be
// older than the log (its term with it), and raft must not go on in a
// term before that of an entry it holds.
func termAtLeast(w *wal.WAL, last uint64) error {
	var e raft.Log
	if err := w.GetLog(last, &e); err != nil {
		return err
	}
	key := []byte("CurrentTerm") // raft's key for it
	term, err := w.GetUint64(key)
	if err != nil || term >= e.Term {
		return err
	}
	return w.SetUint64(key, e.Term)
}

// clearTornSeal makes raft-wal blind to a torn write left out at the end
// of the log's tail that holds the segment's index frame: a crash while
// the append that sealed the segment was written. raft-wal leaves the
// batch out when it opens the log, but keeps taking the segment for
// sealed, and refuses every append to it: the node would never lead. The
// batch was never acknowledged; the first frame header of it is zeroed
// (as raft-wal's next append would overwrite it), and the file fsynced.
func clearTornSeal(wc walCheck, logger *slog.Logger) error {
	if len(wc.segs) == 0 {
		return nil
	}
	s := wc.segs[len(wc.segs)-1]
	if !s.tail || s.cutFrom < 0 || s.after != nil {
		return nil
	}
	f, err := os.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if !indexFrameFrom(f, s.cutFrom) {
		return nil
	}
	if _, err := f.WriteAt(make([]byte, segFrameLen), s.cutFrom); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	logger.Warn("log: the torn write was the one that sealed the segment; its first frame is cleared so that the log is written on",
		"file", s.path, "offset", s.cutFrom)
	return nil
}

// indexFrameFrom reports whether raft-wal, reading the frames of r from
// off on as it does when it opens a segment, finds an index frame.
func indexFrameFrom(r io.ReaderAt, off int64) bool {
	var fh [segFrameLen]byte
	for {
		if _, err := r.ReadAt(fh[:], off); err != nil {
			return false
		}
		l := int64(binary.LittleEndian.Uint32(fh[4:]))
		switch fh[0] {
		case frameIndex:
			return true
		case frameEntry:
			off += segFrameLen + l + int64(padLen(int(l)))
		case frameCommit:
			off += segFrameLen
		default:
			return false
		}
	}
}
