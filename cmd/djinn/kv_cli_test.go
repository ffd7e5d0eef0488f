package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/kv"
)

type kvEntryJSON struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// kvScript is TestCLIKV's state.
type kvScript struct{ *rig }

func (s *kvScript) get(key string, extra ...string) string {
	s.t.Helper()
	return strings.TrimSuffix(s.must(append([]string{"kv", "get", key}, extra...)...), "\n")
}

// notFound wants a negative answer: not found, exit 1.
func (s *kvScript) notFound(key string, extra ...string) {
	s.t.Helper()
	if out, errs, ok := s.run(append([]string{"kv", "get", key}, extra...)...); ok || !strings.Contains(errs, "not found") {
		s.t.Errorf("get %s %v: ok=%v out %q stderr %q, want not found", key, extra, ok, out, errs)
	}
}

// create returns a new transaction's token (what --txn takes; txn show,
// commit and abort take it too) and its manager's reference.
func (s *kvScript) create() (token, manager string) {
	s.t.Helper()
	var c txnCreatedJSON
	s.json(&c, "txn", "create", "--lease", "10m")
	return c.Token, c.Manager
}

// idOf is a token's transaction id.
func idOf(token string) string { return strings.Split(token, ".")[0] }

// TestCLIKV runs the kv commands against a real server's key/value
// participant: writes without a transaction apply at once; under one they
// are seen only under it until it commits (TX.3's default semantics), and
// vanish if it aborts.
func TestCLIKV(t *testing.T) {
	s := &kvScript{newRig(t)}
	s.withoutTxn()
	s.underTxn()
	mgr := s.abortDiscards()
	tx3 := s.otherManager(mgr)
	// A manager nothing serves: its server, joining the transaction there,
	// cannot reach it; the command says what it tried and what to do.
	closed := freePort(t)
	gone := "djinn://" + closed + "/" + djinn.NewID().String() + "/" + djinn.NewID().String()
	s.errors([]errRow{
		{[]string{"kv", "put", "k", "v", "--txn", "1." + djinn.NewID().String(), "--manager", gone},
			"--manager " + gone + ": the transaction manager at " + closed + " cannot be reached: nothing listens there: start the server of that transaction manager"},
		{[]string{"kv", "get", "nothing"}, `key "nothing": not found`},
		{[]string{"kv", "get", "nothing", "--txn", tx3}, "transaction " + idOf(tx3) + ": COMMITTED"}, // TX.2.3, TX.2.6
		{[]string{"kv", "put", "k", "v", "--txn", "99999." + djinn.NewID().String()}, "transaction 99999: unknown"},
		{[]string{"kv", "put", "k", "v", "--txn", idOf(tx3)}, "transaction " + idOf(tx3) + ": its id alone does not let one work under it"},
		{[]string{"kv", "put", "k", "v", "--txn", idOf(tx3) + "." + djinn.NewID().String()}, ": unknown"},
		{[]string{"kv", "put", "k", "v", "--txn", "0"}, `--txn: transaction id "0"`},
		{[]string{"kv", "ls", "--manager", mgr}, "--txn, which is missing"},
		{[]string{"kv", "get", "k", "--txn", "1." + djinn.NewID().String(), "--manager", "mgr"}, `--manager: reference "mgr"`},
		{[]string{"kv", "put", "k"}, "accepts 2 arg(s)"},
	})
	s.largeListing()
	off := newRig(t, "--kv=false")
	off.errors([]errRow{{[]string{"kv", "get", "a"}, off.p.addr + " serves no key/value store"}})
}

// withoutTxn: writes apply at once; a delete of a key not there is a
// negative answer.
func (s *kvScript) withoutTxn() {
	t := s.t
	if out := s.must("kv", "put", "a", "one"); strings.TrimSpace(out) != "stored" {
		t.Errorf("put printed %q", out)
	}
	var put struct {
		Key    string  `json:"key"`
		Stored bool    `json:"stored"`
		Txn    *string `json:"transaction"`
	}
	s.json(&put, "kv", "put", "ab", "two words")
	if put.Key != "ab" || !put.Stored || put.Txn != nil {
		t.Errorf("put -o json printed %+v", put)
	}
	s.must("kv", "put", "b", "three")
	if v := s.get("a"); v != "one" {
		t.Errorf("get a: %q", v)
	}
	var e kvEntryJSON
	s.json(&e, "kv", "get", "ab")
	if e != (kvEntryJSON{"ab", "two words"}) {
		t.Errorf("get -o json: %+v", e)
	}
	if out := s.must("kv", "ls", "a"); out != "a\tone\nab\ttwo words\n" {
		t.Errorf("ls a printed %q", out)
	}
	var es []kvEntryJSON
	s.json(&es, "kv", "ls")
	if len(es) != 3 || es[2] != (kvEntryJSON{"b", "three"}) {
		t.Errorf("ls -o json: %+v", es)
	}
	if out := s.must("kv", "delete", "b"); strings.TrimSpace(out) != "deleted" {
		t.Errorf("delete printed %q", out)
	}
	if out, errs, ok := s.run("kv", "delete", "b"); ok || !strings.Contains(out, "was not there") || !strings.Contains(errs, "not found") {
		t.Errorf("second delete: ok=%v printed %q, stderr %q; want a negative answer", ok, out, errs)
	}
	s.notFound("b")
}

// underTxn: TX.3: a write under a transaction is seen only under it until
// it commits; the participant joined it.
func (s *kvScript) underTxn() {
	t := s.t
	tx, _ := s.create()
	if out := s.must("kv", "put", "x", "ex", "--txn", tx); !strings.Contains(out, "under transaction "+idOf(tx)) {
		t.Errorf("put --txn printed %q", out)
	}
	s.notFound("x")
	if v := s.get("x", "--txn", tx); v != "ex" {
		t.Errorf("get x --txn %s: %q", tx, v)
	}
	var es []kvEntryJSON
	s.json(&es, "kv", "ls", "--txn", tx)
	if len(es) != 3 || es[2] != (kvEntryJSON{"x", "ex"}) {
		t.Errorf("ls --txn: %+v", es)
	}
	var d txnDescribedJSON
	s.json(&d, "txn", "show", tx)
	if len(d.Participants) != 1 || !strings.HasPrefix(d.Participants[0].Participant, "djinn://"+s.p.addr+"/") {
		t.Errorf("show %s: participants %+v, want the server's key/value participant", tx, d.Participants)
	}
	s.must("txn", "commit", tx, "--wait", "10s")
	if v := s.get("x"); v != "ex" {
		t.Errorf("get x after commit: %q", v)
	}
}

// abortDiscards: TX.3: an abort discards the transaction's writes and
// deletes. It returns the manager's reference.
func (s *kvScript) abortDiscards() string {
	t := s.t
	tx2, mgr := s.create()
	s.must("kv", "put", "y", "why", "--txn", tx2)
	s.must("kv", "delete", "a", "--txn", tx2)
	s.notFound("a", "--txn", tx2)
	if v := s.get("a"); v != "one" {
		t.Errorf("get a outside the transaction that deleted it: %q", v)
	}
	s.must("txn", "abort", tx2, "--wait", "10s")
	s.notFound("y")
	if v := s.get("a"); v != "one" {
		t.Errorf("get a after the abort: %q", v)
	}
	return mgr
}

// otherManager: --manager names the manager of --txn. It returns the
// committed transaction.
func (s *kvScript) otherManager(mgr string) string {
	t := s.t
	tx3, _ := s.create()
	s.must("kv", "put", "z", "zed", "--txn", tx3, "--manager", mgr)
	if v := s.get("z", "--txn", tx3); v != "zed" {
		t.Errorf("get z --txn %s: %q", tx3, v)
	}
	s.must("txn", "commit", tx3, "--wait", "10s")
	if v := s.get("z"); v != "zed" {
		t.Errorf("get z after commit: %q", v)
	}
	return tx3
}

// largeListing: kv ls prints a listing past what one response carries to
// a client (4 MiB): it reads it in pages. Before, it failed with gRPC's
// "received message larger than max".
func (s *kvScript) largeListing() {
	t := s.t
	db := kv.NewClient(servertest.Conn(t, s.p.addr))
	value := strings.Repeat("v", 1<<20)
	for i := range 5 {
		if err := db.Put(t.Context(), nil, fmt.Sprint("large/", i), []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	out, errs, ok := s.run("kv", "ls", "large/")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if !ok || len(lines) != 5 || lines[4] != "large/4\t"+value {
		t.Errorf("ls of 5 MiB: ok=%v, %d lines, stderr %q; want the 5 entries", ok, len(lines), errs)
	}
}
