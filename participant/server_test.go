package participant_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/pstream"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/participant/participanttest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// serve serves a participant.Server on a loopback port and returns it
// with a client for it.
func serve(t *testing.T) (*participant.Server, string, djinnpb.TransactionParticipantClient) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv := participant.NewServer()
	srv.Register(g)
	go g.Serve(ln)
	pool := client.NewPool()
	t.Cleanup(func() {
		pool.Close()
		g.Stop()
	})
	conn, err := pool.Conn(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return srv, ln.Addr().String(), djinnpb.NewTransactionParticipantClient(conn)
}

// TestServerCarriesKinds: the manager tells the participant's answers apart
// by their djinn kinds, over a real gRPC connection.
func TestServerCarriesKinds(t *testing.T) {
	srv, addr, c := serve(t)
	mgr := participanttest.NewManager()
	res := newFakeRes()
	p, err := participant.New(participant.Config{Endpoint: addr, Store: participant.NewMemStore(), Resource: res, Managers: mgr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv.Add(p)
	tx := mgr.Create()
	self := p.Ref().Object
	req := func(tx participant.Tx) *djinnpb.ParticipantRequest {
		return &djinnpb.ParticipantRequest{ParticipantId: self[:], Manager: client.RefToProto(tx.Manager), Id: tx.ID}
	}

	_, err = c.Prepare(bg, req(tx))
	wantKind(t, err, djinn.UnknownTransaction)
	_, err = c.Commit(bg, req(tx))
	wantKind(t, err, djinn.UnknownTransaction)
	other := djinn.NewID()
	_, err = c.Prepare(bg, &djinnpb.ParticipantRequest{ParticipantId: other[:], Manager: client.RefToProto(tx.Manager), Id: tx.ID})
	wantKind(t, err, djinn.NoSuchObject)
	_, err = c.Abort(bg, &djinnpb.ParticipantRequest{ParticipantId: []byte{1, 2}, Manager: client.RefToProto(tx.Manager), Id: tx.ID})
	wantKind(t, err, djinn.InvalidArgument)

	done, err := p.Join(bg, tx)
	if err != nil {
		t.Fatal(err)
	}
	res.change(tx, "a")
	done()
	resp, err := c.Prepare(bg, req(tx))
	if err != nil || resp.GetVote() != djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
		t.Fatalf("prepare: %v, %v; want PREPARED", resp.GetVote(), err)
	}
	for range 2 {
		if _, err := c.Commit(bg, req(tx)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.Abort(bg, req(tx))
	wantKind(t, err, djinn.CannotAbort)

	one := mgr.Create()
	done, err = p.Join(bg, one)
	if err != nil {
		t.Fatal(err)
	}
	res.change(one, "b")
	done()
	resp, err = c.PrepareAndCommit(bg, req(one))
	if err != nil || resp.GetVote() != djinnpb.TransactionState_TRANSACTION_STATE_COMMITTED {
		t.Fatalf("prepareAndCommit: %v, %v; want COMMITTED", resp.GetVote(), err)
	}

	srv.Remove(p)
	_, err = c.Prepare(bg, req(tx))
	wantKind(t, err, djinn.NoSuchObject)
}

// TestServerCallsStream: the same calls over the Calls stream, as a djinn
// manager makes them, give the same answers with the same kinds.
func TestServerCallsStream(t *testing.T) {
	srv, addr, _ := serve(t)
	mgr := participanttest.NewManager()
	res := newFakeRes()
	p, err := participant.New(participant.Config{Endpoint: addr, Store: participant.NewMemStore(), Resource: res, Managers: mgr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv.Add(p)
	pool := client.NewPool()
	defer pool.Close()
	calls := pstream.NewCaller(func(_ context.Context, ref *djinnpb.Ref) (pstream.Route, error) {
		cc, err := pool.Conn(ref.GetEndpoint())
		return pstream.Route{Conn: cc}, err
	})
	defer calls.Close()
	self := client.RefToProto(p.Ref())
	call := func(op djinnpb.ParticipantOp, tx participant.Tx, ref *djinnpb.Ref) (djinnpb.TransactionState, error) {
		type answer struct {
			v   djinnpb.TransactionState
			err error
		}
		ch := make(chan answer, 1)
		calls.Call(bg, time.Minute, op, ref, client.RefToProto(tx.Manager), tx.ID, tx.Secret, func(v djinnpb.TransactionState, err error) { ch <- answer{v, err} })
		a := <-ch
		return a.v, a.err
	}
	tx := mgr.Create()
	_, err = call(djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, tx, self)
	wantKind(t, err, djinn.UnknownTransaction)
	other := client.RefToProto(djinn.Ref{Endpoint: addr, Service: djinn.NewID(), Object: djinn.NewID()})
	_, err = call(djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, tx, other)
	wantKind(t, err, djinn.NoSuchObject)

	done, err := p.Join(bg, tx)
	if err != nil {
		t.Fatal(err)
	}
	res.change(tx, "a")
	done()
	if v, err := call(djinnpb.ParticipantOp_PARTICIPANT_OP_PREPARE, tx, self); err != nil || v != djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
		t.Fatalf("prepare: %v, %v; want PREPARED", v, err)
	}
	if _, err := call(djinnpb.ParticipantOp_PARTICIPANT_OP_COMMIT, tx, self); err != nil {
		t.Fatal(err)
	}
	_, err = call(djinnpb.ParticipantOp_PARTICIPANT_OP_ABORT, tx, self)
	wantKind(t, err, djinn.CannotAbort)
	if st, _ := p.State(tx); st != participant.Committed {
		t.Fatalf("state %v, want COMMITTED", st)
	}
}
