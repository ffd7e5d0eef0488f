package kv_test

import (
	"context"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Nested transactions with the real manager (TX.2.6, TX.2.7, TX.3): a
// nested transaction's changes roll forward into its parent when it
// commits, visible only under the parent until the parent commits.

// nest creates a transaction nested in parent.
func (w *world) nest(parent *participant.Tx) *participant.Tx {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), servertest.Timeout)
	defer cancel()
	c, err := w.mgr.Create(ctx, &djinnpb.CreateTransactionRequest{
		LeaseDurationNanos: int64(time.Minute),
		ParentManager:      client.RefToProto(parent.Manager), ParentId: parent.ID, ParentSecret: parent.Secret[:],
	})
	if err != nil {
		w.t.Fatal(err)
	}
	mgr, err := client.RefFromProto("manager", c.GetManager())
	if err != nil {
		w.t.Fatal(err)
	}
	return &participant.Tx{Manager: mgr, ID: c.GetId(), Secret: djinn.ID(c.GetSecret())}
}

// getUnder returns key's value as tx sees it at n ("-": absent).
func (n *node) getUnder(tx *participant.Tx, key string) string {
	n.t.Helper()
	v, ok, err := n.kv.Get(context.Background(), tx, key)
	if err != nil {
		n.t.Fatalf("get %s under %d at %s: %v", key, tx.ID, n.addr, err)
	}
	if !ok {
		return "-"
	}
	return string(v)
}

func (w *world) mustComplete(tx *participant.Tx, commit bool) {
	w.t.Helper()
	if err := w.complete(tx, commit, true); err != nil {
		w.t.Fatalf("complete %d (commit %v): %v", tx.ID, commit, err)
	}
}

// TestNestedCommitThenParentAbort is the CLI scenario: a nested
// transaction's committed write is not visible outside its parent, and
// vanishes when the parent aborts.
func TestNestedCommitThenParentAbort(t *testing.T) {
	w := newWorld(t)
	p := w.create()
	c := w.nest(p)
	w.a.put(c, "n", "1")
	w.mustComplete(c, true)
	if got := w.a.get("n"); got != "-" {
		t.Fatalf("after the nested commit, seen outside the parent: %s", got)
	}
	if got := w.a.getUnder(p, "n"); got != "1" {
		t.Fatalf("after the nested commit, under the parent: %s", got)
	}
	if st, ok := w.a.db.Participant().State(*p); !ok || st != participant.Active {
		t.Fatalf("the parent at the participant: %v (known %v), want ACTIVE", st, ok)
	}
	w.mustComplete(p, false)
	if got := w.a.get("n"); got != "-" {
		t.Fatalf("after the parent aborted: %s", got)
	}
	w.a.put(nil, "n", "unlocked") // the locks went with the parent
}

func TestNestedCommitThenParentCommit(t *testing.T) {
	w := newWorld(t)
	p := w.create()
	w.b.put(p, "other", "b") // a second participant: no prepareAndCommit
	c := w.nest(p)
	w.a.put(c, "n", "1")
	w.mustComplete(c, true)
	if got := w.a.get("n"); got != "-" {
		t.Fatalf("before the parent commits, seen outside: %s", got)
	}
	w.mustComplete(p, true)
	if got := w.a.get("n") + "," + w.b.get("other"); got != "1,b" {
		t.Fatalf("after the parent committed: %s", got)
	}
	// One participant alone: the parent gets prepareAndCommit.
	p = w.create()
	c = w.nest(p)
	w.a.put(c, "solo", "1")
	w.mustComplete(c, true)
	w.mustComplete(p, true)
	if got := w.a.get("solo"); got != "1" {
		t.Fatalf("after a one-participant parent committed: %s", got)
	}
}

func TestNestedAbortLeavesParent(t *testing.T) {
	w := newWorld(t)
	p := w.create()
	w.a.put(p, "mine", "p")
	c := w.nest(p)
	w.a.put(c, "child", "c")
	w.a.put(c, "mine", "c") // not blocked by the parent's write lock
	w.mustComplete(c, false)
	if got := w.a.getUnder(p, "mine") + "," + w.a.getUnder(p, "child"); got != "p,-" {
		t.Fatalf("under the parent after the nested abort: %s", got)
	}
	w.mustComplete(p, true)
	if got := w.a.get("mine") + "," + w.a.get("child"); got != "p,-" {
		t.Fatalf("after the parent committed: %s", got)
	}
	w.a.put(nil, "child", "unlocked")
	w.a.put(nil, "mine", "unlocked")
}

func TestNestedSeesParent(t *testing.T) {
	w := newWorld(t)
	w.a.put(nil, "k", "0")
	p := w.create()
	w.a.put(p, "k", "p")
	w.a.put(p, "gone", "x")
	c := w.nest(p)
	if got := w.a.getUnder(c, "k"); got != "p" {
		t.Fatalf("the nested transaction reads %s, want its parent's write", got)
	}
	if _, err := w.a.kv.Delete(context.Background(), c, "gone"); err != nil {
		t.Fatal(err)
	}
	w.a.put(c, "k", "c")
	ents, err := w.a.kv.List(context.Background(), c, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Key != "k" || string(ents[0].Value) != "c" {
		t.Fatalf("list under the nested transaction: %+v", ents)
	}
	// Another transaction is blocked by the nested one's lock...
	other := w.create()
	if err := w.a.kv.Put(context.Background(), other, "k", []byte("o")); !isKind(err, djinn.Unavailable) {
		t.Fatalf("another transaction's write: %v, want a lock conflict", err)
	}
	// ... and the parent does not see the nested write before it commits.
	if got := w.a.getUnder(p, "k"); got != "p" {
		t.Fatalf("the parent reads %s before the nested commit", got)
	}
	w.mustComplete(c, true)
	if got := w.a.getUnder(p, "k") + "," + w.a.getUnder(p, "gone"); got != "c,-" {
		t.Fatalf("the parent after the nested commit: %s", got)
	}
	if got := w.a.get("k"); got != "0" {
		t.Fatalf("seen outside before the parent commits: %s", got)
	}
	w.mustComplete(other, false)
	w.mustComplete(p, true)
	if got := w.a.get("k") + "," + w.a.get("gone"); got != "c,-" {
		t.Fatalf("after the parent committed: %s", got)
	}
}

func TestNestedDepthTwo(t *testing.T) {
	w := newWorld(t)
	g := w.create()
	w.a.put(g, "g", "1")
	p := w.nest(g)
	c := w.nest(p)
	if got := w.a.getUnder(c, "g"); got != "1" {
		t.Fatalf("the grandchild reads %s, want the top-level's write", got)
	}
	w.a.put(c, "n", "1")
	w.b.put(c, "m", "1")
	w.mustComplete(c, true)
	if got := w.a.getUnder(p, "n") + w.a.get("n"); got != "1-" {
		t.Fatalf("after the grandchild committed (under the parent, outside): %s", got)
	}
	w.mustComplete(p, true)
	if got := w.a.getUnder(g, "n") + w.a.get("n") + w.b.getUnder(g, "m") + w.b.get("m"); got != "1-1-" {
		t.Fatalf("after the parent committed (under the top-level, outside, twice): %s", got)
	}
	w.mustComplete(g, true)
	if got := w.a.get("g") + w.a.get("n") + w.b.get("m"); got != "111" {
		t.Fatalf("after the top-level committed: %s", got)
	}

	// Again, the top-level aborting after both nested ones committed.
	g = w.create()
	p = w.nest(g)
	c = w.nest(p)
	w.a.put(c, "x", "1")
	w.mustComplete(c, true)
	w.mustComplete(p, true)
	w.mustComplete(g, false)
	if got := w.a.get("x"); got != "-" {
		t.Fatalf("after the top-level aborted: %s", got)
	}
	w.a.put(nil, "x", "unlocked")
}

// TestNestedActiveWhenParentCommits: a nested transaction still ACTIVE
// when its parent commits is aborted (TX.2.7), and the participant,
// prepared for the parent, drops its changes (TX.2.6).
func TestNestedActiveWhenParentCommits(t *testing.T) {
	w := newWorld(t)
	p := w.create()
	w.a.put(p, "p", "1")
	c := w.nest(p)
	w.a.put(c, "c", "1")
	w.mustComplete(p, true)
	if got := w.a.get("p") + w.a.get("c"); got != "1-" {
		t.Fatalf("after the parent committed: %s", got)
	}
	servertest.Eventually(t, "the nested transaction rolled back", func() bool {
		st, ok := w.a.db.Participant().State(*c)
		return ok && st == participant.Aborted
	})
	w.a.put(nil, "c", "unlocked")
}
