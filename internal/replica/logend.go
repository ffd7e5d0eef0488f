package replica

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/djinn-go/djinn/internal/disk"
)

// The log-end record, raft/log-end, says how far the log had reached the
// disk: every entry up to its index had been appended and fsynced when it
// was written. A crash tears at most a write not yet acknowledged, which
// lies after any index the record can hold; so a log that, at start, ends
// before the record (and before the newest snapshot) lost acknowledged
// entries to damage — batches zeroed or cut at its end, its last segment
// gone — where without the record that end would pass for a write a crash
// interrupted.
//
// The record trails the log by at most logEndEvery: it is rewritten after
// appends, at most once per interval, in place, alternating between two
// checksummed slots in separate disk blocks, so that a crash while one is
// written leaves the other whole. A suffix raft deletes (a follower's
// entries a new leader overwrites, the log emptied once a snapshot is
// installed) lowers it first, before the entries go. The entries of the
// last interval before a crash are not covered: damage to them still
// reads as a torn write.

// logEndName is the log-end record in the raft directory.
const logEndName = "log-end"

// logEndEvery is the most often the record is rewritten: at most this
// long after an append is acknowledged, the record covers it.
const logEndEvery = 10 * time.Millisecond

const (
	logEndMagic   = "DJLE"
	logEndVersion = 1
	logEndSlotLen = 32   // magic, version, 3 zero bytes, sequence, index, CRC, 4 zero bytes
	logEndBlock   = 4096 // slot i is at i*logEndBlock
	logEndLen     = logEndBlock + logEndSlotLen
)

func encodeLogEndSlot(seq, index uint64) []byte {
	b := make([]byte, logEndSlotLen)
	copy(b, logEndMagic)
	b[4] = logEndVersion
	binary.BigEndian.PutUint64(b[8:], seq)
	binary.BigEndian.PutUint64(b[16:], index)
	binary.BigEndian.PutUint32(b[24:], crc32.Checksum(b[:24], castagnoli))
	return b
}

// decodeLogEndSlot reads one slot: ok is false when it does not check out.
func decodeLogEndSlot(b []byte) (seq, index uint64, ok bool) {
	if len(b) < logEndSlotLen || string(b[:4]) != logEndMagic || b[4] != logEndVersion || !zeros(b[5:8]) || !zeros(b[28:logEndSlotLen]) ||
		crc32.Checksum(b[:24], castagnoli) != binary.BigEndian.Uint32(b[24:]) {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(b[8:]), binary.BigEndian.Uint64(b[16:]), true
}

// decodeLogEnd reads the record's bytes: the sequence and index of the
// newer slot that checks out.
func decodeLogEnd(b []byte) (seq, index uint64, err error) {
	if len(b) != logEndLen {
		return 0, 0, fmt.Errorf("is %d bytes, want %d", len(b), logEndLen)
	}
	return newerSlot(b[:logEndSlotLen], b[logEndBlock:], decodeLogEndSlot)
}

// readLogEnd reads the record in raftDir: ok is false when there is none
// (a first start, or a data directory from before the record).
func readLogEnd(raftDir string) (seq, index uint64, ok bool, err error) {
	return readSlots(raftDir, logEndName, "the record of how far the log reached the disk", decodeLogEnd)
}

// checkLogEnd refuses a log that ends before the record: last is the
// log's last index, snap the newest snapshot's, tail the file the log's
// end is in (or the log's directory).
func checkLogEnd(raftDir string, last, snap uint64, tail string) error {
	_, rec, ok, err := readLogEnd(raftDir)
	if err != nil || !ok {
		return err
	}
	end := max(last, snap)
	if rec <= end {
		return nil
	}
	lost := "were"
	if rec == end+1 {
		lost = "was"
	}
	return &disk.DamageError{Path: tail, Offset: -1, Problem: fmt.Sprintf(
		"the log ends at entry %d, but %s records that entries up to %d reached the disk: %s, acknowledged, %s lost (the end of the log was cut, zeroed or removed)",
		end, filepath.Join(raftDir, logEndName), rec, entries(end+1, rec), lost)}
}

// logEnd keeps the record up to date for a running node.
type logEnd struct {
	f        *os.File
	mu       sync.Mutex // held while the record is written
	seq      uint64     // the newer slot's sequence
	written  uint64     // the index the record holds
	appended atomic.Uint64
	kick     chan struct{} // capacity 1: an append to cover
	stop     chan struct{}
	done     chan struct{}
	failed   func(error) // a write of the record failed
	started  bool
}

// openLogEnd opens the record in raftDir, making it (holding index 0) if
// there is none, for a log whose last index is last. It holds what it
// held: entries read back from the log at a start may not be fsynced yet,
// and are covered after the next append's fsync.
func openLogEnd(raftDir string, last uint64) (*logEnd, error) {
	path := filepath.Join(raftDir, logEndName)
	seq, index, ok, err := readLogEnd(raftDir)
	if err != nil {
		return nil, err
	}
	if !ok {
		if err := makeLogEnd(raftDir); err != nil {
			return nil, fmt.Errorf("log-end record %s: %w", path, err)
		}
		seq = 1
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("log-end record %s: %w", path, err)
	}
	e := &logEnd{f: f, seq: seq, written: index, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	e.appended.Store(last)
	return e, nil
}

// start starts the rewrites; failed is told if one fails.
func (e *logEnd) start(failed func(error)) {
	e.failed = failed
	e.started = true
	go e.run()
}

// makeLogEnd writes a new record holding index 0: to a temporary file,
// fsynced, renamed, and the directory fsynced.
func makeLogEnd(raftDir string) error {
	b := make([]byte, logEndLen)
	copy(b[logEndBlock:], encodeLogEndSlot(1, 0)) // slot seq%2: the next write goes to the other
	return disk.WriteFile(filepath.Join(raftDir, logEndName), b)
}

// appendedTo notes that the log's entries up to index are appended and
// fsynced.
func (e *logEnd) appendedTo(index uint64) {
	for {
		a := e.appended.Load()
		if index <= a || e.appended.CompareAndSwap(a, index) {
			break
		}
	}
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// deleting is told before the log's entries lo..hi are deleted: when
// they are its end, the record is lowered below them first.
func (e *logEnd) deleting(lo, hi uint64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if hi < e.appended.Load() || lo == 0 {
		return nil // the log's head: compaction
	}
	// The entries go: the record must not claim them, whatever a snapshot
	// holds (lo is 1 when the whole log goes).
	e.appended.Store(lo - 1)
	if e.written < lo {
		return nil
	}
	return e.writeLocked(lo - 1)
}

// run rewrites the record after appends, at most once per logEndEvery.
func (e *logEnd) run() {
	defer close(e.done)
	t := time.NewTimer(logEndEvery)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-e.kick:
		}
		if err := e.flush(); err != nil {
			e.failed(err)
			return
		}
		t.Reset(logEndEvery)
		select {
		case <-e.stop:
			return
		case <-t.C:
		}
	}
}

// flush writes the record if the log has reached past it.
func (e *logEnd) flush() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a := e.appended.Load(); a > e.written {
		return e.writeLocked(a)
	}
	return nil
}

// writeLocked writes index into the older slot and fsyncs it.
func (e *logEnd) writeLocked(index uint64) error {
	seq := e.seq + 1
	if err := writeSlot(e.f, "log-end record", seq, encodeLogEndSlot(seq, index), logEndBlock); err != nil {
		return err
	}
	e.seq, e.written = seq, index
	return nil
}

// close stops the rewrites and closes the record.
func (e *logEnd) close() error {
	close(e.stop)
	if e.started {
		<-e.done
	}
	return e.f.Close()
}
