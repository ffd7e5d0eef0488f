package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// runBenchLookup runs djinn bench lookup in process with args and returns
// its stdout and error.
func runBenchLookup(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"bench", "lookup"}, args...))
	err := root.ExecuteContext(ctxT(t))
	return out.String(), err
}

// TestBenchLookupArgs: the flag rules, checked before anything is dialled.
func TestBenchLookupArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown workload", []string{"--ops", "lookup,browse"}, `workload "browse"`},
		{"no workload", []string{"--ops", ","}, "want register, lookup, lookup-stream, lookup-shared, notify or discovery"},
		{"clients must be positive", []string{"--clients", "1,0"}, `clients "1,0"`},
		{"clients must be numbers", []string{"--clients", "many"}, `clients "many"`},
		{"duration must be positive", []string{"--duration", "0s"}, "duration 0s"},
		{"conns at least 1", []string{"--conns", "0"}, "conns 0"},
		{"streams at least 1", []string{"--streams", "0"}, "streams 0"},
		{"items at least 1", []string{"--items", "0"}, "items 0"},
		{"watchers at least 1", []string{"--watchers", "0"}, "watchers 0"},
		{"rounds at least 1", []string{"--rounds", "0"}, "rounds 0"},
		{"retry min positive", []string{"--retry-min", "0s"}, "retry 0s to"},
		{"retry max at least min", []string{"--retry-min", "5ms", "--retry-max", "1ms"}, "retry 5ms to 1ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runBenchLookup(t, append(tt.args, "--server", "127.0.0.1:1")...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("bench lookup %v: %v, want an error naming %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestBenchLookupWorkloads runs every workload briefly against a real
// server and checks what it counted: every lookup found the one item asked
// for, register cycles left nothing behind, templates on a type match
// many, every watcher had every round's event, every discovery round
// ended in a Discovered event. Timings are not checked.
func TestBenchLookupWorkloads(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	const (
		items    = 300
		watchers = 20
		rounds   = 3
	)
	levels := []int{1, 4}
	out, err := runBenchLookup(t, "--server", p.addr, "--admin", n.admin, "--clients", "1,4",
		"--duration", "200ms", "--conns", "2", "--items", "300", "--watchers", "20", "--rounds", "3", "-o", "json")
	if err != nil {
		t.Fatalf("bench lookup: %v\n%s", err, out)
	}
	var rep lookupBenchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(rep.Runs) != 4*len(levels) {
		t.Fatalf("%d runs, want register, lookup, lookup-stream and lookup-shared at %v clients", len(rep.Runs), levels)
	}
	for i, r := range rep.Runs {
		wantOp, wantCalls := []string{"register", "lookup", "lookup-stream", "lookup-shared"}[i/len(levels)], []int{2, 1, 1, 1}[i/len(levels)]
		if r.Op != wantOp || r.Clients != levels[i%len(levels)] {
			t.Errorf("run %d is %s at %d clients, want %s at %d", i, r.Op, r.Clients, wantOp, levels[i%len(levels)])
		}
		if r.Ops <= 0 || r.CallsPerOp != wantCalls {
			t.Errorf("%s at %d clients: %d ops, %d calls each; want some, of %d calls", r.Op, r.Clients, r.Ops, r.CallsPerOp, wantCalls)
		}
		if r.Mismatches != 0 || r.LeftRegistered != 0 {
			t.Errorf("%s at %d clients: %d mismatches, %d left registered; want none", r.Op, r.Clients, r.Mismatches, r.LeftRegistered)
		}
		if r.EmptyPerS <= 0 || r.ServerCPU <= 0 {
			t.Errorf("%s at %d clients: empty call %.0f/s, server CPU %.2f: want both measured", r.Op, r.Clients, r.EmptyPerS, r.ServerCPU)
		}
	}
	it := rep.Items
	if it == nil {
		t.Fatal("no items result")
	}
	if it.Items != items || it.TypeMatches != items || it.KindWant != 3 || it.KindMatches != 3 || it.RSSAfterMB <= 0 {
		t.Errorf("items: %+v: want %d items all of the shared type, 3 of kind 7, and the server's RSS", *it, items)
	}
	nt := rep.Notify
	if nt == nil {
		t.Fatal("no notify result")
	}
	if nt.Watchers != watchers || nt.Rounds != rounds || nt.Events-nt.Duplicates != watchers*rounds || nt.Missing != 0 {
		t.Errorf("notify: %+v: want %d rounds, each one event for each of %d watchers", *nt, rounds, watchers)
	}
	d := rep.Discovery
	if d == nil {
		t.Fatal("no discovery result")
	}
	if d.Rounds != rounds || d.Attempts <= float64(d.FailedFirst) {
		t.Errorf("discovery: %+v: want %d rounds, each discovered after more than %d failed attempts", *d, rounds, d.FailedFirst)
	}
}

// TestHostSteal: the bench reads the machine's stolen CPU time from the
// cpu line of /proc/stat (proc(5): user nice system idle iowait irq
// softirq steal guest guest_nice, guest counted in user already), and
// reports nothing from a line it cannot read.
func TestHostSteal(t *testing.T) {
	h0 := parseProcStat("cpu  100 0 50 800 10 0 5 35 7 0\ncpu0 1 2 3\n")
	h1 := parseProcStat("cpu  200 0 100 1500 10 0 5 185 9 0\n")
	if !h0.ok || h0.total != 1000 || h0.steal != 35 {
		t.Fatalf("parsed %+v, want total 1000, steal 35", h0)
	}
	if got := h1.stealSince(h0); got != 0.15 {
		t.Errorf("steal since: %v, want 150 of 1000 ticks, 0.15", got)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x", "cpu0 1 2 3 4 5 6 7 8"} {
		if h := parseProcStat(bad); h.ok || h.stealSince(h0) != 0 || h0.stealSince(h) != 0 {
			t.Errorf("parseProcStat(%q) = %+v, want unread and no steal", bad, h)
		}
	}
	if got := h0.stealSince(h0); got != 0 {
		t.Errorf("steal over no time: %v, want 0", got)
	}
}
