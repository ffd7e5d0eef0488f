package participant

import (
	"bytes"
	"testing"
)

// FuzzScanLog: whatever a log holds, scanning it never panics, and what it
// finds is coherent: good frames in order that read back as found, damaged
// spans between them, and a log cut where the scan ends scans again to the
// same frames with nothing torn.
func FuzzScanLog(f *testing.F) {
	log := appendFrame(nil, append([]byte{frameHeader}, storeMagic...))
	log = append(log, countFrame(7)...)
	log = append(log, batchFrame(2, appendOps(nil, []Op{{Key: "k", Value: []byte("v")}, {Key: "d", Delete: true}}))...)
	f.Add(log)
	f.Add(log[:len(log)-3])
	damaged := bytes.Clone(log)
	damaged[40] ^= 4
	f.Add(damaged)
	f.Add(make([]byte, 600))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := scanLog(data)
		if s.end > len(data) {
			t.Fatalf("end %d past the log's %d bytes", s.end, len(data))
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
		again := scanLog(data[:s.end])
		if again.end != s.end || len(again.frames) != len(s.frames) || len(again.damaged) != len(s.damaged) {
			t.Fatalf("the log cut at %d scans differently", s.end)
		}
	})
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
	got := appendBatchFrame(bytes.Clone(prefix), batches)
	want := append(bytes.Clone(prefix), batchFrame(n, joined)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("frame in place\n%x\nwant\n%x", got, want)
	}
}
