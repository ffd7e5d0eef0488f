package participant

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// encodeBatch returns the payload of a version 1 batch frame holding ops.
func encodeBatch(ops []Op) []byte {
	return append([]byte{frameBatch}, append(binary.AppendUvarint(nil, uint64(len(ops))), appendOps(nil, ops)...)...)
}

// testLog returns a version 2 log as the store lays it out: a header, a
// crash count and a batch, zeros to extentMin.
func testLog() []byte {
	log := appendFrame(nil, append([]byte{frameHeader}, storeMagic...))
	log = append(log, countFrame(7)...)
	log = append(log, batchFrame(3, 2, appendOps(nil, []Op{{Key: "k", Value: []byte("v")}, {Key: "d", Delete: true}}))...)
	return append(log, make([]byte, extentMin-len(log))...)
}

// FuzzScanLog: whatever a log holds, scanning it never panics, and what it
// finds is coherent: good frames in order that read back as found, damaged
// spans between them, and a torn frame only before zeros. A version 1 log
// cut where the scan ends scans again to the same frames with nothing
// torn; a version 2 log whose torn frame is zeroed (as opening does) scans
// again to the same frames with nothing torn.
func FuzzScanLog(f *testing.F) {
	v1 := appendFrame(nil, append([]byte{frameHeader}, storeMagicV1...))
	v1 = append(v1, countFrame(7)...)
	v1 = append(v1, appendFrame(nil, encodeBatch([]Op{{Key: "k", Value: []byte("v")}}))...)
	f.Add(v1)
	f.Add(v1[:len(v1)-3])
	log := testLog()
	f.Add(log)
	f.Add(log[:len(log)-3])
	f.Add(log[:extentMin/2])
	damaged := bytes.Clone(log)
	damaged[40] ^= 4
	f.Add(damaged)
	torn := bytes.Clone(log)
	copy(torn[600:], batchFrame(4, 1, appendOps(nil, []Op{{Key: "t", Value: make([]byte, 1200)}})))
	f.Add(torn)
	f.Add(make([]byte, 600))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := scanLog(data)
		if s.end+s.torn > len(data) {
			t.Fatalf("end %d and torn %d past the log's %d bytes", s.end, s.torn, len(data))
		}
		pos, d := 0, 0
		for _, fr := range s.frames {
			for d < len(s.damaged) && s.damaged[d].from < fr.off {
				if s.damaged[d].from != pos || s.damaged[d].to > fr.off {
					t.Fatalf("damaged span %v out of place at %d", s.damaged[d], pos)
				}
				pos = s.damaged[d].to
				d++
			}
			payload, n, ok := readFrame(data[fr.off:])
			if fr.off != pos || !ok || !bytes.Equal(payload, fr.payload) {
				t.Fatalf("frame at %d (expected at %d) does not read back", fr.off, pos)
			}
			pos += n
		}
		for ; d < len(s.damaged); d++ {
			if s.damaged[d].from != pos {
				t.Fatalf("damaged span %v out of place at %d", s.damaged[d], pos)
			}
			pos = s.damaged[d].to
		}
		if pos != s.end {
			t.Fatalf("frames and damage end at %d, the scan at %d", pos, s.end)
		}
		if s.v1 {
			again := scanLog(data[:s.end])
			if again.end != s.end || len(again.frames) != len(s.frames) || len(again.damaged) != len(s.damaged) || again.torn != 0 {
				t.Fatalf("the log cut at %d scans differently", s.end)
			}
			return
		}
		if s.torn == 0 {
			return
		}
		if written(data[s.end+s.torn:]) != 0 {
			t.Fatalf("a torn frame at %d (%d bytes) with data after it", s.end, s.torn)
		}
		zeroed := bytes.Clone(data)
		clear(zeroed[s.end : s.end+s.torn])
		again := scanLog(zeroed)
		if again.end != s.end || len(again.frames) != len(s.frames) || len(again.damaged) != len(s.damaged) || again.torn != 0 || (again.short == nil) != (s.short == nil) {
			t.Fatalf("the log with its torn frame zeroed scans differently: %+v, was %+v", again, s)
		}
	})
}

// FuzzPosition: whatever a position record holds, decoding it never
// panics, and a record that decodes encodes back to the same bytes.
func FuzzPosition(f *testing.F) {
	for _, closed := range []bool{true, false} {
		rec := storePos{closed: closed, end: 1234, crash: 99, seq: 7}.encode()
		f.Add(rec)
		f.Add(rec[:len(rec)-1])
		f.Add(append(bytes.Clone(rec), 0))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodePos(b)
		if err != nil {
			return
		}
		if again := c.encode(); !bytes.Equal(again, b) {
			t.Fatalf("% x decodes to %+v, which encodes to % x", b, c, again)
		}
	})
}

// TestAllocSize: the sizes a log is given grow from extentMin, doubling
// to extentMax, then by extentMax, and each is a size it gives.
func TestAllocSize(t *testing.T) {
	for _, tc := range []struct{ n, want int64 }{
		{0, extentMin}, {1, extentMin}, {extentMin, extentMin}, {extentMin + 1, 2 * extentMin},
		{3 * extentMin, 4 * extentMin}, {extentMax, extentMax}, {extentMax + 1, 2 * extentMax}, {5*extentMax + 7, 6 * extentMax},
	} {
		if got := allocSize(tc.n); got != tc.want || allocSize(got) != got {
			t.Errorf("allocSize(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	if got := needSize(100, 50, extentMin); got != extentMin {
		t.Errorf("a write that fits grows the log to %d", got)
	}
	if got := needSize(extentMin-100, 100-frameHead+1, extentMin); got != 2*extentMin {
		t.Errorf("a write that leaves no frame head of zeros grows the log to %d, want %d", got, 2*extentMin)
	}
}

// TestAppendBatchFrame: a group's frame encoded in place is byte for byte
// the frame of its batches' encodings joined, after what the buffer held,
// and opsSize is the length of each batch's encoding.
func TestAppendBatchFrame(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 300)
	batches := [][]Op{
		{{Key: "k", Value: []byte("v")}, {Key: "d", Delete: true}},
		{{Key: string(long), Value: long}, {Key: "", Value: nil}},
		{{Key: "only", Delete: true}},
	}
	var joined []byte
	n := 0
	for _, ops := range batches {
		enc := appendOps(nil, ops)
		if got := opsSize(ops); got != len(enc) {
			t.Errorf("opsSize %d, encoding %d bytes", got, len(enc))
		}
		joined = append(joined, enc...)
		n += len(ops)
	}
	prefix := []byte("before")
	got := appendBatchFrame(bytes.Clone(prefix), 42, batches)
	want := append(bytes.Clone(prefix), batchFrame(42, n, joined)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("frame in place\n%x\nwant\n%x", got, want)
	}
}
