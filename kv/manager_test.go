package kv_test

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/pstream"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// These tests run a real djinn transaction manager in process and two key/
// value participants, each on its own gRPC server on a loopback port with a
// FileStore, reached by the manager over gRPC.

// node is a key/value participant served on addr.
type node struct {
	t     *testing.T
	dir   string
	addr  string
	pool  *client.Pool
	store *participant.FileStore
	db    *kv.DB
	g     *grpc.Server
	kv    *kv.Client
	// cut, when set, makes the node refuse the manager's commit calls as a
	// broken link would (Unavailable), so that only recovery can roll
	// forward.
	cut *atomic.Bool
}

func startNode(t *testing.T, pool *client.Pool, addr, dir string, cut *atomic.Bool) *node {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, dir: dir, addr: ln.Addr().String(), pool: pool, cut: cut}
	if n.store, err = participant.OpenFileStore(dir); err != nil {
		t.Fatal(err)
	}
	n.db, err = kv.Open(kv.Config{Participant: participant.Config{
		Endpoint: n.addr, Store: n.store, Managers: participant.Remote(pool),
		MinRetry: 10 * time.Millisecond, MaxRetry: 100 * time.Millisecond,
	}})
	if err != nil {
		t.Fatal(err)
	}
	n.g = grpc.NewServer()
	ps := participant.NewServer()
	ps.Add(n.db.Participant())
	djinnpb.RegisterTransactionParticipantServer(n.g, cuttable{ps, cut})
	kv.NewServer(n.db).Register(n.g)
	go n.g.Serve(ln)
	conn, err := pool.Conn(n.addr)
	if err != nil {
		t.Fatal(err)
	}
	n.kv = kv.NewClient(conn)
	t.Cleanup(n.crash)
	return n
}

// cuttable serves the participant, refusing the manager's commit calls —
// unary or on the Calls stream — as a broken link would (Unavailable)
// while cut is set.
type cuttable struct {
	*participant.Server
	cut *atomic.Bool
}

func (c cuttable) Commit(ctx context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.ParticipantResponse, error) {
	if c.cut.Load() {
		return nil, status.Error(codes.Unavailable, "link cut by the test")
	}
	return c.Server.Commit(ctx, req)
}

func (c cuttable) Calls(stream djinnpb.TransactionParticipant_CallsServer) error {
	return pstream.Serve(stream, func(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
		if c.cut.Load() && op == djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT {
			return 0, djinn.Errorf(djinn.Unavailable, "link cut by the test")
		}
		return c.Server.Call(ctx, op, req)
	}, nil)
}

// crash stops the node without any goodbye: what is not in its store is
// lost. A second crash does nothing.
func (n *node) crash() {
	if n.g == nil {
		return
	}
	n.g.Stop()
	n.db.Close()
	n.store.Close()
	n.g = nil
}

// restart crashes the node and starts it again on the same address over
// the same directory.
func (n *node) restart() *node {
	n.crash()
	return startNode(n.t, n.pool, n.addr, n.dir, n.cut)
}

func (n *node) get(key string) string {
	n.t.Helper()
	v, ok, err := n.kv.Get(context.Background(), nil, key)
	if err != nil {
		n.t.Fatalf("get %s at %s: %v", key, n.addr, err)
	}
	if !ok {
		return "-"
	}
	return string(v)
}

func (n *node) put(tx *participant.Tx, key, value string) {
	n.t.Helper()
	if err := n.kv.Put(context.Background(), tx, key, []byte(value)); err != nil {
		n.t.Fatalf("put %s at %s: %v", key, n.addr, err)
	}
}

type world struct {
	t    *testing.T
	mgr  djinnpb.TransactionManagerClient
	a, b *node
	cutA atomic.Bool
}

func newWorld(t *testing.T) *world {
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	w := &world{t: t, mgr: djinnpb.NewTransactionManagerClient(c.ClientConn())}
	pool := client.NewPool()
	t.Cleanup(func() { pool.Close() })
	w.a = startNode(t, pool, "127.0.0.1:0", t.TempDir(), &w.cutA)
	w.b = startNode(t, pool, "127.0.0.1:0", t.TempDir(), new(atomic.Bool))
	return w
}

func (w *world) create() *participant.Tx {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), servertest.Timeout)
	defer cancel()
	c, err := w.mgr.Create(ctx, &djinnpb.CreateTransactionRequest{LeaseDurationNanos: int64(time.Minute)})
	if err != nil {
		w.t.Fatal(err)
	}
	mgr, err := client.RefFromProto("manager", c.GetManager())
	if err != nil {
		w.t.Fatal(err)
	}
	return &participant.Tx{Manager: mgr, ID: c.GetId(), Secret: djinn.ID(c.GetSecret())}
}

// complete commits or aborts tx and, with wait, waits until every
// participant has been told (TX.2.5's waitFor forms).
func (w *world) complete(tx *participant.Tx, commit, wait bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), servertest.Timeout)
	defer cancel()
	req := &djinnpb.CompleteTransactionRequest{Id: tx.ID}
	if wait {
		d := int64(servertest.Timeout / 2)
		req.WaitForNanos = &d
	}
	var err error
	if commit {
		_, err = w.mgr.Commit(ctx, req)
	} else {
		_, err = w.mgr.Abort(ctx, req)
	}
	return err
}

func TestWithManagerCommitShowsBoth(t *testing.T) {
	w := newWorld(t)
	tx := w.create()
	w.a.put(tx, "from", "90")
	w.b.put(tx, "to", "10")
	if got := w.a.get("from") + w.b.get("to"); got != "--" {
		t.Fatalf("before commit, seen outside: %s", got)
	}
	if err := w.complete(tx, true, true); err != nil {
		t.Fatal(err)
	}
	if got := w.a.get("from") + "," + w.b.get("to"); got != "90,10" {
		t.Fatalf("after commit: %s", got)
	}
	// One participant alone gets prepareAndCommit.
	one := w.create()
	w.a.put(one, "solo", "1")
	if err := w.complete(one, true, true); err != nil {
		t.Fatal(err)
	}
	if got := w.a.get("solo"); got != "1" {
		t.Fatalf("after a one-participant commit: %s", got)
	}
}

func TestWithManagerAbortShowsNeither(t *testing.T) {
	w := newWorld(t)
	w.a.put(nil, "from", "100")
	tx := w.create()
	w.a.put(tx, "from", "90")
	w.b.put(tx, "to", "10")
	if err := w.complete(tx, false, true); err != nil {
		t.Fatal(err)
	}
	if got := w.a.get("from") + "," + w.b.get("to"); got != "100,-" {
		t.Fatalf("after abort: %s", got)
	}
	w.a.put(nil, "from", "unlocked")
	w.b.put(nil, "to", "unlocked")
}

// TestWithManagerParticipantCrashBetweenPrepareAndCommit: a participant
// that voted PREPARED and crashed before hearing the outcome recovers its
// prepared record and, asking the manager (TX.2.8.1), rolls forward — the
// manager's own commit calls cannot reach it.
func TestWithManagerParticipantCrashBetweenPrepareAndCommit(t *testing.T) {
	w := newWorld(t)
	tx := w.create()
	w.a.put(tx, "from", "90")
	w.b.put(tx, "to", "10")
	w.cutA.Store(true)
	if err := w.complete(tx, true, false); err != nil {
		t.Fatal(err) // COMMITTED: both voted PREPARED
	}
	if st, ok := w.a.db.Participant().State(*tx); !ok || st != participant.Prepared {
		t.Fatalf("participant A: %v, want PREPARED (its commit calls are cut)", st)
	}
	before := w.a.db.Participant().CrashCount()
	w.a = w.a.restart()
	if w.a.db.Participant().CrashCount() == before {
		t.Fatal("the crash count did not change across a restart")
	}
	servertest.Eventually(t, "participant A rolled forward by recovery", func() bool {
		st, _ := w.a.db.Participant().State(*tx)
		return st == participant.Committed
	})
	// B hears the outcome from the manager's phase 2, which the commit
	// above did not wait for.
	servertest.Eventually(t, "participant B told to commit", func() bool {
		st, _ := w.b.db.Participant().State(*tx)
		return st == participant.Committed
	})
	if got := w.a.get("from") + "," + w.b.get("to"); got != "90,10" {
		t.Fatalf("after recovery: %s", got)
	}
	w.cutA.Store(false)
	if err := w.complete(tx, true, true); err != nil {
		t.Fatalf("commit again, waiting for every participant: %v", err)
	}
}

// TestWithManagerRestartAbortsWhatWasActive: a participant that restarted
// lost the ACTIVE transactions; continuing one fails with the manager's
// CrashCount, and the transaction aborts (TX.2.3).
func TestWithManagerRestartAbortsWhatWasActive(t *testing.T) {
	w := newWorld(t)
	tx := w.create()
	w.a.put(tx, "k", "1")
	w.b.put(tx, "k", "1")
	w.a = w.a.restart()
	// The restarted participant's first call may meet a connection the
	// restart broke (UNAVAILABLE, which a client retries); then the
	// manager answers.
	var err error
	for range 20 {
		err = w.a.kv.Put(context.Background(), tx, "k2", []byte("2"))
		if !isKind(err, djinn.Unavailable) {
			break
		}
	}
	if !isKind(err, djinn.CrashCount) {
		t.Fatalf("put after the participant restarted: %v, want a crash count error", err)
	}
	if err := w.complete(tx, true, false); err == nil {
		t.Fatal("a transaction whose participant lost its changes committed")
	}
	if got := w.b.get("k"); got != "-" {
		t.Fatalf("the other participant shows %s", got)
	}
}

func isKind(err error, k djinn.Kind) bool { return djinn.KindOf(err) == k }
