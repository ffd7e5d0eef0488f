package main

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestREADMEFindProgram builds the README's Go program that finds the
// transaction manager and the mailbox with nothing but a group name, as
// pasted, and runs it against a server whose lookup service answers
// multicast in a group of the test's own (other tests' servers are in
// other groups).
func TestREADMEFindProgram(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	program := ""
	for _, block := range strings.Split(string(b), "```go\n")[1:] {
		block = block[:strings.Index(block, "```")]
		if strings.HasPrefix(block, "package main") && strings.Contains(block, "client.Find(") {
			program = block
		}
	}
	if program == "" {
		t.Fatal("the README has no Go program that finds services with client.Find")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(program), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "find")
	build := exec.Command("go", "build", "-o", bin, filepath.Join(dir, "main.go"))
	build.Dir = "../.." // in the module, which the program imports
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the README's program does not build: %v\n%s", err, out)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	group := "readme-" + hex.EncodeToString(suffix[:])
	p := newNode(t).start(t, "--multicast", "--groups", group)
	defer p.stop(t)
	out, err := exec.Command(bin, "-group", group).CombinedOutput()
	if err != nil {
		t.Fatalf("the README's program failed: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "committed a transaction at djinn://") || !strings.Contains(string(out), "registered at the mailbox; its listener: djinn://") {
		t.Errorf("the README's program printed:\n%s", out)
	}
}
