package server

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzRulesFile: any content of the data directory's rules file is read
// as a version or refused with an error naming the file, never a panic;
// a version written reads back as itself.
func FuzzRulesFile(f *testing.F) {
	for _, seed := range []string{"1\n", "2", "", "x", "-1", "4294967296", " 7 \n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, rulesFileName), content, 0o600); err != nil {
			t.Fatal(err)
		}
		v, err := readRulesFile(dir)
		if err != nil {
			return
		}
		if err := writeRulesFile(dir, v); err != nil {
			t.Fatal(err)
		}
		if again, err := readRulesFile(dir); err != nil || again != v {
			t.Fatalf("version %d written reads back as %d, %v", v, again, err)
		}
	})
}
