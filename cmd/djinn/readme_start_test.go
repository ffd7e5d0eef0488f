package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestREADMEAtStart: the README's first examples run as pasted right
// after djinn serve starts, in its first second — as soon as its gRPC
// port accepts connections, before it has elected itself and served: a
// command meeting a server still starting waits for it, it does not fail.
func TestREADMEAtStart(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(b))
	var first readmeBlock
	for _, bl := range blocks[1:] {
		if !bl.noRun {
			first = bl
			break
		}
	}
	dir := t.TempDir()
	ports := map[string]string{}
	script := readmeScript(t, []readmeBlock{blocks[0], first}, ports)
	n := node{dir: filepath.Join(dir, "djinn-data"), listen: "127.0.0.1:" + ports["4161"], admin: "127.0.0.1:" + ports["4162"],
		raft: "127.0.0.1:" + ports["4163"], discovery: "127.0.0.1:" + ports["4160"]}
	p, _ := n.launch(t)
	defer p.stop(t)
	if !poll(60*time.Second, func() bool {
		c, err := net.Dial("tcp", n.listen)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("the server never listened:\n%s", p.output())
	}
	path := filepath.Join(dir, "readme.sh")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runREADME(t, dir, path, n.listen)
	if err != nil {
		t.Fatalf("the README's first examples failed right after start (%v); bash -x says, last lines:\n%s\n\nthe server said:\n%s", err, lastLines(out, 40), lastLines(p.output(), 20))
	}
	var waited []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "djinn: waiting") {
			waited = append(waited, l)
		}
	}
	t.Logf("ran right after start; the commands that waited for the server said:\n%s", strings.Join(waited, "\n"))
}
