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
//
// Version 2 (the header storeMagic) numbers its batch frames and keeps the
// file in zero-filled extents (see extent.go), so that a torn write is
// recognised rather than assumed. Version 1 (storeMagicV1) did neither: its
// logs are still read, by the rule of scanV1, and rewritten as version 2
// when opened.

const (
	logName = "store.log"
	tmpName = "store.log.tmp"
	// lockName is the file whose lock an open FileStore holds (lockDir).
	lockName = "store.lock"

	frameHeader = 'H'
	frameCount  = 'C'
	// frameBatch is version 1's batch frame: its type, then the changes.
	frameBatch = 'B'
	// frameNumbered is version 2's batch frame: its type, its sequence
	// number (8 bytes, big-endian), then the changes.
	frameNumbered = 'N'

	storeMagicV1 = "djinn-participant-store/1"
	storeMagic   = "djinn-participant-store/2"
	// magicPrefix starts every version's header.
	magicPrefix = "djinn-participant-store/"

	// frameHead is the length of a frame's length and checksum.
	frameHead = 8
	// maxFrame bounds a frame's length when reading.
	maxFrame = 1 << 30
	// seqLen is the length of a numbered batch frame's sequence number.
	seqLen = 8
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

// batchFrame returns one numbered batch frame with sequence number seq
// holding n changes, encoded by appendOps into ops.
func batchFrame(seq uint64, n int, ops []byte) []byte {
	payload := make([]byte, 0, 1+seqLen+binary.MaxVarintLen64+len(ops))
	payload = append(payload, frameNumbered)
	payload = binary.BigEndian.AppendUint64(payload, seq)
	payload = binary.AppendUvarint(payload, uint64(n))
	return appendFrame(nil, append(payload, ops...))
}

// appendBatchFrame appends to dst one numbered batch frame, sequence
// number seq, holding the changes of batches, in order: the frame
// batchFrame makes of them, encoded in place.
func appendBatchFrame(dst []byte, seq uint64, batches [][]Op) []byte {
	n := 0
	for _, ops := range batches {
		n += len(ops)
	}
	start := len(dst)
	dst = append(dst, make([]byte, frameHead)...)
	dst = append(dst, frameNumbered)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = binary.AppendUvarint(dst, uint64(n))
	for _, ops := range batches {
		dst = appendOps(dst, ops)
	}
	payload := dst[start+frameHead:]
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(payload, crcTable))
	return dst
}

// maxWrite bounds the frame one write appends: a group of at most maxGroup
// bytes of changes.
const maxWrite = frameHead + 1 + seqLen + binary.MaxVarintLen64 + maxGroup

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

// span is a range of a log's bytes, and what is wrong with it.
type span struct {
	from, to int
	problem  string
	cut      bool // the log was cut short at to
}

// logScan is what reading a log found: its good frames, the damaged spans
// between them, where the good frames end (the log's length, or the start
// of a torn last frame) and the length of a torn last frame there.
type logScan struct {
	v1      bool
	frames  []logFrame
	damaged []span
	end     int
	// torn is the length of a torn last frame at end: a write a crash
	// interrupted, never acknowledged. 0: none.
	torn int
	// short, in a version 2 log, says the file is not as long as the store
	// made it: cut short (or extended). Its from is the offset named.
	short *span
	// trim, in a version 2 log, is the size to cut it back to: it is
	// longer than that by an extension that failed part way, all zeros.
	// 0: none.
	trim int64
}

// scanLog reads every good frame of data, by the rule of its version:
// scanV1 for a log whose header is version 1's, scanExtents otherwise.
func scanLog(data []byte) logScan {
	if p, _, ok := readFrame(data); ok && p[0] == frameHeader && string(p[1:]) == storeMagicV1 {
		return scanV1(data)
	}
	return scanExtents(data)
}

// scanV1 reads a version 1 log, which the store grew one frame at a time.
// A frame that is cut short or fails its checksum is a torn write, and ends
// the log, when no good frame follows it and it is cut short by the end of
// the log or shows a sector never written (disk.Torn); otherwise its bytes,
// up to the next good frame or the end of the log, are damaged. (A log cut
// short anywhere passes for one torn: version 1 has no way to tell.)
func scanV1(data []byte) logScan {
	s := logScan{v1: true}
	for off := 0; off < len(data); {
		payload, n, ok := readFrame(data[off:])
		if ok {
			s.frames = append(s.frames, logFrame{off: off, payload: payload})
			off += n
			continue
		}
		next := nextFrame(data, off+1)
		if next < 0 && tornTail(data, off) {
			s.end, s.torn = off, len(data)-off
			return s
		}
		problem := "a frame fails its checksum and valid frames follow it"
		if next < 0 {
			next = len(data)
			problem = "the last frame fails its checksum and was written whole, so it is not a write a crash interrupted"
		}
		s.damaged = append(s.damaged, span{from: off, to: next, problem: problem})
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
		case t == frameCount && l == 9, t == frameBatch, t == frameNumbered && l > seqLen, t == frameHeader:
		default:
			continue
		}
		if _, _, ok := readFrame(data[p:]); ok {
			return p
		}
	}
	return -1
}

// tornTail reports whether the bad frame at off, the last in a version 1
// log data, is a write a crash interrupted: cut short by the end of data
// (unless the bytes to the end check out against its checksum, so that
// only its length is wrong), or showing a sector never written.
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

// cutAt returns where a version 2 log was found cut short, or 0.
func (s logScan) cutAt() int {
	if s.short != nil {
		return s.short.from
	}
	if k := len(s.damaged); k > 0 && s.damaged[k-1].cut {
		return s.damaged[k-1].to
	}
	return 0
}

// damage describes what a scan found wrong first, naming path: a damaged
// span, or else the file cut short; nil when nothing is.
func (s logScan) damage(path string) *disk.DamageError {
	if len(s.damaged) > 0 {
		d := s.damaged[0]
		return &disk.DamageError{Path: path, Offset: int64(d.from), Problem: fmt.Sprintf("%s (%d bytes unreadable)", d.problem, d.to-d.from)}
	}
	if s.short != nil {
		return &disk.DamageError{Path: path, Offset: int64(s.short.from), Problem: s.short.problem}
	}
	return nil
}
