package main

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// ldsEventJSON is a discovery event as `events listen -o json` prints it.
type ldsEventJSON struct {
	Source    string `json:"source"`
	ID        int64  `json:"event_id,string"`
	Seq       int64  `json:"sequence,string"`
	Handback  string `json:"handback"`
	Discovery *struct {
		Discarded  bool            `json:"discarded"`
		Registrars []registrarView `json:"registrars"`
	} `json:"discovery"`
}

// eventListener runs `djinn events listen -o json` and reads the events
// it prints.
type eventListener struct {
	ref    string
	lines  chan string
	stderr *strings.Builder
}

func listenEvents(t *testing.T) *eventListener {
	t.Helper()
	cmd := exec.Command(djinnBinary(t), "events", "listen", "-o", "json")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	l := &eventListener{lines: make(chan string, 64), stderr: &strings.Builder{}}
	cmd.Stderr = l.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	go func() {
		defer close(l.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
	}()
	var first struct {
		Listener string `json:"listener"`
	}
	if line := l.next(t, "the listener's reference"); json.Unmarshal([]byte(line), &first) != nil || first.Listener == "" {
		t.Fatalf("events listen printed %q first", line)
	}
	l.ref = first.Listener
	return l
}

func (l *eventListener) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case line, ok := <-l.lines:
		if !ok {
			t.Fatalf("events listen ended before %s; stderr: %s", what, l.stderr.String())
		}
		return line
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s from events listen; stderr: %s", what, l.stderr.String())
	}
	return ""
}

// expect reads the next event and checks it is a discovered (or, with
// discarded, a discarded) event for exactly the lookup services ids.
func (l *eventListener) expect(t *testing.T, discarded bool, ids ...string) ldsEventJSON {
	t.Helper()
	line := l.next(t, "a discovery event")
	var ev ldsEventJSON
	if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Discovery == nil {
		t.Fatalf("event %q (%v), want a discovery event", line, err)
	}
	var got []string
	for _, r := range ev.Discovery.Registrars {
		got = append(got, r.ServiceID)
	}
	slices.Sort(got)
	slices.Sort(ids)
	if ev.Discovery.Discarded != discarded || !slices.Equal(got, ids) {
		t.Fatalf("event %q, want discarded=%v for %v", line, discarded, ids)
	}
	return ev
}

// none checks that no event arrives before the marker event that mark,
// sent by `events send`, arrives.
func (l *eventListener) none(t *testing.T, p *proc, after string) {
	t.Helper()
	mustRun(t, p, "events", "send", "--listener", l.ref, "--source", "djinn://127.0.0.1:9/00000000000000000000000000000001/00000000000000000000000000000002", "--id", "-1", "--seq", "0", "--handback", "marker")
	line := l.next(t, "the marker event")
	var ev ldsEventJSON
	if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Handback != "marker" {
		t.Fatalf("after %s: event %q, want none (only the marker)", after, line)
	}
}

// ldsStateJSON is what lds show prints.
type ldsStateJSON struct {
	Registration string   `json:"registration"`
	EventID      int64    `json:"event_id,string"`
	AllGroups    bool     `json:"all_groups"`
	Groups       []string `json:"groups"`
	Locators     []string `json:"locators"`
	Sequence     int64    `json:"sequence,string"`
	Expires      *string  `json:"expires"`
}

// ldsRegJSON is what lds register prints.
type ldsRegJSON struct {
	Registration string `json:"registration"`
	EventID      int64  `json:"event_id,string"`
}

// ldsScript is TestCLILDS's state: a server with the lookup discovery
// service, a second one found by locator, a listener and a registration.
type ldsScript struct {
	t            *testing.T
	p, q         *proc
	locB         string
	infoA, infoB string // the servers' lookup service ids
	l            *eventListener
	reg          ldsRegJSON
	firstSeq     int64
}

func (s *ldsScript) json(on *proc, v any, args ...string) {
	s.t.Helper()
	out := mustRun(s.t, on, append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		s.t.Fatalf("djinn %v: %v in %q", args, err, out)
	}
}

// serviceID is the lookup service id of the server at on.
func (s *ldsScript) serviceID(on *proc) string {
	var info struct {
		ServiceID string `json:"service_id"`
	}
	s.json(on, &info, "lookup", "info")
	return info.ServiceID
}

// TestCLILDS runs the lds commands against a real server (issue 7,
// section 2), with a second server as a lookup service found by locator
// and a listener hosted by `djinn events listen`.
func TestCLILDS(t *testing.T) {
	a, b := newNode(t), newNode(t)
	s := &ldsScript{t: t, p: a.start(t), q: b.start(t, "--groups", "lab", "--lds=false"), locB: "jini://" + b.discovery}
	defer s.p.stop(t)
	defer s.q.stop(t)
	s.infoA, s.infoB = s.serviceID(s.p), s.serviceID(s.q)
	s.l = listenEvents(t)
	s.registerAndFind()
	s.discardAndGroups()
	s.errorRows()
	// The lease ends the registration.
	mustRun(t, s.p, "lease", "cancel", s.reg.Registration)
	if _, errs, ok := run(t, s.p, "lds", "show", s.reg.Registration); ok || errs == "" {
		t.Errorf("show after cancel: ok=%v stderr %q, want an error", ok, errs)
	}
}

// registerAndFind: LD.3.1, the server's own lookup service is of the
// public group; LD.4.1.1 addLocators: found there; show and registrars.
func (s *ldsScript) registerAndFind() {
	t, p, l := s.t, s.p, s.l
	s.json(p, &s.reg, "lds", "register", "--groups", "", "--listener", l.ref, "--lease", "10m", "--handback", "hb")
	if len(s.reg.Registration) != 32 || s.reg.EventID == 0 {
		t.Fatalf("register printed %+v", s.reg)
	}
	ev := l.expect(t, false, s.infoA)
	if ev.ID != s.reg.EventID || ev.Handback != "hb" || ev.Seq < 1 {
		t.Errorf("first event %+v, want event id %d, handback hb", ev, s.reg.EventID)
	}
	s.firstSeq = ev.Seq
	mustRun(t, p, "lds", "locators", "add", s.reg.Registration, s.locB)
	ev = l.expect(t, false, s.infoB)
	if ev.Seq != s.firstSeq+1 || !slices.Equal(ev.Discovery.Registrars[0].Groups, []string{"lab"}) || ev.Discovery.Registrars[0].Endpoint != s.q.addr {
		t.Errorf("locator event %+v, want sequence %d, groups lab, endpoint %s", ev, s.firstSeq+1, s.q.addr)
	}
	var rs []registrarView
	s.json(p, &rs, "lds", "registrars", s.reg.Registration)
	if len(rs) != 2 {
		t.Fatalf("registrars %+v, want both lookup services", rs)
	}
	var st ldsStateJSON
	s.json(p, &st, "lds", "show", s.reg.Registration)
	if st.Registration != s.reg.Registration || st.EventID != s.reg.EventID || st.AllGroups || !slices.Equal(st.Groups, []string{""}) ||
		!slices.Equal(st.Locators, []string{s.locB + "/"}) || st.Sequence != ev.Seq || st.Expires == nil {
		t.Errorf("show printed %+v", st)
	}
}

// discardAndGroups: LD.4.1.1 discard, then the managed sets of groups and
// locators.
func (s *ldsScript) discardAndGroups() {
	t, p, l, reg := s.t, s.p, s.l, s.reg.Registration
	// A discarded event, then discovered again, found at its locator once
	// more.
	var discarded struct {
		Discarded bool `json:"discarded"`
	}
	s.json(p, &discarded, "lds", "discard", reg, s.infoB)
	if !discarded.Discarded {
		t.Errorf("discard printed %+v", discarded)
	}
	l.expect(t, true, s.infoB)
	l.expect(t, false, s.infoB)
	// All groups wants b by group too: no event. Removing its locator then
	// leaves the service no way to reach it (this server discovers by
	// locator only, without --lds-multicast), so b is lost: a passive
	// communication discard to a registration that wants it by group
	// (LD.3.1). Setting the public group alone changes nothing more.
	var st ldsStateJSON
	s.json(p, &st, "lds", "groups", "set", reg, "--all-groups")
	if !st.AllGroups {
		t.Errorf("groups set --all-groups printed %+v", st)
	}
	l.none(t, p, "all groups set")
	mustRun(t, p, "lds", "locators", "remove", reg, s.locB)
	l.expect(t, true, s.infoB)
	s.json(p, &st, "lds", "groups", "set", reg, "")
	if st.AllGroups || !slices.Equal(st.Groups, []string{""}) || len(st.Locators) != 0 {
		t.Errorf("groups set \"\" printed %+v", st)
	}
	l.none(t, p, "the public group set")
	// Adding lab brings b back; removing it discards it again.
	mustRun(t, p, "lds", "groups", "add", reg, "lab")
	mustRun(t, p, "lds", "locators", "set", reg, s.locB)
	l.expect(t, false, s.infoB)
	mustRun(t, p, "lds", "groups", "remove", reg, "lab")
	l.none(t, p, "lab removed while its locator is held")
	out, errs, ok := run(t, p, "lds", "discard", reg, "00000000000000000000000000000042", "-o", "json")
	if ok || json.Unmarshal([]byte(out), &discarded) != nil || discarded.Discarded || !strings.Contains(errs, "NEGATIVE") {
		t.Errorf("discard of a lookup service never discovered: ok=%v %q %q, want discarded false and exit 1", ok, out, errs)
	}
}

func (s *ldsScript) errorRows() {
	t, p, l, reg := s.t, s.p, s.l, s.reg.Registration
	wantErrors(t, p, []errRow{
		{[]string{"lds", "register", "--groups", "a"}, "--listener: missing"},
		{[]string{"lds", "register", "--listener", l.ref, "--locator", "http://x:1"}, `--locator "http://x:1"`},
		{[]string{"lds", "register", "--listener", l.ref, "--groups", "a", "--all-groups"}, "--all-groups and --groups"},
		{[]string{"lds", "register", "--listener", "nope"}, `--listener: reference "nope"`},
		{[]string{"lds", "register", "--listener", l.ref, "--lease", "-1s"}, "--lease -1s: must be positive"},
		{[]string{"lds", "show", "not-a-token"}, `REG "not-a-token"`},
		{[]string{"lds", "show"}, "REG: missing"},
		{[]string{"lds", "groups", "merge", reg, "a"}, `"merge": want add, set or remove`},
		{[]string{"lds", "groups", "add", reg}, "groups add: missing"},
		{[]string{"lds", "groups", "add", reg, "--all-groups"}, "--all-groups: only with set"},
		{[]string{"lds", "locators", "add", reg, "jini://"}, `locator "jini://"`},
		{[]string{"lds", "discard", reg, "xyz"}, `REGISTRAR-ID "xyz"`},
	})
	// LD.4.1.1: no managed set of groups to add to under all groups.
	mustRun(t, p, "lds", "groups", "set", reg, "--all-groups")
	if _, errs, ok := run(t, p, "lds", "groups", "add", reg, "x"); ok || !strings.Contains(errs, "no managed set of groups") {
		t.Errorf("groups add under all groups: ok=%v stderr %q, want the unsupported operation refused", ok, errs)
	}
}

// TestLDSSurvivesKill: a registration the lookup discovery service
// acknowledged, its managed sets and the lookup services discovered for it
// survive a SIGKILL and a restart on the same data (issue 7, section 1),
// and its events go on from the last sequence number (LD.3.2).
func TestLDSSurvivesKill(t *testing.T) {
	a, b := newNode(t), newNode(t)
	s := &ldsScript{t: t, p: a.start(t), q: b.start(t, "--groups", "lab", "--lds=false")}
	defer func() { s.p.kill() }()
	defer s.q.stop(t)
	infoB := s.serviceID(s.q)
	l := listenEvents(t)
	var reg ldsRegJSON
	s.json(s.p, &reg, "lds", "register", "--groups", "lab", "--locator", "jini://"+b.discovery, "--listener", l.ref, "--lease", "1h")
	seq := l.expect(t, false, infoB).Seq

	s.p.kill()
	s.p = a.start(t)
	var st ldsStateJSON
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, errs, ok := run(t, s.p, "lds", "show", reg.Registration, "-o", "json")
		if ok {
			if err := json.Unmarshal([]byte(out), &st); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lds show after the restart: %s", errs)
		}
		<-time.After(50 * time.Millisecond)
	}
	if st.EventID != reg.EventID || !slices.Equal(st.Groups, []string{"lab"}) || !slices.Equal(st.Locators, []string{"jini://" + b.discovery + "/"}) || st.Sequence != seq {
		t.Errorf("after the restart: %+v, want event id %d, groups lab, b's locator, sequence %d", st, reg.EventID, seq)
	}
	var rs []registrarView
	s.json(s.p, &rs, "lds", "registrars", reg.Registration)
	if len(rs) != 1 || rs[0].ServiceID != infoB {
		t.Errorf("registrars after the restart: %+v, want b", rs)
	}
	mustRun(t, s.p, "lds", "discard", reg.Registration, infoB)
	if ev := l.expect(t, true, infoB); ev.Seq != seq+1 {
		t.Errorf("discarded event after the restart: sequence %d, want %d", ev.Seq, seq+1)
	}
	if ev := l.expect(t, false, infoB); ev.Seq != seq+2 {
		t.Errorf("rediscovered event after the restart: sequence %d, want %d", ev.Seq, seq+2)
	}
}

// TestEventsSendNeedsNoServer: events send reaches the listener where its
// reference points, with nothing at --server: it failed when the default
// server was down, which it does not need.
func TestEventsSendNeedsNoServer(t *testing.T) {
	l := listenEvents(t)
	src := "djinn://127.0.0.1:9/00000000000000000000000000000001/00000000000000000000000000000002"
	args := []string{"events", "send", "--listener", l.ref, "--source", src, "--id", "7", "--seq", "1", "--handback", "no server", "--server", freePort(t)}
	if got, _, errs := exitOf(t, args...); got != 0 {
		t.Fatalf("djinn %v with nothing at --server: exit %d, stderr %q; want 0", args, got, errs)
	}
	var ev ldsEventJSON
	if line := l.next(t, "the event sent"); json.Unmarshal([]byte(line), &ev) != nil || ev.Handback != "no server" || ev.ID != 7 || ev.Seq != 1 {
		t.Errorf("the listener got %q, want the event sent", line)
	}
}
