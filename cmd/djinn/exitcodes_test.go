package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// exitOf runs djinn with args through the real binary and returns its exit
// status, stdout and stderr.
func exitOf(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(djinnBinary(t), args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("djinn %v: %v", args, err)
	return 0, "", ""
}

// sectionNumber is a bare spec section in an error, which must not be.
var sectionNumber = regexp.MustCompile(`\((TX|LR|LE|EM|LD|EV)\.[0-9]`)

// TestExitCodes is the table of djinn help exit-codes, through the real
// binary: 2 for a command line not understood, 1 for a negative answer or
// an error, 0 for yes; every non-zero status with one line on stderr (a
// JSON object with -o json) that cites no section number.
func TestExitCodes(t *testing.T) {
	r := newRig(t)
	s := r.p.addr
	var set, owner struct {
		Set   string `json:"set"`
		Owner string `json:"owner"`
	}
	r.json(&set, "lock", "create")
	r.json(&owner, "lock", "owner")
	r.must("lock", "acquire", set.Set, "--mode", "w", "--owner", owner.Owner)
	var gone mailboxRegJSON
	r.json(&gone, "mailbox", "register")
	r.must("lease", "cancel", gone.Lease.Name)
	var rset struct {
		Set string `json:"set"`
	}
	r.json(&rset, "renewal", "create")
	listener := "djinn://127.0.0.1:1/" + set.Set + "/" + set.Set
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"an unknown command", []string{"lease", "typo", "--server", s}, 2},
		{"an unknown top command", []string{"typo"}, 2},
		{"an unknown flag", []string{"status", "--bogus", "--server", s}, 2},
		{"a missing argument", []string{"lease", "show", "--server", s}, 2},
		{"an extra argument", []string{"txn", "show", "1", "2", "--server", s}, 2},
		{"a flag value not of its type", []string{"mailbox", "pull", gone.ID, "--after", "x", "--server", s}, 2},
		{"an unknown output", []string{"status", "-o", "xml", "--server", s}, 2},
		{"an argument not of its kind: a lease", []string{"lease", "show", "deadbeef", "--server", s}, 2},
		{"an argument not of its kind: a transaction", []string{"txn", "show", "x", "--server", s}, 2},
		{"an argument not of its kind: a lock set", []string{"lock", "validate", "zz", "1", "--server", s}, 2},
		{"an argument not of its kind: a fence", []string{"lock", "validate", set.Set, "0", "--server", s}, 2},
		{"an argument not of its kind: a registration", []string{"mailbox", "show", "q", "--server", s}, 2},
		{"a flag value not of its kind: an owner", []string{"lock", "acquire", set.Set, "--mode", "r", "--owner", "zz", "--server", s}, 2},
		{"a flag value not of its kind: a lease length", []string{"lock", "create", "--lease", "-5s", "--server", s}, 2},
		{"a flag value not of its kind: a wait", []string{"txn", "commit", "5", "--wait", "-1s", "--server", s}, 2},
		{"a flag value not of its kind: a registration's lease", []string{"mailbox", "register", "--lease", "abc", "--server", s}, 2},
		{"a flag value not of its kind: a negative registration lease", []string{"mailbox", "register", "--lease", "-5s", "--server", s}, 2},
		{"a flag value not of its kind: a transaction's lease", []string{"txn", "create", "--lease", "0", "--server", s}, 2},
		{"a flag value not of its kind: a nested transaction's lease", []string{"txn", "nest", "5." + set.Set, "--lease", "abc", "--server", s}, 2},
		{"a flag value not of its kind: a renewed lease", []string{"lease", "renew", gone.Lease.Name, "--lease", "abc", "--server", s}, 2},
		{"a flag value not of its kind: a renewal set's lease", []string{"renewal", "create", "--lease", "-1s", "--server", s}, 2},
		{"a flag value not of its kind: an lds registration's lease", []string{"lds", "register", "--listener", listener, "--lease", "abc", "--server", s}, 2},
		{"a flag value not of its kind: a lookup registration's lease", []string{"lookup", "register", "--type", "T", "--endpoint", "h:1", "--lease", "abc", "--server", s}, 2},
		{"a flag value not of its kind: an endpoint", []string{"lookup", "register", "--type", "T", "--endpoint", "nohost", "--server", s}, 2},
		{"a flag value not of its kind: a desired expiration", []string{"renewal", "add", rset.Set, gone.Lease.Token, "--desired", "abc", "--server", s}, 2},
		{"a flag value not of its kind: a renewal duration", []string{"renewal", "add", rset.Set, gone.Lease.Token, "--desired", "1h", "--renew", "abc", "--server", s}, 2},
		{"a flag value not of its kind: a minimum warning", []string{"renewal", "warn", rset.Set, "--listener", listener, "--min-warning", "abc", "--server", s}, 2},
		{"a flag value not of its kind: a bench's set lease", []string{"bench", "renewal", "--set-lease", "abc", "--server", s}, 2},
		{"a flag value not of its kind: a run length", []string{"events", "listen", "--for", "abc", "--server", s}, 2},
		{"a flag value not of its kind: transitions", []string{"lookup", "watch", "--transitions", "bogus", "--for", "1s", "--server", s}, 2},
		{"a flag value not of its kind: a negative most", []string{"lookup", "ls", "--max", "-1", "--server", s}, 2},
		{"a flag value not of its kind: a most past what a lookup returns", []string{"lookup", "find", "--max", "99999999999", "--server", s}, 2},
		{"a flag value not of its kind: a negative most of transactions", []string{"txn", "ls", "--max", "-1", "--server", s}, 2},
		{"a flag value not of its kind: a transaction state", []string{"txn", "ls", "--state", "bogus", "--server", s}, 2},
		{"a flag value not of its kind: a discovery wait", []string{"discover", "--wait", "abc"}, 2},
		{"a flag value not of its kind: a locator", []string{"discover", "--locator", "bogus"}, 2},
		{"a flag value not of its kind: a certificate host", []string{"tls", "server", "--host", "a b", "--dir", t.TempDir()}, 2},
		{"an argument not of its kind: a client certificate's name", []string{"tls", "client", "a b", "--dir", t.TempDir()}, 2},
		{"an argument not of its kind: a peer certificate's node id", []string{"tls", "peer", "n/1", "--dir", t.TempDir()}, 2},
		{"a flag value not of its kind: a CA's days", []string{"tls", "ca", "--days", "0", "--dir", t.TempDir()}, 2},
		{"a flag value not of its kind: a certificate's days", []string{"tls", "client", "alice", "--days", "-5", "--dir", t.TempDir()}, 2},
		{"a flag value not of its kind: a certificate's days past the year 9999", []string{"tls", "ca", "--days", "99999999", "--dir", t.TempDir()}, 2},
		{"a flag without the flag it needs: --manager without --txn", []string{"kv", "get", "a", "--manager", "x", "--server", s}, 2},
		{"a flag value not of its kind: no server", []string{"status", "--server", ""}, 2},
		{"a flag value not of its kind: a server without a port", []string{"status", "--server", "127.0.0.1"}, 2},
		{"a flag value not of its kind: a server's empty endpoint", []string{"kv", "get", "a", "--server", ",,"}, 2},
		{"a flag value not of its kind: a server's port out of range", []string{"status", "--server", "127.0.0.1:99999"}, 2},
		{"a flag value not of its kind: a bench's server", []string{"bench", "txn", "--server", "nohost"}, 2},
		{"a flag value not of its kind: an attribute", []string{"lookup", "find", "--attr", "Name.=x", "--server", s}, 2},
		{"a flag value not of its kind: a registration's attribute", []string{"lookup", "register", "--type", "T", "--endpoint", "h:1", "--attr", ".x=y", "--server", s}, 2},
		{"a flag value not of its kind: a wanted attribute", []string{"find", "T", "--attr", "Name.=x", "--wait", "1s"}, 2},
		{"a flag value not of its kind: an operator's attribute", []string{"join", "attrs", "add", "txn", "--attr", "Name.=x", "--server", s}, 2},
		{"a flag value not of its kind: a template's attribute", []string{"join", "attrs", "remove", "txn", "--match", "Name.=x", "--server", s}, 2},
		{"conflicting flags: --linearizable and --max-staleness", []string{"lookup", "ls", "--linearizable", "--max-staleness", "1s", "--server", s}, 2},
		{"conflicting flags: --all-groups and --groups", []string{"lds", "register", "--listener", listener, "--all-groups", "--groups", "a", "--server", s}, 2},
		{"an argument not of its kind: an lds change", []string{"lds", "groups", set.Set, "add", "a", "--server", s}, 2},
		{"a flag value not of its kind: an lds registration's locator", []string{"lds", "register", "--listener", listener, "--locator", "bogus", "--server", s}, 2},
		{"a flag value not of its kind: an lds registration's locator port", []string{"lds", "register", "--listener", listener, "--locator", "jini://h:99999", "--server", s}, 2},
		{"an argument not of its kind: an lds locator", []string{"lds", "locators", "add", gone.ID, "bogus", "--server", s}, 2},
		{"a missing argument: the lds groups to add", []string{"lds", "groups", "add", gone.ID, "--server", s}, 2},
		{"a flag without what it needs: --all-groups with add", []string{"lds", "groups", "add", gone.ID, "--all-groups", "--server", s}, 2},
		{"a flag value not of its kind: a bench's length", []string{"bench", "lock", "--for", "-1s", "--server", s}, 2},
		{"a flag without the flag it needs: --tls-cert without --tls-key", []string{"status", "--tls-cert", "client.pem", "--server", s}, 2},
		{"a flag without the flag it needs: --tls-key without --tls-cert", []string{"status", "--tls-key", "client-key.pem", "--server", s}, 2},
		{"a flag without the flag it needs: find's --tls-cert without --tls-key", []string{"find", "T", "--tls-cert", "client.pem", "--wait", "1s"}, 2},
		{"a flag value not of its kind: a listener's address", []string{"events", "listen", "--listen", "nohost", "--for", "1s", "--server", s}, 2},
		{"a flag value not of its kind: a watch's listener address", []string{"lookup", "watch", "--listen", "nohost", "--for", "1s", "--server", s}, 2},
		{"a flag value not of its kind, told before the set is looked up: a desired expiration", []string{"renewal", "add", gone.ID, gone.Lease.Token, "--desired", "abc", "--server", s}, 2},
		{"a flag value not of its kind, told before the set is looked up: a minimum warning", []string{"renewal", "warn", gone.ID, "--listener", listener, "--min-warning", "abc", "--server", s}, 2},
		{"a missing required flag", []string{"mailbox", "enable", gone.ID, "--server", s}, 2},
		{"an argument not of its kind: a member's node id", []string{"member", "add", "bad id!", "--raft", "127.0.0.1:1", "--grpc", "127.0.0.1:2", "--server", s}, 2},
		{"a flag value not of its kind: a member's raft address", []string{"member", "add", "n9", "--raft", "bogus", "--grpc", "127.0.0.1:2", "--server", s}, 2},
		{"a flag value not of its kind: a member's gRPC address", []string{"member", "add", "n9", "--raft", "127.0.0.1:1", "--grpc", "h:x", "--server", s}, 2},
		{"a missing required flag: a desired expiration", []string{"renewal", "add", rset.Set, gone.Lease.Token, "--server", s}, 2},
		{"a missing required flag: a minimum warning", []string{"renewal", "warn", rset.Set, "--listener", listener, "--server", s}, 2},
		{"an argument not UTF-8: a key", []string{"kv", "put", "\xff", "v", "--server", s}, 2},
		{"a flag value not UTF-8: a service type", []string{"lookup", "find", "--type", "caf\xe9", "--server", s}, 2},
		{"not granted", []string{"lock", "acquire", set.Set, "--mode", "r", "--owner", owner.Owner, "--try", "--server", s}, 0},
		{"not granted to another", []string{"lock", "acquire", set.Set, "--mode", "r", "--owner", gone.Lease.Name, "--try", "--server", s}, 1},
		{"invalid", []string{"lock", "validate", set.Set, "99", "--server", s}, 1},
		{"not found", []string{"kv", "get", "nothing", "--server", s}, 1},
		{"a lease gone", []string{"lease", "show", gone.Lease.Token, "--server", s}, 1},
		{"an error of the server", []string{"txn", "show", "99999", "--server", s}, 1},
		{"no server", []string{"status", "--server", freePort(t)}, 1},
		{"yes", []string{"status", "--server", s}, 0},
		{"a group's help", []string{"lease"}, 0},
		{"the help of exit codes", []string{"help", "exit-codes"}, 0},
	} {
		got, out, errs := exitOf(t, tc.args...)
		if got != tc.want {
			t.Errorf("%s: djinn %v exited %d, want %d; stderr %q", tc.name, tc.args, got, tc.want, errs)
		}
		if got != 0 && (strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.HasPrefix(errs, "djinn: ") || sectionNumber.MatchString(errs)) {
			t.Errorf("%s: stderr %q, want one line saying why, without section numbers", tc.name, errs)
		}
		if tc.name == "the help of exit-codes" && !strings.Contains(out, "2  the command line was not understood") {
			t.Errorf("djinn help exit-codes printed %q", out)
		}
		if got != 0 {
			checkJSONError(t, tc.name, append(tc.args, "-o", "json"), got)
		}
	}
}

// checkJSONError runs a failing command with -o json: stderr is one JSON
// object naming the error and its exit status.
func checkJSONError(t *testing.T, name string, args []string, want int) {
	t.Helper()
	if name == "an unknown output" {
		return // -o json would make it understood
	}
	got, _, errs := exitOf(t, args...)
	var e struct {
		Error struct {
			Message    string `json:"message"`
			Kind       string `json:"kind"`
			ExitStatus int    `json:"exit_status"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(errs), &e); err != nil || got != want || e.Error.ExitStatus != want || e.Error.Message == "" || e.Error.Kind == "" {
		t.Errorf("%s with -o json: exit %d, stderr %q (%v), want a JSON error with exit status %d", name, got, errs, err, want)
	}
	if want == 2 && e.Error.Kind != "USAGE" {
		t.Errorf("%s with -o json: kind %q, want USAGE", name, e.Error.Kind)
	}
}

// TestJSONErrorKinds: with -o json the error's kind is the server's (a
// djinn kind), USAGE, NEGATIVE, or ERROR for a failure of the command's
// own, such as a file it will not overwrite: never INTERNAL, which says
// the server failed.
func TestJSONErrorKinds(t *testing.T) {
	dir := t.TempDir()
	if got, _, errs := exitOf(t, "tls", "ca", "--dir", dir); got != 0 {
		t.Fatalf("djinn tls ca: exit %d: %s", got, errs)
	}
	got, _, errs := exitOf(t, "tls", "ca", "--dir", dir, "-o", "json")
	var e struct {
		Error struct {
			Message    string `json:"message"`
			Kind       string `json:"kind"`
			ExitStatus int    `json:"exit_status"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(errs), &e); err != nil || got != 1 || e.Error.Kind != "ERROR" || !strings.Contains(e.Error.Message, "--force") {
		t.Errorf("djinn tls ca over an existing CA with -o json: exit %d, stderr %q (%v), want exit 1 and kind ERROR naming --force", got, errs, err)
	}
}

// TestArgumentCountErrorsSayTheUsage: a missing or extra argument is told
// with the command's usage line, which names the arguments it takes.
func TestArgumentCountErrorsSayTheUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"kv", "put", "k"}, "accepts 2 arg(s), received 1; usage: djinn kv put KEY VALUE"},
		{[]string{"lease", "show"}, "accepts 1 arg(s), received 0; usage: djinn lease show LEASE"},
		{[]string{"join", "attrs", "add", "txn", "Name.name=x"}, "accepts 2 arg(s), received 3; usage: djinn join attrs add|set|modify|remove SERVICE|all"},
	} {
		got, _, errs := exitOf(t, tc.args...)
		if got != 2 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "[flags]") {
			t.Errorf("djinn %v: exit %d, stderr %q; want exit 2 and %q", tc.args, got, errs, tc.want)
		}
	}
}

// TestUnknownHelpTopicsAndShells: help for a command that does not exist,
// and a completion script for a shell it does not know, are command lines
// not understood (they printed the root help and exited 0).
func TestUnknownHelpTopicsAndShells(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
		says string
	}{
		{[]string{"help", "nosuch"}, 2, `unknown help topic "nosuch"`},
		{[]string{"help", "lease", "nosuch"}, 2, `unknown help topic "lease nosuch"`},
		{[]string{"completion", "nosuch"}, 2, `unknown command "nosuch" for "djinn completion"`},
		{[]string{"completion", "bash", "extra"}, 2, `usage: djinn completion bash`},
		{[]string{"help", "lease", "show"}, 0, "Usage:"},
		{[]string{"help", "exit-codes"}, 0, "the command line was not understood"},
		{[]string{"completion", "bash"}, 0, "bash completion"},
	} {
		got, out, errs := exitOf(t, tc.args...)
		if got != tc.want || !strings.Contains(out+errs, tc.says) {
			t.Errorf("djinn %v: exit %d, stdout %.80q, stderr %q; want exit %d saying %q", tc.args, got, out, errs, tc.want, tc.says)
		}
	}
}

// TestTransportFailuresSayTheirCause: a server or a listener that cannot be
// reached is told by its cause (connection refused), with the next step
// where there is one, not in gRPC's words ("connection error: desc =
// \"transport: Error while dialing: …\"").
func TestTransportFailuresSayTheirCause(t *testing.T) {
	r := newRig(t)
	closed := freePort(t)
	ref := "djinn://" + closed + "/00000000000000000000000000000001/00000000000000000000000000000001"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--server", closed, "--wait-timeout", "0"}, closed + ": nothing listens there: start a server"},
		{[]string{"status", "--server", "nosuchhost.invalid:4161", "--wait-timeout", "0"}, "nosuchhost.invalid:4161: cannot resolve host nosuchhost.invalid: check the name in --server"},
		{[]string{"events", "send", "--listener", ref, "--source", ref, "--id", "1", "--seq", "1", "--server", r.p.addr}, "dial tcp " + closed + ": connect: connection refused"},
	} {
		got, _, errs := exitOf(t, tc.args...)
		if got != 1 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("djinn %v: exit %d, stderr %q; want exit 1 and one line saying %q", tc.args, got, errs, tc.want)
		}
		for _, internal := range []string{"desc =", "transport:", "rpc error"} {
			if strings.Contains(errs, internal) {
				t.Errorf("djinn %v: stderr %q says gRPC's %q", tc.args, errs, internal)
			}
		}
	}
}

// TestInterruptedCommandSaysSo: a command interrupted while it waits for
// its answer (here a lock acquire queued behind a holder) says, in one
// line, that it was interrupted and what that leaves unknown — not
// "context canceled interrupt signal received".
func TestInterruptedCommandSaysSo(t *testing.T) {
	r := newRig(t)
	var set, holder, waiter struct {
		Set   string `json:"set"`
		Owner string `json:"owner"`
	}
	r.json(&set, "lock", "create")
	r.json(&holder, "lock", "owner")
	r.json(&waiter, "lock", "owner")
	r.must("lock", "acquire", set.Set, "--mode", "w", "--owner", holder.Owner)
	cmd := exec.Command(djinnBinary(t), "lock", "acquire", set.Set, "--mode", "w", "--owner", waiter.Owner, "--server", r.p.addr)
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }() // a test that failed early leaves no process behind
	eventually(t, "the acquire to queue", func() bool {
		var v struct {
			Waiters []json.RawMessage `json:"waiters"`
		}
		out, _, ok := r.run("lock", "show", set.Set, "-o", "json")
		return ok && json.Unmarshal([]byte(out), &v) == nil && len(v.Waiters) == 1
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("interrupted lock acquire: %v, want exit status 1", err)
	}
	if got := errb.String(); !strings.HasPrefix(got, "djinn: interrupted before the answer came") || strings.Count(got, "\n") != 1 || strings.Contains(got, "context canceled") {
		t.Errorf("interrupted lock acquire said %q, want one line saying it was interrupted", got)
	}
}

// TestFindThatFindsNothingSaysWhere: find that finds nothing before --wait
// passes says so once, with where it looked, not the deadline's own text.
func TestFindThatFindsNothingSaysWhere(t *testing.T) {
	loc := "jini://" + freePort(t)
	got, _, errs := exitOf(t, "find", "djinn.Landlord", "--locator", loc, "--wait", "300ms")
	want := "djinn: --wait 300ms passed: find djinn.Landlord: none found; 0 lookup services discovered (" + loc + "/)"
	if got != 1 || !strings.HasPrefix(errs, want) || strings.Contains(errs, "deadline") || strings.Count(errs, "\n") != 1 {
		t.Errorf("find at a locator nothing answers: exit %d, stderr %q; want exit 1 and %q", got, errs, want)
	}
}

// TestServeConfigurationNotUnderstood: djinn serve with a configuration
// value not of its kind refuses to start with exit status 2, in one line
// naming the value, as every other command line not understood.
func TestServeConfigurationNotUnderstood(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--log-level", "loud"}, `log-level "loud"`},
		{[]string{"--mailbox-max-stored", "-5"}, "max-stored -5"},
		{[]string{"--listen", "nohost"}, `endpoint "nohost"`},
		{[]string{"--txn-max-lease", "0"}, "max-lease 0s"},
		{[]string{"--node-id", "bad id"}, `node id "bad id"`},                      // exited 1, as a server that failed
		{[]string{"--discovery", "nohost"}, `lookup discovery: endpoint "nohost"`}, // served, its discovery never started
	} {
		args := append([]string{"serve", "--data-dir", t.TempDir()}, tc.args...)
		got, _, errs := exitOf(t, args...)
		if got != 2 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("djinn %v: exit %d, stderr %q; want exit 2 and one line naming %q", args, got, errs, tc.want)
		}
	}
}

// TestTemplateOfAFieldNotThereKeepsTheAnswer: a template naming a field
// the answer does not have fails after the command did its work; the
// error names the fields there are and carries the answer, so what was
// made (here a registration and its lease) is not lost.
func TestTemplateOfAFieldNotThereKeepsTheAnswer(t *testing.T) {
	r := newRig(t)
	out, errs, ok := r.run("mailbox", "register", "-o", "template={{.nosuch}}")
	if ok || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, `map has no entry for key "nosuch"`) ||
		!strings.Contains(errs, "its fields: .lease .listener .registration") || !strings.Contains(errs, `the answer: {"registration":"`) {
		t.Errorf("mailbox register -o template={{.nosuch}}: ok %v, stdout %q, stderr %q; want one line naming the fields and carrying the answer", ok, out, errs)
	}
}

// TestTypedFlagValuesSayWhatTheyWant: a value a typed flag cannot take is
// told with what the flag wants, not in Go's words ("strconv.ParseInt:
// parsing").
func TestTypedFlagValuesSayWhatTheyWant(t *testing.T) {
	const reg = "00000000000000000000000000000001"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mailbox", "pull", reg, "--after", "-1"}, `--after "-1": want a whole number, 0 or more`},
		{[]string{"mailbox", "receive", reg, "--count", "x"}, `--count "x": want a whole number`},
		{[]string{"lookup", "ls", "--max", "1.5"}, `--max "1.5": want a whole number`},
		{[]string{"events", "send", "--id", "99999999999999999999"}, `--id "99999999999999999999": out of range: want a whole number`},
		{[]string{"member", "ls", "--health=maybe"}, `--health "maybe": want true or false`},
		{[]string{"serve", "--election-timeout", "abc"}, `--election-timeout "abc": want a Go duration`},
	} {
		got, _, errs := exitOf(t, tc.args...)
		if got != 2 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "strconv") || strings.Contains(errs, "lease duration") {
			t.Errorf("djinn %v: exit %d, stderr %q; want exit 2 and %q", tc.args, got, errs, tc.want)
		}
	}
}

// TestGoneLeaseNamedOnce: a lease named by its short name that its
// landlord no longer knows is told naming it once ("LEASE X: lease X: …"
// named it twice).
func TestGoneLeaseNamedOnce(t *testing.T) {
	r := newRig(t)
	var reg mailboxRegJSON
	r.json(&reg, "mailbox", "register")
	r.must("lease", "cancel", reg.Lease.Name)
	for _, args := range [][]string{{"lease", "cancel", reg.Lease.Name}, {"lds", "show", reg.Lease.Name}} {
		_, errs, ok := r.run(args...)
		if ok || strings.Count(errs, reg.Lease.Name) != 1 {
			t.Errorf("djinn %v: ok %v, stderr %q; want a failure naming the lease once", args, ok, errs)
		}
	}
}

// TestUnknownCommandWithFlags: an unknown command followed by flags is
// told as the unknown command, exit status 2 (as without flags), not as a
// flag the group it was looked for in does not take; with -o json, in the
// JSON form. Flags with no command at all (djinn -o json) are told as the
// missing command, pointing to djinn help, not as a flag the root does
// not take ("unknown shorthand flag 'o'"); a flag no command has is named
// as well.
func TestUnknownCommandWithFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "djinn"`},
		{[]string{"bogus", "--server", "127.0.0.1:1"}, `unknown command "bogus" for "djinn"`},
		{[]string{"bogus", "-o", "json"}, `unknown command \"bogus\" for \"djinn\"`},
		{[]string{"-o", "json", "bogus"}, `unknown command \"bogus\" for \"djinn\"`},
		{[]string{"--server", "127.0.0.1:1", "bogus", "--nosuch"}, `unknown command "bogus" for "djinn"`},
		{[]string{"mailbox", "bogus", "--nosuch"}, `unknown command "bogus" for "djinn mailbox"`},
		{[]string{"lock", "bogus", "-o", "json", "--nosuch"}, `unknown command \"bogus\" for \"djinn lock\"`},
		{[]string{"-o", "json"}, "no command given: give a command and its flags after it"},
		{[]string{"-ojson"}, "no command given: give a command and its flags after it"},
		{[]string{"--server", "127.0.0.1:1"}, "no command given: give a command and its flags after it"},
		{[]string{"-o", "text", "--server", "127.0.0.1:1"}, "(djinn help lists the commands)"},
		{[]string{"--nosuch"}, "no command given, and no command has the flag --nosuch"},
		{[]string{"-Z"}, "no command given, and no command has the flag -Z"},
		{[]string{"-o", "json", "--nosuch"}, "no command given"},
	} {
		got, _, errs := exitOf(t, tc.args...)
		if got != 2 || !strings.Contains(errs, tc.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("djinn %v: exit %d, stderr %q; want exit 2 and one line saying %s", tc.args, got, errs, tc.want)
		}
		if slices.Contains(tc.args, "json") {
			checkJSONError(t, strings.Join(tc.args, " "), tc.args, 2)
		}
	}
}
