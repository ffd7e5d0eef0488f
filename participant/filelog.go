package participant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/djinn-go/djinn/internal/disk"
)

// A FileStore's log is a sequence of frames: a 4-byte little-endian payload
// length, a 4-byte little-endian CRC-32C of the payload, then the payload,
// whose first byte is its type. The first frame is the header; crash count
// frames and batch frames follow. Each write is one frame (the batches of a
// group commit share one), so a crash can tear only the last frame, and a
// frame with a good frame after it was written whole before it.

const (
	logName = "store.log"
	tmpName = "store.log.tmp"
	// lockName is the file whose lock an open FileStore holds (lockDir).
	lockName = "store.lock"

	frameHeader = 'H'
	frameCount  = 'C'
	frameBatch  = 'B'

	storeMagic = "djinn-participant-store/1"

	// frameHead is the length of a frame's length and checksum.
	frameHead = 8
	// maxFrame bounds a frame's length when reading.
	maxFrame = 1 << 30
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// readFrame reads the frame at the start of b: its payload (never empty)
// and its length.
func readFrame(b []byte) (payload []byte, n int, ok bool) {
	if len(b) < frameHead {
		return nil, 0, false
	}
	l := binary.LittleEndian.Uint32(b)
	if l == 0 || l > maxFrame || uint64(len(b)-frameHead) < uint64(l) {
		return nil, 0, false
	}
	payload = b[frameHead : frameHead+l]
	if crc32.Checksum(payload, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, false
	}
	return payload, frameHead + int(l), true
}

func appendFrame(dst []byte, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(payload, crcTable))
	return append(dst, payload...)
}

func countFrame(n int64) []byte {
	return appendFrame(nil, binary.BigEndian.AppendUint64([]byte{frameCount}, uint64(n)))
}

// batchFrame returns one batch frame holding n changes, encoded by
// appendOps into ops.
func batchFrame(n int, ops []byte) []byte {
	return appendFrame(nil, batchPayload(n, ops))
}

// appendBatchFrame appends to dst one batch frame holding the changes of
// batches, in order: the frame batchFrame makes of them, encoded in place.
func appendBatchFrame(dst []byte, batches [][]Op) []byte {
	n := 0
	for _, ops := range batches {
		n += len(ops)
	}
	start := len(dst)
	dst = append(dst, make([]byte, frameHead)...)
	dst = append(dst, frameBatch)
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, ops := range batches {
		dst = appendOps(dst, ops)
	}
	payload := dst[start+frameHead:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, crcTable))
	return dst
}

// encodeBatch returns the payload of a batch frame holding ops.
func encodeBatch(ops []Op) []byte { return batchPayload(len(ops), appendOps(nil, ops)) }

func batchPayload(n int, ops []byte) []byte {
	payload := make([]byte, 0, 1+binary.MaxVarintLen64+len(ops))
	payload = append(payload, frameBatch)
	payload = binary.AppendUvarint(payload, uint64(n))
	return append(payload, ops...)
}

// opsSize returns the length of appendOps' encoding of ops.
func opsSize(ops []Op) int {
	n := 0
	for _, op := range ops {
		n += 1 + uvarintLen(len(op.Key)) + len(op.Key)
		if !op.Delete {
			n += uvarintLen(len(op.Value)) + len(op.Value)
		}
	}
	return n
}

func uvarintLen(x int) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}

// appendOps appends the encoding of ops to dst.
func appendOps(dst []byte, ops []Op) []byte {
	for _, op := range ops {
		if op.Delete {
			dst = append(dst, 1)
			dst = binary.AppendUvarint(dst, uint64(len(op.Key)))
			dst = append(dst, op.Key...)
			continue
		}
		dst = append(dst, 0)
		dst = binary.AppendUvarint(dst, uint64(len(op.Key)))
		dst = append(dst, op.Key...)
		dst = binary.AppendUvarint(dst, uint64(len(op.Value)))
		dst = append(dst, op.Value...)
	}
	return dst
}

// decodeBatch reads a batch frame's payload (after the type byte).
func decodeBatch(b []byte) ([]Op, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errors.New("bad length")
	}
	b = b[k:]
	ops := make([]Op, 0, n)
	bytesOf := func() ([]byte, bool) {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, false
		}
		v := b[k : k+int(l)]
		b = b[k+int(l):]
		return v, true
	}
	for range n {
		if len(b) == 0 {
			return nil, errors.New("cut short")
		}
		kind := b[0]
		b = b[1:]
		key, ok := bytesOf()
		if !ok || kind > 1 {
			return nil, errors.New("bad change")
		}
		op := Op{Key: string(key), Delete: kind == 1}
		if !op.Delete {
			if op.Value, ok = bytesOf(); !ok {
				return nil, errors.New("bad value")
			}
		}
		ops = append(ops, op)
	}
	if len(b) != 0 {
		return nil, errors.New("trailing bytes")
	}
	return ops, nil
}

// logFrame is one good frame of a log.
type logFrame struct {
	off     int
	payload []byte
}

// span is a range of a log's bytes.
type span struct{ from, to int }

// logScan is what reading a log found: its good frames, the damaged spans
// between them, and where the good frames end (the log's length, or the
// start of a torn last frame).
type logScan struct {
	frames  []logFrame
	damaged []span
	end     int
}

// scanLog reads every good frame of data. A frame that is cut short or
// fails its checksum is a torn write, and ends the log, when no good frame
// follows it and it is cut short by the end of the log or shows a sector
// never written (disk.Torn); otherwise its bytes, up to the next good frame
// or the end of the log, are damaged.
func scanLog(data []byte) logScan {
	var s logScan
	for off := 0; off < len(data); {
		payload, n, ok := readFrame(data[off:])
		if ok {
			s.frames = append(s.frames, logFrame{off: off, payload: payload})
			off += n
			continue
		}
		next := nextFrame(data, off+1)
		if next < 0 && tornTail(data, off) {
			s.end = off
			return s
		}
		if next < 0 {
			next = len(data)
		}
		s.damaged = append(s.damaged, span{off, next})
		off = next
	}
	s.end = len(data)
	return s
}

// nextFrame returns the offset of the first good frame at or after from,
// or -1. A good frame is one whose checksum holds and whose type is known.
func nextFrame(data []byte, from int) int {
	for p := from; p+frameHead < len(data); p++ {
		l := binary.LittleEndian.Uint32(data[p:])
		if l == 0 || uint64(l) > uint64(len(data)-p-frameHead) {
			continue
		}
		switch t := data[p+frameHead]; {
		case t == frameCount && l == 9, t == frameBatch, t == frameHeader:
		default:
			continue
		}
		if _, _, ok := readFrame(data[p:]); ok {
			return p
		}
	}
	return -1
}

// tornTail reports whether the bad frame at off, the last in data, is a
// write a crash interrupted: cut short by the end of data (unless the
// bytes to the end check out against its checksum, so that only its length
// is wrong), or showing a sector never written.
func tornTail(data []byte, off int) bool {
	rest := data[off:]
	if len(rest) < frameHead {
		return true
	}
	l := uint64(binary.LittleEndian.Uint32(rest))
	if l > uint64(len(rest)-frameHead) {
		whole := len(rest) > frameHead && crc32.Checksum(rest[frameHead:], crcTable) == binary.LittleEndian.Uint32(rest[4:])
		return !whole
	}
	return disk.Torn(rest[:frameHead+int(l)], int64(off))
}

// damageAt describes the first damaged span of a scan.
func (s logScan) damageAt(path string) *disk.DamageError {
	d := s.damaged[0]
	problem := "a frame fails its checksum and valid frames follow it"
	if d.to == s.end {
		problem = "the last frame fails its checksum and was written whole, so it is not a write a crash interrupted"
	}
	return &disk.DamageError{Path: path, Offset: int64(d.from), Problem: fmt.Sprintf("%s (%d bytes unreadable)", problem, d.to-d.from)}
}
