package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// lsJSON is a page as ls prints it with -o json.
type lsJSON struct {
	Kind      string           `json:"kind"`
	Total     int              `json:"total"`
	Resources []map[string]any `json:"resources"`
	Next      *string          `json:"next"`
}

func (l lsJSON) names() []string {
	var out []string
	for _, r := range l.Resources {
		out = append(out, r["name"].(string))
	}
	return out
}

// TestCLILs: djinn ls lists each kind of resource, a page at a time, with
// its filters; every principal's needs the operator role (here the join
// secret); a command line it does not understand exits 2.
func TestCLILs(t *testing.T) {
	n := newNode(t)
	p := n.start(t)
	defer p.stop(t)
	r := &rig{t: t, p: p}
	var regs []string
	for range 3 {
		var reg mailboxRegJSON
		r.json(&reg, "mailbox", "register", "--lease", "10m")
		regs = append(regs, reg.ID)
	}
	slices.Sort(regs)
	var set struct {
		Set string `json:"set"`
	}
	r.json(&set, "lock", "create")

	var page lsJSON
	r.json(&page, "ls", "mailboxes")
	if page.Kind != "mailboxes" || page.Total != 3 || !slices.Equal(page.names(), regs) || page.Next != nil ||
		page.Resources[0]["stored_events"] != 0.0 || page.Resources[0]["lease"] == nil {
		t.Errorf("ls mailboxes: %+v, want the three registrations %v", page, regs)
	}
	r.json(&page, "ls", "mailboxes", "--max", "2")
	if len(page.Resources) != 2 || page.Next == nil || *page.Next != regs[1] {
		t.Fatalf("ls mailboxes --max 2: %+v, want the first two and where the next page starts", page)
	}
	if text := r.must("ls", "mailboxes", "--max", "2"); !strings.Contains(text, "2 of 3 shown; the next page: djinn ls mailboxes --after "+regs[1]) {
		t.Errorf("ls mailboxes --max 2 printed:\n%s", text)
	}
	r.json(&page, "ls", "mailboxes", "--after", regs[1])
	if !slices.Equal(page.names(), regs[2:]) || page.Next != nil {
		t.Errorf("ls mailboxes --after %s: %+v, want the last", regs[1], page)
	}
	// A lease's time left is in milliseconds, as every other command
	// shows it.
	r.json(&page, "ls", "leases", "--covers", "mailbox registration")
	if left, ok := page.Resources[0]["remaining"].(map[string]any); !ok || regexp.MustCompile(`\.[0-9]{4}`).MatchString(fmt.Sprint(left["human"])) {
		t.Errorf("ls leases: remaining %v, want milliseconds at most", page.Resources[0]["remaining"])
	}
	r.json(&page, "ls", "leases", "--covers", "lock set")
	if page.Total != 1 || page.Resources[0]["covers"] != "lock set" || page.Resources[0]["expiration"] != nil {
		t.Errorf("ls leases --covers \"lock set\": %+v, want the lock set's lease, forever", page)
	}
	r.json(&page, "ls", "lock")
	if !slices.Equal(page.names(), []string{set.Set}) {
		t.Errorf("ls lock: %+v, want set %s", page, set.Set)
	}
	if out := r.must("ls", "renewal-sets"); out != "no renewal-sets\n" {
		t.Errorf("ls renewal-sets printed %q", out)
	}
	secret := filepath.Join(n.dir, "join-secret")
	var own lsJSON
	r.json(&own, "ls", "leases")
	r.json(&page, "ls", "leases", "--all", "--join-secret-file", secret)
	for _, name := range own.names() {
		if !slices.Contains(page.names(), name) {
			t.Errorf("ls leases --all %v lacks lease %s", page.names(), name)
		}
	}
	if _, errs, ok := r.run("ls", "leases", "--all"); ok || !strings.Contains(errs, "operator role") {
		t.Errorf("ls --all without the join secret: ok=%v %s, want refused for want of the operator role", ok, errs)
	}
	if _, errs, ok := r.run("ls", "leases", "--all", "--join-secret-file", filepath.Join(t.TempDir(), "none")); ok || !strings.Contains(errs, "join-secret-file") {
		t.Errorf("ls --all with a secret file that is not there: ok=%v %s", ok, errs)
	}
	lsUsage(t, p.addr)
}

// lsUsage: command lines ls does not understand exit 2.
func lsUsage(t *testing.T, server string) {
	for _, args := range [][]string{
		{"ls"},
		{"ls", "widgets"},
		{"ls", "leases", "--type", "Printer"},
		{"ls", "transactions", "--covers", "lock set"},
		{"ls", "leases", "--all", "--principal", "cn:x"},
		{"ls", "leases", "--max", "0"},
		{"ls", "leases", "--max", "1001"},
		{"ls", "transactions", "--state", "bogus"},
	} {
		if code, _, errs := exitOf(t, append(args, "--server", server)...); code != 2 {
			t.Errorf("djinn %v exited %d (%s), want 2", args, code, errs)
		}
	}
}
