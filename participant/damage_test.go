package participant_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/participant"
)

// written is a closed store's log, where each of its batch frames
// starts, and where its frames end.
type written struct {
	dir    string
	data   []byte
	frames []int // the offset of each batch frame, in order
	end    int
}

// writeStore makes a store, applies one batch per record, closes it and
// reads its log.
func writeStore(t *testing.T, recs ...participant.Op) written {
	t.Helper()
	w := written{dir: t.TempDir()}
	s, err := participant.OpenFileStore(w.dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(w.dir, "store.log")
	for _, r := range recs {
		w.frames = append(w.frames, int(participant.LogEnd(s)))
		apply(t, s, r)
	}
	w.end = int(participant.LogEnd(s))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if w.data, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	return w
}

// with writes data as the log of a new directory and returns it: the
// store as a crash leaves it, with no record of a clean close.
func with(t *testing.T, data []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "store.log"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func flip(data []byte, off int, bit uint) []byte {
	b := bytes.Clone(data)
	b[off] ^= 1 << bit
	return b
}

// TestFileStoreDamage: a damaged log, or one cut short anywhere, is
// refused, naming the file and the offset, and left as it was; a torn last
// frame — a write a crash interrupted, never acknowledged: a sector of it
// never written, and nothing but never-written space after it — is cut
// off and every earlier write is kept.
func TestFileStoreDamage(t *testing.T) {
	big := strings.Repeat("v", 2000)
	w := writeStore(t, put("a", "1"), put("b", "2"), put("c", big))
	last := w.frames[2]
	sector := (last/disk.SectorSize + 1) * disk.SectorSize
	headless := zero(w.data, last, sector-last)
	dataAfter := flip(zero(w.data, sector, disk.SectorSize), w.end+600, 0)
	for _, tc := range []struct {
		name    string
		data    []byte
		refused int // the offset named, or -1: opens with what is kept
		kept    string
	}{
		{"middle frame: a flipped bit", flip(w.data, w.frames[1]+10, 3), w.frames[1], ""},
		{"middle frame: its length damaged", flip(w.data, w.frames[1], 4), w.frames[1], ""},
		{"header: a flipped bit", flip(w.data, 12, 0), 0, ""},
		{"last frame: a flipped bit", flip(w.data, last+100, 5), last, ""},
		{"last frame: its length damaged", flip(w.data, last+1, 2), last, ""},
		{"last frame: its checksum damaged", flip(w.data, last+5, 0), last, ""},
		{"cut inside the last frame", w.data[:w.end-700], last, ""},
		{"cut inside the last frame's head", w.data[:last+5], last, ""},
		{"cut where a frame ends", w.data[:last], last, ""},
		{"cut where the frames end", w.data[:w.end], w.end, ""},
		{"cut to half", w.data[:len(w.data)/2], len(w.data) / 2, ""},
		{"extended with other bytes", flip(append(bytes.Clone(w.data), make([]byte, 100)...), len(w.data)+99, 0), len(w.data) + 100, ""},
		{"extended with zeros: an extension that failed part way", append(bytes.Clone(w.data), make([]byte, 100)...), -1, "a=1 b=2 c=" + big + " "},
		{"last frame: a sector of zeros, data after it", dataAfter, last, ""},
		{"torn tail: a sector never written", zero(w.data, sector, disk.SectorSize), -1, "a=1 b=2 "},
		{"torn tail: only its header written", zero(w.data, last+8, len(w.data)-last-8), -1, "a=1 b=2 "},
		{"torn tail: its head never written", headless, -1, "a=1 b=2 "},
		{"no damage", w.data, -1, "a=1 b=2 c=" + big + " "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := with(t, tc.data)
			s, err := participant.OpenFileStore(dir)
			if tc.refused >= 0 {
				var d *disk.DamageError
				if !errors.As(err, &d) || !errors.Is(err, participant.ErrDamaged) {
					t.Fatalf("opened, or failed otherwise: %v", err)
				}
				if d.Path != filepath.Join(dir, "store.log") || d.Offset != int64(tc.refused) {
					t.Errorf("names %s at %d, want store.log at %d: %v", d.Path, d.Offset, tc.refused, err)
				}
				if got, _ := os.ReadFile(filepath.Join(dir, "store.log")); !bytes.Equal(got, tc.data) {
					t.Error("the refused log was changed")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := dump(t, s); got != tc.kept {
				t.Errorf("records %.40q, want %.40q", got, tc.kept)
			}
		})
	}
}

func zero(data []byte, off, n int) []byte {
	b := bytes.Clone(data)
	clear(b[off : off+n])
	return b
}

// TestFileStoreEveryFlippedBitIsFound: whichever bit of the log is
// flipped, opening either refuses the store as damaged or gives back
// every acknowledged record — never fewer (zero silent losses).
func TestFileStoreEveryFlippedBitIsFound(t *testing.T) {
	w := writeStore(t, put("a", "1"), del("a"), put("b", "2"), put("c", strings.Repeat("3", 600)))
	want := "b=2 c=" + strings.Repeat("3", 600) + " "
	// Every byte of the frames and of the frame head of zeros after them,
	// and some of the never-written space further on.
	offs := []int{w.end + 100, w.end + 511, w.end + 513, w.end + 2000, len(w.data) - 1}
	for off := range w.end + 16 {
		offs = append(offs, off)
	}
	for _, off := range offs {
		for _, bit := range []uint{0, 6} {
			data := flip(w.data, off, bit)
			s, err := participant.OpenFileStore(with(t, data))
			if err != nil {
				if !errors.Is(err, participant.ErrDamaged) {
					t.Fatalf("bit %d of byte %d: %v, want a damage error", bit, off, err)
				}
				continue
			}
			if got := dump(t, s); got != want {
				t.Fatalf("bit %d of byte %d flipped: records %.30q, want %.30q", bit, off, got, want)
			}
			s.Close()
		}
	}
}

// TestRepairFileStore: repair keeps every frame that checks out, reports
// the damaged span it dropped, saves the damaged log, takes a crash count
// above any the dropped span could hold, and the store then opens.
func TestRepairFileStore(t *testing.T) {
	w := writeStore(t, put("a", "1"), put("b", "2"), put("c", "3"))
	damaged := flip(w.data, w.frames[1]+9, 1)
	dir := with(t, damaged)
	if _, err := participant.OpenFileStore(dir); !errors.Is(err, participant.ErrDamaged) {
		t.Fatalf("open before repair: %v", err)
	}
	rep, err := participant.RepairFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	frame := w.frames[2] - w.frames[1]
	if len(rep.Dropped) != 1 || rep.Dropped[0] != (participant.Span{Offset: int64(w.frames[1]), Length: int64(frame)}) || rep.Torn != 0 {
		t.Errorf("report %+v, want the frame at %d (%d bytes) dropped", rep, w.frames[1], frame)
	}
	if saved, err := os.ReadFile(rep.Saved); err != nil || !bytes.Equal(saved, damaged) {
		t.Errorf("saved copy %s: %v, or not the damaged log", rep.Saved, err)
	}
	if !strings.Contains(rep.String(), fmt.Sprintf("dropped %d damaged bytes at offset %d", frame, w.frames[1])) {
		t.Errorf("report does not say what it dropped:\n%s", rep)
	}
	s := openFile(t, dir)
	if got := dump(t, s); got != "a=1 c=3 " {
		t.Errorf("after repair: %q, want the frames that checked out", got)
	}
	if s.CrashCount() <= rep.CrashCount {
		t.Errorf("crash count %d after repair, want above %d", s.CrashCount(), rep.CrashCount)
	}

	// A healthy store is left as it is.
	healthy := with(t, w.data)
	rep, err = participant.RepairFileStore(healthy)
	if err != nil || rep.Saved != "" {
		t.Fatalf("repair of a healthy store: %+v, %v", rep, err)
	}
	if got, _ := os.ReadFile(filepath.Join(healthy, "store.log")); !bytes.Equal(got, w.data) {
		t.Error("repair changed a healthy store")
	}
}
