package disk

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestTorn(t *testing.T) {
	full := bytes.Repeat([]byte{7}, 2000)
	holed := bytes.Clone(full)
	clear(holed[512-100 : 1024-100]) // the record starts at 100: this is the sector [512, 1024)
	headless := bytes.Clone(full)
	clear(headless[:12])
	straddling := bytes.Clone(full)
	clear(straddling[2:12]) // the record's part of the sector [0, 512) when it starts at 500
	for _, tc := range []struct {
		name string
		rec  []byte
		off  int64
		want bool
	}{
		{"every sector written", full, 100, false},
		{"a whole sector of zeros", holed, 100, true},
		{"zeros not filling the record's part of a sector", holed, 0, false},
		{"the record's part of its first sector is zeros", headless, 500, true},
		{"zeros across a sector boundary, neither part whole", straddling, 506, false},
		{"empty", nil, 0, false},
	} {
		if got := Torn(tc.rec, tc.off); got != tc.want {
			t.Errorf("%s: Torn = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDamageError(t *testing.T) {
	err := fmt.Errorf("open: %w", &DamageError{Path: "/d/store.log", Offset: 42, Problem: "a frame fails its checksum"})
	if !errors.Is(err, ErrDamaged) {
		t.Fatal("a DamageError does not match ErrDamaged")
	}
	err = WithRecovery(err, "restore from a backup")
	if other := errors.New("disk full"); WithRecovery(other, "restore") != other {
		t.Error("advice added to an error that is not damage")
	}
	want := "open: /d/store.log at offset 42: a frame fails its checksum; to recover: restore from a backup"
	if err.Error() != want {
		t.Errorf("%q\nwant %q", err, want)
	}
	whole := &DamageError{Path: "/d/meta.json", Offset: -1, Problem: "unreadable"}
	if whole.Error() != "/d/meta.json: unreadable" {
		t.Errorf("%q", whole)
	}
}

// TestWriteFile: a file written replaces the one there whole, leaves no
// temporary file behind, and is removed again; removing a file not there
// is no error.
func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "record")
	for _, data := range []string{"first", "second, longer"} {
		if err := WriteFile(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != data {
			t.Fatalf("read %q, %v; want %q", got, err, data)
		}
	}
	if _, err := os.Stat(path + ".tmp"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary file is left: %v", err)
	}
	if err := Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removed, but: %v", err)
	}
	if err := Remove(path); err != nil {
		t.Errorf("removing a file not there: %v", err)
	}
	if err := WriteFile(filepath.Join(path, "under-a-file"), nil); err == nil {
		t.Error("a write where no directory is succeeded")
	}
}
