package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// runBenchLock runs djinn bench lock in process with args and returns its
// stdout and error.
func runBenchLock(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"bench", "lock"}, args...))
	err := root.ExecuteContext(ctxT(t))
	return out.String(), err
}

// TestBenchLockArgs: the flag rules, checked before anything is dialled.
func TestBenchLockArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown workload", []string{"--ops", "uncontended,spin"}, `workload "spin"`},
		{"no workload", []string{"--ops", ","}, "want uncontended, contended or sets"},
		{"clients must be positive", []string{"--clients", "1,0"}, `clients "1,0"`},
		{"clients must be numbers", []string{"--clients", "many"}, `clients "many"`},
		{"duration must be positive", []string{"--duration", "0s"}, "duration 0s"},
		{"conns at least 1", []string{"--conns", "0"}, "conns 0"},
		{"sets at least 1", []string{"--sets", "0"}, "sets 0"},
		{"sets needs the admin endpoint", []string{"--ops", "sets", "--admin", ""}, "--admin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runBenchLock(t, append(tt.args, "--server", "127.0.0.1:1")...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("bench lock %v: %v, want an error naming %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestBenchLockWorkloads runs every workload briefly against a real server
// and checks that what it counted agrees with itself and with the server:
// every grant issued one fence, nothing is left held, no fence was
// violated. Timings are not checked.
func TestBenchLockWorkloads(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	const sets = 300
	levels := []int{1, 4}
	out, err := runBenchLock(t, "--server", p.addr, "--admin", n.admin, "--clients", "1,4",
		"--duration", "200ms", "--conns", "2", "--sets", "300", "-o", "json")
	if err != nil {
		t.Fatalf("bench lock: %v\n%s", err, out)
	}
	var rep lockBenchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(rep.Runs) != 2*len(levels) {
		t.Fatalf("%d runs, want uncontended and contended at %v clients", len(rep.Runs), levels)
	}
	for i, r := range rep.Runs {
		wantOp := []string{"uncontended", "contended"}[i/len(levels)]
		if r.Op != wantOp || r.Clients != levels[i%len(levels)] {
			t.Errorf("run %d is %s at %d clients, want %s at %d", i, r.Op, r.Clients, wantOp, levels[i%len(levels)])
		}
		if r.Ops <= 0 || r.CallsPerOp != 2 {
			t.Errorf("%s at %d clients: %d ops, %d calls each; want some, of 2 calls", r.Op, r.Clients, r.Ops, r.CallsPerOp)
		}
		if r.FencesIssued != uint64(r.Ops) || r.FenceViolations != 0 || r.LeftHeld != 0 {
			t.Errorf("%s at %d clients: %d fences issued for %d grants, %d violations, %d left held",
				r.Op, r.Clients, r.FencesIssued, r.Ops, r.FenceViolations, r.LeftHeld)
		}
		if r.EmptyPerS <= 0 || r.ServerCPU <= 0 {
			t.Errorf("%s at %d clients: empty call %.0f/s, server CPU %.2f: want both measured", r.Op, r.Clients, r.EmptyPerS, r.ServerCPU)
		}
	}
	s := rep.Sets
	if s == nil {
		t.Fatal("no sets result")
	}
	if s.Sets != sets || s.Owners != levels[len(levels)-1] || s.FirstGrants != sets || s.RSSAfterMB <= 0 {
		t.Errorf("sets: %+v: want %d sets, each its first grant, by %d owners, and the server's RSS", *s, sets, levels[len(levels)-1])
	}
}
