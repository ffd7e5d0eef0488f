package main

import (
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// `status --wait` returns once the services serve, not merely once a
// leader is known: right after it, on a node restarted in the background
// (as scripts and benchmarks start one), a mailbox registration succeeds —
// the leader's leases are taken over and its services answer.
func TestCLIStatusWaitUntilServing(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	mustRun(t, p, "mailbox", "register", "--lease", "10m") // a lease the restart takes over
	p.stop(t)
	q, _ := n.launch(t)
	t.Cleanup(func() { q.stop(t) })
	mustRun(t, q, "status", "--wait", "30s")
	if _, errs, ok := run(t, q, "mailbox", "register", "--lease", "10m"); !ok {
		t.Fatalf("mailbox register right after status --wait on a restarted node failed: %s", errs)
	}
}

// TestCLIStatusWaitNotListeningYet: `status --wait` asks again while
// nothing listens at --server yet, and answers once a server started
// there serves; a wait that runs out says nothing listens there and how
// to start one. Before the server starts, the test holds the port and
// closes what it accepts: the proof that status asked before it listened.
func TestCLIStatusWaitNotListeningYet(t *testing.T) {
	n := newNode(t)
	if _, errs, ok := runAt(t, n.listen, "status", "--wait", "1s"); ok ||
		!strings.Contains(errs, n.listen+": nothing listens there: start a server") || !strings.Contains(errs, "gave up after waiting 1s") {
		t.Errorf("status --wait 1s with nothing listening: %q; want it gave up, naming the address and how to start a server", errs)
	}
	hold, err := net.Listen("tcp", n.listen)
	if err != nil {
		t.Fatal(err)
	}
	status := exec.Command(djinnBinary(t), "status", "--wait", "60s", "-o", "json", "--server", n.listen)
	var out, errs strings.Builder
	status.Stdout, status.Stderr = &out, &errs
	if err := status.Start(); err != nil {
		t.Fatal(err)
	}
	defer status.Process.Kill()
	c, err := hold.Accept() // status asked
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	hold.Close()
	p, _ := n.launch(t)
	t.Cleanup(func() { p.stop(t) })
	var v statusView
	if err := status.Wait(); err != nil || json.Unmarshal([]byte(out.String()), &v) != nil || v.Mailbox == "" {
		t.Fatalf("status --wait once the server listens: %v, %q, stderr %q; want its status, ready", err, out.String(), errs.String())
	}
}
