package participant_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/participant"
)

// acked is a store after acknowledged writes: its log as a crash leaves it
// (the store still open), with the record of its opening, and as a clean
// close leaves it, with the record of that close.
type acked struct {
	crashed, closed []byte
	opened, record  []byte
	frames          []int // where each batch frame starts
	end             int   // where the frames end
}

// ackStore applies n batches of a record of size bytes each, one at a
// time, and reads the log before and after closing.
func ackStore(t *testing.T, n, size int) acked {
	t.Helper()
	dir := t.TempDir()
	s := openFile(t, dir)
	var a acked
	for i := range n {
		a.frames = append(a.frames, int(participant.LogEnd(s)))
		apply(t, s, put(string(rune('a'+i%26))+strings.Repeat("k", i/26), strings.Repeat("v", size)))
	}
	a.end = int(participant.LogEnd(s))
	var err error
	path := filepath.Join(dir, "store.log")
	if a.crashed, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if a.opened, err = os.ReadFile(filepath.Join(dir, participant.PositionName)); err != nil {
		t.Fatalf("no record of the opening: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if a.closed, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if a.record, err = os.ReadFile(filepath.Join(dir, participant.PositionName)); err != nil {
		t.Fatalf("no record of the clean close: %v", err)
	}
	return a
}

// restore makes a directory holding log, and record if not nil.
func restore(t *testing.T, log, record []byte) string {
	t.Helper()
	dir := with(t, log)
	if record != nil {
		if err := os.WriteFile(filepath.Join(dir, participant.PositionName), record, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// refused checks that opening dir is refused as damage naming file at
// offset off (-1: the whole file), with want in the message, and that the
// log is left as it was.
func refused(t *testing.T, dir, file string, off int, want string) {
	t.Helper()
	before, _ := os.ReadFile(filepath.Join(dir, "store.log"))
	s, err := participant.OpenFileStore(dir)
	if err == nil {
		s.Close()
		t.Fatalf("opened, want refused as damage at %s offset %d", file, off)
	}
	var d *disk.DamageError
	if !errors.As(err, &d) || !errors.Is(err, participant.ErrDamaged) {
		t.Fatalf("failed otherwise: %v", err)
	}
	if d.Path != filepath.Join(dir, file) || d.Offset != int64(off) || !strings.Contains(err.Error(), want) {
		t.Errorf("%v\nwant %s at offset %d, saying %q", err, file, off, want)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "store.log")); !bytes.Equal(after, before) {
		t.Error("the refused log was changed")
	}
}

// TestFileStoreRefusesACut: a log cut short after acknowledged writes —
// where a frame ends, inside one, where the frames end, to half, to the
// size of a smaller extent — is refused, after a crash and after a clean
// close, naming store.log and where it was cut; never opened with the
// writes after the cut silently gone.
func TestFileStoreRefusesACut(t *testing.T) {
	small := ackStore(t, 6, 10)
	large := ackStore(t, 40, 2000) // grown past its first extent
	if len(large.crashed) != 128<<10 || len(small.crashed) != 64<<10 {
		t.Fatalf("logs of %d and %d bytes, want 64 KiB and 128 KiB", len(small.crashed), len(large.crashed))
	}
	straddling := 0 // the frame across the end of the first extent
	for _, f := range large.frames {
		if f < 64<<10 {
			straddling = f
		}
	}
	for _, tc := range []struct {
		name string
		a    acked
		cut  int
		off  int
		want string
	}{
		{"where a frame ends", small, small.frames[3], small.frames[3], "cut short"},
		{"inside a frame", small, small.frames[3] + 12, small.frames[3], "runs past the end of the file"},
		{"inside a frame's head", small, small.frames[3] + 3, small.frames[3], "inside a frame's head"},
		{"where the frames end", small, small.end, small.end, "cut short"},
		{"to half", small, len(small.crashed) / 2, len(small.crashed) / 2, "not a size the store gives it"},
		{"to the first extent", large, 64 << 10, straddling, "runs past the end of the file"},
		{"to half, grown", large, len(large.crashed) / 2, straddling, "runs past the end of the file"},
	} {
		t.Run(tc.name+", crash", func(t *testing.T) {
			refused(t, restore(t, tc.a.crashed[:tc.cut], tc.a.opened), "store.log", tc.off, tc.want)
		})
		t.Run(tc.name+", clean close", func(t *testing.T) {
			refused(t, restore(t, tc.a.closed[:tc.cut], tc.a.record), "store.log", tc.off, tc.want)
		})
	}
}

// TestFileStoreRefusesAnOlderCopy: a log replaced by an older copy of
// itself is refused naming store.log and where it ends: after a clean
// close, any copy from before it (before the last writes, or before the
// last opening: older than the store's last clean close); after a crash,
// a copy from before the last opening (older than the store was when last
// opened). The record is kept. The log as the crash left it opens.
func TestFileStoreRefusesAnOlderCopy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "store.log")
	record := filepath.Join(dir, participant.PositionName)
	s := openFile(t, dir)
	beforeWrite, _ := os.ReadFile(path)
	ends := map[string]int{"before the last write": int(participant.LogEnd(s))}
	apply(t, s, put("a", "1"))
	ends["before the last opening"] = int(participant.LogEnd(s))
	s.Close()
	beforeOpen, _ := os.ReadFile(path)
	s = openFile(t, dir)
	apply(t, s, put("b", "2"))
	crashed, _ := os.ReadFile(path)
	opened, _ := os.ReadFile(record)
	s.Close()
	closed, _ := os.ReadFile(record)
	for _, tc := range []struct {
		name, want  string
		log, record []byte
	}{
		{"before the last write", "older than this store's last clean close", beforeWrite, closed},
		{"before the last opening", "older than this store's last clean close", beforeOpen, closed},
		{"before the last opening, after a crash", "older than this store was when last opened", beforeOpen, opened},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := restore(t, tc.log, tc.record)
			refused(t, dir, "store.log", ends[strings.TrimSuffix(tc.name, ", after a crash")], tc.want)
			if got, err := os.ReadFile(filepath.Join(dir, participant.PositionName)); err != nil || !bytes.Equal(got, tc.record) {
				t.Errorf("the record was not kept: %v", err)
			}
		})
	}
	s = openFile(t, restore(t, crashed, opened))
	defer s.Close()
	if got := dump(t, s); got != "a=1 b=2 " {
		t.Errorf("the log as the crash left it: %q", got)
	}
}

// TestFileStoreOpensVersion1: a log written before extents and the
// position record still opens, by the rule it was written under (a
// last frame cut short is taken for torn), with a higher crash count; it
// is rewritten in the current format, whose cuts are then refused.
func TestFileStoreOpensVersion1(t *testing.T) {
	old := participant.V1Log(41, put("a", "1"), put("b", "2"), del("a"), put("c", "3"))
	for name, log := range map[string][]byte{"whole": old, "torn last frame": old[:len(old)-3]} {
		t.Run(name, func(t *testing.T) {
			dir := with(t, log)
			s := openFile(t, dir)
			want := "b=2 c=3 "
			if name != "whole" {
				want = "b=2 "
			}
			if got := dump(t, s); got != want || s.CrashCount() != 42 {
				t.Fatalf("records %q, crash count %d; want %q, 42", got, s.CrashCount(), want)
			}
			last := participant.LogEnd(s)
			apply(t, s, put("d", "4"))
			end := participant.LogEnd(s)
			s.Close()
			data, err := os.ReadFile(filepath.Join(dir, "store.log"))
			if err != nil || len(data) != 64<<10 || !bytes.Contains(data[:40], []byte("djinn-participant-store/2")) {
				t.Fatalf("not rewritten in the current format (%d bytes): %v", len(data), err)
			}
			s = openFile(t, dir)
			if got := dump(t, s); got != want+"d=4 " {
				t.Errorf("reopened: %q", got)
			}
			s.Close()
			refused(t, restore(t, data[:end-2], nil), "store.log", int(last), "runs past the end")
		})
	}
}

// TestRepairFileStoreCut: repair of a log cut short keeps the frames
// before the cut, reports the partial frame it drops and where the log was
// cut, takes a crash count above any the lost part could hold, and leaves
// a store that opens; repair of an older copy after a clean close reports
// it, keeps what the copy holds, and takes a count above the close's.
func TestRepairFileStoreCut(t *testing.T) {
	a := ackStore(t, 6, 10)
	cut := a.frames[3] + 12
	for name, dir := range map[string]string{
		"crash":       restore(t, a.crashed[:cut], nil),
		"clean close": restore(t, a.closed[:cut], a.record),
	} {
		t.Run(name, func(t *testing.T) {
			rep, err := participant.RepairFileStore(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Dropped) != 1 || rep.Dropped[0] != (participant.Span{Offset: int64(a.frames[3]), Length: 12}) || rep.CutAt != int64(cut) {
				t.Errorf("report %+v, want the 12 bytes at %d dropped and the cut at %d", rep, a.frames[3], cut)
			}
			for _, want := range []string{"dropped 12 damaged bytes at offset", "cut short at offset"} {
				if !strings.Contains(rep.String(), want) {
					t.Errorf("report does not say %q:\n%s", want, rep)
				}
			}
			s := openFile(t, dir)
			defer s.Close()
			if got := dump(t, s); got != "a=vvvvvvvvvv b=vvvvvvvvvv c=vvvvvvvvvv " {
				t.Errorf("after repair: %q, want the frames before the cut", got)
			}
			if s.CrashCount() <= rep.CrashCount || rep.CrashCount < 1<<32 {
				t.Errorf("crash count %d after repair reporting %d, want a jump of 2^32", s.CrashCount(), rep.CrashCount)
			}
		})
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "store.log")
	s := openFile(t, dir)
	apply(t, s, put("a", "1"))
	old, _ := os.ReadFile(path)
	apply(t, s, put("b", "2"))
	count := s.CrashCount()
	s.Close()
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := participant.RepairFileStore(dir)
	if err != nil || !strings.Contains(rep.String(), "older than this store's last clean close") || rep.CrashCount <= count {
		t.Fatalf("repair of an older copy: %v\n%s", err, rep)
	}
	s = openFile(t, dir)
	defer s.Close()
	if got := dump(t, s); got != "a=1 " {
		t.Errorf("after repair: %q, want what the copy holds", got)
	}
}

// TestFileStorePositionDamaged: an unreadable record of the last clean
// close is refused naming it (the log cannot be checked); repair drops it
// and says so; the store then opens.
func TestFileStorePositionDamaged(t *testing.T) {
	a := ackStore(t, 3, 10)
	rec := bytes.Clone(a.record)
	rec[12] ^= 1
	dir := restore(t, a.closed, rec)
	refused(t, dir, participant.PositionName, -1, "record of how far the store had got is unreadable")
	rep, err := participant.RepairFileStore(dir)
	if err != nil || !strings.Contains(rep.String(), "dropped the record of how far the store had got") {
		t.Fatalf("repair: %v\n%s", err, rep)
	}
	s := openFile(t, dir)
	defer s.Close()
	if got := dump(t, s); got != "a=vvvvvvvvvv b=vvvvvvvvvv c=vvvvvvvvvv " {
		t.Errorf("after repair: %q", got)
	}
}

// TestFileStoreHeaderDamage: a log whose header is unreadable is refused
// as damage at offset 0, so that the server adds how to recover.
func TestFileStoreHeaderDamage(t *testing.T) {
	a := ackStore(t, 3, 10)
	refused(t, restore(t, zero(a.crashed, 0, 4096), nil), "store.log", 0, "header")
	refused(t, restore(t, flip(a.closed, 5, 0), a.record), "store.log", 0, "")
}

// TestFileStoreOpensAFailedExtension: a log left larger than an extent by
// an extension a full disk stopped part way (fallocate failing with
// ENOSPC can leave the file's size partly extended: only zeros past the
// extent) is no cut: it opens with every acknowledged write, is cut back
// to the extent, and that is logged. A log past its frames but in a
// smaller extent than they need, or with other bytes past the extent, is
// still refused.
func TestFileStoreOpensAFailedExtension(t *testing.T) {
	small := ackStore(t, 6, 10)
	large := ackStore(t, 40, 2000)
	grown := func(log []byte, to int) []byte { return append(bytes.Clone(log), make([]byte, to-len(log))...) }
	for _, tc := range []struct {
		name        string
		a           acked
		to          int
		want        string
		crash, tidy []byte
	}{
		{"first extent", small, 64<<10 + 12345, "a=vvvvvvvvvv b=vvvvvvvvvv c=vvvvvvvvvv d=vvvvvvvvvv e=vvvvvvvvvv f=vvvvvvvvvv ", small.crashed, small.closed},
		{"second extent", large, 128<<10 + 777, "", large.crashed, large.closed},
	} {
		for name, rec := range map[string][2][]byte{"crash": {tc.crash, tc.a.opened}, "clean close": {tc.tidy, tc.a.record}} {
			t.Run(tc.name+", "+name, func(t *testing.T) {
				dir := restore(t, grown(rec[0], tc.to), rec[1])
				var logged bytes.Buffer
				s, err := participant.OpenFileStore(dir, participant.StoreLogger(slog.New(slog.NewTextHandler(&logged, nil))))
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				defer s.Close()
				if got := dump(t, s); strings.Count(got, "=") != len(tc.a.frames) || tc.want != "" && got != tc.want {
					t.Errorf("records %q, want all %d acknowledged", got, len(tc.a.frames))
				}
				if !strings.Contains(logged.String(), "level=WARN") || !strings.Contains(logged.String(), "failed part way") {
					t.Errorf("not logged at WARN: %q", logged.String())
				}
				if fi, err := os.Stat(filepath.Join(dir, "store.log")); err != nil || fi.Size() != int64(len(rec[0])) {
					t.Errorf("not cut back to %d bytes: %v %v", len(rec[0]), fi.Size(), err)
				}
				apply(t, s, put("z", "1"))
				s.Close()
				s = openFile(t, dir)
				if got := dump(t, s); !strings.HasSuffix(got, "z=1 ") {
					t.Errorf("reopened after a write: %q", got)
				}
			})
		}
	}
	t.Run("past its frames in a smaller extent than they need", func(t *testing.T) {
		cut := large.end + 101
		refused(t, restore(t, large.crashed[:cut], large.opened), "store.log", cut, "not a size the store gives it")
	})
	t.Run("other bytes past the extent", func(t *testing.T) {
		log := grown(small.crashed, 64<<10+501)
		log[len(log)-1] = 1
		refused(t, restore(t, log, small.opened), "store.log", len(log), "not a size the store gives it")
	})
}

// TestFileStoreCutsBackAFailedExtension: when making the log larger fails
// part way (fallocate on a full disk), the write fails — the store takes
// no more, saying to free space — and the log is cut back to its extent,
// so that the next open serves every acknowledged write.
func TestFileStoreCutsBackAFailedExtension(t *testing.T) {
	dir := t.TempDir()
	full := func(f *os.File, size, to int64) error {
		if err := f.Truncate(size + (to-size)/3 + 1); err != nil {
			return err
		}
		return syscall.ENOSPC
	}
	s, err := participant.OpenFileStore(dir, participant.Grow(full))
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	var werr error
	for i := 0; werr == nil; i++ {
		k, v := fmt.Sprintf("k%03d", i), strings.Repeat("v", 2000)
		var b participant.Batch
		b.Put(k, []byte(v))
		if werr = s.Apply(context.Background(), &b); werr == nil {
			fmt.Fprintf(&want, "%s=%s ", k, v)
		}
		if i > 100 {
			t.Fatal("the log never grew")
		}
	}
	if !strings.Contains(werr.Error(), "no space left") || !strings.Contains(werr.Error(), "free space") {
		t.Errorf("the failed write says %q, want the cause and to free space", werr)
	}
	s.Close()
	if fi, err := os.Stat(filepath.Join(dir, "store.log")); err != nil || fi.Size() != 64<<10 {
		t.Fatalf("log not cut back to its extent: %v %v", fi.Size(), err)
	}
	s = openFile(t, dir)
	if got := dump(t, s); got != want.String() {
		t.Errorf("after the failed extension the store holds %d bytes of records, want %d", len(got), want.Len())
	}
}
