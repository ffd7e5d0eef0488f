package main

import (
	"bufio"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// TestCLIWaitsForStartingServer: a command that finds a service through
// the status of a server still starting (started with --bootstrap=false:
// no cluster service id until a member adds it) says once on stderr what
// it waits for, and succeeds once the server is added.
func TestCLIWaitsForStartingServer(t *testing.T) {
	a, b := newNode(t), newNode(t)
	pa := a.start(t)
	defer pa.stop(t)
	sec := filepath.Join(a.dir, "join-secret")
	pb := b.start(t, "--bootstrap=false", "--join-secret-file", sec)
	defer pb.stop(t)
	addLine := regexp.MustCompile(`djinn member add (\S+) --raft (\S+) --grpc (\S+) `)
	var m []string
	if !poll(10*time.Second, func() bool { m = addLine.FindStringSubmatch(pb.output()); return m != nil }) {
		t.Fatalf("a server waiting to be added does not say how:\n%s", pb.output())
	}
	cmd := exec.Command(djinnBinary(t), "txn", "create", "--lease", "1m", "-o", "template={{.token}}", "--server", b.listen)
	var out strings.Builder
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	if !lines.Scan() || !strings.Contains(lines.Text(), "waiting") || !strings.Contains(lines.Text(), b.listen) || !strings.Contains(lines.Text(), "no service id") {
		cmd.Process.Kill()
		t.Fatalf("first stderr line %q: want what it waits for, naming the server", lines.Text())
	}
	if o, errs, ok := runAt(t, a.listen, "member", "add", m[1], "--raft", m[2], "--grpc", m[3], "--join-secret-file", sec); !ok {
		cmd.Process.Kill()
		t.Fatalf("member add: %s%s", o, errs)
	}
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	if err := cmd.Wait(); err != nil || len(rest) != 0 || !regexp.MustCompile(`^\d+\.\S+$`).MatchString(strings.TrimSpace(out.String())) {
		t.Errorf("txn create once the server was added: %v, stdout %q, more stderr %q; want a token, and one notice", err, out.String(), rest)
	}
}

// TestNotReadyHint: when the wait runs out, the error names the server and
// how to see what it waits for, and stays unavailable; other errors are
// left alone.
func TestNotReadyHint(t *testing.T) {
	other := djinn.Errorf(djinn.Unavailable, "connection refused")
	if got := notReadyHint(other); got != other {
		t.Errorf("notReadyHint(%v) = %v, want it unchanged", other, got)
	}
	first := servertest.Start(t, servertest.Config(t))
	cfg := servertest.Config(t)
	cfg.Cluster.Bootstrap = false
	cfg.Security.JoinSecretFile = servertest.SecretFile(first)
	s := servertest.Open(t, cfg)
	err := notReadyHint(servertest.Dial(t, s.Addr()).Ready(t.Context()))
	if !errors.Is(err, client.ErrNotReady) || djinn.KindOf(err) != djinn.Unavailable {
		t.Fatalf("hinted error %v: want still not ready, unavailable", err)
	}
	if want := "djinn status --server " + s.Addr(); !strings.Contains(err.Error(), want) {
		t.Errorf("hinted error %q: want %q", err, want)
	}
}
