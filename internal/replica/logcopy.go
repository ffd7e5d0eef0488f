package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"go.etcd.io/bbolt"

	"github.com/djinn-go/djinn/internal/disk"
)

// rebuildLog writes a new log, in walDir.repair, holding the entries
// first..last of the checked log in walDir and its stable values (the
// term and vote).
func rebuildLog(walDir string, wc walCheck, first, last uint64) error {
	// Built in walDir.repair.partial and renamed walDir.repair once whole:
	// a walDir.repair is always a whole log (finishInterruptedRepair).
	done := walDir + ".repair"
	tmp := done + ".partial"
	if err := os.RemoveAll(done); err != nil {
		return err
	}
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	w, err := wal.Open(tmp)
	if err != nil {
		return fmt.Errorf("new log in %s: %w", tmp, err)
	}
	err = copyStable(filepath.Join(walDir, metadb.FileName), w)
	if err == nil && last > 0 {
		err = copyEntries(wc, first, last, w)
	}
	if err == nil && last > 0 {
		err = termAtLeast(w, last)
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("new log in %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, done); err != nil {
		return err
	}
	return disk.SyncDir(filepath.Dir(walDir))
}

// finishInterruptedRepair puts in place the log a repair rebuilt when it
// was stopped after moving the old log aside and before renaming the new
// one into its place: no walDir (or an empty one, which a start tried
// meanwhile makes), a whole walDir.repair. It reports whether it did.
func finishInterruptedRepair(walDir string) (bool, error) {
	ents, err := os.ReadDir(walDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	if len(ents) > 0 {
		return false, nil
	}
	if _, err := os.Stat(walDir + ".repair"); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	if err := os.RemoveAll(walDir); err != nil {
		return false, err
	}
	if err := os.Rename(walDir+".repair", walDir); err != nil {
		return false, err
	}
	return true, disk.SyncDir(filepath.Dir(walDir))
}

// copyStable copies raft's stable values (current term, vote) from the
// old log's metadata.
func copyStable(meta string, w *wal.WAL) error {
	if _, err := os.Stat(meta); errors.Is(err, fs.ErrNotExist) {
		return nil // the log's directory is gone: nothing to copy
	}
	var kv [][2][]byte
	err := withMeta(meta, true, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(metadb.StableBucket))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			kv = append(kv, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
			return nil
		})
	})
	if d := (*disk.DamageError)(nil); errors.As(err, &d) {
		return nil // lost with the damaged file; the term is then taken from the log (termAtLeast)
	}
	if err != nil {
		return err
	}
	for _, e := range kv {
		if err := w.Set(e[0], e[1]); err != nil {
			return err
		}
	}
	return nil
}

// copyEntries appends the entries first..last, read from the checked
// segments, to w.
func copyEntries(wc walCheck, first, last uint64, w *wal.WAL) error {
	var codec wal.BinaryCodec
	var batch []*raft.Log
	for _, s := range wc.segs {
		f, err := os.Open(s.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for i, off := range s.walk.entries {
			idx := s.info.BaseIndex + uint64(i)
			if idx < first || idx > last || (!s.tail && idx > s.info.MaxIndex) {
				continue // past a sealed segment's last index: the log's end was cut there and written again
			}
			raw, err := readEntryFrame(f, off)
			if err == nil {
				l := new(raft.Log)
				if err = codec.Decode(raw, l); err == nil {
					batch = append(batch, l)
				}
			}
			if err == nil && (len(batch) == 256 || idx == last) {
				err = w.StoreLogs(batch)
				batch = batch[:0]
			}
			if err != nil {
				f.Close()
				return fmt.Errorf("log entry %d in %s: %w", idx, s.path, err)
			}
		}
		f.Close()
	}
	return nil
}

func readEntryFrame(f *os.File, off int64) ([]byte, error) {
	var fh [segFrameLen]byte
	if _, err := f.ReadAt(fh[:], off); err != nil {
		return nil, err
	}
	raw := make([]byte, int(fh[4])|int(fh[5])<<8|int(fh[6])<<16|int(fh[7])<<24)
	_, err := f.ReadAt(raw, off+segFrameLen)
	return raw, err
}
