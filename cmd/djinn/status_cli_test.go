package main

import "testing"

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
