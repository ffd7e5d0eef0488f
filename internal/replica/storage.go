package replica

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	rawfs "github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"

	"github.com/djinn-go/djinn/internal/disk"
)

// recovery is the advice a node that refuses its data directory gives.
func recovery(dataDir string) string {
	return fmt.Sprintf("restore the data directory %s from a backup; in a cluster, you may instead replace this member with a new one, "+
		"which copies the state from the others; or run `djinn repair --data-dir %s`, which keeps what checks out and reports what it drops", dataDir, dataDir)
}

// storage is a node's checked log and snapshots.
type storage struct {
	log   *wal.WAL
	snaps *snapStore
	end   *logEnd
	term  *termStore // the log's stable store, and the term record
}

// openStorage checks the log and snapshots in raftDir and opens them. It
// refuses (with a *disk.DamageError) storage that would not give back
// everything it acknowledged: damage in the log or the snapshots, a log
// that ends before where a clean shutdown left it or that lost a segment
// its witness says held acknowledged entries, a snapshot that
// disagrees with the log, a log whose metadata holds an older term or
// vote than raft acted on (termvote.go). A torn last write, never
// acknowledged, is left out and logged.
func openStorage(raftDir string, segSize int, hlog hclog.Logger, logger *slog.Logger) (*storage, error) {
	walDir := filepath.Join(raftDir, "wal")
	clean, wasClean, err := readCleanStop(raftDir)
	if err != nil {
		return nil, err
	}
	wc, walFS, err := checkLog(raftDir, segSize, logger)
	if err != nil {
		return nil, err
	}
	sc, err := checkSnapshots(raftDir, false)
	if err != nil {
		return nil, err
	}
	if d := sc.damage(); d != nil {
		return nil, d
	}
	if err := clearTornSeal(wc, logger); err != nil {
		return nil, fmt.Errorf("log in %s: %w", walDir, err)
	}
	if err := syncTail(wc); err != nil {
		return nil, fmt.Errorf("log in %s: %w", walDir, err)
	}
	// Raft's telemetry first: the log's metrics go where it sends them.
	if _, err := RaftMetrics(); err != nil {
		return nil, fmt.Errorf("raft metrics: %w", err)
	}
	log, err := wal.Open(walDir, wal.WithSegmentSize(segSize),
		wal.WithMetricsCollector(telemetry.wal), wal.WithSegmentFiler(segment.NewFiler(walDir, walFS)))
	if err != nil {
		return nil, fmt.Errorf("open log in %s: %w", walDir, err)
	}
	if err := checkOpenedLog(log, wc, clean, wasClean, logger); err != nil {
		log.Close()
		return nil, err
	}
	if err := sc.settle(log, walDir, logger); err != nil {
		log.Close()
		return nil, err
	}
	last, err := checkLogEndOf(raftDir, walDir, log, wc, sc)
	if err != nil {
		log.Close()
		return nil, err
	}
	term, err := openTermStore(raftDir, filepath.Join(walDir, metadb.FileName), log)
	if err != nil {
		log.Close()
		return nil, err
	}
	closeAll := func() { term.close(); log.Close() }
	if err := removeCleanStop(raftDir); err != nil {
		closeAll()
		return nil, fmt.Errorf("clean-shutdown record in %s: %w", raftDir, err)
	}
	if err := removeUnfinishedSnapshots(raftDir, logger); err != nil {
		closeAll()
		return nil, err
	}
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir, 2, hlog)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("open snapshots in %s: %w", raftDir, err)
	}
	end, err := openLogEnd(raftDir, last)
	if err != nil {
		closeAll()
		return nil, err
	}
	return &storage{log: log, snaps: &snapStore{FileSnapshotStore: snaps, dataDir: filepath.Dir(raftDir)}, end: end, term: term}, nil
}

// checkLogEndOf checks the opened log against the log-end record
// (logend.go), and returns the log's last index.
func checkLogEndOf(raftDir, walDir string, log *wal.WAL, wc walCheck, sc snapCheck) (uint64, error) {
	last, err := log.LastIndex()
	if err != nil {
		return 0, err
	}
	var snap uint64
	if s := sc.newest(); s != nil {
		snap = s.meta.Index
	}
	tail := walDir
	if len(wc.segs) > 0 {
		tail = wc.segs[len(wc.segs)-1].path
	}
	return last, checkLogEnd(raftDir, last, snap, tail)
}

// checkLog checks the log's files in raftDir before raft-wal opens them:
// its metadata, every segment, and the log against its witness
// (witness.go). It returns the file system to open the log through, which
// keeps the witness.
func checkLog(raftDir string, segSize int, logger *slog.Logger) (walCheck, *witnessFS, error) {
	walDir := filepath.Join(raftDir, "wal")
	w, witnessed, err := readWitness(raftDir)
	if err != nil {
		return walCheck{}, nil, err
	}
	if err := checkWALMeta(walDir); err != nil {
		return walCheck{}, nil, err
	}
	wc, err := checkWAL(walDir, false)
	if err != nil {
		return wc, nil, err
	}
	if wc.sealedOpen && wc.damage == wc.stale && wc.segs[len(wc.segs)-1].walk.sealedEntries() > 0 {
		if err := finishRotation(walDir, wc.segs[len(wc.segs)-1], segSize, logger); err != nil {
			return wc, nil, fmt.Errorf("log in %s: %w", walDir, err)
		}
		if wc, err = checkWAL(walDir, false); err != nil {
			return wc, nil, err
		}
	}
	if wc.damage != nil {
		return wc, nil, wc.damage
	}
	if witnessed {
		if d, _ := w.check(raftDir, wc); d != nil {
			return wc, nil, d
		}
	}
	return wc, newWitnessFS(raftDir, rawfs.New(), w, witnessed), nil
}

// checkOpenedLog checks the log raft-wal opened against the check of its
// files and against the record of a clean shutdown, if any.
func checkOpenedLog(log *wal.WAL, wc walCheck, clean cleanStop, wasClean bool, logger *slog.Logger) error {
	first, err := log.FirstIndex()
	if err != nil {
		return err
	}
	last, err := log.LastIndex()
	if err != nil {
		return err
	}
	if first != wc.first || last != wc.last {
		return fmt.Errorf("the log serves entries %d to %d, its check found %d to %d: not starting on a log whose reading is in doubt", first, last, wc.first, wc.last)
	}
	var tail *segCheck
	if len(wc.segs) > 0 {
		tail = &wc.segs[len(wc.segs)-1]
	}
	if wasClean {
		return matchCleanStop(log, tail, clean, last)
	}
	if tail == nil || tail.cutFrom < 0 {
		return nil
	}
	if tail.after != nil {
		return tail.after
	}
	logger.Warn("log: a write a crash interrupted was torn and is left out; it was never acknowledged",
		"file", tail.path, "offset", tail.cutFrom, "entries", tail.cut)
	return nil
}

// matchCleanStop checks that the log ends where the node's last, clean,
// shutdown left it.
func matchCleanStop(log *wal.WAL, tail *segCheck, clean cleanStop, last uint64) error {
	where, off := "", int64(-1)
	if tail != nil {
		where, off = tail.path, tail.keptEnd
	}
	if last > clean.LastIndex && tail != nil {
		return staleCleanStop(tail.path, clean, last, 0)
	}
	if last != clean.LastIndex {
		return &disk.DamageError{Path: where, Offset: off, Problem: fmt.Sprintf(
			"the node stopped cleanly with its log at index %d, but the log now ends at index %d: its last entries are damaged", clean.LastIndex, last)}
	}
	if last == 0 {
		return nil
	}
	var e raft.Log
	if err := log.GetLog(last, &e); err != nil {
		return &disk.DamageError{Path: where, Offset: -1, Problem: fmt.Sprintf("the log's last entry, %d, cannot be read: %v", last, err)}
	}
	if e.Term > clean.LastTerm && tail != nil {
		return staleCleanStop(tail.path, clean, last, e.Term)
	}
	if e.Term != clean.LastTerm {
		return &disk.DamageError{Path: where, Offset: -1, Problem: fmt.Sprintf(
			"the node stopped cleanly with its last entry, %d, of term %d, but the log's is of term %d", last, clean.LastTerm, e.Term)}
	}
	return nil
}

// settle checks the newest snapshot against the opened log, and drops a
// log that the snapshot wholly replaces.
func (c snapCheck) settle(log *wal.WAL, walDir string, logger *slog.Logger) error {
	first, err := log.FirstIndex()
	if err != nil {
		return err
	}
	last, err := log.LastIndex()
	if err != nil {
		return err
	}
	stale, d := c.againstLog(walDir, first, last)
	if d != nil {
		return d
	}
	if !stale {
		return nil
	}
	logger.Info("log: dropping entries the newest snapshot already holds (its install was interrupted)",
		"first", first, "last", last, "snapshot", c.newest().meta.Index)
	if err := log.DeleteRange(first, last); err != nil {
		return fmt.Errorf("drop log entries %d to %d: %w", first, last, err)
	}
	return nil
}

// restoreFailure explains why raft did not start when it could not
// restore the newest snapshot: the snapshot did not open (damage), or the
// state machine did not take its data (restoreErr). nil: neither.
func (st *storage) restoreFailure(raftDir string, restoreErr error) error {
	l, err := st.snaps.FileSnapshotStore.List()
	if err != nil || len(l) == 0 {
		return nil
	}
	path := filepath.Join(raftDir, snapDirName, l[0].ID, snapStateName)
	if cause := st.snaps.failure(); cause != nil {
		return &disk.DamageError{Path: path, Offset: -1, Problem: "the snapshot does not check out: " + cause.Error()}
	}
	if restoreErr != nil {
		return fmt.Errorf("snapshot %s checks out but the state does not take it (written by another version of djinn?): %w", path, restoreErr)
	}
	return nil
}

func (st *storage) close() error { return errors.Join(st.term.close(), st.log.Close()) }

// checkWALMeta refuses a log whose metadata file is gone while its
// segments are there: without it the log cannot be read back.
func checkWALMeta(walDir string) error {
	meta := filepath.Join(walDir, "wal-meta.db")
	segs, _ := filepath.Glob(filepath.Join(walDir, "*.wal"))
	if _, err := os.Stat(meta); len(segs) == 0 || !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return &disk.DamageError{Path: meta, Offset: -1, Problem: "the log's metadata file is gone but its segments are there"}
}

// syncTail fsyncs the last segment's file: after a kill the log's last
// writes may be in the page cache only, and the records beside the log
// (log-end, clean shutdown) must not cover what a power loss would still
// take.
func syncTail(wc walCheck) error {
	if len(wc.segs) == 0 {
		return nil
	}
	f, err := os.OpenFile(wc.segs[len(wc.segs)-1].path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
