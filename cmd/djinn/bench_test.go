package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djinn-go/djinn/internal/bench"
)

// The bench commands through the CLI: the flag rules, checked before
// anything is dialled, and each bench run small against a real server,
// checking what it counted, not its timings.

// runBench runs djinn bench with args in process and returns its stdout
// and error.
func runBench(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root, _ := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(append([]string{"bench"}, args...))
	err := root.ExecuteContext(ctxT(t))
	return out.String(), err
}

// benchReport runs a bench with -o json and returns its report.
func benchReport(t *testing.T, args ...string) bench.Report {
	t.Helper()
	out, err := runBench(t, append(args, "-o", "json")...)
	if err != nil {
		t.Fatalf("bench %v: %v\n%s", args, err, out)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	return rep
}

// figure returns a result's figure, failing the test when it is missing.
func figure(t *testing.T, r bench.Result, name string) float64 {
	t.Helper()
	v, ok := r.Figure(name)
	if !ok {
		t.Fatalf("%s at %d clients: no figure %q in %+v", r.Workload, r.Clients, name, r.Figures)
	}
	return v
}

// passed reports whether every must of r passed, and says which did not.
func passed(t *testing.T, r bench.Result, names ...string) {
	t.Helper()
	for _, n := range names {
		c, ok := r.Check(n)
		if !ok || !c.OK {
			t.Errorf("%s at %d clients: check %q %+v (present %v), want passed", r.Workload, r.Clients, n, c, ok)
		}
	}
}

type argRow struct {
	name string
	args []string
	want string
}

// wantArgErrors runs each row as djinn bench ARGS --server 127.0.0.1:1 and
// wants an error naming the row's want, before anything is dialled.
func wantArgErrors(t *testing.T, sub string, rows []argRow) {
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{sub}, tt.args...)
			if sub == "" {
				args = tt.args
			}
			_, err := runBench(t, append(args, "--server", "127.0.0.1:1")...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("bench %s %v: %v, want an error naming %q", sub, tt.args, err, tt.want)
			}
		})
	}
}

func TestBenchArgs(t *testing.T) {
	wantArgErrors(t, "", []argRow{
		{"unknown workload", []string{"--ops", "renew,spin"}, `workload "spin"`},
		{"clients must be numbers", []string{"--clients", "many"}, `clients "many"`},
		{"conns at least 1", []string{"--conns", "0"}, "conns 0"},
	})
}

// TestBenchTxnLease: bench txn's --lease takes what every --lease takes
// (forever and any too) and refuses what they refuse, saying so; it is
// parsed before --clients, which the rows get wrong to stop there.
func TestBenchTxnLease(t *testing.T) {
	for _, tc := range []struct{ lease, want string }{
		{"forever", `--clients "many"`},
		{"any", `--clients "many"`},
		{"-1s", "--lease -1s: must be positive, Forever or Any"},
	} {
		args := []string{"bench", "txn", "--lease", tc.lease, "--clients", "many", "--server", "127.0.0.1:1"}
		if code, _, errs := exitOf(t, args...); code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("djinn %v exited %d (%q), want 2 naming %q", args, code, errs, tc.want)
		}
	}
}

// TestBenchClientsUsage: --clients not a list of numbers is a command line
// not understood, exit 2, as every other bench flag out of its range is.
func TestBenchClientsUsage(t *testing.T) {
	for _, sub := range [][]string{{}, {"txn"}, {"lock"}, {"lookup"}} {
		args := append(append([]string{"bench"}, sub...), "--clients", "many", "--server", "127.0.0.1:1")
		if code, _, errs := exitOf(t, args...); code != 2 || !strings.Contains(errs, `--clients "many"`) {
			t.Errorf("djinn %v exited %d (%q), want 2 naming --clients", args, code, errs)
		}
	}
}

func TestBenchLDSArgs(t *testing.T) {
	wantArgErrors(t, "lds", []argRow{
		{"registrations at least 1", []string{"--registrations", "0"}, "registrations 0"},
		{"registrars at least 1", []string{"--registrars", "0"}, "registrars 0"},
		{"registrars at most 256", []string{"--registrars", "257"}, "registrars 257"},
		{"clients at least 1", []string{"--clients", "0"}, "clients 0"},
		{"conns at least 1", []string{"--conns", "0"}, "conns 0"},
		{"wait positive", []string{"--wait", "0s"}, "--wait 0s"},
	})
}

func TestBenchLockArgs(t *testing.T) {
	wantArgErrors(t, "lock", []argRow{
		{"unknown workload", []string{"--ops", "uncontended,spin"}, `workload "spin"`},
		{"no workload", []string{"--ops", ","}, "want uncontended, contended, spread or sets"},
		{"clients must be positive", []string{"--clients", "1,0"}, `clients "1,0"`},
		{"clients must be numbers", []string{"--clients", "many"}, `clients "many"`},
		{"duration must be positive", []string{"--for", "0s"}, "--for 0s"},
		{"conns at least 1", []string{"--conns", "0"}, "conns 0"},
		{"sets at least 1", []string{"--sets", "0"}, "sets 0"},
		{"locks at least 1", []string{"--ops", "spread", "--locks", "0"}, "locks 0"},
		{"sets needs the admin endpoint", []string{"--ops", "sets", "--admin", ""}, "--admin"},
	})
}

func TestBenchLookupArgs(t *testing.T) {
	wantArgErrors(t, "lookup", []argRow{
		{"unknown workload", []string{"--ops", "lookup,browse"}, `workload "browse"`},
		{"no workload", []string{"--ops", ","}, "want register, lookup, lookup-stream, lookup-shared, notify or discovery"},
		{"clients must be positive", []string{"--clients", "1,0"}, `clients "1,0"`},
		{"clients must be numbers", []string{"--clients", "many"}, `clients "many"`},
		{"duration must be positive", []string{"--for", "0s"}, "--for 0s"},
		{"conns at least 1", []string{"--conns", "0"}, "conns 0"},
		{"streams at least 1", []string{"--streams", "0"}, "streams 0"},
		{"items at least 1", []string{"--items", "0"}, "items 0"},
		{"watchers at least 1", []string{"--watchers", "0"}, "watchers 0"},
		{"rounds at least 1", []string{"--rounds", "0"}, "rounds 0"},
		{"retry min positive", []string{"--retry-min", "0s"}, "--retry-min 0s"},
		{"retry max at least min", []string{"--retry-min", "5ms", "--retry-max", "1ms"}, "--retry-min 5ms, --retry-max 1ms"},
	})
}

// TestBenchLDS runs the bench small against a real server: every
// registration discovered every registrar, with no violation, and the
// memory was read.
func TestBenchLDS(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	rep := benchReport(t, "lds", "--server", p.addr, "--admin", n.admin, "--registrations", "200", "--registrars", "5",
		"--clients", "8", "--conns", "2")
	if len(rep.Results) != 1 {
		t.Fatalf("%d results, want 1", len(rep.Results))
	}
	r := rep.Results[0]
	if r.Ops != 200 || figure(t, r, "registrars") != 5 {
		t.Errorf("result %+v, want 200 registrations over 5 registrars", r)
	}
	passed(t, r, "incomplete", "violations")
	// Every registration heard of 5 registrars: at least one event each,
	// and 5 registrars counted per registration over its events.
	events, per := figure(t, r, "events"), figure(t, r, "registrars per event")
	if events < 200 || per*events < 1000-0.5 || per*events > 1000+0.5 {
		t.Errorf("%v events of %.2f registrars each, want 1000 registrars told over at least 200 events", events, per)
	}
	if figure(t, r, "live heap after") <= 0 || figure(t, r, "RSS after") <= 0 {
		t.Errorf("memory not read: %+v", r.Figures)
	}
}

// TestBenchLeases runs the leases workload small against a real server:
// it registers, has the server take a snapshot, and reads the server's
// memory — the live heap, resident and peak resident memory, and what
// the registrations cost in allocations.
func TestBenchLeases(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	rep := benchReport(t, "--server", p.addr, "--admin", n.admin, "--ops", "leases", "--leases", "300",
		"--join-secret-file", filepath.Join(n.dir, "join-secret"))
	if len(rep.Results) != 1 || rep.Results[0].Workload != "leases" || rep.Results[0].Ops != 300 {
		t.Fatalf("results %+v: want the leases workload's, of 300 registrations", rep.Results)
	}
	r := rep.Results[0]
	for _, name := range []string{"live heap after", "RSS after", "allocations per registration", "snapshot", "live heap after the snapshot"} {
		if figure(t, r, name) <= 0 {
			t.Errorf("%s: %v, want it measured", name, figure(t, r, name))
		}
	}
	if peak, rss := figure(t, r, "peak RSS (snapshot included)"), figure(t, r, "RSS after the snapshot"); peak < rss {
		t.Errorf("peak RSS %v MB below the RSS after the snapshot %v MB", peak, rss)
	}
	if _, ok := r.Check("peak RSS with 1M registrations, snapshot included"); ok {
		t.Error("the 1M targets are checked on a run of 300")
	}
}

// TestBenchLockWorkloads runs every workload briefly against a real server
// and checks that what it counted agrees with itself and with the server:
// every grant issued one fence, nothing is left held, no fence was
// violated.
func TestBenchLockWorkloads(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	levels := []int{1, 4}
	rep := benchReport(t, "lock", "--server", p.addr, "--admin", n.admin, "--clients", "1,4",
		"--for", "200ms", "--conns", "2", "--sets", "300", "--locks", "3",
		"--join-secret-file", filepath.Join(n.dir, "join-secret"))
	if len(rep.Results) != 3*len(levels)+1 {
		t.Fatalf("%d results, want uncontended, contended and spread at %v clients, and sets", len(rep.Results), levels)
	}
	for i, r := range rep.Results[:3*len(levels)] {
		wantOp := []string{"uncontended", "contended", "spread"}[i/len(levels)]
		if r.Workload != wantOp || r.Clients != levels[i%len(levels)] {
			t.Errorf("run %d is %s at %d clients, want %s at %d", i, r.Workload, r.Clients, wantOp, levels[i%len(levels)])
		}
		if r.Ops <= 0 || r.CallsPerOp != 2 {
			t.Errorf("%s at %d clients: %d ops, %v calls each; want some, of 2 calls", r.Workload, r.Clients, r.Ops, r.CallsPerOp)
		}
		if figure(t, r, "fences issued") != float64(r.Ops) {
			t.Errorf("%s at %d clients: %v fences issued for %d grants", r.Workload, r.Clients, figure(t, r, "fences issued"), r.Ops)
		}
		passed(t, r, "fence violations", "left held", "fences issued per grant")
		if r.Workload == "spread" && figure(t, r, "locks") != 3 {
			t.Errorf("spread at %d clients over %v locks, want 3", r.Clients, figure(t, r, "locks"))
		}
		if r.Empty == nil || r.Empty.PerS <= 0 || figure(t, r, "server CPU") <= 0 {
			t.Errorf("%s at %d clients: empty call %+v, server CPU: want both measured", r.Workload, r.Clients, r.Empty)
		}
	}
	s := rep.Results[len(rep.Results)-1]
	if s.Workload != "sets" || s.Ops != 300 || figure(t, s, "owners") != 4 || figure(t, s, "server RSS after") <= 0 {
		t.Errorf("sets: %+v: want 300 sets by 4 owners, and the server's RSS", s)
	}
	passed(t, s, "first grants (fence 1)")
	if figure(t, s, "snapshot") <= 0 || figure(t, s, "peak RSS (snapshot included)") <= 0 {
		t.Errorf("sets: %+v: want the snapshot's size and the peak RSS through it", s.Figures)
	}
	// Without the operator role the sets are measured, and the result
	// says why the snapshot was not.
	rep = benchReport(t, "lock", "--server", p.addr, "--admin", n.admin, "--ops", "sets", "--sets", "50")
	if s := rep.Results[len(rep.Results)-1]; s.Workload != "sets" || figure(t, s, "live heap") <= 0 ||
		len(s.Notes) == 0 || !strings.Contains(s.Notes[len(s.Notes)-1], "--join-secret-file") {
		t.Errorf("sets without the operator role: %+v, want the live heap and a note naming --join-secret-file", s)
	}
}

// TestBenchLookupWorkloads runs every workload briefly against a real
// server and checks what it counted: every lookup found the one item asked
// for, register cycles left nothing behind, templates on a type match
// many, every watcher had every round's event, every discovery round
// ended in a Discovered event after the client had settled.
func TestBenchLookupWorkloads(t *testing.T) {
	// The registry holds the bench's items alone: the server's services
	// do not join it (their registrations, made at any time after the
	// start, would count as items a register cycle left behind).
	conf := filepath.Join(t.TempDir(), "djinn.toml")
	if err := os.WriteFile(conf, []byte("[lookup-join]\nenabled = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := newNode(t)
	p := n.start(t, "--config", conf)
	defer p.stop(t)
	levels := []int{1, 4}
	rep := benchReport(t, "lookup", "--server", p.addr, "--admin", n.admin, "--clients", "1,4",
		"--for", "200ms", "--conns", "2", "--items", "300", "--watchers", "20", "--rounds", "3")
	byOp := map[string][]bench.Result{}
	for _, r := range rep.Results {
		byOp[r.Workload] = append(byOp[r.Workload], r)
	}
	for op, calls := range map[string]float64{"register": 2, "lookup": 1, "lookup-stream": 1, "lookup-shared": 1} {
		if len(byOp[op]) != len(levels) {
			t.Fatalf("%s: %d runs, want one at each of %v clients", op, len(byOp[op]), levels)
		}
		for i, r := range byOp[op] {
			if r.Clients != levels[i] || r.Ops <= 0 || r.CallsPerOp != calls {
				t.Errorf("%s run %d: %d clients, %d ops of %v calls; want %d clients, some ops of %v calls", op, i, r.Clients, r.Ops, r.CallsPerOp, levels[i], calls)
			}
			if r.Empty == nil || r.Empty.PerS <= 0 || figure(t, r, "server CPU") <= 0 {
				t.Errorf("%s at %d clients: empty call %+v, server CPU: want both measured", op, r.Clients, r.Empty)
			}
		}
	}
	for _, r := range byOp["register"] {
		passed(t, r, "left registered")
	}
	for _, op := range []string{"lookup", "lookup-stream", "lookup-shared"} {
		for _, r := range byOp[op] {
			passed(t, r, "mismatches")
		}
	}
	checkLookupOnce(t, byOp)
}

// checkLookupOnce checks the lookup bench's one-off results: the items
// loaded, notify and discovery.
func checkLookupOnce(t *testing.T, byOp map[string][]bench.Result) {
	t.Helper()
	for _, op := range []string{"items", "notify", "discovery"} {
		if len(byOp[op]) != 1 {
			t.Fatalf("%s: %d results, want 1", op, len(byOp[op]))
		}
	}
	it := byOp["items"][0]
	if it.Ops != 300 || figure(t, it, "with the items") <= 0 {
		t.Errorf("items: %+v: want 300 items and the server's RSS", it)
	}
	passed(t, it, "shared type matches", "one kind matches")
	if c, _ := it.Check("one kind matches"); c.Got != 3 {
		t.Errorf("one kind matches %v items, want 3", c.Got)
	}
	nt := byOp["notify"][0]
	if nt.Ops != 3 || figure(t, nt, "watchers") != 20 {
		t.Errorf("notify: %+v: want 3 rounds, 20 watchers", nt)
	}
	passed(t, nt, "events of the rounds")
	d := byOp["discovery"][0]
	if d.Ops != 3 {
		t.Errorf("discovery: %+v: want 3 rounds", d)
	}
	passed(t, d, "attempts per round")
}

// TestBenchDelivery runs the delivery workloads briefly against a real
// server: pushed to a listener and taken over delivery streams, one event
// a call and in batches; every event accepted is delivered (and those of
// calls the end of the run cut short, which are not counted accepted, may
// be too).
func TestBenchDelivery(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	ops := []string{"deliver", "deliverstream", "deliverstreambatch"}
	rep := benchReport(t, "--server", p.addr, "--ops", strings.Join(ops, ","), "--clients", "3",
		"--for", "200ms", "--conns", "2", "--events", "10")
	if len(rep.Results) != len(ops) {
		t.Fatalf("%d results, want %d", len(rep.Results), len(ops))
	}
	for i, r := range rep.Results {
		if r.Workload != ops[i] {
			t.Errorf("result %d is %s, want %s", i, r.Workload, ops[i])
		}
		delivered, accepted := figure(t, r, "events delivered"), figure(t, r, "events accepted")
		if accepted <= 0 || delivered < accepted {
			t.Errorf("%s: %v events delivered of %v accepted, want all of some", r.Workload, delivered, accepted)
		}
		passed(t, r, "events not delivered")
	}
}
