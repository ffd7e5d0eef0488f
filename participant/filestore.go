package participant

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/djinn-go/djinn"
)

// FileStore is a Store in a directory: one append-only log file of
// checksummed frames, each batch written and fsynced before Apply returns.
// Concurrent Applies share one frame, one write and one fsync (group
// commit).
// When the log has grown to several times the live records it is rewritten:
// the records go to a temporary file, which is fsynced and renamed over the
// log, and the directory is fsynced.
//
// On open, a torn last frame (a write a crash interrupted, never
// acknowledged) is cut off. Any other frame that fails its checksum is
// damage: OpenFileStore refuses the store with a *disk.DamageError naming
// the file and offset (errors.Is(err, ErrDamaged)), and RepairFileStore
// keeps what can be read. The crash count goes up by one at every open and
// that is written and fsynced before OpenFileStore returns; a new directory
// starts from a random count, so a store made again in a wiped directory
// does not repeat an old count.
//
// The records are held in memory as well as on disk: a FileStore suits a
// participant's prepared records and modest application data, not a
// database.
type FileStore struct {
	dir   string
	crash int64
	lock  *os.File // the directory's lock (lockDir), released by Close

	mu   sync.Mutex
	cond *sync.Cond // signalled when a flush ends, for Close; uses mu
	// Guarded by mu.
	f        *os.File
	live     map[string][]byte // the records on disk
	liveSize int64             // bytes of keys and values in live
	size     int64             // bytes of the log file
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

// OpenFileStore opens the store in dir, creating dir and the store if
// needed, and takes the next crash count. A directory holds one open store
// at a time: while one is open (until its Close, or its process's end),
// another open of dir, in this process or another, is refused with
// djinn.ErrUnavailable — two would write over each other's log. (Where the
// system has no flock, outside Unix, that is the caller's to ensure.)
func OpenFileStore(dir string) (*FileStore, error) {
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
	s, err := openLocked(dir)
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
func openLocked(dir string) (*FileStore, error) {
	s := &FileStore{dir: dir, live: map[string][]byte{}}
	s.cond = sync.NewCond(&s.mu)
	// A temporary file is a compaction a crash interrupted: the log is
	// still whole.
	if err := os.Remove(filepath.Join(dir, tmpName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("participant store %s: %w", dir, err)
	}
	path := filepath.Join(dir, logName)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := s.rewrite(randomCount()); err != nil {
			return nil, err
		}
		data, err = os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("participant store %s: %w", dir, err)
		}
	case err != nil:
		return nil, fmt.Errorf("participant store %s: %w", dir, err)
	}
	count, good, err := s.replay(data)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("participant store %s: %w", dir, err)
	}
	if good < len(data) {
		// A torn last frame: cut it off before appending after it.
		if err := f.Truncate(int64(good)); err != nil {
			f.Close()
			return nil, fmt.Errorf("participant store %s: cutting a torn frame: %w", dir, err)
		}
	}
	s.f, s.size = f, int64(good)
	s.crash = count + 1
	if err := s.writeSync(countFrame(s.crash)); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// replay reads the log into live. It returns the last crash count and the
// length of the good frames: a torn last frame is left out; any other frame
// that does not check out is damage, and replay refuses the log.
func (s *FileStore) replay(data []byte) (count int64, good int, err error) {
	path := filepath.Join(s.dir, logName)
	scan := scanLog(data)
	if len(data) == 0 {
		return 0, 0, fmt.Errorf("participant store %s: %s is empty", s.dir, logName)
	}
	if len(scan.frames) == 0 {
		return 0, 0, fmt.Errorf("participant store %s: %s is not a participant store or its header is damaged", s.dir, logName)
	}
	if first := scan.frames[0]; first.off == 0 && !isHeader(first.payload) {
		return 0, 0, fmt.Errorf("participant store %s: %s is not a participant store (header %q)", s.dir, logName, first.payload)
	}
	if len(scan.damaged) > 0 {
		return 0, 0, scan.damageAt(path)
	}
	for _, f := range scan.frames[1:] {
		if count, err = s.replayFrame(f, count); err != nil {
			return 0, 0, fmt.Errorf("participant store %s: %w", s.dir, err)
		}
	}
	return count, scan.end, nil
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
	case frameBatch:
		ops, err := decodeBatch(p[1:])
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
	f := s.f
	s.mu.Unlock()
	buf := appendBatchFrame(s.frame[:0], batches)
	if cap(buf) <= maxKeptFrame {
		s.frame = buf
	}
	_, err := f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	s.mu.Lock()
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
	s.size += int64(len(buf))
	s.synced += uint64(k)
	s.writes++
	if s.size > compactMin && s.size > 4*(s.liveSize+int64(64*len(s.live))) {
		if err := s.compactLocked(); err != nil {
			s.err = err
		}
	}
}

// writeSync appends frames and fsyncs them (used while opening).
func (s *FileStore) writeSync(frames []byte) error {
	if _, err := s.f.Write(frames); err != nil {
		return fmt.Errorf("participant store %s: %w", s.dir, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("participant store %s: %w", s.dir, err)
	}
	s.size += int64(len(frames))
	return nil
}

// compactLocked rewrites the log with only the live records, and reopens
// it for appending. Writers wait meanwhile: compaction is rare.
func (s *FileStore) compactLocked() error {
	if err := s.rewrite(s.crash); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, logName), os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("participant store %s: reopening after compaction: %w", s.dir, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("participant store %s: %w", s.dir, err)
	}
	s.f.Close()
	s.f, s.size = f, st.Size()
	return nil
}

// rewrite writes a log holding the header, crash count and live records
// to a temporary file, fsyncs it, renames it over the log and fsyncs the
// directory.
func (s *FileStore) rewrite(count int64) error {
	buf := appendFrame(nil, append([]byte{frameHeader}, storeMagic...))
	buf = append(buf, countFrame(count)...)
	keys := make([]string, 0, len(s.live))
	for k := range s.live {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	const chunk = 4 << 20
	var ops []Op
	var size int
	for i, k := range keys {
		ops = append(ops, Op{Key: k, Value: s.live[k]})
		size += len(k) + len(s.live[k])
		if size >= chunk || i == len(keys)-1 {
			buf = appendFrame(buf, encodeBatch(ops))
			ops, size = ops[:0], 0
		}
	}
	tmp := filepath.Join(s.dir, tmpName)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("participant store %s: %w", s.dir, err)
	}
	_, err = f.Write(buf)
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
		err = syncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("participant store %s: rewriting the log: %w", s.dir, err)
	}
	return nil
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

// Writes returns the batches applied and the writes (each one frame and
// one fsync) that carried them: concurrent Applies share a write.
func (s *FileStore) Writes() (batches, writes uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced, s.writes
}

// Close waits for a write under way and closes the log. Later Applies
// fail.
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
	err := s.f.Close()
	if s.lock != nil {
		if lerr := s.lock.Close(); err == nil {
			err = lerr
		}
	}
	return err
}
