package secret

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSecretRoundTrip(t *testing.T) {
	s := New()
	if s == (Secret{}) || s == New() {
		t.Fatal("New does not draw random secrets")
	}
	got, err := Parse(" " + strings.ToUpper(s.String()) + "\n")
	if err != nil || got != s {
		t.Fatalf("Parse(String) = %v, %v", got, err)
	}
	if !s.Matches(s.String()) || s.Matches(New().String()) || s.Matches("") {
		t.Fatal("Matches")
	}
}

// TestParseRefusesWithoutRepeating: a bad secret is refused naming what is
// wrong, never echoing the text (which may be a real secret, mistyped).
func TestParseRefusesWithoutRepeating(t *testing.T) {
	for _, text := range []string{"", "abc", strings.Repeat("g", 32), strings.Repeat("a", 33), "0123456789abcdef0123456789abcdeX"} {
		_, err := Parse(text)
		if err == nil {
			t.Errorf("Parse(%q) accepted", text)
			continue
		}
		if text != "" && strings.Contains(err.Error(), text) {
			t.Errorf("Parse(%q) = %v: repeats the text", text, err)
		}
	}
}

func TestWriteLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s := New()
	if err := s.Write(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("stat = %v, %v; want mode 0600", fi, err)
	}
	if got, err := Load(path); err != nil || got != s {
		t.Fatalf("Load = %v, %v", got, err)
	}
	if err := New().Write(path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Write over a secret = %v, want fs.ErrExist", err)
	}
	if got, err := Load(path); err != nil || got != s {
		t.Fatalf("after a refused Write, Load = %v, %v", got, err)
	}
	if names, err := os.ReadDir(filepath.Dir(path)); err != nil || len(names) != 1 {
		t.Fatalf("Write left %v, %v; want only the secret (no temporary file)", names, err)
	}
	if err := os.WriteFile(path, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Load of a damaged file = %v, want an error naming it", err)
	}
}

// FuzzParse: whatever Parse accepts is the text form of what it returns.
func FuzzParse(f *testing.F) {
	f.Add(New().String())
	f.Add("")
	f.Add(" 00112233445566778899AABBCCDDEEFF\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text)
		if err != nil {
			return
		}
		if !strings.EqualFold(strings.TrimSpace(text), s.String()) || !s.Matches(text) {
			t.Fatalf("Parse(%q) = %s", text, s)
		}
	})
}
