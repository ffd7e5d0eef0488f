package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// These tests drive transactions through the client against a real djinn
// server, with participants served by the test.

// txnServer starts a server and returns a client and its transaction
// manager.
func txnServer(t *testing.T) (*client.Client, *client.TransactionManager) {
	t.Helper()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	m, err := c.TransactionManager(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c, m
}

// partCall is a call a test participant answered.
type partCall struct {
	method  string // Prepare, PrepareAndCommit, Commit, Abort
	manager djinn.Ref
	id      uint64
}

// testParticipant is a transaction participant served by the test on a
// loopback port. It answers prepare with its vote and records every call.
// A health Check made under a transaction (client.WithTransaction) is "work
// under the transaction": the participant joins it first, as a real
// participant joins on its first operation (TX.2.3).
type testParticipant struct {
	djinnpb.UnimplementedTransactionParticipantServer
	ref   djinn.Ref
	pool  *client.Pool
	calls chan partCall

	mu sync.Mutex
	// Guarded by mu.
	vote      djinnpb.TransactionState // Prepare's answer
	crash     int64                    // the crash count it joins with
	commitErr error                    // Commit's error, if any
	abortErr  error                    // Abort's error, if any
	worked    []*client.Transaction    // transactions work was done under
}

func newTestParticipant(t *testing.T) *testParticipant {
	t.Helper()
	p := &testParticipant{pool: client.NewPool(), calls: make(chan partCall, 64), vote: djinnpb.TransactionState_TRANSACTION_STATE_PREPARED}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.ref = djinn.Ref{Endpoint: ln.Addr().String(), Service: djinn.NewID(), Object: djinn.NewID()}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(p.intercept))
	djinnpb.RegisterTransactionParticipantServer(srv, p)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
		p.pool.Close()
	})
	return p
}

func (p *testParticipant) set(fn func(p *testParticipant)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p)
}

// intercept joins the transaction a health Check carries, and turns errors
// into statuses as a djinn server does.
func (p *testParticipant) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if info.FullMethod == healthpb.Health_Check_FullMethodName {
		tx, err := client.TransactionFromIncoming(ctx, p.pool)
		if err != nil {
			return nil, grpcerr.Status(err)
		}
		if tx != nil {
			p.mu.Lock()
			crash := p.crash
			p.mu.Unlock()
			if err := tx.Join(ctx, p.ref, crash); err != nil {
				return nil, grpcerr.Status(err)
			}
			p.mu.Lock()
			p.worked = append(p.worked, tx)
			p.mu.Unlock()
		}
	}
	resp, err := h(ctx, req)
	return resp, grpcerr.Status(err)
}

// work does work at p under the transaction in ctx, if any.
func (p *testParticipant) work(ctx context.Context, c client.Connector) error {
	cc, err := c.Conn(p.ref.Endpoint)
	if err != nil {
		return err
	}
	_, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func (p *testParticipant) record(method string, req *djinnpb.ParticipantRequest) error {
	mgr, err := client.RefFromProto("manager", req.GetManager())
	if err != nil {
		return err
	}
	if id, err := djinn.IDFromBytes("participant id", req.GetParticipantId()); err != nil || id != p.ref.Object {
		return djinn.Errorf(djinn.NoSuchObject, "participant %x: not this one", req.GetParticipantId())
	}
	p.calls <- partCall{method, mgr, req.GetId()}
	return nil
}

func (p *testParticipant) Prepare(_ context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.PrepareResponse, error) {
	if err := p.record("Prepare", req); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return &djinnpb.PrepareResponse{Vote: p.vote}, nil
}

func (p *testParticipant) PrepareAndCommit(_ context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.PrepareResponse, error) {
	if err := p.record("PrepareAndCommit", req); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v := p.vote
	if v == djinnpb.TransactionState_TRANSACTION_STATE_PREPARED {
		v = djinnpb.TransactionState_TRANSACTION_STATE_COMMITTED
	}
	return &djinnpb.PrepareResponse{Vote: v}, nil
}

func (p *testParticipant) Commit(_ context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.ParticipantResponse, error) {
	if err := p.record("Commit", req); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return &djinnpb.ParticipantResponse{}, p.commitErr
}

func (p *testParticipant) Abort(_ context.Context, req *djinnpb.ParticipantRequest) (*djinnpb.ParticipantResponse, error) {
	if err := p.record("Abort", req); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return &djinnpb.ParticipantResponse{}, p.abortErr
}

// expect waits for p's next call and checks it is method on tx.
func (p *testParticipant) expect(t *testing.T, method string, tx *client.Transaction) {
	t.Helper()
	select {
	case c := <-p.calls:
		if c.method != method || c.id != tx.ID() || !c.manager.Equal(tx.Manager().Ref()) {
			t.Fatalf("participant got %s of transaction %d from %s, want %s of %v", c.method, c.id, c.manager, method, tx)
		}
	case <-time.After(servertest.Timeout):
		t.Fatalf("participant got no %s of %v", method, tx)
	}
}

// quiet checks that p was not called again.
func (p *testParticipant) quiet(t *testing.T) {
	t.Helper()
	select {
	case c := <-p.calls:
		t.Fatalf("participant got an unexpected %s of transaction %d", c.method, c.id)
	default:
	}
}

func wantKind(t *testing.T, what string, err error, k djinn.Kind) {
	t.Helper()
	if !errors.Is(err, k) {
		t.Fatalf("%s: %v (kind %q), want kind %q", what, err, djinn.KindOf(err), k)
	}
}

func wantState(t *testing.T, tx *client.Transaction, want client.TransactionState) {
	t.Helper()
	st, err := tx.State(t.Context())
	if err != nil || st != want {
		t.Fatalf("state of %v: %v, %v; want %v", tx, st, err, want)
	}
}

func TestTransactionManagerRef(t *testing.T) {
	c, m := txnServer(t)
	if got := m.Ref(); got.Endpoint != c.Addr() || got.Object != server.TxnID || got.Service.IsZero() {
		t.Fatalf("manager ref %v: want %s, the server's service id and object %v", got, c.Addr(), server.TxnID)
	}
	// Create checks the reference the manager answers with against the
	// one Status gave.
	tx, err := m.Create(t.Context(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !tx.Manager().Equal(m) || tx.IsNested() || tx.Lease() == nil {
		t.Fatalf("created %v: manager %v nested %v lease %v", tx, tx.Manager(), tx.IsNested(), tx.Lease())
	}
	if tx.Lease().Landlord().Service != m.Ref().Service {
		t.Errorf("lease landlord %v: want the manager's server %v", tx.Lease().Landlord(), m.Ref())
	}
	// TX.3.3: the same manager and id are the same transaction, however
	// each was obtained.
	again := client.NewTransactionManager(c, m.Ref()).Transaction(tx.ID())
	if !tx.Equal(again) || tx.Key() != again.Key() {
		t.Errorf("%v and %v: not equal", tx, again)
	}

	srv := servertest.Config(t)
	srv.Txn.Enabled = false
	off := servertest.Dial(t, servertest.Start(t, srv).Addr())
	if _, err := off.TransactionManager(t.Context()); !errors.Is(err, djinn.ErrUnsupported) {
		t.Errorf("manager of a server without one: %v, want unsupported", err)
	}
}

// TestTransactionManagerStarting: a server that answers Status before its
// cluster has a service id (not bootstrapped, not joined yet) names no
// manager; the client says it is unavailable instead of handing back a
// manager whose every call fails for naming no object.
func TestTransactionManagerStarting(t *testing.T) {
	s := servertest.OpenWaiting(t, servertest.Start(t, servertest.Config(t))) // no service id until a member adds it
	c := servertest.Dial(t, s.Addr())
	ctx := t.Context()
	for what, find := range map[string]func() (fmt.Stringer, error){
		"transaction manager":      func() (fmt.Stringer, error) { return c.TransactionManager(ctx) },
		"lock service":             func() (fmt.Stringer, error) { return c.LockService(ctx) },
		"lookup service":           func() (fmt.Stringer, error) { return c.Lookup(ctx) },
		"lookup discovery service": func() (fmt.Stringer, error) { return c.LookupDiscovery(ctx) },
	} {
		got, err := find()
		if !errors.Is(err, djinn.ErrUnavailable) {
			t.Errorf("%s of a server with no service id: %v, %v; want unavailable", what, got, err)
			continue
		}
		if !strings.Contains(err.Error(), "no service id") || !strings.Contains(err.Error(), s.Addr()) {
			t.Errorf("%s: error %q: want the server's address and what is not ready", what, err)
		}
	}
}

// TestTransactionCommit: TX.2.7 with two participants that vote PREPARED:
// both are asked to prepare, then told to commit.
func TestTransactionCommit(t *testing.T) {
	_, m := txnServer(t)
	ctx := t.Context()
	a, b := newTestParticipant(t), newTestParticipant(t)
	tx, err := m.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*testParticipant{a, b} {
		if err := tx.Join(ctx, p.ref, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Join(ctx, a.ref, 1); err != nil {
		t.Errorf("repeated join with the same crash count (TX.2.3): %v", err)
	}
	wantState(t, tx, client.TxnActive)
	if err := tx.CommitWait(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*testParticipant{a, b} {
		p.expect(t, "Prepare", tx)
		p.expect(t, "Commit", tx)
		p.quiet(t)
	}
	wantState(t, tx, client.TxnCommitted)
	if err := tx.Commit(ctx); err != nil {
		t.Errorf("commit of a committed transaction (TX.2.5): %v", err)
	}
	wantKind(t, "abort of a committed transaction (TX.2.5)", tx.Abort(ctx), djinn.CannotAbort)
	wantKind(t, "join of a committed transaction (TX.2.3)", tx.Join(ctx, newTestParticipant(t).ref, 1), djinn.CannotJoin)

	d, err := tx.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != tx.ID() || d.State != client.TxnCommitted || len(d.Participants) != 2 {
		t.Fatalf("describe: %+v", d)
	}
	for i, p := range d.Participants {
		if !p.Participant.Equal([]*testParticipant{a, b}[i].ref) || p.CrashCount != 1 || p.Vote != client.TxnPrepared || !p.Notified || p.LastError != nil {
			t.Errorf("participant %d: %+v", i, p)
		}
	}
}

// TestTransactionOneParticipant: one participant is asked to prepare, then
// told to commit (TX.2.7), and is not told again.
func TestTransactionOneParticipant(t *testing.T) {
	_, m := txnServer(t)
	ctx := t.Context()
	p := newTestParticipant(t)
	tx, err := m.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Join(ctx, p.ref, 7); err != nil {
		t.Fatal(err)
	}
	if err := tx.CommitWait(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p.expect(t, "Prepare", tx)
	p.expect(t, "Commit", tx)
	p.quiet(t)
	wantState(t, tx, client.TxnCommitted)
}

// TestTransactionVoteAborted: a participant voting ABORTED aborts the
// transaction; commit fails with CannotCommit, and the participant that
// voted PREPARED is told to abort.
func TestTransactionVoteAborted(t *testing.T) {
	_, m := txnServer(t)
	ctx := t.Context()
	yes, no := newTestParticipant(t), newTestParticipant(t)
	no.set(func(p *testParticipant) { p.vote = djinnpb.TransactionState_TRANSACTION_STATE_ABORTED })
	tx, err := m.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*testParticipant{yes, no} {
		if err := tx.Join(ctx, p.ref, 1); err != nil {
			t.Fatal(err)
		}
	}
	wantKind(t, "commit with an ABORTED vote (TX.2.5)", tx.Commit(ctx), djinn.CannotCommit)
	wantState(t, tx, client.TxnAborted)
	yes.expect(t, "Prepare", tx)
	yes.expect(t, "Abort", tx)
	no.expect(t, "Prepare", tx)
	if err := tx.AbortWait(ctx, 10*time.Second); err != nil {
		t.Errorf("abort of an aborted transaction (TX.2.5): %v", err)
	}
	yes.quiet(t)
	no.quiet(t)
}

// TestTransactionAbort: abort tells the joined participants, and a later
// commit fails with CannotCommit.
func TestTransactionAbort(t *testing.T) {
	_, m := txnServer(t)
	ctx := t.Context()
	p := newTestParticipant(t)
	tx, err := m.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Join(ctx, p.ref, 1); err != nil {
		t.Fatal(err)
	}
	if err := tx.AbortWait(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p.expect(t, "Abort", tx)
	wantState(t, tx, client.TxnAborted)
	wantKind(t, "commit of an aborted transaction (TX.2.5)", tx.Commit(ctx), djinn.CannotCommit)
	if err := tx.Abort(ctx); err != nil {
		t.Errorf("second abort (TX.2.5): %v", err)
	}
	p.quiet(t)
}

// TestTransactionCrashCount: a participant that joins again with another
// crash count lost its state; the join fails and the transaction aborts
// (TX.2.3).
func TestTransactionCrashCount(t *testing.T) {
	_, m := txnServer(t)
	ctx := t.Context()
	p := newTestParticipant(t)
	tx, err := m.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Join(ctx, p.ref, 1); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "join with another crash count", tx.Join(ctx, p.ref, 2), djinn.CrashCount)
	wantState(t, tx, client.TxnAborted)
	wantKind(t, "commit after a crash count change", tx.Commit(ctx), djinn.CannotCommit)
}

// TestTransactionPromote: TX.2.7's promote through the client adds
// participants with their crash counts and drops one; a crash count other
// than the known one aborts the transaction.
func TestTransactionPromote(t *testing.T) {
	_, m := txnServer(t)
	ctx := t.Context()
	a, b, c := newTestParticipant(t), newTestParticipant(t), newTestParticipant(t)
	tx, err := m.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Join(ctx, c.ref, 7); err != nil {
		t.Fatal(err)
	}
	if err := tx.Promote(ctx, []djinn.Ref{a.ref, b.ref}, []int64{1, 2}, c.ref); err != nil {
		t.Fatal(err)
	}
	d, err := tx.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[djinn.Ref]int64{}
	for _, p := range d.Participants {
		got[p.Participant] = p.CrashCount
	}
	if len(got) != 2 || got[a.ref] != 1 || got[b.ref] != 2 {
		t.Fatalf("participants after promote %v, want a=1 and b=2, c dropped", got)
	}
	wantKind(t, "promote with mismatched lists", tx.Promote(ctx, []djinn.Ref{a.ref}, nil, djinn.Ref{}), djinn.InvalidArgument)
	wantKind(t, "promote with another crash count", tx.Promote(ctx, []djinn.Ref{a.ref}, []int64{5}, djinn.Ref{}), djinn.CrashCount)
	wantState(t, tx, client.TxnAborted)
}

// TestTransactionLeaseEnd: cancelling the transaction's lease aborts it
// (TX.2.1).
func TestTransactionLeaseEnd(t *testing.T) {
	c, m := txnServer(t)
	ctx := t.Context()
	tx, err := m.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Lease().Cancel(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantState(t, tx, client.TxnAborted)
	wantKind(t, "commit after the lease was cancelled", tx.Commit(ctx), djinn.CannotCommit)
}

// TestTransactionNested: TX.2.2 through the client: a nested transaction
// created on the manager or on its parent is nested in it, the manager
// describes the tree, and aborting the parent aborts it.
func TestTransactionNested(t *testing.T) {
	_, m := txnServer(t)
	ctx := t.Context()
	parent, err := m.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	child, err := parent.CreateNested(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	grandchild, err := m.CreateNested(ctx, child.ID(), child.Secret(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !child.IsNested() || child.Parent() != parent || child.Lease() == nil || !child.Manager().Equal(m) {
		t.Fatalf("created %v: nested %v parent %v lease %v", child, child.IsNested(), child.Parent(), child.Lease())
	}
	if !grandchild.IsNested() || !grandchild.Parent().Equal(child) || !grandchild.EnclosedBy(child) || grandchild.EnclosedBy(parent) {
		t.Fatalf("created %v under id %d: parent %v", grandchild, child.ID(), grandchild.Parent())
	}
	if !child.EnclosedBy(parent) || parent.EnclosedBy(child) || parent.IsNested() {
		t.Errorf("%v and its parent %v: enclosure wrong", child, parent)
	}
	// TX.3.3: the id names the transaction, nested or not.
	if again := m.Transaction(child.ID()); !again.Equal(child) || again.IsNested() {
		t.Errorf("%v named by id: equal %v, nested %v", again, again.Equal(child), again.IsNested())
	}
	wantState(t, child, client.TxnActive)

	for _, tc := range []struct {
		tx       *client.Transaction
		parent   uint64
		children []uint64
	}{
		{parent, 0, []uint64{child.ID()}},
		{child, parent.ID(), []uint64{grandchild.ID()}},
		{grandchild, child.ID(), nil},
	} {
		d, err := tc.tx.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Parent != tc.parent || !slices.Equal(d.Children, tc.children) {
			t.Errorf("describe %v: parent %d children %v, want %d and %v", tc.tx, d.Parent, d.Children, tc.parent, tc.children)
		}
	}

	_, err = m.CreateNested(ctx, 1<<40, djinn.NewID(), time.Minute)
	wantKind(t, "TX.2.2 nested in an unknown transaction", err, djinn.UnknownTransaction)

	if err := parent.AbortWait(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	wantState(t, child, client.TxnAborted)
	wantState(t, grandchild, client.TxnAborted)
	_, err = parent.CreateNested(ctx, time.Minute)
	wantKind(t, "TX.2.2 nested in an aborted transaction", err, djinn.CannotJoin)
}

// TestTransactionUnknown: an id the manager never gave (TX.2.5, TX.2.7).
func TestTransactionUnknown(t *testing.T) {
	_, m := txnServer(t)
	ctx := t.Context()
	tx := m.Transaction(1 << 40)
	_, err := tx.State(ctx)
	wantKind(t, "state", err, djinn.UnknownTransaction)
	wantKind(t, "commit", tx.Commit(ctx), djinn.UnknownTransaction)
	wantKind(t, "abort", tx.AbortWait(ctx, time.Second), djinn.UnknownTransaction)
	wantKind(t, "join", tx.Join(ctx, newTestParticipant(t).ref, 1), djinn.UnknownTransaction)
	_, err = tx.Describe(ctx)
	wantKind(t, "describe", err, djinn.UnknownTransaction)
}

// TestTransactionTimeoutExpired: the waitFor forms fail with
// TimeoutExpired while a participant cannot be told, and the error says
// whether the transaction committed (TX.2.5).
func TestTransactionTimeoutExpired(t *testing.T) {
	_, m := txnServer(t)
	ctx := t.Context()
	for _, commit := range []bool{true, false} {
		// Two participants, so that commit is prepare then commit, not
		// prepareAndCommit.
		p, other := newTestParticipant(t), newTestParticipant(t)
		p.set(func(p *testParticipant) {
			p.commitErr = djinn.Errorf(djinn.Unavailable, "participant down for the test")
			p.abortErr = p.commitErr
		})
		tx, err := m.Create(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []*testParticipant{p, other} {
			if err := tx.Join(ctx, q.ref, 1); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			err = tx.CommitWait(ctx, 100*time.Millisecond)
		} else {
			err = tx.AbortWait(ctx, 100*time.Millisecond)
		}
		var de *djinn.Error
		if !errors.As(err, &de) || de.Kind != djinn.TimeoutExpired || de.Committed != commit {
			t.Fatalf("commit=%v: %v (%#v), want TimeoutExpired{committed: %v}", commit, err, de, commit)
		}
		if commit {
			p.expect(t, "Prepare", tx)
			p.expect(t, "Commit", tx)
		} else {
			p.expect(t, "Abort", tx)
		}
		// The manager keeps trying; once the participant answers, the
		// outcome is delivered.
		p.set(func(p *testParticipant) { p.commitErr, p.abortErr = nil, nil })
		if commit {
			err = tx.CommitWait(ctx, servertest.Timeout)
		} else {
			err = tx.AbortWait(ctx, servertest.Timeout)
		}
		if err != nil {
			t.Fatalf("commit=%v, once the participant answers: %v", commit, err)
		}
		d, err := tx.Describe(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Participants[0].Notified {
			t.Errorf("commit=%v: participant not notified: %+v", commit, d.Participants[0])
		}
	}
}

// TestTransactionInContext: a transaction set on a context travels with the
// calls made under it; the server that handles such a call reads it back
// and joins it, and the client then commits it (the implicit mode).
func TestTransactionInContext(t *testing.T) {
	c, m := txnServer(t)
	ctx := t.Context()
	p := newTestParticipant(t)
	tx, err := m.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.work(client.WithTransaction(ctx, tx), c); err != nil {
		t.Fatal(err)
	}
	if err := p.work(ctx, c); err != nil { // no transaction: no join
		t.Fatal(err)
	}
	p.mu.Lock()
	worked := p.worked
	p.mu.Unlock()
	if len(worked) != 1 || !worked[0].Equal(tx) {
		t.Fatalf("participant worked under %v, want [%v]", worked, tx)
	}
	if err := tx.CommitWait(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p.expect(t, "Prepare", tx)
	p.expect(t, "Commit", tx)

	// A malformed transaction in the metadata is refused, naming the key.
	bad := metadata.AppendToOutgoingContext(ctx, client.TxnManagerMetadataKey, tx.Manager().Ref().String(), client.TxnIDMetadataKey, "-1")
	err = p.work(bad, c)
	wantKind(t, "work under a malformed transaction", err, djinn.InvalidArgument)
	if err == nil || !strings.Contains(err.Error(), client.TxnIDMetadataKey) {
		t.Errorf("error %q does not name %s", err, client.TxnIDMetadataKey)
	}
}
