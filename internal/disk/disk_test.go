package disk

import (
	"bytes"
	"errors"
	"fmt"
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
