package participant_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/participant"
)

func openFile(t *testing.T, dir string) *participant.FileStore {
	t.Helper()
	s, err := participant.OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func apply(t *testing.T, s participant.Store, ops ...participant.Op) {
	t.Helper()
	var b participant.Batch
	for _, op := range ops {
		if op.Delete {
			b.Delete(op.Key)
		} else {
			b.Put(op.Key, op.Value)
		}
	}
	if err := s.Apply(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
}

func put(k, v string) participant.Op { return participant.Op{Key: k, Value: []byte(v)} }
func del(k string) participant.Op    { return participant.Op{Key: k, Delete: true} }

func dump(t *testing.T, s participant.Store) string {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Range("", func(k string, v []byte) error {
		fmt.Fprintf(&buf, "%s=%s ", k, v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestFileStoreKeepsRecordsAndCountsOpenings(t *testing.T) {
	dir := t.TempDir()
	s := openFile(t, dir)
	apply(t, s, put("a", "1"), put("b", "2"))
	apply(t, s, del("a"), put("c", ""), put("b", "3"))
	want := dump(t, s)
	if want != "b=3 c= " {
		t.Fatalf("records %q", want)
	}
	first := s.CrashCount()
	s.Close()
	wantKind(t, s.Apply(context.Background(), &participant.Batch{}), "") // an empty batch is nothing
	var b participant.Batch
	b.Put("x", nil)
	wantKind(t, s.Apply(context.Background(), &b), djinn.Unavailable)

	s2 := openFile(t, dir)
	if got := dump(t, s2); got != want {
		t.Fatalf("after reopening: %q, want %q", got, want)
	}
	if s2.CrashCount() != first+1 {
		t.Fatalf("crash count %d after %d: want one more at every opening (TX.2.3)", s2.CrashCount(), first)
	}
	other := openFile(t, t.TempDir())
	if other.CrashCount() == first {
		t.Fatal("two new stores start from the same crash count")
	}
}

// TestFileStoreCutsATornLastFrame: a write a crash interrupted — its
// frame in the log's never-written space, a sector of it (or its head)
// still zeros — was never acknowledged: the store opens without it,
// keeping every earlier write, logs the cut (file, offset, bytes), zeroes
// it, and takes writes after it.
func TestFileStoreCutsATornLastFrame(t *testing.T) {
	dir := t.TempDir()
	s := openFile(t, dir)
	apply(t, s, put("kept", "1"))
	at := participant.LogEnd(s)
	apply(t, s, put("torn", strings.Repeat("2", 1500)))
	frame := participant.LogEnd(s) - at
	path := filepath.Join(dir, "store.log")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	sector := (at/disk.SectorSize + 1) * disk.SectorSize
	for name, tear := range map[string][2]int64{
		"a sector never written": {sector, sector + disk.SectorSize},
		"its head never written": {at, sector},
		"only its head written":  {at + 8, at + frame},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			torn := bytes.Clone(data)
			clear(torn[tear[0]:tear[1]])
			if err := os.WriteFile(filepath.Join(dir, "store.log"), torn, 0o600); err != nil {
				t.Fatal(err)
			}
			var logged bytes.Buffer
			s, err := participant.OpenFileStore(dir, participant.StoreLogger(slog.New(slog.NewTextHandler(&logged, nil))))
			if err != nil {
				t.Fatal(err)
			}
			if got := dump(t, s); got != "kept=1 " {
				t.Fatalf("records %q, want only the whole frames", got)
			}
			path := filepath.Join(dir, "store.log")
			for _, want := range []string{"level=WARN", "torn last frame", "file=" + path, fmt.Sprintf("offset=%d", at), fmt.Sprintf("bytes=%d", frame)} {
				if !strings.Contains(logged.String(), want) {
					t.Errorf("log %q does not say %q", logged.String(), want)
				}
			}
			apply(t, s, put("after", "3"))
			s.Close()
			logged.Reset()
			s, err = participant.OpenFileStore(dir, participant.StoreLogger(slog.New(slog.NewTextHandler(&logged, nil))))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := dump(t, s); got != "after=3 kept=1 " {
				t.Fatalf("cut, then wrote: %q", got)
			}
			if logged.Len() > 0 {
				t.Errorf("a second opening logged %q", logged.String())
			}
		})
	}
}

func TestFileStoreRefusesWhatIsNotAStore(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "store.log"), []byte("hello, world: not a store"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := participant.OpenFileStore(dir); err == nil {
		t.Fatal("opened a file that is not a store")
	}
	if _, err := participant.OpenFileStore(""); djinn.KindOf(err) != djinn.InvalidArgument {
		t.Fatalf("empty directory: %v", err)
	}
}

func TestFileStoreCompacts(t *testing.T) {
	dir := t.TempDir()
	s := openFile(t, dir)
	big := bytes.Repeat([]byte("x"), 64<<10)
	for i := range 100 {
		apply(t, s, put("k", string(big)), put(fmt.Sprintf("n%d", i%3), fmt.Sprint(i)))
	}
	st, err := os.Stat(filepath.Join(dir, "store.log"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 2<<20 {
		t.Fatalf("log of %d bytes for %d live: not compacted", st.Size(), len(big))
	}
	want := dump(t, s)
	s.Close()
	if got := dump(t, openFile(t, dir)); got != want {
		t.Fatal("records changed across compaction and reopening")
	}
}

func TestFileStoreConcurrentAppliesAllLand(t *testing.T) {
	dir := t.TempDir()
	s := openFile(t, dir)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				apply(t, s, put(fmt.Sprintf("g%02d/%02d", g, i), "v"))
			}
		})
	}
	wg.Wait()
	if batches, writes := s.Writes(); batches != 16*20 || writes < 1 || writes > batches {
		t.Errorf("Writes: %d batches in %d writes, want %d batches in 1 to %[3]d writes", batches, writes, 16*20)
	}
	s.Close()
	n := 0
	if err := openFile(t, dir).Range("g", func(string, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 16*20 {
		t.Fatalf("%d records after reopening, want %d", n, 16*20)
	}
}

func TestMemStore(t *testing.T) {
	a, b := participant.NewMemStore(), participant.NewMemStore()
	if a.CrashCount() == b.CrashCount() {
		t.Fatal("two memory stores share a crash count")
	}
	apply(t, a, put("k", "v"))
	r := a.Reopen()
	if r.CrashCount() == a.CrashCount() || dump(t, r) != "k=v " {
		t.Fatalf("reopened: count %d (was %d), records %q", r.CrashCount(), a.CrashCount(), dump(t, r))
	}
	var keysSeen []string
	apply(t, a, put("a/1", "x"), put("b/1", "y"))
	if err := a.Range("a/", func(k string, _ []byte) error { keysSeen = append(keysSeen, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keysSeen, []string{"a/1"}) {
		t.Fatalf("range a/: %v", keysSeen)
	}
}

// FuzzFileStoreOpen: whatever the log holds, opening never panics, and a
// store that opens takes writes and gives them back.
func FuzzFileStoreOpen(f *testing.F) {
	dir := f.TempDir()
	s, err := participant.OpenFileStore(dir)
	if err != nil {
		f.Fatal(err)
	}
	var b participant.Batch
	b.Put("participant/prepared/x", []byte("rec"))
	b.Delete("kv/gone")
	if err := s.Apply(context.Background(), &b); err != nil {
		f.Fatal(err)
	}
	s.Close()
	seed, err := os.ReadFile(filepath.Join(dir, "store.log"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "store.log"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := participant.OpenFileStore(dir)
		if err != nil {
			return
		}
		defer s.Close()
		var b participant.Batch
		b.Put("fuzz", []byte("v"))
		if err := s.Apply(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		found := false
		if err := s.Range("fuzz", func(k string, v []byte) error { found = string(v) == "v"; return nil }); err != nil || !found {
			t.Fatalf("write lost: %v", err)
		}
	})
}

// TestFileStoreIsOpenOnceAtATime: a second store in a directory that an
// open store holds — in this process or another — would write over the
// first's log, and its open would remove the first's compaction in
// progress: it is refused, and so is a repair, until the first closes.
func TestFileStoreIsOpenOnceAtATime(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock: one store per directory is the caller's to ensure")
	}
	dir := t.TempDir()
	first, err := participant.OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := participant.OpenFileStore(dir)
	if err == nil {
		second.Close()
		first.Close()
		t.Fatal("a second store opened in a directory an open store holds")
	}
	if !errors.Is(err, djinn.ErrUnavailable) || !strings.Contains(err.Error(), dir) {
		t.Errorf("second open: %v, want unavailable naming the directory", err)
	}
	if _, err := participant.RepairFileStore(dir); !errors.Is(err, djinn.ErrUnavailable) {
		t.Errorf("repairing an open store: %v, want unavailable", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := participant.OpenFileStore(dir)
	if err != nil {
		t.Fatalf("open after the first closed: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFileStoreWriteFailure: after a write or fsync fails, what reached
// the disk is unknown, so the store takes no more writes: the failed write
// and every later one fail Unavailable, saying why and what to do (fix the
// disk, open the store again); reopened, it serves what was acknowledged.
func TestFileStoreWriteFailure(t *testing.T) {
	dir := t.TempDir()
	s, err := participant.OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	apply(t, s, put("a", "1"))
	participant.BreakFile(s)
	for i, k := range []string{"b", "c"} {
		var b participant.Batch
		b.Put(k, []byte("2"))
		err := s.Apply(context.Background(), &b)
		if !errors.Is(err, djinn.ErrUnavailable) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "open it again") {
			t.Errorf("write %d after the file failed: %v, want Unavailable naming %s and saying to open it again", i, err, dir)
		}
	}
	s.Close()
	s = openFile(t, dir)
	if got := dump(t, s); got != "a=1 " {
		t.Errorf("reopened: %q, want what was acknowledged, a=1", got)
	}
}
