package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djinn-go/djinn/internal/state"
)

// TestServeRefusesNewerRules: djinn serve on a data directory whose log
// reached a rules version above the highest this binary supports (a newer
// binary ran on it and raised the version) exits with status 1 naming
// both versions and saying to run the newer binary — no repair advice:
// nothing is damaged (README, Upgrading). Its status shows the version.
func TestServeRefusesNewerRules(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	out, errs, ok := runAt(t, p.addr, "status")
	want := fmt.Sprintf("rules     version %d (this member's binary supports up to %d)", state.MaxRules(), state.MaxRules())
	if !ok || !strings.Contains(out, want) {
		t.Fatalf("status does not show %q:\n%s%s", want, out, errs)
	}
	p.stop(t)

	file := filepath.Join(n.dir, "rules-version")
	newer := state.MaxRules() + 1
	if err := os.WriteFile(file, fmt.Appendf(nil, "%d\n", newer), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runBinary(t, "serve", "--data-dir", n.dir, "--listen", n.listen, "--admin", n.admin, "--raft", n.raft, "--discovery", n.discovery)
	for _, want := range []string{
		"data directory " + n.dir,
		fmt.Sprintf("the cluster's rules version is %d but this binary supports rules up to version %d", newer, state.MaxRules()),
		fmt.Sprintf("run a djinn binary that supports rules version %d", newer),
	} {
		if code != 1 || !strings.Contains(out, want) {
			t.Fatalf("exit %d, want 1 with %q in:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "repair") {
		t.Errorf("the refusal advises a repair:\n%s", out)
	}
}
