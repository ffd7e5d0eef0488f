package main

import (
	"encoding/json"
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bgRun is a client command running in the background: a lock request
// that waits.
type bgRun struct {
	cmd       *exec.Cmd
	out, errs strings.Builder
	done      chan error
	finished  bool
	err       error
}

// runBackground starts a client command against p; the test's end kills
// it if it is still running.
func runBackground(t *testing.T, p *proc, args ...string) *bgRun {
	t.Helper()
	b := &bgRun{cmd: exec.Command(djinnBinary(t), append(args, "--server", p.addr)...), done: make(chan error, 1)}
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.errs
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.done <- b.cmd.Wait() }()
	t.Cleanup(func() {
		if !b.finished {
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

// wait waits for the command to end and returns its stdout and stderr and
// whether it succeeded.
func (b *bgRun) wait(t *testing.T) (string, string, bool) {
	t.Helper()
	if !b.finished {
		select {
		case b.err = <-b.done:
			b.finished = true
		case <-time.After(30 * time.Second):
			t.Fatalf("djinn %v still running", b.cmd.Args[1:])
		}
	}
	return b.out.String(), b.errs.String(), b.err == nil
}

// running reports whether the command has not ended yet.
func (b *bgRun) running() bool {
	if b.finished {
		return false
	}
	select {
	case b.err = <-b.done:
		b.finished = true
		return false
	default:
		return true
	}
}

type lockHolderJSON struct {
	Owner       string         `json:"owner"`
	Transaction uint64         `json:"transaction"`
	Manager     string         `json:"manager"`
	Locks       map[string]int `json:"locks"`
	Fences      []uint64       `json:"fences"`
}

type lockWaiterJSON struct {
	Owner       string `json:"owner"`
	Transaction uint64 `json:"transaction"`
	Mode        string `json:"mode"`
	From        string `json:"from"`
	Request     uint64 `json:"request"`
}

type lockSetJSON struct {
	Set           string           `json:"set"`
	Transactional bool             `json:"transactional"`
	Related       []string         `json:"related"`
	LastFence     uint64           `json:"last_fence"`
	Holders       []lockHolderJSON `json:"holders"`
	Waiters       []lockWaiterJSON `json:"waiters"`
	Lease         *struct {
		Token string `json:"token"`
	} `json:"lease"`
}

// TestCLILock runs the lock commands against a real server: owners
// holding, waiting first come first served, leaving the queue at a
// timeout; transactions holding until they commit (strict two-phase
// locking) in transactional and related sets; and the errors, one line
// each naming what is wrong.
func TestCLILock(t *testing.T) {
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
	show := func(set string) lockSetJSON {
		t.Helper()
		var v lockSetJSON
		jsonOf(&v, "lock", "show", set)
		return v
	}
	fenceOf := func(out string) uint64 {
		t.Helper()
		f, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		if err != nil || f == 0 {
			t.Fatalf("printed %q, want a fencing token", out)
		}
		return f
	}
	type owner struct {
		Owner string `json:"owner"`
		Lease struct {
			Token string `json:"token"`
		} `json:"lease"`
	}
	newOwner := func() owner {
		t.Helper()
		var o owner
		jsonOf(&o, "lock", "owner", "--duration", "10m")
		if o.Owner == "" || !strings.HasPrefix(o.Lease.Token, "djinn-lease:") {
			t.Fatalf("lock owner printed %+v", o)
		}
		return o
	}

	// A set, and three owners.
	var created struct {
		Set           string `json:"set"`
		Transactional bool   `json:"transactional"`
		Lease         struct {
			Token string `json:"token"`
		} `json:"lease"`
	}
	jsonOf(&created, "lock", "create", "--duration", "10m")
	if len(created.Set) != 32 || created.Transactional || !strings.HasPrefix(created.Lease.Token, "djinn-lease:") {
		t.Fatalf("lock create printed %+v", created)
	}
	set := created.Set
	a, b, c := newOwner(), newOwner(), newOwner()
	if a.Owner == b.Owner || b.Owner == c.Owner {
		t.Fatalf("owners %s %s %s: not distinct", a.Owner, b.Owner, c.Owner)
	}
	if text := mustRun(t, p, "lock", "owner", "--duration", "1m"); !strings.HasPrefix(text, "owner          ") || !strings.Contains(text, "lease          djinn-lease:") {
		t.Errorf("lock owner printed:\n%s", text)
	}

	// A holds w; B's try is refused; show lists A.
	fa := fenceOf(mustRun(t, p, "lock", "acquire", set, "--mode", "w", "--owner", a.Lease.Token))
	out, errs, ok := run(t, p, "lock", "acquire", set, "--mode", "r", "--owner", b.Lease.Token, "--try")
	if ok || strings.TrimSpace(out) != "not granted" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "not granted") {
		t.Errorf("refused --try: ok=%v stdout %q stderr %q; want \"not granted\" and one line", ok, out, errs)
	}
	out, _, ok = run(t, p, "lock", "acquire", set, "--mode", "IR", "--owner", b.Lease.Token, "--try", "-o", "json")
	var refused struct {
		Set     string `json:"set"`
		Mode    string `json:"mode"`
		Granted bool   `json:"granted"`
	}
	if err := json.Unmarshal([]byte(out), &refused); ok || err != nil || refused.Granted || refused.Mode != "ir" || refused.Set != set {
		t.Errorf("refused --try -o json: ok=%v %q (%v)", ok, out, err)
	}
	v := show(set)
	if len(v.Holders) != 1 || v.Holders[0].Owner != a.Owner || !maps.Equal(v.Holders[0].Locks, map[string]int{"w": 1}) ||
		!slices.Equal(v.Holders[0].Fences, []uint64{fa}) || len(v.Waiters) != 0 || v.LastFence != fa || v.Lease == nil {
		t.Fatalf("show with A holding w: %+v", v)
	}
	if text := mustRun(t, p, "lock", "show", set); !strings.Contains(text, "holder         owner "+a.Owner+"  w=1  fences "+strconv.FormatUint(fa, 10)+"\n") ||
		!strings.Contains(text, "waiters        (none)\n") {
		t.Errorf("show printed:\n%s", text)
	}
	if s := strings.TrimSpace(mustRun(t, p, "lock", "validate", set, strconv.FormatUint(fa, 10))); s != "valid" {
		t.Errorf("validate %d while held: %s", fa, s)
	}

	// B and C wait, in that order (CC 1.3.1.3: first come, first served).
	wb := runBackground(t, p, "lock", "acquire", set, "--mode", "r", "--owner", b.Lease.Token)
	if !poll(20*time.Second, func() bool { return len(show(set).Waiters) == 1 }) {
		t.Fatalf("B's request is not queued: %+v", show(set))
	}
	wc := runBackground(t, p, "lock", "acquire", set, "--mode", "w", "--owner", c.Lease.Token)
	if !poll(20*time.Second, func() bool { return len(show(set).Waiters) == 2 }) {
		t.Fatalf("C's request is not queued: %+v", show(set))
	}
	v = show(set)
	if w := v.Waiters; w[0].Owner != b.Owner || w[0].Mode != "r" || w[1].Owner != c.Owner || w[1].Mode != "w" || w[0].Request == 0 || w[0].Request == w[1].Request {
		t.Errorf("waiters %+v, want B's r then C's w", w)
	}
	if text := mustRun(t, p, "lock", "show", set); !strings.Contains(text, "waiter 1       owner "+b.Owner+"  r  request ") ||
		!strings.Contains(text, "waiter 2       owner "+c.Owner+"  w  request ") {
		t.Errorf("show printed:\n%s", text)
	}
	// A, holding w, would wait behind C, who waits for A: refused, the
	// queue unchanged. D's request gives up at its timeout and leaves the
	// queue.
	wantErrors(t, p, []errRow{{[]string{"lock", "acquire", set, "--mode", "r", "--owner", a.Lease.Token}, "deadlock"}})
	d := newOwner()
	_, errs, ok = run(t, p, "lock", "acquire", set, "--mode", "r", "--owner", d.Lease.Token, "--timeout", "300ms")
	if ok || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "not granted within --timeout 300ms") {
		t.Errorf("acquire --timeout: ok=%v stderr %q", ok, errs)
	}
	if !poll(20*time.Second, func() bool { return len(show(set).Waiters) == 2 }) {
		t.Errorf("the timed-out request is still queued: %+v", show(set))
	}

	// A releases: B is granted, C (w) still waits for B's r.
	if s := strings.TrimSpace(mustRun(t, p, "lock", "release", set, "--mode", "w", "--owner", a.Lease.Token)); s != "released" {
		t.Errorf("release printed %q", s)
	}
	out, errs, ok = wb.wait(t)
	if !ok {
		t.Fatalf("B's acquire failed: %s", errs)
	}
	fb := fenceOf(out)
	if fb <= fa {
		t.Errorf("B's fence %d after A's %d: want it larger", fb, fa)
	}
	if !wc.running() {
		out, errs, _ := wc.wait(t)
		t.Fatalf("C's w was granted over B's r: %q %q", out, errs)
	}
	if s := strings.TrimSpace(mustRun(t, p, "lock", "validate", set, strconv.FormatUint(fa, 10))); s != "invalid" {
		t.Errorf("validate %d after its release: %s", fa, s)
	}
	var valid struct {
		Fence uint64 `json:"fence"`
		Valid bool   `json:"valid"`
	}
	jsonOf(&valid, "lock", "validate", set, strconv.FormatUint(fb, 10))
	if !valid.Valid || valid.Fence != fb {
		t.Errorf("validate -o json: %+v", valid)
	}
	wantErrors(t, p, []errRow{
		{[]string{"lock", "release", set, "--mode", "w", "--owner", a.Lease.Token}, "no w lock"},
		{[]string{"lock", "change", set, "--from", "w", "--to", "r", "--owner", a.Lease.Token}, "no w lock"},
	})

	// B releases: C is granted, then changes w to r.
	mustRun(t, p, "lock", "release", set, "--mode", "r", "--owner", b.Lease.Token)
	out, errs, ok = wc.wait(t)
	if !ok {
		t.Fatalf("C's acquire failed: %s", errs)
	}
	fc := fenceOf(out)
	var changed struct {
		Mode  string `json:"mode"`
		From  string `json:"from"`
		Fence uint64 `json:"fence"`
	}
	jsonOf(&changed, "lock", "change", set, "--from", "w", "--to", "read", "--owner", c.Lease.Token)
	if changed.Mode != "r" || changed.From != "w" || changed.Fence <= fc {
		t.Errorf("change printed %+v after fence %d", changed, fc)
	}
	v = show(set)
	if len(v.Holders) != 1 || v.Holders[0].Owner != c.Owner || !maps.Equal(v.Holders[0].Locks, map[string]int{"r": 1}) || len(v.Waiters) != 0 {
		t.Errorf("show after the change: %+v", v)
	}
	// Now B's try is granted: r is compatible with r (Table 1-1).
	fenceOf(mustRun(t, p, "lock", "acquire", set, "--mode", "r", "--owner", b.Lease.Token, "--try"))

	// A transactional set and one related to it: transactions hold the
	// locks until they end.
	var tset, rset struct {
		Set           string `json:"set"`
		Transactional bool   `json:"transactional"`
		Related       string `json:"related"`
	}
	jsonOf(&tset, "lock", "create", "--transactional")
	jsonOf(&rset, "lock", "create", "--transactional", "--related", tset.Set)
	if !tset.Transactional || !rset.Transactional || rset.Related != tset.Set {
		t.Fatalf("created %+v and %+v", tset, rset)
	}
	type txn struct {
		ID      uint64 `json:"id"`
		Manager string `json:"manager"`
	}
	var x, y txn
	jsonOf(&x, "txn", "create", "--duration", "10m")
	jsonOf(&y, "txn", "create", "--duration", "10m")
	xID, yID := strconv.FormatUint(x.ID, 10), strconv.FormatUint(y.ID, 10)
	fenceOf(mustRun(t, p, "lock", "acquire", tset.Set, "--mode", "u", "--txn", xID))
	fenceOf(mustRun(t, p, "lock", "acquire", rset.Set, "--mode", "iw", "--txn", xID, "--manager", x.Manager))
	if out, _, ok := run(t, p, "lock", "acquire", tset.Set, "--mode", "u", "--txn", yID, "--try"); ok || strings.TrimSpace(out) != "not granted" {
		t.Errorf("Y's u over X's u: ok=%v %q, want not granted (U conflicts with U)", ok, out)
	}
	fenceOf(mustRun(t, p, "lock", "acquire", tset.Set, "--mode", "r", "--txn", yID, "--try"))
	v = show(tset.Set)
	if !v.Transactional || !slices.Equal(v.Related, []string{rset.Set}) || len(v.Holders) != 2 {
		t.Fatalf("show of the transactional set: %+v", v)
	}
	held := map[uint64]map[string]int{}
	for _, h := range v.Holders {
		if h.Owner != "" || h.Manager == "" {
			t.Errorf("holder %+v: want a transaction with its manager", h)
		}
		held[h.Transaction] = h.Locks
	}
	if !maps.Equal(held[x.ID], map[string]int{"u": 1}) || !maps.Equal(held[y.ID], map[string]int{"r": 1}) {
		t.Errorf("holders %+v: want X with u, Y with r", v.Holders)
	}
	if text := mustRun(t, p, "lock", "show", tset.Set); !strings.Contains(text, "holder         transaction "+xID+" of ") || !strings.Contains(text, "  u=1  fences ") {
		t.Errorf("show printed:\n%s", text)
	}
	// The lock service joined X as a participant; committing X drops its
	// locks in both sets (CC 1.4).
	var desc struct {
		Participants []struct {
			Participant string `json:"participant"`
		} `json:"participants"`
	}
	jsonOf(&desc, "txn", "show", xID)
	if len(desc.Participants) != 1 {
		t.Errorf("transaction %s has participants %+v, want the lock service", xID, desc.Participants)
	}
	mustRun(t, p, "txn", "commit", xID, "--wait", "10s")
	if !poll(20*time.Second, func() bool { return len(show(rset.Set).Holders) == 0 && len(show(tset.Set).Holders) == 1 }) {
		t.Errorf("X's locks after it committed: %+v and %+v", show(tset.Set), show(rset.Set))
	}
	// drop_locks (CC 2.2): Y's locks in the group go at once.
	fenceOf(mustRun(t, p, "lock", "acquire", rset.Set, "--mode", "w", "--txn", yID))
	if s := strings.TrimSpace(mustRun(t, p, "lock", "drop", tset.Set, "--txn", yID)); s != "dropped" {
		t.Errorf("drop printed %q", s)
	}
	if v, r := show(tset.Set), show(rset.Set); len(v.Holders) != 0 || len(r.Holders) != 0 {
		t.Errorf("after drop: %+v and %+v, want no holders", v.Holders, r.Holders)
	}

	bogusSet := "0123456789abcdef0123456789abcdef"
	wantErrors(t, p, []errRow{
		{[]string{"lock", "acquire", tset.Set, "--mode", "w", "--owner", a.Lease.Token}, "transactional"},
		{[]string{"lock", "acquire", set, "--mode", "x", "--owner", a.Lease.Token}, `--mode: lock mode "x"`},
		{[]string{"lock", "acquire", set, "--owner", a.Lease.Token}, "--mode: missing"},
		{[]string{"lock", "acquire", set, "--mode", "w"}, "--owner or --txn: missing"},
		{[]string{"lock", "acquire", set, "--mode", "w", "--owner", a.Lease.Token, "--txn", xID}, "--owner and --txn"},
		{[]string{"lock", "acquire", set, "--mode", "w", "--owner", "nope"}, `--owner: lease token "nope"`},
		{[]string{"lock", "acquire", set, "--mode", "w", "--txn", "0"}, `--txn: transaction id "0"`},
		{[]string{"lock", "acquire", set, "--mode", "w", "--txn", "99999"}, "transaction 99999"},
		{[]string{"lock", "acquire", set, "--mode", "w", "--txn", xID, "--manager", "bad"}, `--manager: reference "bad"`},
		{[]string{"lock", "acquire", set, "--mode", "w", "--manager", x.Manager}, "--manager " + x.Manager},
		{[]string{"lock", "acquire", set, "--mode", "w", "--owner", a.Lease.Token, "--timeout", "soon"}, `--timeout "soon"`},
		{[]string{"lock", "acquire", set, "--mode", "w", "--owner", a.Lease.Token, "--timeout", "-1s"}, "--timeout -1s"},
		{[]string{"lock", "acquire", "zzz", "--mode", "w", "--owner", a.Lease.Token}, `lock set: id "zzz"`},
		{[]string{"lock", "acquire", bogusSet, "--mode", "w", "--owner", a.Lease.Token}, bogusSet},
		{[]string{"lock", "release", set, "--mode", "upgrade!", "--owner", a.Lease.Token}, `--mode: lock mode "upgrade!"`},
		{[]string{"lock", "release", set, "--owner", a.Lease.Token}, "--mode: missing"},
		{[]string{"lock", "change", set, "--from", "r", "--owner", b.Lease.Token}, "--to: missing"},
		{[]string{"lock", "change", set, "--from", "rr", "--to", "w", "--owner", b.Lease.Token}, `--from: lock mode "rr"`},
		{[]string{"lock", "change", set, "--from", "r", "--to", "w"}, "--owner or --txn: missing"},
		{[]string{"lock", "show", bogusSet}, bogusSet},
		{[]string{"lock", "show"}, "accepts 1 arg(s)"},
		{[]string{"lock", "validate", set, "x"}, `fencing token "x"`},
		{[]string{"lock", "validate", set, "0"}, `fencing token "0"`},
		{[]string{"lock", "drop", tset.Set}, "--txn: missing"},
		{[]string{"lock", "drop", tset.Set, "--txn", "seven"}, `--txn: transaction id "seven"`},
		{[]string{"lock", "create", "--duration", "0s"}, "--duration 0s"},
		{[]string{"lock", "create", "--duration", "soon"}, `--duration: lease duration "soon"`},
		{[]string{"lock", "create", "--related", "nope"}, `--related: id "nope"`},
		{[]string{"lock", "create", "--related", bogusSet}, bogusSet},
		{[]string{"lock", "owner", "--duration", "-5s"}, "--duration -5s"},
	})

	// An owner whose lease is cancelled loses its locks.
	mustRun(t, p, "lease", "cancel", c.Lease.Token)
	if !poll(20*time.Second, func() bool {
		for _, h := range show(set).Holders {
			if h.Owner == c.Owner {
				return false
			}
		}
		return true
	}) {
		t.Errorf("the cancelled owner still holds: %+v", show(set))
	}
}
