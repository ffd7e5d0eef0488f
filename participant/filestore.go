package participant

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/disk"
)

// FileStore is a Store in a directory: one append-only log file of
// checksummed frames, each batch written and fsynced before Apply returns.
// Concurrent Applies share one frame, one write and one fsync (group
// commit). The log grows in zero-filled extents (64 KiB, doubling to 4 MiB,
// then 4 MiB at a time), made and fsynced before frames are written into
// them, so that a torn write is told from a file cut short.
// When the log has grown to several times the live records it is rewritten:
// the records go to a temporary file, which is fsynced and renamed over the
// log, and the directory is fsynced.
//
// On open, a torn last frame — one that shows a sector never written and
// is followed only by never-written space: a write a crash interrupted,
// never acknowledged — is cut off, and logged; so is an extension a full
// disk stopped part way (only zeros past the last extent). Anything else that does
// not check out is damage: a frame that fails its checksum, a log cut
// short (anywhere: at a frame's end or inside one), a log shorter or older
// than the one its last Close recorded, or than the store was when last
// opened (PositionName). OpenFileStore then
// refuses the store with a *disk.DamageError naming the file and offset
// (errors.Is(err, ErrDamaged)), and RepairFileStore keeps what can be
// read. The crash count goes up by one at every open and that is written
// and fsynced before OpenFileStore returns; a new directory starts from a
// random count, so a store made again in a wiped directory does not repeat
// an old count.
//
// A log written before the extents and the position record (version 1)
// is still opened, by the rule it was written under (a frame cut short at
// its end is taken for torn), and rewritten in the current version before
// the store takes writes.
//
// The records are held in memory as well as on disk: a FileStore suits a
// participant's prepared records and modest application data, not a
// database.
type FileStore struct {
	dir   string
	crash int64
	lock  *os.File // the directory's lock (lockDir), released by Close
	log   *slog.Logger
	// grow makes the log larger (extendTo); nil: extend. Tests make it fail.
	grow func(f *os.File, size, to int64) error

	mu   sync.Mutex
	cond *sync.Cond // signalled when a flush ends, for Close; uses mu
	// Guarded by mu.
	f        *os.File
	live     map[string][]byte // the records on disk
	liveSize int64             // bytes of keys and values in live
	end      int64             // where the log's frames end
	alloc    int64             // bytes of the log file (allocSize)
	seq      uint64            // the last batch frame's sequence number
	sizes    []int             // the encoded sizes (opsSize) of the batches queued and not yet written
	batches  [][]Op            // the same batches
	frame    []byte            // the flush's buffer, reused; only the flusher touches it
	wakes    []chan struct{}   // the same batches' writers, waiting (see wake)
	queued   uint64            // batches queued so far
	synced   uint64            // batches on disk so far
	flushing bool              // a flush is writing pending
	err      error             // sticky: the store failed and must be reopened
	closed   bool
	writes   uint64 // frames of batches written and fsynced
}

var _ Store = (*FileStore)(nil)

const (
	// compactMin is the smallest log that is compacted.
	compactMin = 1 << 20
	// maxGroup bounds the bytes of changes one write (one frame) holds,
	// well under maxFrame: a larger batch is refused.
	maxGroup = 256 << 20
	// maxKeptFrame bounds the flush buffer kept for the next flush.
	maxKeptFrame = 1 << 20
)

// FileStoreOption configures OpenFileStore.
type FileStoreOption func(*FileStore)

// StoreLogger sets where OpenFileStore logs what it cut off or rewrote on
// opening (default: slog.Default()).
func StoreLogger(l *slog.Logger) FileStoreOption {
	return func(s *FileStore) {
		if l != nil {
			s.log = l
		}
	}
}

// OpenFileStore opens the store in dir, creating dir and the store if
// needed, and takes the next crash count. A directory holds one open store
// at a time: while one is open (until its Close, or its process's end),
// another open of dir, in this process or another, is refused with
// djinn.ErrUnavailable — two would write over each other's log. (Where the
// system has no flock, outside Unix, that is the caller's to ensure.)
func OpenFileStore(dir string, opts ...FileStoreOption) (*FileStore, error) {
	if dir == "" {
		return nil, djinn.Errorf(djinn.InvalidArgument, "store directory: missing")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("participant store %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s, err := openLocked(dir, opts...)
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// openLocked opens the store in dir, whose lock the caller holds.
func openLocked(dir string, opts ...FileStoreOption) (*FileStore, error) {
	s := &FileStore{dir: dir, live: map[string][]byte{}, log: slog.Default()}
	s.cond = sync.NewCond(&s.mu)
	for _, o := range opts {
		o(s)
	}
	// A temporary file is a compaction a crash interrupted: the log is
	// still whole.
	for _, tmp := range []string{tmpName, PositionName + ".tmp"} {
		if err := os.Remove(filepath.Join(dir, tmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("participant store %s: %w", dir, err)
		}
	}
	pos, recorded, err := readPos(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, logName)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && recorded:
		return nil, &disk.DamageError{Path: path, Offset: -1, Problem: fmt.Sprintf("the store's log is gone, but the store had written %d bytes of it (%s)", pos.end, PositionName)}
	case errors.Is(err, fs.ErrNotExist):
		s.crash = randomCount()
		if s.end, s.alloc, err = s.rewrite(s.crash); err != nil {
			return nil, err
		}
		return s.opened(path)
	case err != nil:
		return nil, fmt.Errorf("participant store %s: %w", dir, err)
	}
	scan, count, err := s.replay(data)
	if err != nil {
		return nil, err
	}
	if recorded {
		if err := pos.check(dir, scan.end, scan.torn, count, s.seq); err != nil {
			return nil, err
		}
	}
	// Before any write: a clean close's record would no longer be exact.
	if err := writePos(dir, storePos{end: int64(scan.end), crash: count, seq: s.seq}); err != nil {
		return nil, fmt.Errorf("participant store %s: writing %s: %w", dir, PositionName, err)
	}
	s.crash = count + 1
	if scan.torn > 0 {
		s.log.Warn("participant store: a torn last frame (a write a crash interrupted, never acknowledged) is cut off",
			"file", path, "offset", scan.end, "bytes", scan.torn)
	}
	if scan.v1 {
		// Written before extents: rewritten now, so that from here on a cut
		// is told from a torn write.
		if s.end, s.alloc, err = s.rewrite(s.crash); err != nil {
			return nil, err
		}
		s.log.Info("participant store: the log was rewritten in the current format", "file", path, "records", len(s.live))
		return s.opened(path)
	}
	s.end, s.alloc = int64(scan.end), int64(len(data))
	if err := s.openLog(path); err != nil {
		return nil, err
	}
	if scan.trim > 0 {
		// Only zeros go: an extension a full disk stopped part way.
		err := s.f.Truncate(scan.trim)
		if err == nil {
			err = s.f.Sync()
		}
		if err != nil {
			s.f.Close()
			return nil, fmt.Errorf("participant store %s: cutting back an extension that failed part way: %w", dir, err)
		}
		s.log.Warn("participant store: the log was larger than the store makes it, with only zeros past its last extent (an extension that failed part way, as on a full disk); cut back",
			"file", path, "from", len(data), "to", scan.trim)
		s.alloc = scan.trim
	}
	if scan.torn > 0 {
		// Zeroed, so that the space after the frames is never written again.
		if err := zeroAt(s.f, s.end, int64(scan.torn)); err != nil {
			s.f.Close()
			return nil, fmt.Errorf("participant store %s: cutting a torn frame: %w", dir, err)
		}
	}
	if err := s.writeSync(countFrame(s.crash)); err != nil {
		s.f.Close()
		return nil, err
	}
	return s.recordOpened()
}

// opened opens the log at path, just made with the store's crash count,
// and records the opening.
func (s *FileStore) opened(path string) (*FileStore, error) {
	if err := s.openLog(path); err != nil {
		return nil, err
	}
	return s.recordOpened()
}

// recordOpened records, now that the new crash count is on disk, the least
// the store holds from now on (see PositionName).
func (s *FileStore) recordOpened() (*FileStore, error) {
	if err := writePos(s.dir, storePos{end: s.end, crash: s.crash, seq: s.seq}); err != nil {
		s.f.Close()
		return nil, fmt.Errorf("participant store %s: writing %s: %w", s.dir, PositionName, err)
	}
	return s, nil
}

// openLog opens the log for writing, as s.f.
func (s *FileStore) openLog(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("participant store %s: %w", s.dir, err)
	}
	s.f = f
	return nil
}

// replay reads the log into live and s.seq. It returns what the scan found
// and the last crash count: a torn last frame is left out; anything else
// that does not check out is damage, and replay refuses the log.
func (s *FileStore) replay(data []byte) (scan logScan, count int64, err error) {
	path := filepath.Join(s.dir, logName)
	if len(data) == 0 {
		return scan, 0, &disk.DamageError{Path: path, Offset: -1, Problem: "the file is empty"}
	}
	scan = scanLog(data)
	if len(scan.frames) == 0 || scan.frames[0].off != 0 {
		if d := scan.damage(path); d != nil && d.Offset == 0 {
			return scan, 0, d
		}
		return scan, 0, &disk.DamageError{Path: path, Offset: 0, Problem: "the header frame fails its checksum: the file is not a participant store, or its header is damaged"}
	}
	if h := scan.frames[0].payload; !isHeader(h) && !isHeaderV1(h) {
		if h[0] == frameHeader && strings.HasPrefix(string(h[1:]), magicPrefix) {
			return scan, 0, fmt.Errorf("participant store %s: %s was written by a newer version of djinn (header %q): open it with that version", s.dir, logName, h[1:])
		}
		return scan, 0, &disk.DamageError{Path: path, Offset: 0, Problem: fmt.Sprintf("the file is not a participant store (its first frame is %.40q, not a header)", h)}
	}
	if d := scan.damage(path); d != nil {
		return scan, 0, d
	}
	for _, f := range scan.frames[1:] {
		if count, err = s.replayFrame(f, count); err != nil {
			return scan, 0, fmt.Errorf("participant store %s: %w", s.dir, err)
		}
	}
	return scan, count, nil
}

// replayFrame applies one frame after the header, returning the crash
// count, changed if it is a count frame. A frame that checks out and does
// not decode was written by a newer version or a bug, not by the disk.
func (s *FileStore) replayFrame(f logFrame, count int64) (int64, error) {
	switch p := f.payload; p[0] {
	case frameCount:
		if len(p) != 9 {
			return 0, fmt.Errorf("crash count frame at %d: %d bytes", f.off, len(p))
		}
		return int64(binary.BigEndian.Uint64(p[1:])), nil
	case frameBatch, frameNumbered:
		body := p[1:]
		if p[0] == frameNumbered {
			if len(body) < seqLen {
				return 0, fmt.Errorf("batch at %d: %d bytes", f.off, len(p))
			}
			s.seq, body = binary.BigEndian.Uint64(body), body[seqLen:]
		}
		ops, err := decodeBatch(body)
		if err != nil {
			return 0, fmt.Errorf("batch at %d: %w", f.off, err)
		}
		s.applyLive(ops)
		return count, nil
	default:
		return 0, fmt.Errorf("frame at %d: unknown type %q", f.off, p[0])
	}
}

func isHeader(payload []byte) bool {
	return payload[0] == frameHeader && string(payload[1:]) == storeMagic
}

func isHeaderV1(payload []byte) bool {
	return payload[0] == frameHeader && string(payload[1:]) == storeMagicV1
}

// applyLive applies ops to the in-memory records. Values are copied.
func (s *FileStore) applyLive(ops []Op) {
	for _, op := range ops {
		if old, ok := s.live[op.Key]; ok {
			s.liveSize -= int64(len(op.Key) + len(old))
			delete(s.live, op.Key)
		}
		if !op.Delete {
			s.live[op.Key] = slices.Clone(op.Value)
			s.liveSize += int64(len(op.Key) + len(op.Value))
		}
	}
}

// CrashCount implements Store.
func (s *FileStore) CrashCount() int64 { return s.crash }

// Dir returns the store's directory.
func (s *FileStore) Dir() string { return s.dir }

// Range implements Store.
func (s *FileStore) Range(prefix string, fn func(key string, value []byte) error) error {
	s.mu.Lock()
	keys := make([]string, 0)
	for k := range s.live {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i] = s.live[k]
	}
	s.mu.Unlock()
	for i, k := range keys {
		if err := fn(k, vals[i]); err != nil {
			return err
		}
	}
	return nil
}

// Apply implements Store: the batch is queued, and the first Apply to find
// no flush running writes the queued batches (up to maxGroup bytes of
// them) with one write and one fsync.
// ctx is checked before queueing; a write under way is not abandoned.
//
// A writer whose batch waits is woken only when it has something to do: by
// the flush that wrote its batch, to return; as the oldest still queued
// when a flush ends, to write the next group; or when the store fails or
// closes. So a flush wakes the writers it wrote and one more, not every
// writer waiting.
func (s *FileStore) Apply(ctx context.Context, b *Batch) error {
	if b.Len() == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	size := opsSize(b.Ops())
	if size > maxGroup {
		return djinn.Errorf(djinn.InvalidArgument, "participant store %s: a batch of %d bytes: at most %d fit one write", s.dir, size, maxGroup)
	}
	// Not copied: the batch is read only by the flush that writes it,
	// which this call waits for, and by none once the store failed.
	ops := b.Ops()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	woken := make(chan struct{}, 1)
	s.sizes = append(s.sizes, size)
	s.batches = append(s.batches, ops)
	s.wakes = append(s.wakes, woken)
	s.queued++
	mine := s.queued
	for s.synced < mine {
		if err := s.usableLocked(); err != nil {
			return err
		}
		if !s.flushing {
			s.flushLocked()
			continue
		}
		s.mu.Unlock()
		<-woken
		s.mu.Lock()
	}
	return nil
}

// wake tells a waiting writer to look again; a writer already told keeps
// the one wake-up.
func wake(w chan struct{}) {
	select {
	case w <- struct{}{}:
	default:
	}
}

// wakeLocked wakes, after a flush, the writers it wrote, and then every
// writer still queued if the store failed, or else the oldest, to write
// the next group.
func (s *FileStore) wakeLocked(written []chan struct{}) {
	for _, w := range written {
		wake(w)
	}
	switch {
	case s.err != nil || s.closed:
		for _, w := range s.wakes {
			wake(w)
		}
	case len(s.wakes) > 0:
		wake(s.wakes[0])
	}
}

func (s *FileStore) usableLocked() error {
	if s.err != nil {
		return s.err
	}
	if s.closed {
		return djinn.Errorf(djinn.Unavailable, "participant store %s: closed", s.dir)
	}
	return nil
}

// flushLocked writes and fsyncs the oldest queued batches, up to maxGroup
// bytes of them, as one frame: a crash tears at most this last frame. It
// releases mu while it writes.
func (s *FileStore) flushLocked() {
	s.flushing = true
	k, size := 0, 0
	for ; k < len(s.sizes) && (k == 0 || size+s.sizes[k] <= maxGroup); k++ {
		size += s.sizes[k]
	}
	batches, written := s.batches[:k], s.wakes[:k]
	s.sizes, s.batches, s.wakes = s.sizes[k:], s.batches[k:], s.wakes[k:]
	f, end, alloc, seq := s.f, s.end, s.alloc, s.seq+1
	s.mu.Unlock()
	buf := appendBatchFrame(s.frame[:0], seq, batches)
	if cap(buf) <= maxKeptFrame {
		s.frame = buf
	}
	alloc, err := s.writeAt(f, buf, end, alloc)
	s.mu.Lock()
	s.alloc = alloc
	s.flushing = false
	defer s.cond.Broadcast()
	defer s.wakeLocked(written)
	if err != nil {
		// After a failed write or fsync what is on disk is unknown: refuse
		// every later write; reopening replays what survived.
		s.err = djinn.Errorf(djinn.Unavailable, "participant store %s: a write failed (%v), so what reached the disk is unknown and the store takes no more writes: "+
			"fix the disk (space, errors), then open it again (for a djinn server, restart it)", s.dir, err)
		return
	}
	for _, ops := range batches {
		s.applyLive(ops)
	}
	s.end += int64(len(buf))
	s.seq = seq
	s.synced += uint64(k)
	s.writes++
	if s.end > compactMin && s.end > 4*(s.liveSize+int64(64*len(s.live))) {
		if err := s.compactLocked(); err != nil {
			s.err = err
		}
	}
}

// writeAt writes frames at end of f, the log, alloc bytes long, and
// fsyncs it, first making the log larger if they and the zeros after them
// do not fit. It returns the log's size.
func (s *FileStore) writeAt(f *os.File, frames []byte, end, alloc int64) (int64, error) {
	if size := needSize(end, int64(len(frames)), alloc); size > alloc {
		grow := s.grow
		if grow == nil {
			grow = extend
		}
		if err := extendTo(f, s.dir, alloc, size, grow); err != nil {
			return alloc, err
		}
		alloc = size
	}
	if _, err := f.WriteAt(frames, end); err != nil {
		return alloc, err
	}
	return alloc, f.Sync()
}

// writeSync appends frames and fsyncs them (used while opening).
func (s *FileStore) writeSync(frames []byte) error {
	alloc, err := s.writeAt(s.f, frames, s.end, s.alloc)
	s.alloc = alloc
	if err != nil {
		return fmt.Errorf("participant store %s: %w", s.dir, err)
	}
	s.end += int64(len(frames))
	return nil
}

// compactLocked rewrites the log with only the live records, and reopens
// it for writing. Writers wait meanwhile: compaction is rare.
func (s *FileStore) compactLocked() error {
	end, alloc, err := s.rewrite(s.crash)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, logName), os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("participant store %s: reopening after compaction: %w", s.dir, err)
	}
	s.f.Close()
	s.f, s.end, s.alloc = f, end, alloc
	return nil
}

// rewrite writes a log holding the header, crash count and live records
// (in batch frames numbered s.seq, at least one), in a file of the size
// the store gives it (allocSize), to a temporary file, fsyncs it, renames
// it over the log and fsyncs the directory. It returns where the frames
// end and the file's size.
func (s *FileStore) rewrite(count int64) (end, size int64, err error) {
	buf := appendFrame(nil, append([]byte{frameHeader}, storeMagic...))
	buf = append(buf, countFrame(count)...)
	keys := make([]string, 0, len(s.live))
	for k := range s.live {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	const chunk = 4 << 20
	var ops []Op
	var n int
	for i, k := range keys {
		ops = append(ops, Op{Key: k, Value: s.live[k]})
		n += len(k) + len(s.live[k])
		if n >= chunk || i == len(keys)-1 {
			buf = append(buf, batchFrame(s.seq, len(ops), appendOps(nil, ops))...)
			ops, n = ops[:0], 0
		}
	}
	if len(keys) == 0 {
		buf = append(buf, batchFrame(s.seq, 0, nil)...)
	}
	end, size = int64(len(buf)), allocSize(int64(len(buf))+frameHead)
	tmp := filepath.Join(s.dir, tmpName)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, 0, fmt.Errorf("participant store %s: %w", s.dir, err)
	}
	err = extend(f, 0, size)
	if err == nil {
		_, err = f.WriteAt(buf, 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, logName))
	}
	if err == nil {
		err = disk.SyncDir(s.dir)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("participant store %s: rewriting the log: %w", s.dir, err)
	}
	return end, size, nil
}

// Writes returns the batches applied and the writes (each one frame and
// one fsync) that carried them: concurrent Applies share a write.
func (s *FileStore) Writes() (batches, writes uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced, s.writes
}

// Close waits for a write under way, records the clean close
// (PositionName: exactly where the log ends, its crash count and last
// batch, checked by the next open) unless the store failed, and closes
// the log.
// Later Applies fail.
func (s *FileStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.flushing {
		s.cond.Wait()
	}
	if s.closed {
		return nil
	}
	s.closed = true
	s.cond.Broadcast()
	s.wakeLocked(nil)
	var err error
	if s.err == nil {
		if err = writePos(s.dir, storePos{closed: true, end: s.end, crash: s.crash, seq: s.seq}); err != nil {
			err = fmt.Errorf("participant store %s: recording the clean close: %w", s.dir, err)
		}
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if s.lock != nil {
		if lerr := s.lock.Close(); err == nil {
			err = lerr
		}
	}
	return err
}
