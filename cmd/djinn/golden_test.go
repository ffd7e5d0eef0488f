package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The JSON shape of every command's output is pinned by a golden file in
// testdata/json: the keys it prints and the JSON type of each value
// (string, number, bool, null; the first element of a list standing for
// all). go test -run TestGoldenJSON -update rewrites them.

var update = flag.Bool("update", false, "rewrite the golden files of testdata/json")

// dataKeyed are the objects whose keys are data, not names of the form:
// an entry's fields, a holder's lock counts, a status's counts, an item's
// type hierarchy. Their values' shapes merge under "*".
var dataKeyed = map[string]bool{"fields": true, "locks": true, "counts": true, "supertypes": true}

// shape replaces every value of a decoded JSON document by its type. The
// elements of a list merge into one shape, as the values of a data-keyed
// object do; a value of two types shows both ("null|string").
func shape(key string, v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			if dataKeyed[key] {
				out["*"] = merge(out["*"], shape("", e))
				continue
			}
			out[k] = shape(k, e)
		}
		return out
	case []any:
		var m any
		for _, e := range x {
			m = merge(m, shape(key, e))
		}
		if m == nil {
			return []any{}
		}
		return []any{m}
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	}
	return "null"
}

// merge is the shape of values of shapes a and b (a nil: none yet).
func merge(a, b any) any {
	if a == nil {
		return b
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	// An object that may be null is the object with "(or)": "null".
	switch {
	case aok && b == "null":
		return merge(a, map[string]any{"(or)": "null"})
	case bok && a == "null":
		return merge(map[string]any{"(or)": "null"}, b)
	}
	if aok && bok {
		out := map[string]any{}
		for k, v := range am {
			out[k] = v
		}
		for k, v := range bm {
			out[k] = merge(out[k], v)
		}
		return out
	}
	al, alok := a.([]any)
	bl, blok := b.([]any)
	if alok && blok {
		switch {
		case len(al) == 0:
			return bl
		case len(bl) == 0:
			return al
		}
		return []any{merge(al[0], bl[0])}
	}
	as, bs := fmt.Sprint(a), fmt.Sprint(b)
	if as == bs {
		return a
	}
	kinds := strings.Split(as+"|"+bs, "|")
	sort.Strings(kinds)
	return strings.Join(slicesCompact(kinds), "|")
}

// slicesCompact drops repeated strings from a sorted list.
func slicesCompact(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// goldenRun checks JSON documents against golden files, and records which
// commands it saw.
type goldenRun struct {
	t    *testing.T
	seen map[string]bool
}

// check compares the shapes of the JSON documents in out (one, or one a
// line) with testdata/json/name.json.
func (g *goldenRun) check(name, out string) []any {
	g.t.Helper()
	g.seen[name] = true
	var docs []any
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			g.t.Fatalf("%s: %v in %q", name, err, out)
		}
		docs = append(docs, v)
	}
	if len(docs) == 0 {
		g.t.Fatalf("%s: no JSON in %q", name, out)
	}
	shapes := make([]any, len(docs))
	for i, d := range docs {
		shapes[i] = shape("", d)
	}
	var want any = shapes
	if len(shapes) == 1 {
		want = shapes[0]
	}
	got, _ := json.MarshalIndent(want, "", "  ")
	got = append(got, '\n')
	path := filepath.Join("testdata", "json", name+".json")
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			g.t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			g.t.Fatal(err)
		}
		return docs
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		g.t.Fatalf("%s: %v (go test -run TestGoldenJSON -update writes it)", name, err)
	}
	var goldenShape, gotShape any
	if err := json.Unmarshal(golden, &goldenShape); err != nil {
		g.t.Fatalf("%s: %v", path, err)
	}
	_ = json.Unmarshal(got, &gotShape)
	if !sameShape(goldenShape, gotShape) {
		g.t.Errorf("%s: the JSON shape changed:\n%s\nwant (%s):\n%s", name, got, path, golden)
	}
	return docs
}

// sameShape compares two shapes. An empty list matches any list: what a
// list holds is known only when it holds something (a bench reports the
// host's steal among its figures only when there was some).
func sameShape(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !sameShape(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok {
			return false
		}
		if len(x) == 0 || len(y) == 0 {
			return true
		}
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameShape(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// on runs a command against p with -o json and checks its output; it
// returns the first document, decoded.
func (g *goldenRun) on(p *proc, name string, args ...string) map[string]any {
	g.t.Helper()
	out, errs, ok := run(g.t, p, append(args, "-o", "json")...)
	if !ok && !strings.Contains(errs, `"error"`) {
		g.t.Fatalf("djinn %v: %s", args, errs)
	}
	docs := g.check(name, out)
	m, _ := docs[0].(map[string]any)
	return m
}

// plain runs a command that takes no --server with -o json and checks its
// output.
func (g *goldenRun) plain(name string, args ...string) {
	g.t.Helper()
	out, errs, ok := runNoServer(g.t, append(args, "-o", "json")...)
	if !ok {
		g.t.Fatalf("djinn %v: %s", args, errs)
	}
	g.check(name, out)
}

// fails runs a command against p that fails, with -o json, and checks
// the error it writes on stderr.
func (g *goldenRun) fails(p *proc, name string, args ...string) {
	g.t.Helper()
	_, errs, ok := run(g.t, p, append(args, "-o", "json")...)
	if ok {
		g.t.Fatalf("djinn %v succeeded", args)
	}
	g.check(name, errs)
}

// leafNames are the golden names of every command of the tree: its path
// without "djinn", joined by dashes.
func leafNames(c *cobra.Command) []string {
	var out []string
	if c.Runnable() && c.Annotations["group"] == "" && c.Name() != "help" && c.Name() != "completion" && !strings.HasPrefix(c.Name(), "__") {
		out = append(out, strings.ReplaceAll(strings.TrimPrefix(c.CommandPath(), "djinn "), " ", "-"))
	}
	for _, sub := range c.Commands() {
		out = append(out, leafNames(sub)...)
	}
	return out
}

// goldenExempt are the commands without a golden file, and why.
var goldenExempt = map[string]string{
	"serve":                 "prints no JSON: it serves",
	"member-add":            "needs a second server waiting to be added: TestCLIMembers",
	"member-remove":         "needs a second member: TestCLIMembers",
	"member-leave":          "stops the member it names: TestCLIMembers",
	"leader-transfer":       "needs a second voter: TestCLIMembers",
	"bench-renewal":         "a soak of minutes; its report has the shape of bench's (bench-lock)",
	"exit-codes":            "a help topic",
	"completion-bash":       "a shell script, not JSON",
	"completion-fish":       "a shell script, not JSON",
	"completion-powershell": "a shell script, not JSON",
	"completion-zsh":        "a shell script, not JSON",
	"bench-plain-server":    "hidden: the plain gRPC server a bench measures its ceiling on; it serves, prints no JSON",
}

// TestGoldenJSON runs every command with -o json against real servers and
// checks the shape of what it prints; every command of the tree has a
// golden file or a reason not to.
func TestGoldenJSON(t *testing.T) {
	g := &goldenRun{t: t, seen: map[string]bool{}}
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	g.statusAndLeases(p)
	g.mailboxAndEvents(p)
	g.renewal(p)
	g.txnAndKV(p)
	g.lock(p)
	g.lookup(p)
	g.ldsAndDiscover(p)
	g.others(p)
	g.ls()
	g.snapshot(p, n)
	g.join(p, n)
	root, _ := newRoot()
	var missing []string
	for _, name := range leafNames(root) {
		if !g.seen[name] && goldenExempt[name] == "" {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("commands without a golden JSON file: %v", missing)
	}
}

func (g *goldenRun) statusAndLeases(p *proc) {
	g.on(p, "status", "status")
	g.plain("version", "version")
	reg := g.on(p, "mailbox-register", "mailbox", "register", "--lease", "10m")
	name := reg["lease"].(map[string]any)["name"].(string)
	g.on(p, "lease-show", "lease", "show", name)
	g.on(p, "lease-renew", "lease", "renew", name, "--lease", "1h")
	_, notice, _ := run(g.t, p, "lease", "renew", name, "--lease", "100h", "-o", "json")
	g.check("notice", notice)
	g.on(p, "lease-cancel", "lease", "cancel", name)
	g.on(p, "lease-show-gone", "lease", "show", name)
	g.fails(p, "error", "mailbox", "show", reg["registration"].(string))
}

func (g *goldenRun) mailboxAndEvents(p *proc) {
	reg := g.on(p, "mailbox-register", "mailbox", "register")
	id, listener := reg["registration"].(string), reg["listener"].(string)
	g.on(p, "events-send", "events", "send", "--listener", listener, "--source", listener, "--id", "7", "--seq", "1", "--handback", "h")
	g.on(p, "mailbox-show", "mailbox", "show", id)
	g.on(p, "mailbox-pull", "mailbox", "pull", id)
	g.on(p, "mailbox-receive", "mailbox", "receive", id, "--count", "1")
	g.on(p, "mailbox-ack", "mailbox", "ack", id, "1")
	l := listenEvents(g.t)
	g.check("events-listen", fmt.Sprintf(`{"listener": %q}`, l.ref))
	g.on(p, "mailbox-enable", "mailbox", "enable", id, "--listener", l.ref)
	mustRun(g.t, p, "events", "send", "--listener", listener, "--source", listener, "--id", "7", "--seq", "2")
	g.check("events-listen-event", l.next(g.t, "an event"))
	g.on(p, "mailbox-disable", "mailbox", "disable", id)
}

func (g *goldenRun) renewal(p *proc) {
	set := g.on(p, "renewal-create", "renewal", "create", "--lease", "1h")
	id := set["set"].(string)
	reg := g.on(p, "mailbox-register", "mailbox", "register")
	lease, listener := reg["lease"].(map[string]any)["name"].(string), reg["listener"].(string)
	g.on(p, "renewal-add", "renewal", "add", id, lease, "--desired", "1h", "--renew", "1m")
	g.on(p, "renewal-ls", "renewal", "ls", id)
	g.on(p, "renewal-warn", "renewal", "warn", id, "--listener", listener, "--min-warning", "1m")
	g.on(p, "renewal-failures", "renewal", "failures", id, "--listener", listener)
	g.on(p, "renewal-show", "renewal", "show", id)
	g.on(p, "renewal-clear-warn", "renewal", "clear-warn", id)
	g.on(p, "renewal-clear-failures", "renewal", "clear-failures", id)
	g.on(p, "renewal-remove", "renewal", "remove", id, lease)
}

func (g *goldenRun) txnAndKV(p *proc) {
	tx := g.on(p, "txn-create", "txn", "create", "--lease", "10m")["token"].(string)
	g.on(p, "txn-nest", "txn", "nest", tx, "--lease", "1m")
	g.on(p, "kv-put", "kv", "put", "k", "v", "--txn", tx)
	g.on(p, "kv-get", "kv", "get", "k", "--txn", tx)
	g.on(p, "kv-ls", "kv", "ls", "--txn", tx)
	g.on(p, "txn-show", "txn", "show", tx)
	g.on(p, "txn-state", "txn", "state", tx)
	g.on(p, "txn-ls", "txn", "ls")
	g.on(p, "txn-commit", "txn", "commit", tx, "--wait", "10s")
	g.on(p, "kv-delete", "kv", "delete", "k")
	tx2 := g.on(p, "txn-create", "txn", "create", "--lease", "1m")["token"].(string)
	g.on(p, "txn-abort", "txn", "abort", tx2)
}

func (g *goldenRun) lock(p *proc) {
	set := g.on(p, "lock-create", "lock", "create", "--lease", "1h")["set"].(string)
	owner := g.on(p, "lock-owner", "lock", "owner")["owner"].(string)
	fence := g.on(p, "lock-acquire", "lock", "acquire", set, "--mode", "w", "--owner", owner)["fence"].(string)
	g.on(p, "lock-change", "lock", "change", set, "--from", "w", "--to", "r", "--owner", owner)
	g.on(p, "lock-validate", "lock", "validate", set, fence)
	g.on(p, "lock-show", "lock", "show", set)
	g.on(p, "lock-release", "lock", "release", set, "--mode", "r", "--owner", owner)
	tset := g.on(p, "lock-create-forever", "lock", "create", "--transactional")["set"].(string)
	tx := g.on(p, "txn-create", "txn", "create", "--lease", "1m")["token"].(string)
	mustRun(g.t, p, "lock", "acquire", tset, "--mode", "w", "--txn", tx)
	g.on(p, "lock-drop", "lock", "drop", tset, "--txn", tx)
}

func (g *goldenRun) lookup(p *proc) {
	reg := g.on(p, "lookup-register", "lookup", "register", "--type", "Laser", "--supertype", "Laser=Printer", "--attr", "Name.model=laser", "--attr", "Name.n=3",
		"--attr", "Name.ok=true", "--endpoint", "127.0.0.1:9")
	lease := reg["lease"].(map[string]any)["name"].(string)
	g.on(p, "lookup-attrs", "lookup", "attrs", "add", lease, "--attr", "Status.state=idle")
	g.on(p, "lookup-find", "lookup", "find", "--type", "Printer")
	g.on(p, "lookup-ls", "lookup", "ls")
	g.on(p, "lookup-types", "lookup", "types")
	g.on(p, "lookup-info", "lookup", "info")
	out, _, _ := run(g.t, p, "lookup", "watch", "--type", "Printer", "--for", "1s", "-o", "json")
	g.check("lookup-watch", out)
}

func (g *goldenRun) ldsAndDiscover(p *proc) {
	q := newNode(g.t)
	qp := q.start(g.t, "--groups", "lab")
	defer qp.stop(g.t)
	l := listenEvents(g.t)
	reg := g.on(p, "lds-register", "lds", "register", "--groups", "", "--listener", l.ref)["registration"].(string)
	l.next(g.t, "the discovered event of the server's own lookup service")
	g.on(p, "lds-locators", "lds", "locators", "add", reg, "jini://"+q.discovery)
	l.next(g.t, "the discovered event of the other server's")
	g.on(p, "lds-groups", "lds", "groups", "add", reg, "lab")
	g.on(p, "lds-show", "lds", "show", reg)
	g.on(p, "lds-registrars", "lds", "registrars", reg)
	info := g.on(qp, "lookup-info", "lookup", "info")
	g.on(p, "lds-discard", "lds", "discard", reg, info["service_id"].(string))
	g.plain("discover", "discover", "--locator", "jini://"+q.discovery)
	g.on(p, "demo-transfer", "demo", "transfer", "--to", qp.addr)
}

func (g *goldenRun) others(p *proc) {
	g.on(p, "member-ls", "member", "ls")
	g.on(p, "bench", "bench", "--ops", "empty", "--clients", "1", "--for", "100ms", "--conns", "1")
	g.on(p, "bench-lock", "bench", "lock", "--ops", "uncontended", "--clients", "1", "--for", "100ms", "--conns", "1", "--admin", "")
	g.on(p, "bench-txn", "bench", "txn", "--clients", "1", "--for", "100ms", "--conns", "1")
	g.on(p, "bench-lookup", "bench", "lookup", "--ops", "lookup", "--items", "10", "--clients", "1", "--for", "100ms", "--conns", "1", "--admin", "")
	g.on(p, "bench-lds", "bench", "lds", "--registrations", "5", "--registrars", "1", "--clients", "1", "--conns", "1", "--admin", "")
	dir := g.t.TempDir()
	g.plain("tls-ca", "tls", "ca", "--dir", dir)
	g.plain("tls-server", "tls", "server", "--dir", dir)
	g.plain("tls-client", "tls", "client", "a", "--dir", dir)
	g.plain("tls-peer", "tls", "peer", "n1", "--dir", dir)
	g.plain("tls-revoke", "tls", "revoke", filepath.Join(dir, "client-a.pem"), "--dir", dir)
	stopped := newNode(g.t)
	stopped.start(g.t).stop(g.t)
	g.plain("repair", "repair", "--data-dir", stopped.dir)
}

// ls lists resources of every kind on a server of its own, so that what
// it lists — and so each list's shape — is the same every run: a lease
// that ends and one that does not, a transaction decided (its lease gone)
// and one nested.
func (g *goldenRun) ls() {
	p := newNode(g.t).start(g.t)
	defer p.stop(g.t)
	reg := g.on(p, "mailbox-register", "mailbox", "register")
	mustRun(g.t, p, "renewal", "create")
	mustRun(g.t, p, "lock", "create")
	mustRun(g.t, p, "lock", "create", "--lease", "1h")
	tx := g.on(p, "txn-create", "txn", "create")["token"].(string)
	mustRun(g.t, p, "txn", "nest", tx)
	done := g.on(p, "txn-create", "txn", "create")["id"].(string)
	mustRun(g.t, p, "txn", "commit", done)
	mustRun(g.t, p, "lookup", "register", "--type", "Printer", "--endpoint", "127.0.0.1:9")
	mustRun(g.t, p, "lds", "register", "--groups", "lab", "--listener", reg["listener"].(string))
	mustRun(g.t, p, "mailbox", "register")
	g.on(p, "ls", "ls", "leases", "--covers", "mailbox registration", "--max", "1") // a page of two
	for _, kind := range []string{"mailboxes", "renewal-sets", "lock-sets", "lds-registrations", "transactions", "lookup-items"} {
		g.on(p, "ls-"+kind, "ls", kind)
	}
}

func (g *goldenRun) snapshot(p *proc, n *node) {
	file := filepath.Join(g.t.TempDir(), "djinn.snap")
	g.on(p, "snapshot-save", "snapshot", "save", file, "--join-secret-file", filepath.Join(n.dir, "join-secret"))
	g.plain("snapshot-restore", "snapshot", "restore", file, "--data-dir", filepath.Join(g.t.TempDir(), "restored"))
}

func (g *goldenRun) join(p *proc, n *node) {
	op := []string{"--join-secret-file", filepath.Join(n.dir, "join-secret")}
	g.on(p, "join-ls", "join", "ls")
	g.on(p, "join-show", "join", "show", "txn")
	g.on(p, "join-groups", append([]string{"join", "groups", "add", "txn", "ops"}, op...)...)
	g.on(p, "join-locators", append([]string{"join", "locators", "add", "txn", "jini://" + n.discovery}, op...)...)
	g.on(p, "join-attrs", append([]string{"join", "attrs", "add", "txn", "--attr", "Location.floor=3"}, op...)...)
	g.on(p, "join-reset", append([]string{"join", "reset", "txn"}, op...)...)
	g.plain("find", "find", "djinn.TransactionManager", "--locator", "jini://"+n.discovery)
}
