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

	"github.com/djinn-go/djinn"
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
	Transaction uint64         `json:"transaction,string"`
	Manager     string         `json:"manager"`
	Locks       map[string]int `json:"locks"`
	Fences      []string       `json:"fences"`
}

type lockWaiterJSON struct {
	Owner       string `json:"owner"`
	Transaction uint64 `json:"transaction,string"`
	Mode        string `json:"mode"`
	From        string `json:"from"`
	Request     uint64 `json:"request,string"`
}

type lockSetJSON struct {
	Set           string           `json:"set"`
	Transactional bool             `json:"transactional"`
	Related       []string         `json:"related"`
	LastFence     uint64           `json:"last_fence,string"`
	Holders       []lockHolderJSON `json:"holders"`
	Waiters       []lockWaiterJSON `json:"waiters"`
	Lease         *struct {
		Token string `json:"token"`
	} `json:"lease"`
}

// lockOwnerJSON is what lock owner prints.
type lockOwnerJSON struct {
	Owner       string `json:"owner"`       // its name: its lease's short name
	Fingerprint string `json:"fingerprint"` // how lock show names it
	Lease       struct {
		Name  string `json:"name"`
		Token string `json:"token"`
	} `json:"lease"`
}

// lockScript is TestCLILock's state: a set, its owners and the fences they
// were granted, and two transactions with a transactional set and one
// related to it.
type lockScript struct {
	*rig
	set        string
	a, b, c    lockOwnerJSON
	fa, fb     uint64
	wc         *bgRun // C's waiting request
	tset, rset string
	xID, yID   string
	xManager   string
}

func (s *lockScript) show(set string) lockSetJSON {
	s.t.Helper()
	var v lockSetJSON
	s.json(&v, "lock", "show", set)
	return v
}

func (s *lockScript) fenceOf(out string) uint64 {
	s.t.Helper()
	f, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil || f == 0 {
		s.t.Fatalf("printed %q, want a fencing token", out)
	}
	return f
}

func (s *lockScript) newOwner() lockOwnerJSON {
	s.t.Helper()
	var o lockOwnerJSON
	s.json(&o, "lock", "owner", "--lease", "10m")
	if len(o.Owner) != 32 || o.Owner != o.Lease.Name || len(o.Fingerprint) != 8 || !strings.HasPrefix(o.Lease.Token, "djinn-lease:") {
		s.t.Fatalf("lock owner printed %+v", o)
	}
	return o
}

// TestCLILock runs the lock commands against a real server: owners
// holding, waiting first come first served, leaving the queue at a
// timeout; transactions holding until they commit (strict two-phase
// locking) in transactional and related sets; and the errors, one line
// each naming what is wrong.
func TestCLILock(t *testing.T) {
	s := &lockScript{rig: newRig(t)}
	s.createAndHold()
	s.queue()
	s.handOff()
	s.change()
	s.transactions()
	s.commitAndDrop()
	s.errorRows()
	s.cancelOwner()
}

// createAndHold: a set and three owners; A holds w, B's try is refused,
// show lists A.
func (s *lockScript) createAndHold() {
	t := s.t
	var created struct {
		Set           string `json:"set"`
		Transactional bool   `json:"transactional"`
		Lease         struct {
			Token string `json:"token"`
		} `json:"lease"`
	}
	s.json(&created, "lock", "create", "--lease", "10m")
	if len(created.Set) != 32 || created.Transactional || !strings.HasPrefix(created.Lease.Token, "djinn-lease:") {
		t.Fatalf("lock create printed %+v", created)
	}
	s.set = created.Set
	s.a, s.b, s.c = s.newOwner(), s.newOwner(), s.newOwner()
	if s.a.Fingerprint == s.b.Fingerprint || s.b.Fingerprint == s.c.Fingerprint {
		t.Fatalf("owners %s %s %s: not distinct", s.a.Fingerprint, s.b.Fingerprint, s.c.Fingerprint)
	}
	if text := s.must("lock", "owner", "--lease", "1m"); !strings.HasPrefix(text, "owner          ") || !strings.Contains(text, "token          djinn-lease:") {
		t.Errorf("lock owner printed:\n%s", text)
	}
	s.fa = s.fenceOf(s.must("lock", "acquire", s.set, "--mode", "w", "--owner", s.a.Owner))
	out, errs, ok := s.run("lock", "acquire", s.set, "--mode", "r", "--owner", s.b.Lease.Token, "--try")
	if ok || strings.TrimSpace(out) != "not granted" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "not granted") {
		t.Errorf("refused --try: ok=%v stdout %q stderr %q; want \"not granted\" and one line", ok, out, errs)
	}
	out, _, ok = s.run("lock", "acquire", s.set, "--mode", "IR", "--owner", s.b.Lease.Token, "--try", "-o", "json")
	var refused struct {
		Set     string `json:"set"`
		Mode    string `json:"mode"`
		Granted bool   `json:"granted"`
	}
	if err := json.Unmarshal([]byte(out), &refused); ok || err != nil || refused.Granted || refused.Mode != "ir" || refused.Set != s.set {
		t.Errorf("refused --try -o json: ok=%v %q (%v)", ok, out, err)
	}
	s.showsAHolding()
}

func (s *lockScript) showsAHolding() {
	t := s.t
	v := s.show(s.set)
	if len(v.Holders) != 1 || v.Holders[0].Owner != s.a.Fingerprint || !maps.Equal(v.Holders[0].Locks, map[string]int{"w": 1}) ||
		!slices.Equal(v.Holders[0].Fences, []string{strconv.FormatUint(s.fa, 10)}) || len(v.Waiters) != 0 || v.LastFence != s.fa || v.Lease == nil {
		t.Fatalf("show with A holding w: %+v", v)
	}
	if text := s.must("lock", "show", s.set); !strings.Contains(text, "holder         owner "+s.a.Fingerprint+"  w=1  fences "+strconv.FormatUint(s.fa, 10)+"\n") ||
		!strings.Contains(text, "waiters        (none)\n") {
		t.Errorf("show printed:\n%s", text)
	}
	if v := strings.TrimSpace(s.must("lock", "validate", s.set, strconv.FormatUint(s.fa, 10))); v != "valid" {
		t.Errorf("validate %d while held: %s", s.fa, v)
	}
}

// queue: B and C wait, in that order (CC 1.3.1.3: first come, first
// served); A, holding w, would wait behind C, who waits for A: refused,
// the queue unchanged. D's request gives up at its timeout and leaves the
// queue. Then A releases: B is granted, C (w) still waits for B's r.
func (s *lockScript) queue() {
	t := s.t
	wb := runBackground(t, s.p, "lock", "acquire", s.set, "--mode", "r", "--owner", s.b.Lease.Token)
	if !poll(20*time.Second, func() bool { return len(s.show(s.set).Waiters) == 1 }) {
		t.Fatalf("B's request is not queued: %+v", s.show(s.set))
	}
	s.wc = runBackground(t, s.p, "lock", "acquire", s.set, "--mode", "w", "--owner", s.c.Lease.Token)
	if !poll(20*time.Second, func() bool { return len(s.show(s.set).Waiters) == 2 }) {
		t.Fatalf("C's request is not queued: %+v", s.show(s.set))
	}
	v := s.show(s.set)
	if w := v.Waiters; w[0].Owner != s.b.Fingerprint || w[0].Mode != "r" || w[1].Owner != s.c.Fingerprint || w[1].Mode != "w" || w[0].Request == 0 || w[0].Request == w[1].Request {
		t.Errorf("waiters %+v, want B's r then C's w", w)
	}
	if text := s.must("lock", "show", s.set); !strings.Contains(text, "waiter 1       owner "+s.b.Fingerprint+"  r  request ") ||
		!strings.Contains(text, "waiter 2       owner "+s.c.Fingerprint+"  w  request ") {
		t.Errorf("show printed:\n%s", text)
	}
	s.errors([]errRow{{[]string{"lock", "acquire", s.set, "--mode", "r", "--owner", s.a.Lease.Token}, "deadlock"}})
	d := s.newOwner()
	_, errs, ok := s.run("lock", "acquire", s.set, "--mode", "r", "--owner", d.Lease.Token, "--wait", "300ms")
	if ok || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "not granted within --wait 300ms") {
		t.Errorf("acquire --timeout: ok=%v stderr %q", ok, errs)
	}
	if !poll(20*time.Second, func() bool { return len(s.show(s.set).Waiters) == 2 }) {
		t.Errorf("the timed-out request is still queued: %+v", s.show(s.set))
	}
	if r := strings.TrimSpace(s.must("lock", "release", s.set, "--mode", "w", "--owner", s.a.Lease.Token)); r != "released" {
		t.Errorf("release printed %q", r)
	}
	out, errs, ok := wb.wait(t)
	if !ok {
		t.Fatalf("B's acquire failed: %s", errs)
	}
	if s.fb = s.fenceOf(out); s.fb <= s.fa {
		t.Errorf("B's fence %d after A's %d: want it larger", s.fb, s.fa)
	}
}

// handOff: C still waits; A's fence is invalid, B's valid; A holds
// nothing to release or change.
func (s *lockScript) handOff() {
	t := s.t
	if !s.wc.running() {
		out, errs, _ := s.wc.wait(t)
		t.Fatalf("C's w was granted over B's r: %q %q", out, errs)
	}
	if out, errs, ok := s.run("lock", "validate", s.set, strconv.FormatUint(s.fa, 10)); ok || strings.TrimSpace(out) != "invalid" || !strings.Contains(errs, "invalid") {
		t.Errorf("validate %d after its release: ok=%v %q %q; want invalid, exit 1", s.fa, ok, out, errs)
	}
	var valid struct {
		Fence uint64 `json:"fence,string"`
		Valid bool   `json:"valid"`
	}
	s.json(&valid, "lock", "validate", s.set, strconv.FormatUint(s.fb, 10))
	if !valid.Valid || valid.Fence != s.fb {
		t.Errorf("validate -o json: %+v", valid)
	}
	s.errors([]errRow{
		{[]string{"lock", "release", s.set, "--mode", "w", "--owner", s.a.Lease.Token}, "no w lock"},
		{[]string{"lock", "change", s.set, "--from", "w", "--to", "r", "--owner", s.a.Lease.Token}, "no w lock"},
	})
}

// change: B releases, C is granted, then changes w to r; B's try is then
// granted, r being compatible with r (Table 1-1).
func (s *lockScript) change() {
	t := s.t
	s.must("lock", "release", s.set, "--mode", "r", "--owner", s.b.Lease.Token)
	out, errs, ok := s.wc.wait(t)
	if !ok {
		t.Fatalf("C's acquire failed: %s", errs)
	}
	fc := s.fenceOf(out)
	var changed struct {
		Mode  string `json:"mode"`
		From  string `json:"from"`
		Fence uint64 `json:"fence,string"`
	}
	s.json(&changed, "lock", "change", s.set, "--from", "w", "--to", "read", "--owner", s.c.Lease.Token)
	if changed.Mode != "r" || changed.From != "w" || changed.Fence <= fc {
		t.Errorf("change printed %+v after fence %d", changed, fc)
	}
	v := s.show(s.set)
	if len(v.Holders) != 1 || v.Holders[0].Owner != s.c.Fingerprint || !maps.Equal(v.Holders[0].Locks, map[string]int{"r": 1}) || len(v.Waiters) != 0 {
		t.Errorf("show after the change: %+v", v)
	}
	s.fenceOf(s.must("lock", "acquire", s.set, "--mode", "r", "--owner", s.b.Lease.Token, "--try"))
}

// transactions: a transactional set and one related to it; transactions
// X and Y hold locks in them until they end.
func (s *lockScript) transactions() {
	t := s.t
	var tset, rset struct {
		Set           string  `json:"set"`
		Transactional bool    `json:"transactional"`
		Related       *string `json:"related"`
	}
	s.json(&tset, "lock", "create", "--transactional")
	s.json(&rset, "lock", "create", "--transactional", "--related", tset.Set)
	if !tset.Transactional || !rset.Transactional || tset.Related != nil || rset.Related == nil || *rset.Related != tset.Set {
		t.Fatalf("created %+v and %+v", tset, rset)
	}
	s.tset, s.rset = tset.Set, rset.Set
	type txn struct {
		ID      uint64 `json:"id,string"`
		Token   string `json:"token"`
		Manager string `json:"manager"`
	}
	var x, y txn
	s.json(&x, "txn", "create", "--lease", "10m")
	s.json(&y, "txn", "create", "--lease", "10m")
	// The transactions' tokens: --txn takes them, and txn show and
	// commit do too.
	s.xID, s.yID, s.xManager = x.Token, y.Token, x.Manager
	s.fenceOf(s.must("lock", "acquire", s.tset, "--mode", "u", "--txn", s.xID))
	s.fenceOf(s.must("lock", "acquire", s.rset, "--mode", "iw", "--txn", s.xID, "--manager", x.Manager))
	if out, _, ok := s.run("lock", "acquire", s.tset, "--mode", "u", "--txn", s.yID, "--try"); ok || strings.TrimSpace(out) != "not granted" {
		t.Errorf("Y's u over X's u: ok=%v %q, want not granted (U conflicts with U)", ok, out)
	}
	s.fenceOf(s.must("lock", "acquire", s.tset, "--mode", "r", "--txn", s.yID, "--try"))
	v := s.show(s.tset)
	if !v.Transactional || !slices.Equal(v.Related, []string{s.rset}) || len(v.Holders) != 2 {
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
	if text := s.must("lock", "show", s.tset); !strings.Contains(text, "holder         transaction "+idOf(s.xID)+" of ") || !strings.Contains(text, "  u=1  fences ") {
		t.Errorf("show printed:\n%s", text)
	}
}

// commitAndDrop: the lock service joined X as a participant; committing X
// drops its locks in both sets (CC 1.4); drop_locks (CC 2.2) drops Y's in
// the group at once.
func (s *lockScript) commitAndDrop() {
	t := s.t
	var desc struct {
		Participants []struct {
			Participant string `json:"participant"`
		} `json:"participants"`
	}
	s.json(&desc, "txn", "show", s.xID)
	if len(desc.Participants) != 1 {
		t.Errorf("transaction %s has participants %+v, want the lock service", s.xID, desc.Participants)
	}
	s.must("txn", "commit", s.xID, "--wait", "10s")
	if !poll(20*time.Second, func() bool { return len(s.show(s.rset).Holders) == 0 && len(s.show(s.tset).Holders) == 1 }) {
		t.Errorf("X's locks after it committed: %+v and %+v", s.show(s.tset), s.show(s.rset))
	}
	s.fenceOf(s.must("lock", "acquire", s.rset, "--mode", "w", "--txn", s.yID))
	if d := strings.TrimSpace(s.must("lock", "drop", s.tset, "--txn", s.yID)); d != "dropped" {
		t.Errorf("drop printed %q", d)
	}
	if v, r := s.show(s.tset), s.show(s.rset); len(v.Holders) != 0 || len(r.Holders) != 0 {
		t.Errorf("after drop: %+v and %+v, want no holders", v.Holders, r.Holders)
	}
}

func (s *lockScript) errorRows() {
	bogusSet := "0123456789abcdef0123456789abcdef"
	a, b, set, tset, xID := s.a.Lease.Token, s.b.Lease.Token, s.set, s.tset, s.xID
	s.errors([]errRow{
		{[]string{"lock", "acquire", tset, "--mode", "w", "--owner", a}, "transactional"},
		{[]string{"lock", "acquire", set, "--mode", "x", "--owner", a}, `--mode: lock mode "x"`},
		{[]string{"lock", "acquire", set, "--owner", a}, "--mode: missing"},
		{[]string{"lock", "acquire", set, "--mode", "w"}, "--owner or --txn: missing"},
		{[]string{"lock", "acquire", set, "--mode", "w", "--owner", a, "--txn", xID}, "--owner and --txn"},
		{[]string{"lock", "acquire", set, "--mode", "w", "--owner", "nope"}, `--owner "nope": neither an owner's name`},
		{[]string{"lock", "acquire", set, "--mode", "w", "--txn", "0"}, `--txn: transaction id "0"`},
		{[]string{"lock", "acquire", set, "--mode", "w", "--txn", "99999." + djinn.NewID().String()}, "transaction 99999"},
		{[]string{"lock", "acquire", set, "--mode", "w", "--txn", "99999"}, "transaction 99999: its id alone does not let one work under it"},
		{[]string{"lock", "acquire", set, "--mode", "w", "--txn", xID, "--manager", "bad"}, `--manager: reference "bad"`},
		{[]string{"lock", "acquire", set, "--mode", "w", "--manager", s.xManager}, "--manager " + s.xManager},
		{[]string{"lock", "acquire", set, "--mode", "w", "--owner", a, "--wait", "soon"}, `--wait "soon"`},
		{[]string{"lock", "acquire", set, "--mode", "w", "--owner", a, "--wait", "-1s"}, "--wait -1s"},
		{[]string{"lock", "acquire", "zzz", "--mode", "w", "--owner", a}, `lock set: id "zzz"`},
		{[]string{"lock", "acquire", bogusSet, "--mode", "w", "--owner", a}, bogusSet},
		{[]string{"lock", "release", set, "--mode", "upgrade!", "--owner", a}, `--mode: lock mode "upgrade!"`},
		{[]string{"lock", "release", set, "--owner", a}, "--mode: missing"},
		{[]string{"lock", "change", set, "--from", "r", "--owner", b}, "--to: missing"},
		{[]string{"lock", "change", set, "--from", "rr", "--to", "w", "--owner", b}, `--from: lock mode "rr"`},
		{[]string{"lock", "change", set, "--from", "r", "--to", "w"}, "--owner or --txn: missing"},
		{[]string{"lock", "show", bogusSet}, bogusSet},
		{[]string{"lock", "show"}, "accepts 1 arg(s)"},
		{[]string{"lock", "validate", set, "x"}, `fencing token "x"`},
		{[]string{"lock", "validate", set, "0"}, `fencing token "0"`},
		{[]string{"lock", "drop", tset}, "--txn: missing"},
		{[]string{"lock", "drop", tset, "--txn", "seven"}, `--txn: transaction id "seven"`},
		{[]string{"lock", "create", "--lease", "0s"}, "--lease 0s"},
		{[]string{"lock", "create", "--lease", "soon"}, `--lease: lease duration "soon"`},
		{[]string{"lock", "create", "--related", "nope"}, `--related: id "nope"`},
		{[]string{"lock", "create", "--related", bogusSet}, bogusSet},
		{[]string{"lock", "owner", "--lease", "-5s"}, "--lease -5s"},
	})
}

// cancelOwner: an owner whose lease is cancelled loses its locks.
func (s *lockScript) cancelOwner() {
	s.must("lease", "cancel", s.c.Owner)
	if !poll(20*time.Second, func() bool {
		for _, h := range s.show(s.set).Holders {
			if h.Owner == s.c.Fingerprint {
				return false
			}
		}
		return true
	}) {
		s.t.Errorf("the cancelled owner still holds: %+v", s.show(s.set))
	}
}
