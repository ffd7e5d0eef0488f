package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// run runs a client command against p and returns its stdout, stderr and
// whether it succeeded.
func run(t *testing.T, p *proc, args ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command(djinnBinary(t), append(args, "--server", p.addr)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

func mustRun(t *testing.T, p *proc, args ...string) string {
	t.Helper()
	out, errs, ok := run(t, p, args...)
	if !ok {
		t.Fatalf("djinn %v failed: %s", args, errs)
	}
	return out
}

// TestCLIWalkThrough runs the README's walk-through against a real server:
// the commands and their JSON output are the contract.
func TestCLIWalkThrough(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)

	var st struct {
		State    string           `json:"state"`
		Services []string         `json:"services"`
		Counts   map[string]int64 `json:"counts"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, p, "status", "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.State != "Leader" || !strings.Contains(strings.Join(st.Services, ","), "mailbox") {
		t.Fatalf("status: %+v", st)
	}

	var reg struct {
		ID       string `json:"registration"`
		Listener string `json:"listener"`
		Lease    struct {
			Token string `json:"token"`
		} `json:"lease"`
		Stored int64 `json:"stored_events"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, p, "mailbox", "register", "--duration", "10m", "-o", "json")), &reg); err != nil {
		t.Fatal(err)
	}
	src := "djinn://127.0.0.1:9/00000000000000000000000000000001/00000000000000000000000000000002"
	mustRun(t, p, "events", "send", "--to", reg.Listener, "--source", src, "--id", "7", "--seq", "1", "--handback", "hello")
	mustRun(t, p, "events", "send", "--to", reg.Listener, "--source", src, "--id", "7", "--seq", "2")
	pulled := mustRun(t, p, "mailbox", "pull", reg.ID)
	if lines := strings.Split(strings.TrimSpace(pulled), "\n"); len(lines) != 2 || !strings.Contains(lines[0], `handback="hello"`) || !strings.Contains(lines[1], "seq=2") {
		t.Fatalf("pull printed:\n%s", pulled)
	}
	renewed := mustRun(t, p, "lease", "renew", reg.Lease.Token, "--duration", "1h", "-o", "json")
	if !strings.Contains(renewed, `"token"`) {
		t.Fatalf("renew printed %s", renewed)
	}
	mustRun(t, p, "lease", "show", reg.Lease.Token)
	mustRun(t, p, "lease", "cancel", reg.Lease.Token)

	// Errors: one line, non-zero exit, naming what is wrong.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mailbox", "show", reg.ID}, "no such registration"},
		{[]string{"lease", "cancel", reg.Lease.Token}, "unknown"},
		{[]string{"lease", "renew", reg.Lease.Token, "--duration", "-5s"}, "-5s"},
		{[]string{"mailbox", "register", "--duration", "0s"}, "0s"},
		{[]string{"lease", "show", "djinn-lease:garbage"}, "token"},
		{[]string{"mailbox", "enable", reg.ID, "--target", "not-a-reference"}, "not-a-reference"},
	} {
		_, errs, ok := run(t, p, tc.args...)
		if ok {
			t.Errorf("djinn %v succeeded", tc.args)
			continue
		}
		if lines := strings.Split(strings.TrimSpace(errs), "\n"); len(lines) != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("djinn %v: stderr %q, want one line naming %q", tc.args, errs, tc.want)
		}
	}
}
