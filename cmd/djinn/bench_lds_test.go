package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// runBenchLDS runs djinn bench lds in process with args and returns its
// stdout and error.
func runBenchLDS(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"bench", "lds"}, args...))
	err := root.ExecuteContext(ctxT(t))
	return out.String(), err
}

// TestBenchLDSArgs: the flag rules, checked before anything is dialled.
func TestBenchLDSArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"registrations at least 1", []string{"--registrations", "0"}, "registrations 0"},
		{"registrars at least 1", []string{"--registrars", "0"}, "registrars 0"},
		{"registrars at most 256", []string{"--registrars", "257"}, "registrars 257"},
		{"clients at least 1", []string{"--clients", "0"}, "clients 0"},
		{"conns at least 1", []string{"--conns", "0"}, "conns 0"},
		{"timeout positive", []string{"--timeout", "0s"}, "timeout 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runBenchLDS(t, append(tt.args, "--server", "127.0.0.1:1")...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("bench lds %v: %v, want an error naming %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestBenchLDS runs the bench small against a real server and checks what
// it counted: every registration discovered every registrar, with no
// violation, and the memory was read. Timings are not checked.
func TestBenchLDS(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	out, err := runBenchLDS(t, "--server", p.addr, "--admin", n.admin, "--registrations", "200", "--registrars", "5",
		"--clients", "8", "--conns", "2", "-o", "json")
	if err != nil {
		t.Fatalf("bench lds: %v\n%s", err, out)
	}
	var rep ldsBenchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if rep.Registrations != 200 || rep.Registrars != 5 || rep.Incomplete != 0 || rep.Violations != 0 {
		t.Errorf("report %+v, want 200 registrations over 5 registrars, none incomplete, no violation", rep)
	}
	// Every registration heard of 5 registrars: at least one event each,
	// and 5 registrars counted per registration over its events.
	if rep.Events < 200 || rep.PerEvent*float64(rep.Events) < 1000-0.5 || rep.PerEvent*float64(rep.Events) > 1000+0.5 {
		t.Errorf("%d events of %.2f registrars each, want 1000 registrars told over at least 200 events", rep.Events, rep.PerEvent)
	}
	if rep.HeapAfterMB <= 0 || rep.RSSAfterMB <= 0 {
		t.Errorf("memory not read: %+v", rep)
	}
}
