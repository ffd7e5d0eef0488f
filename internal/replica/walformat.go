package replica

import (
	"bufio"
	"encoding/binary"
	"hash/crc32"
	"io"
)

// The log's segment files, as raft-wal v0.4 writes them: a 32-byte header
// (magic, version, base index, segment id, codec), then frames aligned to 8
// bytes. A frame header is a type byte, three zero bytes and a 4-byte
// little-endian length (entry and index frames, whose payload follows,
// padded to 8 bytes) or CRC-32C (commit frames). Each append writes entry
// frames — and, when it seals the segment, an index frame — then a commit
// frame whose CRC covers every byte since the previous commit frame (for
// the first, since the start of the file), and fsyncs.
//
// raft-wal checks only the last commit when it opens the log, takes one
// that fails for a write a crash interrupted, and trusts the disk with
// everything before. walkSegment reads every frame so that damage is
// found instead.

const (
	segHeaderLen = 32
	segMagic     = 0x58eb6b0d
	segFrameLen  = 8
	frameEntry   = 1
	frameIndex   = 2
	frameCommit  = 3
	// maxEntry is raft-wal's bound on an entry's length.
	maxEntry = 64 << 20
)

// segCommit is a commit frame of a segment.
type segCommit struct {
	off     int64
	ok      bool // its CRC matches the bytes it covers
	entries int  // how many entry frames precede it
}

// segWalk is what reading a segment's frames in order found.
type segWalk struct {
	header  []byte // the file header as read (shorter if the file is)
	commits []segCommit
	entries []int64 // the offset of each entry frame, in order
	indexAt int64   // the offset of the index frame; -1: none
	// stop is where reading stopped: at zeros, at the end of the file, or
	// at bytes that are no frame (bad).
	stop int64
	bad  bool
	// seen is the end of the bytes read at a bad stop.
	seen int64
}

// walkSegment reads the frames of a segment whose first entry is index
// base. Each entry frame must hold one log entry of the next index whose
// encoding ends where the frame does; reading stops at the first frame
// that does not check out, so a damaged length is found at its frame.
func walkSegment(r io.ReaderAt, size int64, base uint64) segWalk {
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), int(min(size, 1<<20)))
	w := segWalk{indexAt: -1}
	hdr := make([]byte, segHeaderLen)
	n, _ := io.ReadFull(br, hdr)
	w.header = hdr[:n]
	if n < segHeaderLen {
		w.stop = 0
		return w
	}
	crc := crc32.Checksum(hdr, castagnoli)
	off := int64(segHeaderLen)
	var fh [segFrameLen]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(br, fh[:]); err != nil {
			w.stop = off
			return w
		}
		typ, l := fh[0], binary.LittleEndian.Uint32(fh[4:])
		switch {
		case typ == 0:
			w.stop, w.bad, w.seen = off, fh != [segFrameLen]byte{}, off+segFrameLen
			return w
		case typ == frameCommit:
			w.commits = append(w.commits, segCommit{off: off, ok: crc == l, entries: len(w.entries)})
			crc = 0
			off += segFrameLen
			continue
		case typ != frameEntry && typ != frameIndex, l > maxEntry:
			w.stop, w.bad, w.seen = off, true, off+segFrameLen
			return w
		}
		need := int(l) + padLen(int(l))
		if cap(payload) < need {
			payload = make([]byte, need)
		}
		payload = payload[:need]
		got, _ := io.ReadFull(br, payload)
		if typ == frameEntry {
			end, ok := entryEnd(payload[:min(got, int(l))], base+uint64(len(w.entries)))
			switch {
			case ok && end != int(l):
				// The entry is whole and the frame's length is not its
				// length: the frame header is damaged.
				w.stop, w.bad, w.seen = off, true, off+segFrameLen+int64(end)
				return w
			case got < need:
				// Cut short by the end of the file.
				w.stop = off
				return w
			case !ok:
				w.stop, w.bad, w.seen = off, true, off+segFrameLen+int64(end)
				return w
			}
			w.entries = append(w.entries, off)
		} else {
			if got < need && l == uint32(4*len(w.entries)) {
				w.stop = off // cut short by the end of the file
				return w
			}
			if !indexMatches(payload[:min(got, int(l))], l, w.entries) {
				w.stop, w.bad, w.seen = off, true, off+segFrameLen
				return w
			}
			w.indexAt = off
		}
		crc = crc32.Update(crc, castagnoli, fh[:])
		crc = crc32.Update(crc, castagnoli, payload)
		off += segFrameLen + int64(need)
	}
}

// indexMatches reports whether an index frame of length l holding p lists
// the offsets of the entry frames read, as raft-wal writes it when it
// seals a segment.
func indexMatches(p []byte, l uint32, entries []int64) bool {
	if l != uint32(4*len(entries)) || len(p) != int(l) {
		return false
	}
	for i, off := range entries {
		if binary.LittleEndian.Uint32(p[4*i:]) != uint32(off) {
			return false
		}
	}
	return true
}

// padLen is the padding after a payload of n bytes.
func padLen(n int) int { return (segFrameLen - n%segFrameLen) % segFrameLen }

// entryEnd reads the encoding of a log entry (raft-wal's binary codec:
// varint index, term and type, length-prefixed data and extensions, then
// a binary time) from p and returns where it ends. ok is false if the
// entry is not of index want or does not decode within p; end is then how
// far the reading got.
func entryEnd(p []byte, want uint64) (end int, ok bool) {
	pos := 0
	varint := func() (uint64, bool) {
		v, n := binary.Uvarint(p[pos:])
		if n <= 0 {
			return 0, false
		}
		pos += n
		return v, true
	}
	index, ok := varint()
	if !ok || index != want {
		return pos, false
	}
	if _, ok := varint(); !ok { // term
		return pos, false
	}
	if t, ok := varint(); !ok || t > 255 { // type
		return pos, false
	}
	for range 2 { // data, extensions
		n, ok := varint()
		if !ok || n > uint64(len(p)-pos) {
			return pos, false
		}
		pos += int(n)
	}
	// time.Time.MarshalBinary: version 1 is 15 bytes, version 2 is 16.
	if pos >= len(p) {
		return pos, false
	}
	switch p[pos] {
	case 1:
		pos += 15
	case 2:
		pos += 16
	default:
		return pos, false
	}
	if pos > len(p) {
		return len(p), false
	}
	return pos, true
}
