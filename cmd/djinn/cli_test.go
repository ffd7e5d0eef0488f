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

// rig is a real server and the client commands run against it.
type rig struct {
	t *testing.T
	p *proc
}

// newRig starts a server with extra flags; the test's end stops it.
func newRig(t *testing.T, extra ...string) *rig {
	t.Helper()
	p := newNode(t).start(t, extra...)
	t.Cleanup(func() { p.stop(t) })
	return &rig{t: t, p: p}
}

// run runs a client command and returns its stdout, stderr and whether it
// succeeded.
func (r *rig) run(args ...string) (string, string, bool) {
	r.t.Helper()
	return run(r.t, r.p, args...)
}

// must runs a client command that must succeed and returns its stdout.
func (r *rig) must(args ...string) string {
	r.t.Helper()
	return mustRun(r.t, r.p, args...)
}

// json runs a client command with -o json into v.
func (r *rig) json(v any, args ...string) {
	r.t.Helper()
	out := r.must(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		r.t.Fatalf("djinn %v: %v\n%s", args, err, out)
	}
}

// errors runs each row's command and checks it fails with one line on
// stderr naming the row's want.
func (r *rig) errors(rows []errRow) {
	r.t.Helper()
	wantErrors(r.t, r.p, rows)
}

// wantErrors runs each row's command against p and checks it fails with
// one line on stderr naming the row's want.
func wantErrors(t *testing.T, p *proc, rows []errRow) {
	t.Helper()
	for _, tc := range rows {
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

type errRow struct {
	args []string
	want string
}

// leaseJSON is a lease as the commands print it.
type leaseJSON struct {
	Name       string  `json:"name"`
	Landlord   string  `json:"landlord"`
	Expiration *string `json:"expiration"`
	Remaining  struct {
		Seconds *float64 `json:"seconds"`
		Human   string   `json:"human"`
	} `json:"remaining"`
	Token string `json:"token"`
}

// TestCLIWalkThrough runs the mailbox walk-through against a real server:
// the commands and their JSON output are the contract.
func TestCLIWalkThrough(t *testing.T) {
	r := newRig(t)
	var st struct {
		State    string           `json:"state"`
		Services []string         `json:"services"`
		Counts   map[string]int64 `json:"counts"`
		Applied  uint64           `json:"applied_index,string"`
	}
	r.json(&st, "status")
	if st.State != "Leader" || !strings.Contains(strings.Join(st.Services, ","), "mailbox") || st.Applied == 0 {
		t.Fatalf("status: %+v", st)
	}
	var reg struct {
		ID       string    `json:"registration"`
		Listener string    `json:"listener"`
		Lease    leaseJSON `json:"lease"`
		Stored   int64     `json:"stored_events"`
		Target   *string   `json:"target"`
	}
	r.json(&reg, "mailbox", "register", "--lease", "10m")
	if len(reg.Lease.Name) != 32 || reg.Lease.Remaining.Seconds == nil || *reg.Lease.Remaining.Seconds <= 0 || reg.Target != nil {
		t.Fatalf("register printed %+v", reg)
	}
	src := "djinn://127.0.0.1:9/00000000000000000000000000000001/00000000000000000000000000000002"
	r.must("events", "send", "--listener", reg.Listener, "--source", src, "--id", "7", "--seq", "1", "--handback", "hello")
	r.must("events", "send", "--listener", reg.Listener, "--source", src, "--id", "7", "--seq", "2")
	pulled := r.must("mailbox", "pull", reg.ID)
	if lines := strings.Split(strings.TrimSpace(pulled), "\n"); len(lines) != 2 || !strings.Contains(lines[0], `handback="hello"`) || !strings.Contains(lines[1], "seq=2") {
		t.Fatalf("pull printed:\n%s", pulled)
	}
	var renewed leaseJSON
	r.json(&renewed, "lease", "renew", reg.Lease.Token, "--lease", "1h")
	if renewed.Name != reg.Lease.Name || *renewed.Remaining.Seconds <= 600 {
		t.Fatalf("renew printed %+v", renewed)
	}
	r.must("lease", "renew", reg.Lease.Name, "--lease", "1h") // by its short name
	// show asks the landlord: the first token, which says 10m, shows the
	// hour the renewal gave.
	var shown leaseJSON
	r.json(&shown, "lease", "show", reg.Lease.Token)
	if shown.Name != reg.Lease.Name || shown.Remaining.Seconds == nil || *shown.Remaining.Seconds <= 600 {
		t.Fatalf("show of the token before the renewal printed %+v, want the renewed hour", shown)
	}
	r.must("lease", "cancel", reg.Lease.Name)
	walkThroughErrors(r, reg.ID, reg.Lease.Token)
}

// walkThroughErrors: one line, non-zero exit, naming what is wrong.
func walkThroughErrors(r *rig, id, token string) {
	r.errors([]errRow{
		{[]string{"mailbox", "show", id}, "no such registration"},
		{[]string{"lease", "cancel", token}, "unknown"},
		{[]string{"lease", "renew", token, "--lease", "-5s"}, "-5s"},
		{[]string{"mailbox", "register", "--lease", "0s"}, "0s"},
		{[]string{"lease", "show", "djinn-lease:garbage"}, "token"},
		{[]string{"lease", "renew", "garbage"}, `LEASE "garbage": neither a lease's short name`},
		{[]string{"mailbox", "enable", id, "--listener", "not-a-reference"}, "not-a-reference"},
	})
}
