package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestStopsWhenTheLogCannotBeWritten: a server whose log can no longer be
// written — here its log directory is removed, so the next segment cannot
// be created — refuses the write that failed and exits with status 1 and a
// message saying why, instead of going on leading (README, Operations).
func TestStopsWhenTheLogCannotBeWritten(t *testing.T) {
	n := newNode(t)
	cfg := filepath.Join(t.TempDir(), "djinn.toml")
	if err := os.WriteFile(cfg, []byte("[raft-tuning]\nwal-segment-size = 65536\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := n.start(t, "--config", cfg)
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	mb := djinnpb.NewEventMailboxClient(dial(t, p.addr))
	ctx := ctxT(t)
	if _, err := mb.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(n.dir, "raft", "wal")); err != nil {
		t.Fatal(err)
	}

	// Each registration is a log entry: enough of them fill the 64 KiB
	// segment, and the log must start a new one.
	refused := false
	for i := 0; i < 100000 && !refused; i++ {
		_, err := mb.Register(ctx, &djinnpb.MailboxRegisterRequest{LeaseDurationNanos: int64(time.Hour)})
		refused = err != nil
	}
	if !refused {
		t.Fatalf("100000 registrations acknowledged with the log's directory gone:\n%s", p.output())
	}
	var err error
	select {
	case err = <-exited:
	case <-ctx.Done():
		p.kill()
		t.Fatalf("the server went on after a failed log write:\n%s", p.output())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit: %v, want status 1", err)
	}
	if out := p.output(); !strings.Contains(out, "the log cannot be written; stopping") {
		t.Errorf("the server's output does not say why it stopped:\n%s", out)
	}
}
