package main

import (
	"bufio"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// An interrupt is how `mailbox pull --follow --ack` ends: the events it
// printed are forgotten all the same (acknowledged as they are printed,
// and the rest under a context the interrupt does not cancel), and it
// exits cleanly.
func TestCLIMailboxPullFollowAckInterrupted(t *testing.T) {
	r := newRig(t)
	var reg struct {
		ID       string `json:"registration"`
		Listener string `json:"listener"`
	}
	r.json(&reg, "mailbox", "register", "--lease", "10m")
	src := "djinn://127.0.0.1:9/00000000000000000000000000000001/00000000000000000000000000000002"
	send := func(seq string) {
		r.must("events", "send", "--listener", reg.Listener, "--source", src, "--id", "7", "--seq", seq)
	}
	send("1")
	send("2")
	cmd := exec.Command(djinnBinary(t), "mailbox", "pull", reg.ID, "--follow", "--ack", "--server", r.p.addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	defer func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	lines := bufio.NewScanner(stdout)
	next := func(want string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("pull printed no line for %s; stderr: %s", want, stderr.String())
		}
		if !strings.Contains(lines.Text(), want) {
			t.Fatalf("pull printed %q, want %s", lines.Text(), want)
		}
	}
	next("seq=1")
	next("seq=2")
	send("3") // one that arrives while it follows
	next("seq=3")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
		t.Errorf("pull printed %q after the interrupt", lines.Text())
	}
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Fatalf("pull exited with %v after an interrupt; stderr: %s", err, stderr.String())
	}
	var shown struct {
		Stored int64 `json:"stored_events"`
	}
	r.json(&shown, "mailbox", "show", reg.ID)
	if shown.Stored != 0 {
		t.Fatalf("after an interrupted pull --follow --ack, %d events stay stored, want 0 (all three were printed)", shown.Stored)
	}
}
