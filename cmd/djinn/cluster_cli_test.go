package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runAt runs a client command with --server servers (one or several
// addresses) and returns its stdout, stderr and whether it succeeded.
func runAt(t *testing.T, servers string, args ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command(djinnBinary(t), append(args, "--server", servers)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

type membersJSON struct {
	Leader  string       `json:"leader"`
	Members []memberView `json:"members"`
}

func (ms membersJSON) find(node string) (memberView, bool) {
	for _, m := range ms.Members {
		if m.Node == node {
			return m, true
		}
	}
	return memberView{}, false
}

// eventually polls cond (poll) for 30s, failing the test without it.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(30*time.Second, cond) {
		t.Fatalf("waited 30s for %s", what)
	}
}

// TestCLIMembers: a server started with --bootstrap=false prints how to
// add it; djinn member add makes it a voter once caught up, member ls and
// status show both members healthy, leader transfer moves the leadership
// to it, and member leave makes it leave and stop.
func TestCLIMembers(t *testing.T) {
	a, b := newNode(t), newNode(t)
	pa := a.start(t)
	defer pa.stop(t)
	sec := filepath.Join(a.dir, "join-secret")
	pb := b.start(t, "--bootstrap=false", "--join-secret-file", sec)
	m := awaitAddCommand(t, pb)
	bID := m[1]
	if out, errs, ok := runAt(t, a.listen, "member", "add", bID, "--raft", m[2], "--grpc", m[3]); ok || !strings.Contains(errs, "operator role") {
		t.Errorf("member add without the join secret: %s%s, want refused for want of the operator role", out, errs)
	}
	out, errs, ok := runAt(t, a.listen, "member", "add", bID, "--raft", m[2], "--grpc", m[3], "--join-secret-file", m[4])
	if !ok {
		pb.kill()
		t.Fatalf("member add: %s%s", out, errs)
	}
	both := a.listen + "," + b.listen
	var ms membersJSON
	eventually(t, "the added member to vote, both healthy", func() bool {
		out, _, ok := runAt(t, both, "member", "ls", "-o", "json")
		ms = membersJSON{}
		if !ok || json.Unmarshal([]byte(out), &ms) != nil || len(ms.Members) != 2 {
			return false
		}
		for _, m := range ms.Members {
			if !m.Voter || m.Health != "healthy" {
				return false
			}
		}
		return true
	})
	var st struct {
		Members []memberView `json:"members"`
	}
	out, errs, ok = runAt(t, b.listen, "status", "-o", "json")
	if !ok || json.Unmarshal([]byte(out), &st) != nil || len(st.Members) != 2 || st.Members[0].Health == "" {
		t.Errorf("status at the new member: %s%s, want both members with their health", out, errs)
	}
	eventually(t, "leadership transferred to the new member", func() bool {
		runAt(t, both, "leader", "transfer", bID, "--join-secret-file", sec)
		out, _, ok := runAt(t, both, "member", "ls", "-o", "json", "--health=false")
		ms = membersJSON{}
		return ok && json.Unmarshal([]byte(out), &ms) == nil && ms.Leader == bID
	})
	if out, errs, ok := runAt(t, both, "member", "remove", "no-such-node", "--join-secret-file", sec); ok || !strings.Contains(errs, "no-such-node") {
		t.Errorf("remove a node that is no member: %s%s, want an error naming it", out, errs)
	}
	if out, errs, ok := runAt(t, b.listen, "member", "leave", "--join-secret-file", sec); !ok {
		t.Fatalf("member leave: %s%s", out, errs)
	}
	if err := pb.cmd.Wait(); err != nil {
		t.Errorf("the member that left exited with %v:\n%s", err, pb.output())
	}
	eventually(t, "one member left, leading", func() bool {
		out, _, ok := runAt(t, a.listen, "member", "ls", "-o", "json")
		ms = membersJSON{}
		if !ok || json.Unmarshal([]byte(out), &ms) != nil || len(ms.Members) != 1 {
			return false
		}
		_, left := ms.find(bID)
		return !left && ms.Members[0].Role == "leader"
	})
}

// TestCLIRemovedMemberRestarts: a member removed from its cluster and
// restarted on its old data directory (its log ends in its removal)
// serves at once, printing that it is not a member and the djinn member
// add command that adds it back, as one started with --bootstrap=false
// does, rather than waiting for a leader it cannot have; run at a member,
// that command makes it a voter again.
func TestCLIRemovedMemberRestarts(t *testing.T) {
	a, b := newNode(t), newNode(t)
	pa := a.start(t)
	defer pa.stop(t)
	sec := filepath.Join(a.dir, "join-secret")
	args := []string{"--bootstrap=false", "--join-secret-file", sec}
	pb := b.start(t, args...)
	m := awaitAddCommand(t, pb)
	bID := m[1]
	// memberOf reports whether the configuration the server at addr
	// holds has bID as a voter.
	memberOf := func(addr string) bool {
		var st statusView
		out, _, ok := runAt(t, addr, "status", "-o", "json")
		if !ok || json.Unmarshal([]byte(out), &st) != nil || len(st.Members) == 0 {
			return false
		}
		for _, m := range st.Members {
			if m.Node == bID {
				return m.Voter
			}
		}
		return false
	}
	add := func() {
		t.Helper()
		if out, errs, ok := runAt(t, a.listen, "member", "add", bID, "--raft", m[2], "--grpc", m[3], "--join-secret-file", m[4]); !ok {
			pb.kill()
			t.Fatalf("member add: %s%s", out, errs)
		}
		eventually(t, "the added member to vote, in its own configuration", func() bool { return memberOf(b.listen) })
	}
	add()
	if out, errs, ok := runAt(t, a.listen, "member", "remove", bID, "--join-secret-file", sec); !ok {
		pb.kill()
		t.Fatalf("member remove: %s%s", out, errs)
	}
	eventually(t, "the removed member's log to hold its removal", func() bool {
		var st statusView
		out, _, ok := runAt(t, b.listen, "status", "-o", "json")
		return ok && json.Unmarshal([]byte(out), &st) == nil && len(st.Members) == 1 && st.Members[0].Node != bID
	})
	pb.stop(t)

	pb = b.start(t, args...)
	defer pb.stop(t)
	var out string
	poll(10*time.Second, func() bool { out = pb.output(); m = addLine.FindStringSubmatch(out); return m != nil })
	if m == nil || m[1] != bID || m[2] != b.raft || !strings.Contains(out, "not a member of the cluster configuration its log holds") ||
		strings.Contains(out, "serving anyway") {
		t.Fatalf("a removed member restarted:\n%s\nwant it to serve at once, saying it is not a member and how to add it back (djinn member add %s --raft %s ...)", out, bID, b.raft)
	}
	add()
}

// TestCLIJoinerServes: a server started with --join was added by the
// member it asked before it serves: whether or not its log holds its
// cluster's configuration yet, it says nothing of waiting to be added nor
// prints a djinn member add command to run.
func TestCLIJoinerServes(t *testing.T) {
	a, b := newNode(t), newNode(t)
	pa := a.start(t)
	defer pa.stop(t)
	pb := b.start(t, "--join", a.listen, "--join-secret-file", filepath.Join(a.dir, "join-secret"))
	defer pb.stop(t)
	var out string
	served := poll(10*time.Second, func() bool { out = pb.output(); return strings.Contains(out, "\n  data ") })
	if !served || strings.Contains(out, "waiting to be added") || strings.Contains(out, "djinn member add") {
		t.Fatalf("a server that joined:\n%s\nwant it to serve as a member, with no djinn member add to run", out)
	}
}

// TestCLISnapshot: djinn snapshot save writes a file from a running
// server; djinn snapshot restore seeds a new data directory from it,
// refusing a damaged copy; the server started there holds the saved
// registration, and renews its lease by the token the saved server gave.
func TestCLISnapshot(t *testing.T) {
	a := newNode(t)
	pa := a.start(t)
	var reg struct {
		ID    string `json:"registration"`
		Lease struct {
			Token string `json:"token"`
		} `json:"lease"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, pa, "mailbox", "register", "--duration", "1h", "-o", "json")), &reg); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "djinn.snap")
	if out, errs, ok := run(t, pa, "snapshot", "save", file); ok || !strings.HasPrefix(errs, "djinn: snapshot save needs the operator role: present the cluster's join secret") {
		t.Errorf("snapshot save without the join secret: %s%s, want refused for want of the operator role, naming the command and the join secret", out, errs)
	}
	out := mustRun(t, pa, "snapshot", "save", file, "--join-secret-file", filepath.Join(a.dir, "join-secret"))
	if !strings.Contains(out, "saved "+file) {
		t.Errorf("snapshot save said %q", out)
	}
	pa.stop(t)

	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	damaged := filepath.Join(t.TempDir(), "damaged.snap")
	if err := os.WriteFile(damaged, b, 0o600); err != nil {
		t.Fatal(err)
	}
	restored := newNode(t)
	if out, errs, ok := runAt(t, "127.0.0.1:1", "snapshot", "restore", damaged, "--data-dir", restored.dir); ok || !strings.Contains(errs, "checksum mismatch") {
		t.Fatalf("restore a damaged file: %s%s, want it refused for its checksum", out, errs)
	}
	if out, errs, ok := runAt(t, "127.0.0.1:1", "snapshot", "restore", file, "--data-dir", restored.dir); !ok {
		t.Fatalf("snapshot restore: %s%s", out, errs)
	}
	pr := restored.start(t)
	defer pr.stop(t)
	mustRun(t, pr, "mailbox", "show", reg.ID)
	mustRun(t, pr, "lease", "renew", reg.Lease.Token, "--duration", "1m")
}

// TestCLIReadModes: the lookup commands read with the freshness asked for,
// and refuse two at once.
func TestCLIReadModes(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	mustRun(t, p, "lookup", "register", "--type", "Fresh", "--endpoint", "127.0.0.1:9")
	for _, mode := range [][]string{{"--max-staleness", "10s"}, {"--linearizable"}} {
		var found struct {
			Total int `json:"total"`
		}
		out := mustRun(t, p, append([]string{"lookup", "find", "--type", "Fresh", "-o", "json"}, mode...)...)
		if err := json.Unmarshal([]byte(out), &found); err != nil || found.Total != 1 {
			t.Errorf("lookup find %v: %s, want the item", mode, out)
		}
	}
	if out, errs, ok := run(t, p, "lookup", "find", "--linearizable", "--max-staleness", "1s"); ok || !strings.Contains(errs, "choose one") {
		t.Errorf("two read modes at once: %s%s, want refused", out, errs)
	}
}

// addLine is the djinn member add command a server waiting to be added
// prints: its node id, Raft address, gRPC address and join-secret file.
var addLine = regexp.MustCompile(`djinn member add (\S+) --raft (\S+) --grpc (\S+) --server MEMBER --join-secret-file (\S+)\n`)

// awaitAddCommand waits for p to print the command that adds it, and
// returns addLine's match of it.
func awaitAddCommand(t *testing.T, p *proc) []string {
	t.Helper()
	var m []string
	if !poll(10*time.Second, func() bool { m = addLine.FindStringSubmatch(p.output()); return m != nil }) {
		p.kill()
		t.Fatalf("a server waiting to be added does not say how:\n%s", p.output())
	}
	return m
}
