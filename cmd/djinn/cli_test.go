package main

import (
	"encoding/json"
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
}
