package bench

import (
	"context"
	"net"
	"strings"
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

// The transaction bench against real servers: it counts a transaction only
// once its participants were told the outcome, and fails a run whose
// participants were not told.

func txnEnv(server string) Env {
	return Env{Server: server, Dial: func(ctx context.Context, addr string) (*client.Client, error) { return client.Dial(ctx, addr) }}
}

// TestTxnCompletes: a manager and two participants in servers of their
// own; every participant is told, every sampled write reads back, and
// the rate is of completed transactions.
func TestTxnCompletes(t *testing.T) {
	mgr := servertest.Start(t, servertest.Config(t))
	p1 := servertest.Start(t, servertest.Config(t))
	p2 := servertest.Start(t, servertest.Config(t))
	b := &Txn{Levels: []int{3}, Duration: 300 * time.Millisecond, Conns: 2, KV: []string{p1.Addr(), p2.Addr()},
		Lease: time.Minute, Lag: time.Minute}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	rep, err := b.Run(t.Context(), txnEnv(mgr.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Verdict(); err != nil {
		t.Fatalf("verdict: %v", err)
	}
	r := rep.Results[0]
	if r.Ops == 0 {
		t.Fatalf("no transaction completed: %+v", r)
	}
	for _, name := range []string{"participants not told", "writes missing at participants"} {
		if c, ok := r.Check(name); !ok || !c.OK {
			t.Errorf("check %q: %+v (present %v)", name, c, ok)
		}
	}
	if n, _ := r.Figure("read back"); n == 0 {
		t.Errorf("no committed transaction was read back from the participants: %+v", r.Figures)
	}
	decided, _ := r.Figure("decided/s")
	completed, _ := r.Figure("completed/s")
	if completed != r.OpsPerS || completed > decided {
		t.Errorf("rate %v/s, completed %v/s, decided %v/s: the rate must be of completed transactions, no more than decided", r.OpsPerS, completed, decided)
	}
}

// refusingCommits is a participant's service that refuses every commit,
// unary or on the Calls stream: its participants are never told a
// transaction committed.
type refusingCommits struct {
	*participant.Server
}

func (refusingCommits) Commit(context.Context, *djinnpb.ParticipantRequest) (*djinnpb.ParticipantResponse, error) {
	return nil, status.Error(codes.Unavailable, "test participant: refusing every commit")
}

func (r refusingCommits) Calls(stream djinnpb.TransactionParticipant_CallsServer) error {
	return pstream.Serve(stream, func(ctx context.Context, op djinnpb.ParticipantOp, req *djinnpb.ParticipantRequest) (djinnpb.TransactionState, error) {
		if op == djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT {
			return 0, djinn.Errorf(djinn.Unavailable, "test participant: refusing every commit")
		}
		return r.Server.Call(ctx, op, req)
	}, nil)
}

// refusingParticipant serves a key/value store whose participant refuses
// every commit, on a gRPC server of its own, and returns its address.
func refusingParticipant(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pool := client.NewPool()
	t.Cleanup(func() { pool.Close() })
	db, err := kv.Open(kv.Config{Participant: participant.Config{Endpoint: lis.Addr().String(), Store: participant.NewMemStore(), Managers: participant.Remote(pool)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ps := participant.NewServer()
	ps.Add(db.Participant())
	g := grpc.NewServer()
	kv.NewServer(db).Register(g)
	djinnpb.RegisterTransactionParticipantServer(g, refusingCommits{ps})
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// TestTxnFailsWhenParticipantsAreNotTold: one participant refuses every
// commit, so the manager can never tell it the outcome: the run fails,
// naming the participants not told and phase 2's lag, and does not count
// the transactions as completed.
func TestTxnFailsWhenParticipantsAreNotTold(t *testing.T) {
	mgr := servertest.Start(t, servertest.Config(t))
	p2 := servertest.Start(t, servertest.Config(t))
	b := &Txn{Levels: []int{2}, Duration: 200 * time.Millisecond, Conns: 1, KV: []string{refusingParticipant(t), p2.Addr()},
		Lease: time.Minute, Lag: 300 * time.Millisecond}
	rep, err := b.Run(t.Context(), txnEnv(mgr.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	err = rep.Verdict()
	if err == nil {
		t.Fatalf("participants never told the outcome, and the run passed: %+v", rep.Results)
	}
	t.Logf("verdict: %v", err)
	for _, want := range []string{"participants not told", "phase-2 lag ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("verdict %q, want it to name %q", err, want)
		}
	}
	r := rep.Results[0]
	if decided, _ := r.Figure("decided/s"); decided == 0 || r.OpsPerS != 0 {
		t.Errorf("decided %v/s, rate %v/s: want commits decided and none counted complete", decided, r.OpsPerS)
	}
}

// refusingPuts is a key/value service that refuses every write as a lock
// conflict (Unavailable), as the reference participant refuses a write
// that meets another transaction's lock.
type refusingPuts struct {
	djinnpb.UnimplementedKeyValueServer
}

func (refusingPuts) Put(context.Context, *djinnpb.KVPutRequest) (*djinnpb.KVPutResponse, error) {
	return nil, status.Error(codes.Unavailable, "test participant: refusing every write")
}

// TestTxnWriteRefusedAborts: the writes of a transaction go out together;
// one participant refuses its write, so the bench aborts the transaction
// once both answered and counts a conflict, no completed transaction —
// and the write the other participant took is rolled back, not committed.
func TestTxnWriteRefusedAborts(t *testing.T) {
	mgr := servertest.Start(t, servertest.Config(t))
	p2 := servertest.Start(t, servertest.Config(t))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	djinnpb.RegisterKeyValueServer(g, refusingPuts{})
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	b := &Txn{Levels: []int{2}, Duration: 200 * time.Millisecond, Conns: 1, KV: []string{lis.Addr().String(), p2.Addr()},
		Lease: time.Minute, Lag: time.Minute}
	rep, err := b.Run(t.Context(), txnEnv(mgr.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	conflicts, _ := r.Figure("conflicts")
	if r.Ops != 0 || conflicts == 0 {
		t.Fatalf("ops %d, conflicts %v: every transaction met a refused write and must count as a conflict, none completed", r.Ops, conflicts)
	}
	c, err := client.Dial(t.Context(), p2.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	got, err := kv.NewClient(c.ClientConn()).List(t.Context(), nil, "bench/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("the participant that took its write holds %d keys of aborted transactions, first %q", len(got), got[0].Key)
	}
}
