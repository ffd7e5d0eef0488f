package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIJoin: djinn join shows how every service joins lookup services,
// changes it only with the operator role, and djinn find finds a service
// by the attributes an operator gave it, then no more after a reset.
func TestCLIJoin(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	op := []string{"--join-secret-file", filepath.Join(n.dir, "join-secret")}
	at := "jini://" + n.discovery

	var joins []joinView
	if err := json.Unmarshal([]byte(mustRun(t, p, "join", "ls", "-o", "json")), &joins); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range joins {
		names = append(names, j.Service)
	}
	if strings.Join(names, ",") != "landlord,mailbox,renewal,txn,lock,lds,kv" {
		t.Errorf("join ls: services %v", names)
	}
	if _, errs, ok := run(t, p, "join", "groups", "add", "txn", "ops"); ok || !strings.Contains(errs, "needs the operator role") {
		t.Errorf("join groups add without the operator role: ok=%v %q", ok, errs)
	}

	mustRun(t, p, append([]string{"join", "attrs", "add", "all", "--attr", "Location.floor=3"}, op...)...)
	out := mustRun(t, p, append([]string{"join", "attrs", "add", "txn", "--attr", "net.jini.lookup.entry.Name.name=payments"}, op...)...)
	if !strings.Contains(out, `attributes  Location{floor=3}  net.jini.lookup.entry.Name{name="payments"}  (set by an operator)`) {
		t.Errorf("join attrs add printed:\n%s", out)
	}
	find := func(attr string) (string, string, bool) {
		cmd := exec.Command(djinnBinary(t), "find", "djinn.TransactionManager", "--locator", at, "--attr", attr, "--wait", "1s")
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		return o.String(), e.String(), err == nil
	}
	if out, errs, ok := find("net.jini.lookup.entry.Name.name=payments"); !ok || !strings.Contains(out, "types=djinn.TransactionManager") || !strings.Contains(out, "found at lookup service ") {
		t.Errorf("find by the operator's attribute: ok=%v %q %q", ok, out, errs)
	}
	if out := mustRun(t, p, append([]string{"join", "reset", "txn"}, op...)...); !strings.Contains(out, "attributes  (none)  (configured)") {
		t.Errorf("join reset printed:\n%s", out)
	}
	if _, errs, ok := find("net.jini.lookup.entry.Name.name=payments"); ok || !strings.Contains(errs, "--wait 1s passed") {
		t.Errorf("find after the reset: ok=%v %q, want nothing found within --wait", ok, errs)
	}
	if out := mustRun(t, p, "join", "show", "mailbox"); !strings.Contains(out, "attributes  Location{floor=3}  (set by an operator)") {
		t.Errorf("the mailbox's attributes after txn's reset:\n%s", out)
	}
	joinSubcommands(t, p, op, at)

	wantErrors(t, p, []errRow{
		{[]string{"join", "groups", "frob", "txn", "a"}, `"frob": want add, set or remove`},
		{[]string{"join", "groups", "add", "txn"}, "groups add: missing: the groups to add"},
		{append([]string{"join", "locators", "add", "txn", "http://x"}, op...), "http://x"},
		{[]string{"join", "attrs", "modify", "txn", "--match", "Location.floor=3"}, "1 --match templates and 0 --attr entries"},
		{[]string{"join", "attrs", "add", "txn", "--attr", "floor=3"}, `--attr: attribute "floor=3"`},
		{append([]string{"join", "attrs", "add", "txn", "--attr", "djinn.Cluster.cluster=x"}, op...), "the service sets its djinn.Cluster entries itself"},
		{[]string{"join", "show", "printer"}, `service "printer": no such service joins lookup services`},
	})
}

// joinSubcommands: one row per join subcommand and operation, each
// checked by the join it prints (-o json) of the service it changed.
func joinSubcommands(t *testing.T, p *proc, op []string, at string) {
	t.Helper()
	floors := func(v joinView) string {
		var out []string
		for _, e := range v.Attributes {
			f, _ := e.Fields["floor"].(map[string]any)
			out = append(out, fmt.Sprint(f["int"]))
		}
		return strings.Join(out, ",")
	}
	for _, row := range []struct {
		args  []string
		check func(joinView) bool
	}{
		{[]string{"join", "show", "lock"}, func(v joinView) bool { return v.Service == "lock" && v.GroupsConfigured }},
		{[]string{"join", "groups", "set", "lock", "a,b"}, func(v joinView) bool { return strings.Join(v.Groups, ",") == "a,b" && !v.GroupsConfigured }},
		{[]string{"join", "groups", "add", "lock", "c"}, func(v joinView) bool { return strings.Join(v.Groups, ",") == "a,b,c" }},
		{[]string{"join", "groups", "remove", "lock", "a"}, func(v joinView) bool { return strings.Join(v.Groups, ",") == "b,c" }},
		{[]string{"join", "locators", "set", "lock", at}, func(v joinView) bool { return strings.Join(v.Locators, ",") == at+"/" && !v.LocatorsConfigured }},
		{[]string{"join", "locators", "remove", "lock", at}, func(v joinView) bool { return len(v.Locators) == 0 }},
		{[]string{"join", "locators", "add", "lock", at}, func(v joinView) bool { return strings.Join(v.Locators, ",") == at+"/" }},
		{[]string{"join", "attrs", "set", "lock", "--attr", "Location.floor=4"}, func(v joinView) bool { return floors(v) == "4" && !v.AttributesConfigured }},
		{[]string{"join", "attrs", "add", "lock", "--attr", "Location.floor=6"}, func(v joinView) bool { return floors(v) == "4,6" }},
		{[]string{"join", "attrs", "modify", "lock", "--match", "Location.floor=4", "--attr", "Location.floor=5"}, func(v joinView) bool { return floors(v) == "5,6" }},
		{[]string{"join", "attrs", "remove", "lock", "--match", "Location.floor=6"}, func(v joinView) bool { return floors(v) == "5" }},
		{[]string{"join", "reset", "lock"}, func(v joinView) bool {
			return v.GroupsConfigured && v.LocatorsConfigured && v.AttributesConfigured && len(v.Attributes) == 0
		}},
	} {
		var v joinView
		out := mustRun(t, p, append(append(row.args, "-o", "json"), op...)...)
		if err := json.Unmarshal([]byte(out), &v); err != nil || !row.check(v) {
			t.Errorf("djinn %v printed %s (%v)", row.args, out, err)
		}
	}
}
