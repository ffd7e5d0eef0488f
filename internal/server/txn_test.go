package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
)

// served returns the calls of the named method the server answered, by
// code ("OK 1"), from its grpc_server_handled_total series.
func served(t *testing.T, srv *server.Server, service, method string) string {
	t.Helper()
	return counted(t, srv, "grpc_server_handled_total", service, method)
}

// streamed returns the messages srv received on method's streams.
func streamed(t *testing.T, srv *server.Server, service, method string) string {
	t.Helper()
	return counted(t, srv, "grpc_server_msg_received_total", service, method)
}

// counted returns the samples of metric for method, by code if it has one.
func counted(t *testing.T, srv *server.Server, metric, service, method string) string {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: servertest.Timeout}
	resp, err := hc.Get("http://" + srv.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for l := range strings.Lines(string(b)) {
		labels, value, ok := strings.Cut(strings.TrimSpace(l), "} ")
		if !ok || !strings.HasPrefix(labels, metric+"{") || value == "0" ||
			!strings.Contains(labels, `grpc_method="`+method+`"`) || !strings.Contains(labels, `grpc_service="djinn.v1.`+service+`"`) {
			continue
		}
		if _, code, ok := strings.Cut(labels, `grpc_code="`); ok {
			code, _, _ = strings.Cut(code, `"`)
			value = code + " " + value
		}
		out = append(out, value)
	}
	return strings.Join(out, "; ")
}

func kvClient(t *testing.T, c *client.Client, addr string) *kv.Client {
	t.Helper()
	conn, err := c.Conn(addr)
	if err != nil {
		t.Fatal(err)
	}
	return kv.NewClient(conn)
}

// transfer writes two keys on kvAddr's participant under a transaction of
// mgr's manager and commits it.
func transfer(t *testing.T, mgr *client.Client, kvc *kv.Client) {
	t.Helper()
	ctx := testContext(t)
	m, err := mgr.TransactionManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := m.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ptx := participant.TxOf(tx)
	for _, k := range []string{"a", "b"} {
		if err := kvc.Put(ctx, ptx, k, []byte("v-"+k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		// The participant rolls forward in phase 2, which may still be on
		// its way after commit returned: a read outside the transaction
		// waits for the key's lock.
		servertest.Eventually(t, "committed "+k+" visible", func() bool {
			v, ok, err := kvc.Get(ctx, nil, k)
			return err == nil && ok && string(v) == "v-"+k
		})
	}
}

// TestTransactionOwnParticipantInProcess: the server's manager and its own
// key/value participant talk in process — no join, prepare or commit is
// served over gRPC, unary or streamed — and give the same outcome as over
// the wire.
func TestTransactionOwnParticipantInProcess(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	transfer(t, c, kvClient(t, c, srv.Addr()))
	for _, m := range []struct{ service, method string }{
		{"TransactionManager", "Join"}, {"TransactionParticipant", "PrepareAndCommit"}, {"TransactionParticipant", "Prepare"}, {"TransactionParticipant", "Calls"},
		{"TransactionManager", "Commit"},
	} {
		got := served(t, srv, m.service, m.method)
		if m.method == "Commit" {
			if got != "OK 1" {
				t.Errorf("Commit served: %q, want the client's one call", got)
			}
			continue
		}
		if got != "" || streamed(t, srv, m.service, m.method) != "" {
			t.Errorf("%s served over gRPC: %q, want none", m.method, got)
		}
	}
}

// TestTransactionOtherServersParticipant: a participant on another server
// joins over gRPC, and is asked to prepare and told to commit over the
// manager's Calls stream, not by unary calls.
func TestTransactionOtherServersParticipant(t *testing.T) {
	t.Parallel()
	mgrSrv := servertest.Start(t, servertest.Config(t))
	kvSrv := servertest.Start(t, servertest.Config(t))
	transfer(t, servertest.Dial(t, mgrSrv.Addr()), kvClient(t, servertest.Dial(t, kvSrv.Addr()), kvSrv.Addr()))
	if got := served(t, mgrSrv, "TransactionManager", "Join"); got != "OK 1" {
		t.Errorf("manager served Join: %q, want one", got)
	}
	servertest.Eventually(t, "the participant's prepare and commit on the Calls stream", func() bool {
		return streamed(t, kvSrv, "TransactionParticipant", "Calls") == "2"
	})
	for _, m := range []string{"Prepare", "Commit", "PrepareAndCommit"} {
		if got := served(t, kvSrv, "TransactionParticipant", m); got != "" {
			t.Errorf("participant served %s unary: %q, want none", m, got)
		}
	}
}

// twoManagers starts two servers, each a manager with its own key/value
// participant.
type twoManagers struct {
	a, b     *client.TransactionManager
	kvA, kvB *kv.Client
}

func startTwoManagers(t *testing.T) twoManagers {
	t.Helper()
	ctx := testContext(t)
	var tm twoManagers
	for i, mp := range []**client.TransactionManager{&tm.a, &tm.b} {
		srv := servertest.Start(t, servertest.Config(t))
		c := servertest.Dial(t, srv.Addr())
		m, err := c.TransactionManager(ctx)
		if err != nil {
			t.Fatal(err)
		}
		*mp = m
		if i == 0 {
			tm.kvA = kvClient(t, c, srv.Addr())
		} else {
			tm.kvB = kvClient(t, c, srv.Addr())
		}
	}
	return tm
}

func ptx(tx *client.Transaction) *participant.Tx {
	return participant.TxOf(tx)
}

// value reads key outside any transaction: "" when absent.
func value(t *testing.T, c *kv.Client, key string) string {
	t.Helper()
	v, ok, err := c.Get(testContext(t), nil, key)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return ""
	}
	return string(v)
}

// TestNestedUnderAnotherManager: TX.2.2 and TX.2.7 across managers. A
// transaction of manager B nested in one of manager A: B joins the parent
// as a participant; when the nested one commits, its participants are
// promoted into the parent at A and roll their changes into it, which
// become durable only when the parent commits — or vanish when it aborts.
func TestNestedUnderAnotherManager(t *testing.T) {
	t.Parallel()
	tm := startTwoManagers(t)
	ctx := testContext(t)

	parent, err := tm.a.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	child, err := parent.CreateNestedAt(ctx, tm.b, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !child.IsNested() || !child.Parent().Equal(parent) || !child.EnclosedBy(parent) {
		t.Fatalf("child %v: not nested in %v", child, parent)
	}
	// Both participants join the child at B and learn its ancestry.
	if err := tm.kvA.Put(ctx, ptx(child), "x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := tm.kvB.Put(ctx, ptx(child), "y", []byte("2")); err != nil {
		t.Fatal(err)
	}
	d, err := child.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Parent != parent.ID() || !d.ParentManager.Equal(tm.a.Ref()) || len(d.Participants) != 2 {
		t.Fatalf("child described as %+v: want nested in %d of %v with two participants", d, parent.ID(), tm.a.Ref())
	}
	pd, err := parent.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pd.Participants) != 1 || pd.Participants[0].Participant.Object != txn.NestID {
		t.Fatalf("parent's participants %+v: want B's nest participant alone", pd.Participants)
	}
	// With waitFor (TX.2.5): commit returns once the participants have
	// been told, so the child's changes are already the parent's when
	// read below. A plain commit may return before that.
	if err := tm.b.CommitWait(ctx, child.ID(), time.Minute); err != nil {
		t.Fatal(err)
	}
	// Promoted: the parent now has both key/value participants.
	if pd, err = parent.Describe(ctx); err != nil {
		t.Fatal(err)
	}
	if len(pd.Participants) != 3 {
		t.Fatalf("parent's participants after the child committed: %+v, want the nest participant and the two promoted", pd.Participants)
	}
	// The changes are the parent's now: seen under it, not outside.
	if v, ok, err := tm.kvA.Get(ctx, ptx(parent), "x"); err != nil || !ok || string(v) != "1" {
		t.Fatalf("x under the parent: %q %v %v", v, ok, err)
	}
	if err := parent.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the parent's commit rolled both participants forward", func() bool {
		return value(t, tm.kvA, "x") == "1" && value(t, tm.kvB, "y") == "2"
	})

	// Aborting the parent aborts an ACTIVE child at the other manager, and
	// drops the changes of a committed one.
	parent2, err := tm.a.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := tm.b.CreateNestedIn(ctx, parent2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	active, err := tm.b.CreateNestedIn(ctx, parent2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := tm.kvB.Put(ctx, ptx(committed), "gone", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := tm.kvB.Put(ctx, ptx(active), "never", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := committed.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := parent2.AbortWait(ctx, servertest.Timeout); err != nil {
		t.Fatal(err)
	}
	if st, err := active.State(ctx); err != nil || st != client.TxnAborted {
		t.Fatalf("ACTIVE child after its parent at another manager aborted: %v %v, want ABORTED", st, err)
	}
	servertest.Eventually(t, "the aborted family's changes gone", func() bool {
		return value(t, tm.kvB, "gone") == "" && value(t, tm.kvB, "never") == ""
	})
	if err := active.Commit(ctx); djinn.KindOf(err) != djinn.CannotCommit {
		t.Fatalf("commit of the aborted child: %v, want CannotCommit", err)
	}

	// Committing a parent completes a child still ACTIVE at the other
	// manager: it aborts, and the parent commits without it.
	parent3, err := tm.a.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	open, err := tm.b.CreateNestedIn(ctx, parent3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := tm.kvB.Put(ctx, ptx(open), "open", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := parent3.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := open.State(ctx); err != nil || st != client.TxnAborted {
		t.Fatalf("ACTIVE child when its parent committed: %v %v, want ABORTED", st, err)
	}

	// The parent's manager's refusals pass through.
	if _, err := tm.b.CreateNestedIn(ctx, tm.a.Transaction(12345), time.Minute); djinn.KindOf(err) != djinn.UnknownTransaction {
		t.Errorf("nesting in an unknown transaction: %v, want UnknownTransaction", err)
	}
	if _, err := tm.b.CreateNestedIn(ctx, parent3, time.Minute); djinn.KindOf(err) != djinn.CannotJoin {
		t.Errorf("nesting in a committed transaction: %v, want CannotJoin", err)
	}
}
