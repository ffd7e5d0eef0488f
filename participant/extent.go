package participant

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"

	"github.com/djinn-go/djinn/internal/disk"
)

// A version 2 log is kept in zero-filled extents, so that the end of what
// was written can be told from a file cut short. The file's size is always
// one the store gives it (allocSize): 64 KiB, doubling up to 4 MiB, then
// growing 4 MiB at a time. The frames start at its beginning and are
// followed by zeros — never-written space — to the end of the file, at
// least a frame head of them (so that a file cut exactly where its frames
// end is told from one that ends there). Before a write would pass that
// point, the store makes the file larger (zero-filled), and fsyncs the file
// and its directory; then it writes frames into the new space. That costs
// one more fsync once per extent, not per write.
//
// So a crash can leave only the frame being written torn, followed by
// zeros to the end of the file: on open, a last frame that fails its check
// is torn only if it shows a sector never written and nothing but zeros
// follows it. A file whose size is larger than one the store gives, with
// only zeros past that size, is an extension that failed part way: it is
// cut back to that size on open, and logged. A file whose size is
// otherwise not one the store gives, that ends
// inside a frame or without the zeros after its frames, or whose failing
// frame is followed by other bytes, is damage.

const (
	// extentMin is the size of a new log.
	extentMin = 64 << 10
	// extentMax is the step a log grows by once it has reached it.
	extentMax = 4 << 20
)

// allocSize returns the size the store gives a log that must hold n
// bytes: extentMin, or the next power of two up to extentMax, or the next
// multiple of extentMax.
func allocSize(n int64) int64 {
	if n <= extentMin {
		return extentMin
	}
	if n <= extentMax {
		size := int64(extentMin)
		for size < n {
			size *= 2
		}
		return size
	}
	return (n + extentMax - 1) / extentMax * extentMax
}

// needSize returns the size a log whose frames end at end must have to
// take a write of n bytes, given its size now: size itself if the write
// and the frame head of zeros after it fit.
func needSize(end, n, size int64) int64 {
	if end+n+frameHead <= size {
		return size
	}
	return allocSize(end + n + frameHead)
}

// scanExtents reads a version 2 log (see above).
func scanExtents(data []byte) logScan {
	var s logScan
	off := 0
	for off < len(data) {
		payload, n, ok := readFrame(data[off:])
		if ok {
			s.frames = append(s.frames, logFrame{off: off, payload: payload})
			off += n
			continue
		}
		rest := data[off:]
		z := written(rest)
		if z == 0 {
			break // never written: the frames end here
		}
		if next := nextFrame(data, off+1); next >= 0 {
			s.damaged = append(s.damaged, span{from: off, to: next, problem: "a frame fails its checksum and valid frames follow it"})
			off = next
			continue
		}
		bad := badLast(rest, off, z)
		if bad.problem == "" {
			s.end, s.torn = off, bad.to
			return s.sized(data)
		}
		s.damaged = append(s.damaged, bad)
		s.end = bad.to
		return s
	}
	s.end = off
	if len(data)-off < frameHead {
		s.short = &span{from: off, problem: "the file ends where its frames end, without the never-written space the store keeps after them: it was cut short"}
	}
	return s.sized(data)
}

// sized notes a log of size bytes whose size the store would not give it.
// One larger than a size the store gives (the largest below it: floor)
// that holds its frames and the zeros after them, followed only by zeros,
// is an extension that failed part way (a full disk): the store grows a
// log before it writes into the new space, so nothing was written there.
// It is not damage: trim says to cut it back to floor. Anything else —
// shorter than the frames need, or other bytes where only zeros can be —
// was cut short.
func (s logScan) sized(data []byte) logScan {
	size := int64(len(data))
	if s.short != nil || allocSize(size) == size {
		return s
	}
	if floor := allocFloor(size); floor > 0 && int64(s.end+s.torn+frameHead) <= floor && written(data[floor:]) == 0 {
		s.trim = floor
		return s
	}
	s.short = &span{from: len(data), problem: fmt.Sprintf("the file is %d bytes, not a size the store gives it: it was cut short (or extended by something other than the store)", size)}
	return s
}

// allocFloor returns the largest size the store gives a log (allocSize)
// that is at most n, or 0 if none is.
func allocFloor(n int64) int64 {
	switch {
	case n < extentMin:
		return 0
	case n < extentMax:
		size := int64(extentMin)
		for size*2 <= n {
			size *= 2
		}
		return size
	}
	return n / extentMax * extentMax
}

// badLast judges the last frame of a log, at off, that fails its check and
// has no good frame after it; rest is the log from off, and z the length
// of rest up to its last byte that is not zero. It returns the torn frame
// (problem empty; to is its length) or the damaged span. A torn frame is
// one write, which fits in the file (the store made room first), shows a
// sector never written, and has only zeros after it.
func badLast(rest []byte, off, z int) span {
	if len(rest) < frameHead {
		return span{off, off + len(rest), "the file ends inside a frame's head: it was cut short", true}
	}
	l := int64(binary.LittleEndian.Uint32(rest))
	e := frameHead + l
	switch {
	case e > int64(len(rest)):
		return span{off, off + len(rest), fmt.Sprintf("the last frame runs past the end of the file (%d of its %d bytes are there): the file was cut short, or the frame's length is damaged", len(rest), e), true}
	case l == 0:
		// Its head was never written: the write ends at its last byte
		// written.
		e = int64(z)
	case int64(z) > e:
		return span{from: off, to: off + z, problem: "a frame fails its checksum and other bytes follow it, so it is not a write a crash interrupted"}
	case wholeBefore(rest, z, e):
		return span{from: off, to: off + z, problem: "the last frame's length is damaged: a shorter frame there checks out"}
	}
	if e > maxWrite || !disk.Torn(rest[:e], int64(off)) {
		return span{from: off, to: off + int(e), problem: "the last frame fails its checksum and was written whole, so it is not a write a crash interrupted"}
	}
	return span{to: int(e)}
}

// wholeBefore reports whether the frame at the start of rest, whose
// bytes end at z and whose head says it ends at e, checks out ending
// somewhere from z to e: a whole frame whose length is damaged, not a torn
// one (whose head holds its length as written).
func wholeBefore(rest []byte, z int, e int64) bool {
	if z <= frameHead {
		return false
	}
	want := binary.LittleEndian.Uint32(rest[4:])
	crc := crc32.Checksum(rest[frameHead:z], crcTable)
	var zero [1]byte
	for k := int64(z); k < e; k++ {
		if crc == want {
			return true
		}
		crc = crc32.Update(crc, crcTable, zero[:])
	}
	return false
}

// written returns the length of b up to its last byte that is not zero.
func written(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i + 1
		}
	}
	return 0
}

// zeroAt writes n zeros at off in f and fsyncs it: a torn frame cut off,
// so that the space after the frames is again never written.
func zeroAt(f *os.File, off, n int64) error {
	zeros := make([]byte, min(n, 1<<20))
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := f.WriteAt(zeros[:k], off); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return f.Sync()
}

// extendTo makes f, of size bytes in dir, size to bytes long, zero-filled
// (allocated where the system can: grow, extend unless a test sets it),
// and fsyncs it and dir. If growing fails — on a full disk fallocate can
// leave the file partly extended — the file is cut back to size, so that
// it keeps a size the store gives (best effort: the next open trims what a
// failed extension leaves, see sized).
func extendTo(f *os.File, dir string, size, to int64, grow func(f *os.File, size, to int64) error) error {
	if err := grow(f, size, to); err != nil {
		back := f.Truncate(size)
		if back == nil {
			back = f.Sync()
		}
		if back != nil {
			return fmt.Errorf("growing %s from %d to %d bytes: %w (and cutting it back failed: %v): free space on its file system", logName, size, to, err, back)
		}
		return fmt.Errorf("growing %s from %d to %d bytes: %w (cut back to %d bytes): free space on its file system", logName, size, to, err, size)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return disk.SyncDir(dir)
}
