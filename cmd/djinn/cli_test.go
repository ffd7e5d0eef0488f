package main

import (
	"encoding/json"
	"maps"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// run runs a client command against p and returns its stdout, stderr and
// whether it succeeded.
func run(t *testing.T, p *proc, args ...string) (string, string, bool) {
	t.Helper()
	cmd := exec.Command(djinnBinary(t), append(args, "--server", p.addr)...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err == nil
}

func mustRun(t *testing.T, p *proc, args ...string) string {
	t.Helper()
	out, errs, ok := run(t, p, args...)
	if !ok {
		t.Fatalf("djinn %v failed: %s", args, errs)
	}
	return out
}

// rig is a real server and the client commands run against it.
type rig struct {
	t *testing.T
	p *proc
}

// newRig starts a server with extra flags; the test's end stops it.
func newRig(t *testing.T, extra ...string) *rig {
	t.Helper()
	p := newNode(t).start(t, extra...)
	t.Cleanup(func() { p.stop(t) })
	return &rig{t: t, p: p}
}

// run runs a client command and returns its stdout, stderr and whether it
// succeeded.
func (r *rig) run(args ...string) (string, string, bool) {
	r.t.Helper()
	return run(r.t, r.p, args...)
}

// must runs a client command that must succeed and returns its stdout.
func (r *rig) must(args ...string) string {
	r.t.Helper()
	return mustRun(r.t, r.p, args...)
}

// json runs a client command with -o json into v.
func (r *rig) json(v any, args ...string) {
	r.t.Helper()
	out := r.must(append(args, "-o", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		r.t.Fatalf("djinn %v: %v\n%s", args, err, out)
	}
}

// errors runs each row's command and checks it fails with one line on
// stderr naming the row's want.
func (r *rig) errors(rows []errRow) {
	r.t.Helper()
	wantErrors(r.t, r.p, rows)
}

// TestCLIWalkThrough runs the README's walk-through against a real server:
// the commands and their JSON output are the contract.
func TestCLIWalkThrough(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)

	var st struct {
		State    string           `json:"state"`
		Services []string         `json:"services"`
		Counts   map[string]int64 `json:"counts"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, p, "status", "-o", "json")), &st); err != nil {
		t.Fatal(err)
	}
	if st.State != "Leader" || !strings.Contains(strings.Join(st.Services, ","), "mailbox") {
		t.Fatalf("status: %+v", st)
	}

	var reg struct {
		ID       string `json:"registration"`
		Listener string `json:"listener"`
		Lease    struct {
			Token string `json:"token"`
		} `json:"lease"`
		Stored int64 `json:"stored_events"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, p, "mailbox", "register", "--duration", "10m", "-o", "json")), &reg); err != nil {
		t.Fatal(err)
	}
	src := "djinn://127.0.0.1:9/00000000000000000000000000000001/00000000000000000000000000000002"
	mustRun(t, p, "events", "send", "--to", reg.Listener, "--source", src, "--id", "7", "--seq", "1", "--handback", "hello")
	mustRun(t, p, "events", "send", "--to", reg.Listener, "--source", src, "--id", "7", "--seq", "2")
	pulled := mustRun(t, p, "mailbox", "pull", reg.ID)
	if lines := strings.Split(strings.TrimSpace(pulled), "\n"); len(lines) != 2 || !strings.Contains(lines[0], `handback="hello"`) || !strings.Contains(lines[1], "seq=2") {
		t.Fatalf("pull printed:\n%s", pulled)
	}
	renewed := mustRun(t, p, "lease", "renew", reg.Lease.Token, "--duration", "1h", "-o", "json")
	if !strings.Contains(renewed, `"token"`) {
		t.Fatalf("renew printed %s", renewed)
	}
	mustRun(t, p, "lease", "show", reg.Lease.Token)
	mustRun(t, p, "lease", "cancel", reg.Lease.Token)

	// Errors: one line, non-zero exit, naming what is wrong.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mailbox", "show", reg.ID}, "no such registration"},
		{[]string{"lease", "cancel", reg.Lease.Token}, "unknown"},
		{[]string{"lease", "renew", reg.Lease.Token, "--duration", "-5s"}, "-5s"},
		{[]string{"mailbox", "register", "--duration", "0s"}, "0s"},
		{[]string{"lease", "show", "djinn-lease:garbage"}, "token"},
		{[]string{"mailbox", "enable", reg.ID, "--target", "not-a-reference"}, "not-a-reference"},
	} {
		_, errs, ok := run(t, p, tc.args...)
		if ok {
			t.Errorf("djinn %v succeeded", tc.args)
			continue
		}
		if lines := strings.Split(strings.TrimSpace(errs), "\n"); len(lines) != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("djinn %v: stderr %q, want one line naming %q", tc.args, errs, tc.want)
		}
	}
}

// TestCLIRenewal runs the renewal commands against a real server: a set
// renews mailbox registrations' leases, lists, shows, and lets them go.
func TestCLIRenewal(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)

	type leaseJSON struct {
		Landlord string `json:"landlord"`
		Token    string `json:"token"`
	}
	type listenerJSON struct {
		Listener   string `json:"listener"`
		Handback   string `json:"handback"`
		MinWarning string `json:"min_warning"`
		NextSeq    int64  `json:"next_sequence"`
	}
	type setJSON struct {
		ID                string        `json:"set"`
		Ref               string        `json:"reference"`
		Lease             leaseJSON     `json:"lease"`
		Leases            int64         `json:"leases"`
		ExpirationWarning *listenerJSON `json:"expiration_warning"`
		RenewalFailure    *listenerJSON `json:"renewal_failure"`
	}
	jsonOf := func(v any, args ...string) {
		t.Helper()
		out := mustRun(t, p, append(args, "-o", "json")...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("djinn %v: %v\n%s", args, err, out)
		}
	}
	show := func(id string) setJSON {
		t.Helper()
		var s setJSON
		jsonOf(&s, "renewal", "show", id)
		return s
	}

	var set setJSON
	jsonOf(&set, "renewal", "create", "--duration", "1h")
	if set.ID == "" || !strings.Contains(set.Ref, set.ID) || !strings.HasPrefix(set.Lease.Token, "djinn-lease:") || set.Leases != 0 {
		t.Fatalf("create printed %+v", set)
	}
	if text := mustRun(t, p, "renewal", "show", set.ID); !strings.Contains(text, set.ID) || !strings.Contains(text, "warning    (none)") {
		t.Errorf("show printed:\n%s", text)
	}

	// Client leases: two mailbox registrations' leases.
	type regJSON struct {
		Listener string    `json:"listener"`
		Lease    leaseJSON `json:"lease"`
	}
	var a, b regJSON
	jsonOf(&a, "mailbox", "register", "--duration", "10m")
	jsonOf(&b, "mailbox", "register", "--duration", "10m")
	mustRun(t, p, "renewal", "add", set.ID, a.Lease.Token, "--desired", "1h", "--renew", "1m")
	mustRun(t, p, "renewal", "add", set.ID, b.Lease.Token, "--desired", "forever")

	var leases []struct {
		Landlord  string `json:"landlord"`
		Desired   string `json:"desired_expiration"`
		Renew     string `json:"renew_duration"`
		LastError string `json:"last_error"`
		Token     string `json:"token"`
	}
	jsonOf(&leases, "renewal", "ls", set.ID)
	if len(leases) != 2 || leases[0].Renew != "1m0s" || leases[0].Landlord != a.Lease.Landlord ||
		leases[1].Desired != "never" || leases[1].Renew != "forever" || leases[0].LastError != "" {
		t.Fatalf("ls printed %+v", leases)
	}
	if text := mustRun(t, p, "renewal", "ls", set.ID); strings.Count(text, "landlord=") != 2 || !strings.Contains(text, "desired=never renew=forever") {
		t.Errorf("ls printed:\n%s", text)
	}

	mustRun(t, p, "renewal", "warn", set.ID, "--listener", a.Listener, "--min-warning", "1m", "--handback", "wake")
	mustRun(t, p, "renewal", "failures", set.ID, "--listener", b.Listener)
	s := show(set.ID)
	if s.Leases != 2 || s.ExpirationWarning == nil || s.ExpirationWarning.Listener != a.Listener || s.ExpirationWarning.MinWarning != "1m0s" ||
		s.ExpirationWarning.Handback != "wake" || s.ExpirationWarning.NextSeq < 1 || s.RenewalFailure == nil || s.RenewalFailure.Listener != b.Listener {
		t.Fatalf("show printed %+v", s)
	}
	mustRun(t, p, "renewal", "clear-warn", set.ID)
	mustRun(t, p, "renewal", "clear-failures", set.ID)
	if s := show(set.ID); s.ExpirationWarning != nil || s.RenewalFailure != nil {
		t.Errorf("after clearing: %+v", s)
	}

	var removed struct {
		Removed bool      `json:"removed"`
		Lease   leaseJSON `json:"lease"`
	}
	jsonOf(&removed, "renewal", "remove", set.ID, a.Lease.Token)
	if !removed.Removed || removed.Lease.Landlord != a.Lease.Landlord {
		t.Errorf("remove printed %+v", removed)
	}
	if text := mustRun(t, p, "renewal", "remove", set.ID, a.Lease.Token); !strings.Contains(text, "not in the set") {
		t.Errorf("second remove printed %q", text)
	}
	if s := show(set.ID); s.Leases != 1 {
		t.Errorf("after remove: %d leases, want 1", s.Leases)
	}

	// Errors: one line, non-zero exit, naming what is wrong.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"renewal", "create", "--duration", "0s"}, "0s"},
		{[]string{"renewal", "add", set.ID, a.Lease.Token, "--desired", "1h", "--renew", "-5s"}, "-5s"},
		{[]string{"renewal", "add", set.ID, a.Lease.Token, "--desired", "soon"}, "soon"},
		{[]string{"renewal", "add", set.ID, "djinn-lease:garbage", "--desired", "1h"}, "token"},
		{[]string{"renewal", "add", set.ID, set.Lease.Token, "--desired", "1h"}, "granted by this renewal service"},
		{[]string{"renewal", "show", "1234"}, "1234"},
		{[]string{"renewal", "warn", set.ID, "--listener", "not-a-reference", "--min-warning", "1m"}, "not-a-reference"},
		{[]string{"renewal", "warn", set.ID, "--listener", a.Listener, "--min-warning", "-1m"}, "-1m"},
	} {
		_, errs, ok := run(t, p, tc.args...)
		if ok {
			t.Errorf("djinn %v succeeded", tc.args)
			continue
		}
		if lines := strings.Split(strings.TrimSpace(errs), "\n"); len(lines) != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("djinn %v: stderr %q, want one line naming %q", tc.args, errs, tc.want)
		}
	}

	// LR.2: the set's lease cancelled, the set is gone.
	mustRun(t, p, "lease", "cancel", set.Lease.Token)
	if _, errs, ok := run(t, p, "renewal", "show", set.ID); ok || !strings.Contains(errs, "no such set") {
		t.Errorf("show of a cancelled set: ok=%v stderr %q", ok, errs)
	}
}

// TestCLITxn runs the transaction commands against a real server: create,
// show, state, commit and abort, with the errors of TX.2.5.
func TestCLITxn(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)

	type created struct {
		ID      uint64 `json:"id"`
		Manager string `json:"manager"`
		Lease   struct {
			Token string `json:"token"`
		} `json:"lease"`
	}
	type participant struct {
		Participant string `json:"participant"`
		CrashCount  int64  `json:"crash_count"`
		Vote        string `json:"vote"`
		Notified    bool   `json:"notified"`
		LastError   string `json:"last_error"`
	}
	type described struct {
		ID    uint64 `json:"id"`
		State string `json:"state"`
		Lease *struct {
			Token string `json:"token"`
		} `json:"lease"`
		Participants []participant `json:"participants"`
	}
	jsonOf := func(v any, args ...string) {
		t.Helper()
		out := mustRun(t, p, append(args, "-o", "json")...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("djinn %v: %v\n%s", args, err, out)
		}
	}
	state := func(id string) string {
		t.Helper()
		return strings.TrimSpace(mustRun(t, p, "txn", "state", id))
	}

	// A transaction with one participant that cannot be reached, joined
	// as a participant would join it.
	var a created
	jsonOf(&a, "txn", "create", "--duration", "10m")
	if a.ID == 0 || !strings.HasPrefix(a.Manager, "djinn://") || !strings.HasPrefix(a.Lease.Token, "djinn-lease:") {
		t.Fatalf("create printed %+v", a)
	}
	aID := strconv.FormatUint(a.ID, 10)
	part, err := djinn.ParseRef("djinn://" + freePort(t) + "/" + djinn.NewID().String() + "/" + djinn.NewID().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := djinnpb.NewTransactionManagerClient(dial(t, p.addr)).Join(ctxT(t), &djinnpb.JoinTransactionRequest{
		Id: a.ID, Participant: &djinnpb.Ref{Endpoint: part.Endpoint, ServiceId: part.Service[:], ObjectId: part.Object[:]}, CrashCount: 3,
	}); err != nil {
		t.Fatal(err)
	}
	var d described
	jsonOf(&d, "txn", "show", aID)
	if d.ID != a.ID || d.State != "ACTIVE" || d.Lease == nil || len(d.Participants) != 1 ||
		d.Participants[0] != (participant{Participant: part.String(), CrashCount: 3, Vote: "NONE"}) {
		t.Fatalf("show printed %+v", d)
	}
	if text := mustRun(t, p, "txn", "show", aID); !strings.Contains(text, "state        ACTIVE") || !strings.Contains(text, "crash=3 vote=NONE notified=false") {
		t.Errorf("show printed:\n%s", text)
	}
	if s := state(aID); s != "ACTIVE" {
		t.Errorf("state %q, want ACTIVE", s)
	}

	// Abort: the participant cannot be told, so --wait times out, saying
	// how the transaction ended; the manager keeps trying and shows why.
	if _, errs, ok := run(t, p, "txn", "abort", aID, "--wait", "100ms"); ok || !strings.Contains(errs, "the transaction aborted") {
		t.Errorf("abort --wait: ok=%v stderr %q", ok, errs)
	}
	if s := state(aID); s != "ABORTED" {
		t.Errorf("state %q, want ABORTED", s)
	}
	if !poll(20*time.Second, func() bool {
		jsonOf(&d, "txn", "show", aID)
		return d.State == "ABORTED" && len(d.Participants) == 1 && d.Participants[0].LastError != "" && !d.Participants[0].Notified
	}) {
		t.Errorf("show of the aborted transaction: %+v, want its participant's last error", d)
	}
	if text := mustRun(t, p, "txn", "abort", aID); strings.TrimSpace(text) != "aborted" {
		t.Errorf("second abort printed %q", text)
	}

	// A transaction without participants commits at once.
	var b created
	jsonOf(&b, "txn", "create", "--duration", "1m")
	bID := strconv.FormatUint(b.ID, 10)
	if b.ID == a.ID || b.Manager != a.Manager {
		t.Errorf("second create printed %+v after %+v", b, a)
	}
	if text := mustRun(t, p, "txn", "commit", bID, "--wait", "10s"); strings.TrimSpace(text) != "committed" {
		t.Errorf("commit printed %q", text)
	}
	if s := state(bID); s != "COMMITTED" {
		t.Errorf("state %q, want COMMITTED", s)
	}
	mustRun(t, p, "txn", "commit", bID)

	// Errors: one line, non-zero exit, naming what is wrong.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"txn", "commit", aID}, "cannot commit: transaction " + aID + ": aborted"},
		{[]string{"txn", "abort", bID}, "cannot abort: transaction " + bID + ": committed"},
		{[]string{"txn", "show", "99999"}, "transaction 99999: unknown"},
		{[]string{"txn", "commit", "99999"}, "transaction 99999: unknown"},
		{[]string{"txn", "state", "0"}, `transaction id "0"`},
		{[]string{"txn", "show", "seven"}, `transaction id "seven"`},
		{[]string{"txn", "create", "--duration", "0s"}, "0s"},
		{[]string{"txn", "commit", bID, "--wait", "-1s"}, "waitFor -1s"},
		{[]string{"txn", "abort", aID, "--wait", "soon"}, `--wait "soon"`},
	} {
		_, errs, ok := run(t, p, tc.args...)
		if ok {
			t.Errorf("djinn %v succeeded", tc.args)
			continue
		}
		if lines := strings.Split(strings.TrimSpace(errs), "\n"); len(lines) != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("djinn %v: stderr %q, want one line naming %q", tc.args, errs, tc.want)
		}
	}

	// TX.2.1: cancelling the lease aborts the transaction.
	var c created
	jsonOf(&c, "txn", "create", "--duration", "1h")
	mustRun(t, p, "lease", "cancel", c.Lease.Token)
	if s := state(strconv.FormatUint(c.ID, 10)); s != "ABORTED" {
		t.Errorf("state after the lease was cancelled %q, want ABORTED", s)
	}

	// ls: every transaction the manager remembers, by id; --state filters.
	var e created
	jsonOf(&e, "txn", "create", "--duration", "1h")
	var all []struct {
		ID    uint64 `json:"id"`
		State string `json:"state"`
	}
	jsonOf(&all, "txn", "ls")
	want := map[uint64]string{a.ID: "ABORTED", b.ID: "COMMITTED", c.ID: "ABORTED", e.ID: "ACTIVE"}
	got := map[uint64]string{}
	for i, x := range all {
		got[x.ID] = x.State
		if i > 0 && all[i-1].ID >= x.ID {
			t.Errorf("ls: %d listed after %d, want by id", x.ID, all[i-1].ID)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("ls: %v, want %v", got, want)
	}
	jsonOf(&all, "txn", "ls", "--state", "active")
	if len(all) != 1 || all[0].ID != e.ID {
		t.Errorf("ls --state active: %+v, want only %d", all, e.ID)
	}
	text := mustRun(t, p, "txn", "ls", "--state", "aborted", "--max", "1")
	if lines := strings.Split(strings.TrimSpace(text), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "ABORTED") {
		t.Errorf("ls --state aborted --max 1 printed %q, want a header and one ABORTED line", text)
	}
	wantErrors(t, p, []errRow{
		{[]string{"txn", "ls", "--state", "done"}, `--state "done"`},
		{[]string{"txn", "ls", "--max", "-1"}, "--max -1"},
	})
}

// wantErrors runs each row's command against p and checks it fails with
// one line on stderr naming the row's want.
func wantErrors(t *testing.T, p *proc, rows []errRow) {
	t.Helper()
	for _, tc := range rows {
		_, errs, ok := run(t, p, tc.args...)
		if ok {
			t.Errorf("djinn %v succeeded", tc.args)
			continue
		}
		if lines := strings.Split(strings.TrimSpace(errs), "\n"); len(lines) != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("djinn %v: stderr %q, want one line naming %q", tc.args, errs, tc.want)
		}
	}
}

type errRow struct {
	args []string
	want string
}

// TestCLIKV runs the kv commands against a real server's key/value
// participant: writes without a transaction apply at once; under one they
// are seen only under it until it commits (TX.3's default semantics), and
// vanish if it aborts.
func TestCLIKV(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	jsonOf := func(v any, args ...string) {
		t.Helper()
		out := mustRun(t, p, append(args, "-o", "json")...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("djinn %v: %v\n%s", args, err, out)
		}
	}
	type entry struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	get := func(key string, extra ...string) string {
		t.Helper()
		return strings.TrimSuffix(mustRun(t, p, append([]string{"kv", "get", key}, extra...)...), "\n")
	}
	notFound := func(key string, extra ...string) {
		t.Helper()
		if out, errs, ok := run(t, p, append([]string{"kv", "get", key}, extra...)...); ok || !strings.Contains(errs, "not found") {
			t.Errorf("get %s %v: ok=%v out %q stderr %q, want not found", key, extra, ok, out, errs)
		}
	}
	create := func() (id, manager string) {
		t.Helper()
		var c struct {
			ID      uint64 `json:"id"`
			Manager string `json:"manager"`
		}
		jsonOf(&c, "txn", "create", "--duration", "10m")
		return strconv.FormatUint(c.ID, 10), c.Manager
	}

	// Without a transaction.
	if out := mustRun(t, p, "kv", "put", "a", "one"); strings.TrimSpace(out) != "stored" {
		t.Errorf("put printed %q", out)
	}
	mustRun(t, p, "kv", "put", "ab", "two words")
	mustRun(t, p, "kv", "put", "b", "three")
	if v := get("a"); v != "one" {
		t.Errorf("get a: %q", v)
	}
	var e entry
	jsonOf(&e, "kv", "get", "ab")
	if e != (entry{"ab", "two words"}) {
		t.Errorf("get -o json: %+v", e)
	}
	if out := mustRun(t, p, "kv", "ls", "a"); out != "a\tone\nab\ttwo words\n" {
		t.Errorf("ls a printed %q", out)
	}
	var es []entry
	jsonOf(&es, "kv", "ls")
	if len(es) != 3 || es[2] != (entry{"b", "three"}) {
		t.Errorf("ls -o json: %+v", es)
	}
	if out := mustRun(t, p, "kv", "delete", "b"); strings.TrimSpace(out) != "deleted" {
		t.Errorf("delete printed %q", out)
	}
	if out := mustRun(t, p, "kv", "delete", "b"); !strings.Contains(out, "was not there") {
		t.Errorf("second delete printed %q", out)
	}
	notFound("b")

	// TX.3: a write under a transaction is seen only under it until it
	// commits; the participant joined it.
	tx, _ := create()
	if out := mustRun(t, p, "kv", "put", "x", "ex", "--txn", tx); !strings.Contains(out, "under transaction "+tx) {
		t.Errorf("put --txn printed %q", out)
	}
	notFound("x")
	if v := get("x", "--txn", tx); v != "ex" {
		t.Errorf("get x --txn %s: %q", tx, v)
	}
	jsonOf(&es, "kv", "ls", "--txn", tx)
	if len(es) != 3 || es[2] != (entry{"x", "ex"}) {
		t.Errorf("ls --txn: %+v", es)
	}
	var d struct {
		Participants []struct {
			Participant string `json:"participant"`
		} `json:"participants"`
	}
	jsonOf(&d, "txn", "show", tx)
	if len(d.Participants) != 1 || !strings.HasPrefix(d.Participants[0].Participant, "djinn://"+p.addr+"/") {
		t.Errorf("show %s: participants %+v, want the server's key/value participant", tx, d.Participants)
	}
	mustRun(t, p, "txn", "commit", tx, "--wait", "10s")
	if v := get("x"); v != "ex" {
		t.Errorf("get x after commit: %q", v)
	}

	// TX.3: an abort discards the transaction's writes and deletes.
	tx2, mgr := create()
	mustRun(t, p, "kv", "put", "y", "why", "--txn", tx2)
	mustRun(t, p, "kv", "delete", "a", "--txn", tx2)
	notFound("a", "--txn", tx2)
	if v := get("a"); v != "one" {
		t.Errorf("get a outside the transaction that deleted it: %q", v)
	}
	mustRun(t, p, "txn", "abort", tx2, "--wait", "10s")
	notFound("y")
	if v := get("a"); v != "one" {
		t.Errorf("get a after the abort: %q", v)
	}

	// --manager names the manager of --txn.
	tx3, _ := create()
	mustRun(t, p, "kv", "put", "z", "zed", "--txn", tx3, "--manager", mgr)
	if v := get("z", "--txn", tx3); v != "zed" {
		t.Errorf("get z --txn %s: %q", tx3, v)
	}
	mustRun(t, p, "txn", "commit", tx3, "--wait", "10s")
	if v := get("z"); v != "zed" {
		t.Errorf("get z after commit: %q", v)
	}

	// Errors: one line, non-zero exit, naming what is wrong.
	wantErrors(t, p, []errRow{
		{[]string{"kv", "get", "nothing"}, `key "nothing": not found`},
		{[]string{"kv", "get", "nothing", "--txn", tx3}, "transaction " + tx3 + ": COMMITTED"}, // TX.2.3, TX.2.6
		{[]string{"kv", "put", "k", "v", "--txn", "99999"}, "transaction 99999: unknown"},
		{[]string{"kv", "put", "k", "v", "--txn", "0"}, `--txn: transaction id "0"`},
		{[]string{"kv", "ls", "--manager", mgr}, "--txn, which is missing"},
		{[]string{"kv", "get", "k", "--txn", "1", "--manager", "mgr"}, `--manager: reference "mgr"`},
		{[]string{"kv", "put", "k"}, "accepts 2 arg(s)"},
	})

	off := newNode(t)
	q := off.start(t, "--kv=false")
	defer q.stop(t)
	wantErrors(t, q, []errRow{{[]string{"kv", "get", "a"}, q.addr + " serves no key/value store"}})
}

// TestCLITxnNest: djinn txn nest creates a transaction nested in another of
// the same manager (TX.2.2), show names the tree, and aborting the parent
// aborts the nested one.
func TestCLITxnNest(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	type created struct {
		ID      uint64 `json:"id"`
		Parent  uint64 `json:"parent"`
		Manager string `json:"manager"`
		Lease   struct {
			Token string `json:"token"`
		} `json:"lease"`
	}
	type described struct {
		ID     uint64   `json:"id"`
		State  string   `json:"state"`
		Parent uint64   `json:"parent"`
		Nested []uint64 `json:"nested"`
	}
	jsonOf := func(v any, args ...string) {
		t.Helper()
		out := mustRun(t, p, append(args, "-o", "json")...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("djinn %v: %v\n%s", args, err, out)
		}
	}

	var parent, child created
	jsonOf(&parent, "txn", "create", "--duration", "10m")
	pID := strconv.FormatUint(parent.ID, 10)
	jsonOf(&child, "txn", "nest", pID, "--duration", "10m")
	if child.ID == 0 || child.ID == parent.ID || child.Parent != parent.ID || child.Manager != parent.Manager ||
		!strings.HasPrefix(child.Lease.Token, "djinn-lease:") || parent.Parent != 0 {
		t.Fatalf("nest %s printed %+v (parent %+v)", pID, child, parent)
	}
	cID := strconv.FormatUint(child.ID, 10)
	if text := mustRun(t, p, "txn", "nest", cID, "--duration", "1m"); !strings.Contains(text, "nested in   "+cID) {
		t.Errorf("nest printed:\n%s", text)
	}

	var d described
	jsonOf(&d, "txn", "show", cID)
	if d.ID != child.ID || d.State != "ACTIVE" || d.Parent != parent.ID || len(d.Nested) != 1 {
		t.Fatalf("show %s: %+v, want ACTIVE, nested in %s, with one nested", cID, d, pID)
	}
	grandchild := strconv.FormatUint(d.Nested[0], 10)
	d = described{}
	jsonOf(&d, "txn", "show", pID)
	if d.Parent != 0 || len(d.Nested) != 1 || d.Nested[0] != child.ID {
		t.Errorf("show %s: %+v, want top-level with %s nested", pID, d, cID)
	}
	if text := mustRun(t, p, "txn", "show", cID); !strings.Contains(text, "nested in    "+pID) || !strings.Contains(text, "nested       "+grandchild) {
		t.Errorf("show printed:\n%s", text)
	}

	// TX.2.2: aborting a transaction aborts every one nested in it, and
	// nothing can be nested in it any more.
	mustRun(t, p, "txn", "abort", pID, "--wait", "10s")
	for _, id := range []string{pID, cID, grandchild} {
		if s := strings.TrimSpace(mustRun(t, p, "txn", "state", id)); s != "ABORTED" {
			t.Errorf("state of %s after its parent aborted: %s", id, s)
		}
	}
	wantErrors(t, p, []errRow{
		{[]string{"txn", "nest", pID, "--duration", "1m"}, "transaction " + pID + ": ABORTED, no longer active"},
		{[]string{"txn", "nest", "99999"}, "transaction 99999: unknown"},
		{[]string{"txn", "nest", "0"}, `transaction id "0"`},
		{[]string{"txn", "nest", cID, "--duration", "0s"}, "0s"},
		{[]string{"txn", "nest"}, "accepts 1 arg(s)"},
	})
}

// TestCLIDemoTransfer runs djinn demo transfer between the key/value
// participants of two real servers, in separate processes, under one
// transaction of the first one's manager.
func TestCLIDemoTransfer(t *testing.T) {
	p := newNode(t).start(t)
	defer p.stop(t)
	q := newNode(t).start(t)
	defer q.stop(t)
	type side struct {
		Address string `json:"address"`
		Created bool   `json:"created"`
		Before  int64  `json:"before"`
		After   int64  `json:"after"`
	}
	var v struct {
		Transaction uint64 `json:"transaction"`
		Manager     string `json:"manager"`
		Amount      int64  `json:"amount"`
		From        side   `json:"from"`
		To          side   `json:"to"`
	}
	out := mustRun(t, p, "demo", "transfer", "--to", q.addr, "--amount", "30", "-o", "json")
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if v.Transaction == 0 || v.Amount != 30 ||
		v.From != (side{p.addr, true, 100, 70}) || v.To != (side{q.addr, true, 100, 130}) {
		t.Fatalf("transfer printed %+v", v)
	}
	tx := strconv.FormatUint(v.Transaction, 10)
	if s := strings.TrimSpace(mustRun(t, p, "txn", "state", tx)); s != "COMMITTED" {
		t.Errorf("state of transaction %s: %s", tx, s)
	}
	// Both sides, read by the kv commands outside any transaction.
	if b := strings.TrimSpace(mustRun(t, p, "kv", "get", "balance")); b != "70" {
		t.Errorf("balance at %s: %s, want 70", p.addr, b)
	}
	if b := strings.TrimSpace(mustRun(t, q, "kv", "get", "balance")); b != "130" {
		t.Errorf("balance at %s: %s, want 130", q.addr, b)
	}

	// Text output names both sides; an existing balance is kept.
	text := mustRun(t, p, "demo", "transfer", "--to", q.addr, "--amount", "70")
	for _, want := range []string{"committed", p.addr + "  70 -> 0\n", q.addr + "  130 -> 200\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("transfer printed:\n%s\nwant %q", text, want)
		}
	}

	// Too little to move: the transaction aborts and nothing moves. The
	// other way round, --from names the payer.
	if _, errs, ok := run(t, p, "demo", "transfer", "--to", q.addr, "--amount", "1"); ok ||
		!strings.Contains(errs, "balance at "+p.addr+" is 0, less than 1") || !strings.Contains(errs, "aborted, nothing moved") {
		t.Errorf("transfer of too much: ok=%v stderr %q", ok, errs)
	}
	if b := strings.TrimSpace(mustRun(t, q, "kv", "get", "balance")); b != "200" {
		t.Errorf("balance at %s after the refused transfer: %s, want 200", q.addr, b)
	}
	text = mustRun(t, p, "demo", "transfer", "--from", q.addr, "--to", p.addr, "--amount", "5")
	if !strings.Contains(text, q.addr+"  200 -> 195\n") || !strings.Contains(text, p.addr+"  0 -> 5\n") {
		t.Errorf("transfer back printed:\n%s", text)
	}

	wantErrors(t, p, []errRow{
		{[]string{"demo", "transfer"}, "djinn serve --data-dir d2 --listen 127.0.0.1:4171"},
		{[]string{"demo", "transfer", "--to", p.addr}, "--from and --to are both " + p.addr},
		{[]string{"demo", "transfer", "--to", q.addr, "--amount", "0"}, "--amount 0"},
		{[]string{"demo", "transfer", "--to", "nowhere"}, "--to"},
	})
}
