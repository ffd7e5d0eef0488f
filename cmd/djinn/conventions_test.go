package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v2"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestClampNotice: a grant shorter than asked says so on stderr (a JSON
// notice with -o json), and one as asked, or asked as any, does not; an
// old flag name works and says what replaced it.
func TestClampNotice(t *testing.T) {
	r := newRig(t, "--mailbox-max-lease", "5m")
	_, errs, ok := r.run("mailbox", "register", "--lease", "10m")
	if !ok || !strings.Contains(errs, "djinn: note: the registration's lease was granted for 5m0s, not the 10m0s asked") {
		t.Errorf("register --lease 10m: ok=%v stderr %q, want a notice of the clamp", ok, errs)
	}
	// The notice names what sets the most: a flag where one does, the
	// lookup service's policy where none does.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mailbox", "register", "--lease", "10m"}, "(djinn serve --mailbox-max-lease)"},
		{[]string{"lookup", "register", "--type", "Printer", "--endpoint", "10.0.0.7:9100", "--lease", "10m"}, "the lookup service's policy"},
	} {
		if _, errs, ok := r.run(tc.args...); !ok || !strings.Contains(errs, tc.want) || strings.Contains(errs, "*-max-lease flags") {
			t.Errorf("djinn %v: ok=%v stderr %q, want a notice naming %q", tc.args, ok, errs, tc.want)
		}
	}
	for _, lease := range []string{"any", "1m"} {
		if _, errs, ok := r.run("mailbox", "register", "--lease", lease); !ok || errs != "" {
			t.Errorf("register --lease %s: ok=%v stderr %q, want nothing", lease, ok, errs)
		}
	}
	_, errs, ok = r.run("mailbox", "register", "--lease", "1h", "-o", "json")
	var n struct {
		Notice struct {
			Message string `json:"message"`
			Asked   struct {
				Seconds float64 `json:"seconds"`
			} `json:"asked"`
			Granted struct {
				Seconds float64 `json:"seconds"`
			} `json:"granted"`
		} `json:"notice"`
	}
	if err := json.Unmarshal([]byte(errs), &n); !ok || err != nil || n.Notice.Asked.Seconds != 3600 || n.Notice.Granted.Seconds != 300 {
		t.Errorf("register --lease 1h -o json: ok=%v stderr %q (%v), want a JSON notice of 3600s asked, 300s granted", ok, errs, err)
	}
	_, errs, ok = r.run("mailbox", "register", "--duration", "1m")
	if !ok || !strings.Contains(errs, "--duration is an old name: use --lease") {
		t.Errorf("register --duration 1m: ok=%v stderr %q, want served, with a notice of the new name", ok, errs)
	}
}

// TestCommitWaitBounded: txn commit --wait D returns within D, while the
// manager still waits for a participant that does not answer, saying on
// stderr which one it waits for and why; the transaction goes on without
// the command.
func TestCommitWaitBounded(t *testing.T) {
	r := newRig(t)
	var tx txnCreatedJSON
	r.json(&tx, "txn", "create", "--lease", "10m")
	part, err := djinn.ParseRef("djinn://" + freePort(t) + "/" + djinn.NewID().String() + "/" + djinn.NewID().String())
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := client.ParseTransactionToken(tx.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := djinnpb.NewTransactionManagerClient(dial(t, r.p.addr)).Join(ctxT(t), &djinnpb.JoinTransactionRequest{
		Id: tx.ID, Secret: secret[:], Participant: &djinnpb.Ref{Endpoint: part.Endpoint, ServiceId: part.Service[:], ObjectId: part.Object[:]}, CrashCount: 1,
	}); err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatUint(tx.ID, 10)
	_, errs, ok := r.run("txn", "commit", id, "--wait", "2500ms")
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	last := lines[len(lines)-1]
	if ok || !strings.Contains(last, "--wait 2.5s passed with the transaction VOTING") || !strings.Contains(last, part.String()+" (no vote yet") ||
		!strings.Contains(last, "djinn txn show "+id) {
		t.Errorf("commit --wait 2500ms: ok=%v stderr %q, want the wait to end with the participant not answered named", ok, errs)
	}
	if len(lines) < 2 || !strings.Contains(lines[0], "djinn: note: waited") || !strings.Contains(lines[0], "waiting for "+part.String()) {
		t.Errorf("commit --wait: stderr %q, want a progress line each second naming the participant waited for", errs)
	}
	// The vote goes on (it gives up after 30s): the command did not wait
	// for it.
	if st := strings.TrimSpace(r.must("txn", "state", tx.Token)); st != "VOTING" {
		t.Errorf("state after the command returned: %s, want VOTING", st)
	}
}

// TestServeHelp: serve --help lists the server's flags only; client
// commands list the client's.
func TestServeHelp(t *testing.T) {
	out, _, ok := runNoServer(t, "serve", "--help")
	if !ok || !strings.Contains(out, "--listen") || !strings.Contains(out, "--tls-cert") {
		t.Fatalf("serve --help printed:\n%s", out)
	}
	for _, client := range []string{"--server", "--output", "--tls-key string      PEM key of --tls-cert"} {
		if strings.Contains(out, client) {
			t.Errorf("serve --help lists the client flag %s:\n%s", client, out)
		}
	}
	out, _, _ = runNoServer(t, "status", "--help")
	if !strings.Contains(out, "--server") || !strings.Contains(out, "--tls-ca") || strings.Contains(out, "--data-dir") || strings.Contains(out, "--ca ") {
		t.Errorf("status --help printed:\n%s", out)
	}
}

// TestCompletion: the shell completion completes modes, formats and the
// caller's transactions from the server.
func TestCompletion(t *testing.T) {
	r := newRig(t)
	var tx txnCreatedJSON
	r.json(&tx, "txn", "create")
	var reg mailboxRegJSON
	r.json(&reg, "mailbox", "register")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "lock", "acquire", "0123456789abcdef0123456789abcdef", "--mode", ""}, "iw\n"},
		{[]string{"__complete", "status", "-o", ""}, "yaml\n"},
		{[]string{"__complete", "txn", "ls", "--state", "c"}, "committed\n"},
		{[]string{"__complete", "txn", "--server", r.p.addr, "show", ""}, strconv.FormatUint(tx.ID, 10) + "\tACTIVE\n"},
		{[]string{"__complete", "mailbox", "--server", r.p.addr, "show", ""}, reg.ID + "\tstored_events=0"},
		{[]string{"__complete", "lease", "--server", r.p.addr, "show", ""}, reg.Lease.Name + "\tcovers=mailbox registration"},
		{[]string{"__complete", "ls", ""}, "lookup-items\t"},
	} {
		out, errs, ok := runNoServer(t, tc.args...)
		if !ok || !strings.Contains(out, tc.want) {
			t.Errorf("djinn %v: ok=%v %q %q, want %q among the completions", tc.args, ok, out, errs, tc.want)
		}
	}
	// A token (ID.SECRET) is not completed with a bare id, which the
	// command would refuse: the listing has no secrets.
	for _, args := range [][]string{
		{"__complete", "txn", "--server", r.p.addr, "state", ""},
		{"__complete", "txn", "--server", r.p.addr, "nest", ""},
		{"__complete", "kv", "--server", r.p.addr, "get", "k", "--txn", ""},
		{"__complete", "lock", "--server", r.p.addr, "acquire", "0123456789abcdef0123456789abcdef", "--mode", "w", "--txn", ""},
	} {
		if out, errs, ok := runNoServer(t, args...); !ok || strings.Contains(out, strconv.FormatUint(tx.ID, 10)) {
			t.Errorf("djinn %v: ok=%v %q %q, want no transaction id offered where a token is wanted", args, ok, out, errs)
		}
	}
	if out, _, ok := runNoServer(t, "completion", "bash"); !ok || !strings.Contains(out, "__djinn") {
		t.Errorf("completion bash printed %.200q", out)
	}
}

// TestVersion: djinn version says the module, the Go version and, for a
// build of a checkout, the commit.
func TestVersion(t *testing.T) {
	out, errs, ok := runNoServer(t, "version", "-o", "json")
	var v struct {
		Module  string  `json:"module"`
		Version string  `json:"version"`
		Commit  *string `json:"commit"`
		Go      string  `json:"go"`
	}
	if err := json.Unmarshal([]byte(out), &v); !ok || err != nil || v.Module != "github.com/djinn-go/djinn" || v.Version == "" || !strings.HasPrefix(v.Go, "go1.") {
		t.Fatalf("version -o json: ok=%v %q %q (%v)", ok, out, errs, err)
	}
	if text, _, _ := runNoServer(t, "version"); !strings.HasPrefix(text, "djinn "+v.Version+"\n") || !strings.Contains(text, v.Go) {
		t.Errorf("version printed %q", text)
	}
}

// TestRootHelp: djinn --help starts with what djinn is and a first
// session, says how a client command finds its server, formats its output
// and exits, and lists every command under a heading of what it is for.
func TestRootHelp(t *testing.T) {
	out, errs, ok := runNoServer(t, "--help")
	if !ok {
		t.Fatalf("--help: %q", errs)
	}
	for _, want := range []string{"djinn serve ", "DJINN_SERVER", "-o json", "djinn help exit-codes", "--wait-timeout",
		"Run a server and look at it:", "Use its services:", "Operate a cluster:"} {
		if !strings.Contains(out, want) {
			t.Errorf("djinn --help lacks %q:\n%s", want, out)
		}
	}
	root, _ := newRoot()
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() && c.GroupID == "" && c.Name() != "help" && c.Name() != "completion" {
			t.Errorf("djinn %s is listed under no heading of djinn --help", c.Name())
		}
	}
}

// TestOutputForms: -o yaml and -o template print the JSON form: the same
// fields, 64-bit ids as strings in both.
func TestOutputForms(t *testing.T) {
	r := newRig(t)
	var tx txnCreatedJSON
	r.json(&tx, "txn", "create", "--lease", "10m")
	id := strconv.FormatUint(tx.ID, 10)
	var j map[string]any
	if err := json.Unmarshal([]byte(r.must("txn", "show", id, "-o", "json")), &j); err != nil {
		t.Fatal(err)
	}
	var y map[string]any
	out := r.must("txn", "show", id, "-o", "yaml")
	if err := yaml.Unmarshal([]byte(out), &y); err != nil {
		t.Fatalf("txn show -o yaml: %v\n%s", err, out)
	}
	if y["id"] != id || j["id"] != id || y["state"] != j["state"] || len(y) != len(j) {
		t.Errorf("txn show: yaml %v, json %v: want the same fields, the id %s a string in both", y, j, id)
	}
	if got := strings.TrimSpace(r.must("txn", "show", id, "-o", "template={{.id}} {{.state}}")); got != id+" ACTIVE" {
		t.Errorf("-o template={{.id}} {{.state}} printed %q, want %q", got, id+" ACTIVE")
	}
}

// TestFlagVocabulary: no command shows a flag by a name the vocabulary
// retired (--timeout, --duration, --target, --ca, --cert): those are
// hidden aliases of --wait, --lease or --for, --listener and --tls-*;
// and --lease means one thing on every command.
func TestFlagVocabulary(t *testing.T) {
	retired := map[string]bool{"timeout": true, "duration": true, "target": true, "ca": true, "cert": true}
	root, _ := newRoot()
	seen := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			if retired[f.Name] && !f.Hidden {
				t.Errorf("%s shows --%s, a retired name", c.CommandPath(), f.Name)
			}
			// --lease is a lease length asked for everywhere: a positive
			// duration, forever or any, and its help says so.
			if f.Name == "lease" && (f.Value.Type() != "string" || !strings.Contains(f.Usage, "positive Go duration, forever or any") || strings.Contains(f.Usage, "zero")) {
				t.Errorf("%s --lease (%s) %q: want a lease length, a positive Go duration, forever or any", c.CommandPath(), f.Value.Type(), f.Usage)
			}
			seen[f.Name] = true
		}
		c.Flags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for name := range retired {
		if !seen[name] {
			t.Errorf("--%s is not even a hidden alias: scripts of the previous release break", name)
		}
	}
}
