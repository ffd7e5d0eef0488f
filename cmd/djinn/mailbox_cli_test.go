package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/server/servertest"
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

// TestEventsSendToAMailboxFailsOver: events send reaches a djinn
// mailbox's listener through the mailbox's cluster, and needs no server:
// with the member its reference names up, nothing is at --server; with
// that member down, another member --server names is asked for the
// cluster's members, and the event goes to the new leader. Before, the
// event went to the named member alone, and failed, since events send
// stopped dialling --server. With that member down and no member at
// --server, it fails saying to name one.
func TestEventsSendToAMailboxFailsOver(t *testing.T) {
	ss := servertest.StartCluster(t, 3, servertest.Steady)
	leader := servertest.ServingLeader(t, ss...)
	out, errs, ok := runAt(t, leader.Addr(), "mailbox", "register", "--lease", "10m", "-o", "json")
	var reg mailboxRegJSON
	if !ok || json.Unmarshal([]byte(out), &reg) != nil {
		t.Fatalf("mailbox register: %s%s", out, errs)
	}
	ref, err := djinn.ParseRef(reg.Listener)
	if err != nil {
		t.Fatal(err)
	}
	named := -1
	for i, s := range ss {
		if s.Addr() == ref.Endpoint {
			named = i
		}
	}
	if named < 0 {
		t.Fatalf("the listener %s names no member", reg.Listener)
	}
	src := "djinn://127.0.0.1:9/00000000000000000000000000000001/00000000000000000000000000000002"
	send := func(seq, server string) (string, bool) {
		_, errs, ok := runAt(t, server, "events", "send", "--listener", reg.Listener, "--source", src, "--id", "7", "--seq", seq)
		return errs, ok
	}
	nowhere := freePort(t)
	if errs, ok := send("1", nowhere); !ok {
		t.Fatalf("events send, the named member up, nothing at --server: %s", errs)
	}
	if err := ss[named].Close(); err != nil {
		t.Fatal(err)
	}
	others := servertest.Others(ss, ss[named])
	servertest.ServingLeader(t, others...)
	if errs, ok := send("2", nowhere); ok || !strings.Contains(errs, "give --server a member of its cluster that is up") {
		t.Errorf("events send, the named member down, nothing at --server: ok %v, stderr %q; want a failure saying to name a member up", ok, errs)
	}
	if errs, ok := send("3", others[0].Addr()); !ok {
		t.Fatalf("events send, the named member down, --server another member: %s", errs)
	}
	var shown struct {
		Stored int64 `json:"stored_events"`
	}
	out, errs, ok = runAt(t, others[0].Addr(), "mailbox", "show", reg.ID, "-o", "json")
	if !ok || json.Unmarshal([]byte(out), &shown) != nil || shown.Stored != 2 {
		t.Errorf("mailbox show after the sends: %s%s; want 2 events stored (seq 1 and 3)", out, errs)
	}
}
