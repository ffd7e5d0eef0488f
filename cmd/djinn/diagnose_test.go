package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDiagnosedPorts: a client that dials one of a server's other ports,
// or a port where nothing listens, is told which port it reached and which
// to dial, on one line, exiting 1.
func TestDiagnosedPorts(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	web := httptest.NewServer(http.NotFoundHandler()) // another program's web server: not djinn's admin port
	defer web.Close()
	for _, tc := range []struct {
		name, addr, want string
	}{
		{"the admin port", n.admin, "this is djinn's admin port"},
		{"the raft port", n.raft, "this port does not speak gRPC (djinn serve's --raft port"},
		{"the discovery port", n.discovery, "unicast discovery port (djinn serve's --discovery): its gRPC port is " + n.listen + ", dial that (--server " + n.listen + ")"},
		{"nothing", freePort(t), "nothing listens there: start a server (djinn serve)"},
		{"a web server", web.Listener.Addr().String(), "this port speaks HTTP, not gRPC (a web server, not a djinn server)"},
	} {
		code, _, errs := exitOf(t, "status", "--server", tc.addr)
		if code != 1 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%s: status --server %s exited %d with %q, want 1 and one line saying %q", tc.name, tc.addr, code, errs, tc.want)
		}
	}
}

// TestDiagnosisNamesTheAddressThatFailed: a command that failed to reach
// another address than its server (discover's --locator, with
// DJINN_SERVER naming a port where nothing listens) is not told that
// nothing listens at the server, which it never dialled.
func TestDiagnosisNamesTheAddressThatFailed(t *testing.T) {
	server, locator := freePort(t), freePort(t)
	cmd := exec.Command(djinnBinary(t), "discover", "--locator", "jini://"+locator, "--wait", "500ms")
	cmd.Env = append(os.Environ(), "DJINN_SERVER="+server)
	var errb strings.Builder
	cmd.Stderr = &errb
	err := cmd.Run()
	if errs := errb.String(); err == nil || strings.Contains(errs, server) || !strings.Contains(errs, locator) {
		t.Errorf("discover --locator jini://%s with nothing at DJINN_SERVER %s: %v, %q, want a failure naming the locator alone", locator, server, err, errs)
	}
}
