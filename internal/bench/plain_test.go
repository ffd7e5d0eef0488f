package bench

import (
	"strings"
	"testing"
	"time"
)

// TestPlainProcess: the plain server's process says where it listens on
// its first line, and is stopped by the function returned; a program that
// says anything else is refused, naming what it said.
func TestPlainProcess(t *testing.T) {
	addr, stop, err := PlainProcess("/bin/sh", "-c", "echo '"+PlainReady+"127.0.0.1:4242'; exec sleep 600")(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if addr != "127.0.0.1:4242" {
		t.Errorf("address %q, want 127.0.0.1:4242", addr)
	}
	stop() // returns once the process ended
	_, _, err = PlainProcess("/bin/sh", "-c", "echo listening somewhere")(t.Context())
	if err == nil || !strings.Contains(err.Error(), "listening somewhere") {
		t.Errorf("a program that does not say where it listens: %v", err)
	}
}

// TestPlainEmptyInProcess: without a program, the ceiling is measured on a
// plain server in the bench's own process, and says so.
func TestPlainEmptyInProcess(t *testing.T) {
	b, err := Env{}.plainEmpty(t.Context(), 2, 1, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.Server, "the bench's process") {
		t.Errorf("baseline %+v", b)
	}
}
