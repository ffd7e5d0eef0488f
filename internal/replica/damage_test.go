package replica

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/proto/statepb"
)

// smallSegments makes logs of many segments from a few entries.
const smallSegments = 64 << 10

func openSized(dir string, segSize int, sm *counter, leading chan<- struct{}) (*Node, error) {
	return Open(Config{
		DataDir: dir, RaftAddr: "127.0.0.1:0", Bootstrap: true, WALSegmentSize: segSize,
		HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		OnLeader: func(ctx context.Context) {
			select {
			case leading <- struct{}{}:
			default:
			}
			<-ctx.Done()
		},
	}, sm)
}

// writeHistory starts a node on a new directory, has it acknowledge n
// commands of about size bytes one by one (each its own append to the
// log), taking a snapshot after snapAt of them if snapAt > 0, and stops it
// cleanly.
func writeHistory(t testing.TB, n, size, snapAt, segSize int) string {
	return writeSnapshots(t, n, size, segSize, snapAt)
}

// writeSnapshots is writeHistory with a snapshot after each of snapAt.
func writeSnapshots(t testing.TB, n, size, segSize int, snapAt ...int) string {
	t.Helper()
	dir := t.TempDir()
	leading := make(chan struct{}, 1)
	node, err := openSized(dir, segSize, newCounter(), leading)
	if err != nil {
		t.Fatal(err)
	}
	<-leading
	for i := 1; i <= n; i++ {
		cmd := &statepb.Command{Op: &statepb.Command_Member{Member: &statepb.Member{NodeId: strings.Repeat("x", size)}}}
		if _, err := node.Propose(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(snapAt, i) {
			if err := node.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := node.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// reopen starts a node on dir and returns how many commands its state
// holds once it leads, or the error Open returned.
func reopen(t *testing.T, dir string, segSize int) (uint64, error) {
	t.Helper()
	return reopenWith(t, dir, segSize, newCounter())
}

func reopenWith(t *testing.T, dir string, segSize int, c *counter) (uint64, error) {
	t.Helper()
	var n uint64
	err := whileLeading(t, dir, segSize, c, func(*Node) { n = c.get() })
	return n, err
}

// whileLeading starts a node on dir with state c, waits until it leads,
// runs fn on it and closes it; or returns the error Open returned.
func whileLeading(t *testing.T, dir string, segSize int, c *counter, fn func(*Node)) error {
	t.Helper()
	leading := make(chan struct{}, 1)
	node, err := openSized(dir, segSize, c, leading)
	if err != nil {
		return err
	}
	defer node.Close()
	select {
	case <-leading:
	case <-time.After(20 * time.Second):
		t.Fatal("the reopened node does not lead")
	}
	fn(node)
	return nil
}

// crashed makes dir look like the node was killed: no clean-shutdown
// record (the log's files are as a kill leaves them, every write having
// been fsynced before it was acknowledged).
func crashed(t *testing.T, dir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, "raft", shutdownName)); err != nil {
		t.Fatal(err)
	}
}

// segments returns the log's segments, checked.
func segments(t testing.TB, dir string) []segCheck {
	t.Helper()
	c, err := checkWAL(filepath.Join(dir, "raft", "wal"), false)
	if err != nil || c.damage != nil {
		t.Fatalf("check of an undamaged log: %v %v", err, c.damage)
	}
	return c.segs
}

func damageFile(t *testing.T, path string, off int64, fn func(b []byte)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fn(data[off:])
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func flipBit(t *testing.T, path string, off int64) {
	damageFile(t, path, off, func(b []byte) { b[0] ^= 0x10 })
}

// wantRefused checks that err refuses the data directory for damage,
// naming path (and off, unless -1) and saying how to recover.
func wantRefused(t *testing.T, err error, path string, off int64) {
	t.Helper()
	var d *disk.DamageError
	if !errors.As(err, &d) {
		t.Fatalf("started, or failed without naming damage: %v", err)
	}
	if d.Path != path || (off >= 0 && d.Offset != off) {
		t.Errorf("names %s at %d, want %s at %d:\n%v", d.Path, d.Offset, path, off, err)
	}
	if !strings.Contains(err.Error(), "djinn repair --data-dir") || !strings.Contains(err.Error(), "backup") {
		t.Errorf("the error does not say how to recover:\n%v", err)
	}
}

// TestLogDamage: a log damaged anywhere is refused, naming the segment and
// the offset; a torn last write after a crash is left out and everything
// acknowledged before it served. Never fewer entries than acknowledged
// without an error.
func TestLogDamage(t *testing.T) {
	const n = 12
	for _, tc := range []struct {
		name  string
		clean bool
		// damage damages the tail segment s and returns the offset the
		// refusal must name, or -1 when the node must start.
		damage func(t *testing.T, s segCheck) int64
		served uint64
	}{
		{"middle record, clean shutdown", true, middleRecord, 0},
		{"middle record, crash", false, middleRecord, 0},
		{"middle record's frame length, crash", false, func(t *testing.T, s segCheck) int64 {
			e := s.walk.entries[n/2]
			damageFile(t, s.path, e+5, func(b []byte) { b[0] ^= 0x01 })
			return s.walk.batchStart(batchOf(s, n/2))
		}, 0},
		{"middle commit's checksum, crash", false, func(t *testing.T, s segCheck) int64 {
			j := batchOf(s, n/2)
			flipBit(t, s.path, s.walk.commits[j].off+6)
			return s.walk.batchStart(j)
		}, 0},
		{"last record, clean shutdown", true, lastRecord, 0},
		{"last record, crash", false, lastRecord, 0},
		{"last record's frame length, crash", false, func(t *testing.T, s segCheck) int64 {
			e := s.walk.entries[len(s.walk.entries)-1]
			damageFile(t, s.path, e+4, func(b []byte) { b[0] += 8 })
			return s.walk.batchStart(len(s.walk.commits) - 1)
		}, 0},
		{"last commit frame turned into an index frame, crash", false, func(t *testing.T, s segCheck) int64 {
			j := len(s.walk.commits) - 1
			damageFile(t, s.path, s.walk.commits[j].off, func(b []byte) { b[0] = frameIndex; binary.LittleEndian.PutUint32(b[4:], 8) })
			return s.walk.batchStart(j)
		}, 0},
		{"torn tail, clean shutdown", true, tornTail, 0},
		// A write a crash tore was never acknowledged: the log-end
		// record, which trails the log, does not cover it.
		{"torn tail, crash", false, func(t *testing.T, s segCheck) int64 { tornTail(t, s); recordBeforeLastBatch(t, s); return -1 }, n - 1},
		{"torn tail's commit never written, crash", false, func(t *testing.T, s segCheck) int64 {
			damageFile(t, s.path, s.walk.commits[len(s.walk.commits)-1].off, func(b []byte) { clear(b[:segFrameLen]) })
			recordBeforeLastBatch(t, s)
			return -1
		}, n - 1},
		// The same bytes, where the record says the batch reached the
		// disk: damage, not a crash (raft/log-end, logend.go).
		{"torn tail the log-end record covers, crash", false, func(t *testing.T, s segCheck) int64 { tornTail(t, s); return 0 }, 0},
		{"last batches zeroed, crash", false, func(t *testing.T, s segCheck) int64 {
			start := s.walk.batchStart(len(s.walk.commits) - 3)
			damageFile(t, s.path, start, func(b []byte) { clear(b[:s.walk.commits[len(s.walk.commits)-1].off+segFrameLen-start]) })
			return 0
		}, 0},
		{"last segment removed, crash", false, func(t *testing.T, s segCheck) int64 {
			if err := os.Remove(s.path); err != nil {
				t.Fatal(err)
			}
			return 0
		}, 0},
		// A segment keeps the size it was made with from its first batch
		// on: a file shorter is cut, whatever a crash did.
		{"cut inside the last batch, crash", false, func(t *testing.T, s segCheck) int64 {
			return cutAt(t, s, s.walk.entries[len(s.walk.entries)-1]+40)
		}, 0},
		{"cut at the last batch's start, crash", false, func(t *testing.T, s segCheck) int64 {
			return cutAt(t, s, s.walk.batchStart(len(s.walk.commits)-1))
		}, 0},
		{"cut after the last batch, crash", false, func(t *testing.T, s segCheck) int64 {
			return cutAt(t, s, s.walk.commits[len(s.walk.commits)-1].off+segFrameLen)
		}, 0},
		{"no damage, crash", false, func(*testing.T, segCheck) int64 { return -1 }, n},
		{"no damage, clean shutdown", true, func(*testing.T, segCheck) int64 { return -1 }, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeHistory(t, n, 10, 0, 0)
			if !tc.clean {
				crashed(t, dir)
			}
			segs := segments(t, dir)
			tail := segs[len(segs)-1]
			off := tc.damage(t, tail)
			got, err := reopen(t, dir, 0)
			if off >= 0 {
				if off == 0 && !tc.clean {
					off = -1 // refused by the log-end record, which names no offset
				}
				wantRefused(t, err, tail.path, off)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.served {
				t.Errorf("%d commands served, want %d", got, tc.served)
			}
		})
	}
}

// cutAt truncates the segment's file at off, as a damaged disk or an
// operator's copy leaves it, and returns off.
func cutAt(t *testing.T, s segCheck, off int64) int64 {
	t.Helper()
	if err := os.Truncate(s.path, off); err != nil {
		t.Fatal(err)
	}
	return off
}

// batchOf returns the commit whose batch holds the i-th entry (from 0).
func batchOf(s segCheck, i int) int {
	for j, c := range s.walk.commits {
		if c.entries > i {
			return j
		}
	}
	return -1
}

func middleRecord(t *testing.T, s segCheck) int64 {
	i := len(s.walk.entries) / 2
	flipBit(t, s.path, s.walk.entries[i]+segFrameLen+3)
	return s.walk.batchStart(batchOf(s, i))
}

func lastRecord(t *testing.T, s segCheck) int64 {
	i := len(s.walk.entries) - 1
	flipBit(t, s.path, s.walk.entries[i]+segFrameLen+3)
	return s.walk.batchStart(batchOf(s, i))
}

// recordBeforeLastBatch sets the log-end record of the segment's node
// where a crash during the segment's last append leaves it: before that
// batch, which was never acknowledged.
func recordBeforeLastBatch(t *testing.T, s segCheck) {
	t.Helper()
	j := len(s.walk.commits) - 1
	before := uint64(0)
	if j > 0 {
		before = uint64(s.walk.commits[j-1].entries)
	}
	setLogEnd(t, filepath.Dir(filepath.Dir(s.path)), s.info.BaseIndex+before-1)
}

// setLogEnd makes raftDir's log-end record hold index.
func setLogEnd(t *testing.T, raftDir string, index uint64) {
	t.Helper()
	b := make([]byte, logEndLen)
	copy(b, encodeLogEndSlot(7, index))
	if err := os.WriteFile(filepath.Join(raftDir, logEndName), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// tornTail makes the last append look as a crash leaves a write it
// interrupted: a disk sector of it never written.
func tornTail(t *testing.T, s segCheck) int64 {
	j := len(s.walk.commits) - 1
	start := s.walk.batchStart(j)
	sector := start / disk.SectorSize * disk.SectorSize
	end := s.walk.commits[j].off + segFrameLen
	damageFile(t, s.path, sector, func(b []byte) {
		// The batch's part of its first sector, as if the sector kept
		// what it held before: the earlier batches and zeros.
		clear(b[start-sector : min(end-sector, disk.SectorSize)])
	})
	return start
}

// TestSealedSegmentDamage: damage in a segment the log has moved past is
// refused too, whether the node stopped cleanly or not.
func TestSealedSegmentDamage(t *testing.T) {
	for _, clean := range []bool{true, false} {
		dir := writeHistory(t, 150, 1000, 0, smallSegments)
		if !clean {
			crashed(t, dir)
		}
		segs := segments(t, dir)
		if len(segs) < 3 {
			t.Fatalf("%d segments, want several", len(segs))
		}
		s := segs[1]
		i := len(s.walk.entries) - 2
		flipBit(t, s.path, s.walk.entries[i]+segFrameLen+2)
		_, err := reopen(t, dir, smallSegments)
		wantRefused(t, err, s.path, s.walk.batchStart(batchOf(s, i)))

		// A sealed segment gone is refused as well.
		dir = writeHistory(t, 150, 1000, 0, smallSegments)
		segs = segments(t, dir)
		if err := os.Remove(segs[1].path); err != nil {
			t.Fatal(err)
		}
		_, err = reopen(t, dir, smallSegments)
		wantRefused(t, err, segs[1].path, -1)
	}
}

// TestEveryFlippedBitInTheLog: whichever bit of a segment's written bytes
// is flipped, after a crash or a clean shutdown, the storage either is
// refused as damaged or serves every acknowledged entry — never fewer
// (zero silent losses).
func TestEveryFlippedBitInTheLog(t *testing.T) {
	if testing.Short() {
		t.Skip("opens the log once per bit")
	}
	for _, h := range []struct {
		clean, together bool
	}{{clean: true}, {clean: false}, {clean: false, together: true}} {
		clean := h.clean
		var dir string
		if h.together {
			dir = writeTogether(t, 4, 3)
		} else {
			dir = writeHistory(t, 6, 10, 0, smallSegments)
		}
		if !clean {
			crashed(t, dir)
		}
		segs := segments(t, dir)
		tail := segs[len(segs)-1]
		_, want := servedRange(segs)
		orig, err := os.ReadFile(tail.path)
		if err != nil {
			t.Fatal(err)
		}
		record, _ := os.ReadFile(filepath.Join(dir, "raft", shutdownName))
		for off := range int(tail.keptEnd) + 64 {
			data := bytes.Clone(orig)
			data[off] ^= 1 << ((off + off/8) % 8) // every bit of a frame's type byte, over the frames
			if err := os.WriteFile(tail.path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if clean {
				if err := os.WriteFile(filepath.Join(dir, "raft", shutdownName), record, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			st, err := openStorage(filepath.Join(dir, "raft"), smallSegments, hclog.NewNullLogger(), slog.New(slog.DiscardHandler))
			if err != nil {
				if !errors.Is(err, disk.ErrDamaged) {
					t.Fatalf("clean %v, byte %d flipped: %v, want damage", clean, off, err)
				}
				continue
			}
			last, _ := st.log.LastIndex()
			st.close()
			if last != want {
				t.Fatalf("clean %v, byte %d flipped: the log serves up to %d, want %d", clean, off, last, want)
			}
		}
	}
}

// writeTogether starts a node on a new directory and has it acknowledge
// n commands from each of g goroutines at once, so that appends hold
// several entries, and stops it cleanly.
func writeTogether(t *testing.T, g, n int) string {
	t.Helper()
	dir := t.TempDir()
	leading := make(chan struct{}, 1)
	node, err := openSized(dir, smallSegments, newCounter(), leading)
	if err != nil {
		t.Fatal(err)
	}
	<-leading
	errs := make(chan error, g*n)
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for range n {
				_, err := propose(context.Background(), node)
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := node.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}
