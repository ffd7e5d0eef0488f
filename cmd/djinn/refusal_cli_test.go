package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/backup"
	"github.com/djinn-go/djinn/proto/statepb"
)

// TestCLIRefusesWrongFiles: snapshot restore, snapshot save and repair
// refuse a wrong or damaged file in one line that names the file (and the
// byte, where there is one) once, says the cause in plain words and what
// to do next.
func TestCLIRefusesWrongFiles(t *testing.T) {
	dir := t.TempDir()
	at := func(name string) string { return filepath.Join(dir, name) }
	write := func(name string, b []byte) string {
		if err := os.WriteFile(at(name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return at(name)
	}
	good := snapshotFile(t)
	n := len(good) - sha256.Size
	wrongSum := bytes.Clone(good)
	wrongSum[len(wrongSum)-1] ^= 1
	contents := sha256.Sum256(good[:n])
	future := bytes.Clone(good)
	future[11] = 9
	if err := os.Mkdir(at("adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	write("plain", []byte("x"))
	const (
		nextCopy = "use an intact copy of the file, or save a new snapshot with djinn snapshot save"
		nextFile = "name a file written by djinn snapshot save"
		nextDir  = "name the data directory of a stopped djinn server (the --data-dir it was started with)"
	)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"restore: not a snapshot file", restore(write("text", []byte("hello\n")), at("d")),
			at("text") + ` is not a djinn snapshot file: it starts with "hello\n", not "DJINNSNP"; ` + nextFile},
		{"restore: truncated in its opening", restore(write("short", []byte("DJINNSNP\x00\x00\x00\x01")), at("d")),
			at("short") + " is truncated at byte 12: it ends there, inside its opening (the copy is incomplete); " + nextCopy},
		{"restore: truncated in its body", restore(write("cut", good[:n-10]), at("d")),
			fmt.Sprintf("%s is truncated at byte %d: it ends there, inside its body (the copy is incomplete); %s", at("cut"), n-10, nextCopy)},
		{"restore: checksum mismatch", restore(write("sum", wrongSum), at("d")),
			fmt.Sprintf("%s is damaged: checksum mismatch: its contents give SHA-256 %x…, its checksum says %x…; %s", at("sum"), contents[:8], wrongSum[n:n+8], nextCopy)},
		{"restore: bytes after the end", restore(write("joined", append(bytes.Clone(good), good...)), at("d")),
			fmt.Sprintf("%s is damaged at byte %d: bytes follow its checksum, which ends the file (two files joined?); %s", at("joined"), len(good), nextCopy)},
		{"restore: another version", restore(write("future", future), at("d")),
			at("future") + " is of format version 9: this djinn reads version 1; restore it with the djinn release that saved it"},
		{"restore: a directory", restore(at("adir"), at("d")),
			at("adir") + " is a directory, not a snapshot file; " + nextFile},
		{"restore: no such file", restore(at("none"), at("d")),
			at("none") + ": no such file; " + nextFile},
		{"save: a directory", []string{"snapshot", "save", at("adir")},
			at("adir") + " is a directory; name a file to write the snapshot to"},
		{"save: no such directory", []string{"snapshot", "save", filepath.Join(at("none"), "s.snap")},
			filepath.Join(at("none"), "s.snap") + " cannot be written: no directory " + at("none") + "; create it, or name a file in a directory that exists"},
		{"repair: no such directory", []string{"repair", "--data-dir", at("none")},
			"data directory " + at("none") + ": no such directory; " + nextDir},
		{"repair: a file", []string{"repair", "--data-dir", at("plain")},
			"data directory " + at("plain") + " is a file, not a directory; " + nextDir},
		{"repair: no node", []string{"repair", "--data-dir", at("adir")},
			"data directory " + at("adir") + " holds no djinn node (it has no raft directory); " + nextDir},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errs, ok := runOffline(t, c.args...)
			if ok {
				t.Fatalf("djinn %v succeeded: %s", c.args, out)
			}
			if want := "djinn: " + c.want + "\n"; errs != want {
				t.Errorf("djinn %v said\n%q\nwant\n%q", c.args, errs, want)
			}
		})
	}
}

// runOffline runs a command that needs no server.
func runOffline(t *testing.T, args ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command(djinnBinary(t), args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

func restore(file, dataDir string) []string {
	return []string{"snapshot", "restore", file, "--data-dir", dataDir}
}

// snapshotFile is an intact snapshot file with an empty body.
func snapshotFile(t *testing.T) []byte {
	t.Helper()
	id := djinn.NewID()
	var b bytes.Buffer
	w, err := backup.NewWriter(&b, &statepb.BackupHeader{ServiceId: id[:], NodeId: "n1", Index: 1, Term: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte("body"), 1000)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
