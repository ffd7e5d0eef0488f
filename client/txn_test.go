package client

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

func testManagerRef() djinn.Ref {
	return djinn.Ref{Endpoint: "127.0.0.1:4161", Service: djinn.ID{1}, Object: djinn.ID{'t', 'x', 'n'}}
}

func TestTransactionStateString(t *testing.T) {
	for s, want := range map[TransactionState]string{
		0: "NONE", TxnActive: "ACTIVE", TxnVoting: "VOTING", TxnPrepared: "PREPARED", TxnNotChanged: "NOTCHANGED",
		TxnCommitted: "COMMITTED", TxnAborted: "ABORTED", 7: "TransactionState(7)", -1: "TransactionState(-1)",
	} {
		if got := s.String(); got != want {
			t.Errorf("%d: %q, want %q", int32(s), got, want)
		}
	}
}

// TestTransactionEqual: TX.3.3's equality, one row per rule.
func TestTransactionEqual(t *testing.T) {
	mgr := testManagerRef()
	elsewhere := mgr
	elsewhere.Endpoint = "10.0.0.7:4161"
	otherService := mgr
	otherService.Service = djinn.ID{2}
	otherObject := mgr
	otherObject.Object = djinn.ID{'x'}
	tx := func(r djinn.Ref, id uint64) *Transaction { return NewTransactionManager(nil, r).Transaction(id) }
	created := tx(mgr, 5)
	created.lease = NewLease(mgr, djinn.NewID(), time.Now().Add(time.Minute))
	nested := tx(mgr, 5)
	nested.parent = tx(mgr, 4)
	for _, tc := range []struct {
		name string
		a, b *Transaction
		want bool
	}{
		{"TX.3.3 same manager and id", tx(mgr, 5), tx(mgr, 5), true},
		{"TX.3.3 the endpoint is where, not who", tx(mgr, 5), tx(elsewhere, 5), true},
		{"TX.3.3 the lease plays no part", created, tx(mgr, 5), true},
		{"TX.3.3 the parent plays no part", nested, tx(mgr, 5), true},
		{"TX.3.3 another id", tx(mgr, 5), tx(mgr, 6), false},
		{"TX.3.3 another manager's service", tx(mgr, 5), tx(otherService, 5), false},
		{"TX.3.3 another manager object", tx(mgr, 5), tx(otherObject, 5), false},
		{"nil and a transaction", nil, tx(mgr, 5), false},
		{"nil and nil", nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.Equal(tc.b); got != tc.want {
				t.Errorf("%v.Equal(%v) = %v, want %v", tc.a, tc.b, got, tc.want)
			}
			if got := tc.b.Equal(tc.a); got != tc.want {
				t.Errorf("not symmetric: %v.Equal(%v) = %v", tc.b, tc.a, got)
			}
			if tc.a != nil && tc.b != nil && (tc.a.Key() == tc.b.Key()) != tc.want {
				t.Errorf("keys equal %v, want %v", tc.a.Key() == tc.b.Key(), tc.want)
			}
		})
	}
	if created.IsNested() {
		t.Error("a top-level transaction is nested")
	}
}

// TestTransactionNesting: TX.3.3's isNested, parent and enclosedBy, one row
// per rule.
func TestTransactionNesting(t *testing.T) {
	mgr := testManagerRef()
	m := NewTransactionManager(nil, mgr)
	top := m.Transaction(1)
	child := m.Transaction(2)
	child.parent = top
	grandchild := m.Transaction(3)
	grandchild.parent = child
	elsewhere := mgr
	elsewhere.Endpoint = "10.0.0.7:4161"
	topElsewhere := NewTransactionManager(nil, elsewhere).Transaction(1)
	for _, tc := range []struct {
		name            string
		tx              *Transaction
		nested          bool
		parent          *Transaction
		enclosedBy, not []*Transaction
	}{
		{"TX.3.3 a top-level transaction is not nested and encloses itself", top, false, nil, []*Transaction{top, topElsewhere}, []*Transaction{child, nil}},
		{"TX.3.3 a nested transaction has its parent", child, true, top, []*Transaction{child, top, topElsewhere}, []*Transaction{grandchild, m.Transaction(9), nil}},
		{"TX.3.3 enclosedBy walks every parent", grandchild, true, child, []*Transaction{grandchild, child, top}, []*Transaction{m.Transaction(9)}},
		{"TX.3.3 a transaction named by id knows no parent", m.Transaction(2), false, nil, []*Transaction{child}, []*Transaction{top}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tx.IsNested(); got != tc.nested {
				t.Errorf("IsNested %v, want %v", got, tc.nested)
			}
			if got := tc.tx.Parent(); got != tc.parent {
				t.Errorf("Parent %v, want %v", got, tc.parent)
			}
			for _, e := range tc.enclosedBy {
				if !tc.tx.EnclosedBy(e) {
					t.Errorf("%v not enclosed by %v", tc.tx, e)
				}
			}
			for _, e := range tc.not {
				if tc.tx.EnclosedBy(e) {
					t.Errorf("%v enclosed by %v", tc.tx, e)
				}
			}
		})
	}
}

// TestTransactionArguments: rules checked before any call is made.
func TestTransactionArguments(t *testing.T) {
	ctx := context.Background()
	p := NewPool()
	defer p.Close()
	m := NewTransactionManager(p, djinn.Ref{Endpoint: "127.0.0.1:1", Service: djinn.ID{1}, Object: djinn.ID{'t', 'x', 'n'}})
	noRef := NewTransactionManager(p, djinn.Ref{Endpoint: "127.0.0.1:1"})
	noConn := NewTransactionManager(nil, testManagerRef())
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"TX.2.1 lease duration zero", func() error { _, err := m.Create(ctx, 0); return err }(), "lease duration 0s"},
		{"TX.2.1 lease duration negative", func() error { _, err := m.Create(ctx, -5*time.Second); return err }(), "lease duration -5s"},
		{"TX.2.2 nested lease duration zero", func() error { _, err := m.CreateNested(ctx, 1, djinn.ID{}, 0); return err }(), "lease duration 0s"},
		{"TX.2.2 nested lease duration zero, by the parent", func() error { _, err := m.Transaction(1).CreateNested(ctx, 0); return err }(), "lease duration 0s"},
		{"TX.2.2 parent id zero", func() error { _, err := m.CreateNested(ctx, 0, djinn.ID{}, time.Minute); return err }(), "parent transaction id 0"},
		{"TX.2.5 commit waitFor negative", m.CommitWait(ctx, 1, -time.Second), "waitFor -1s"},
		{"TX.2.5 abort waitFor negative", m.AbortWait(ctx, 1, -time.Second), "waitFor -1s"},
		{"TX.3.3 manager names no object", noRef.Commit(ctx, 1), "names no object"},
		{"connector missing", noConn.Abort(ctx, 1), "connector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, djinn.ErrInvalidArgument) || !strings.Contains(tc.err.Error(), tc.want) {
				t.Errorf("%v, want invalid argument naming %q", tc.err, tc.want)
			}
		})
	}
}

// fakeManager answers every call with its err, and Create with its
// created.
type fakeManager struct {
	djinnpb.UnimplementedTransactionManagerServer

	mu sync.Mutex
	// Guarded by mu.
	err        error
	created    *djinnpb.CreatedTransaction
	last       *djinnpb.CompleteTransactionRequest
	lastCreate *djinnpb.CreateTransactionRequest
	// pages answers List, by after_id: the transactions' ids and the
	// next_after_id.
	pages map[uint64]fakePage
}

type fakePage struct {
	ids  []uint64
	next uint64
}

func (f *fakeManager) List(_ context.Context, req *djinnpb.ListTransactionsRequest) (*djinnpb.ListTransactionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pg := f.pages[req.GetAfterId()]
	resp := &djinnpb.ListTransactionsResponse{NextAfterId: pg.next}
	for _, id := range pg.ids {
		resp.Transactions = append(resp.Transactions, &djinnpb.TransactionDescription{Id: id, State: djinnpb.TransactionState_TRANSACTION_STATE_ACTIVE})
	}
	return resp, nil
}

func (f *fakeManager) set(err error, created *djinnpb.CreatedTransaction) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.created = err, created
}

func (f *fakeManager) lastRequest() *djinnpb.CompleteTransactionRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakeManager) lastCreateRequest() *djinnpb.CreateTransactionRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastCreate
}

func (f *fakeManager) Create(_ context.Context, req *djinnpb.CreateTransactionRequest) (*djinnpb.CreatedTransaction, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastCreate = req
	return f.created, grpcerr.Status(f.err)
}

func (f *fakeManager) complete(req *djinnpb.CompleteTransactionRequest) (*djinnpb.CompleteTransactionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = req
	return &djinnpb.CompleteTransactionResponse{}, grpcerr.Status(f.err)
}

func (f *fakeManager) Commit(_ context.Context, req *djinnpb.CompleteTransactionRequest) (*djinnpb.CompleteTransactionResponse, error) {
	return f.complete(req)
}

func (f *fakeManager) Abort(_ context.Context, req *djinnpb.CompleteTransactionRequest) (*djinnpb.CompleteTransactionResponse, error) {
	return f.complete(req)
}

func (f *fakeManager) GetState(context.Context, *djinnpb.TransactionRequest) (*djinnpb.TransactionStateResponse, error) {
	return &djinnpb.TransactionStateResponse{State: 42}, nil
}

// serveFake serves f on a loopback port until the test ends and returns a
// manager client for it.
func serveFake(t *testing.T, f *fakeManager) *TransactionManager {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	djinnpb.RegisterTransactionManagerServer(srv, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	p := NewPool()
	t.Cleanup(func() {
		p.Close()
		srv.Stop()
		<-done
	})
	ref := testManagerRef()
	ref.Endpoint = ln.Addr().String()
	return NewTransactionManager(p, ref)
}

// TestTimeoutExpiredCommitted: TX.2.5's TimeoutExpiredException.committed
// comes through the wire as (*djinn.Error).Committed, and waitFor is sent
// only by the waitFor forms.
func TestTimeoutExpiredCommitted(t *testing.T) {
	ctx := context.Background()
	for _, committed := range []bool{true, false} {
		f := &fakeManager{}
		f.set(&djinn.Error{Kind: djinn.TimeoutExpired, Committed: committed, Message: "not yet told"}, nil)
		m := serveFake(t, f)
		err := m.CommitWait(ctx, 3, 250*time.Millisecond)
		var de *djinn.Error
		if !errors.As(err, &de) || de.Kind != djinn.TimeoutExpired || de.Committed != committed || !errors.Is(err, djinn.ErrTimeoutExpired) {
			t.Fatalf("committed=%v: %v (%#v)", committed, err, de)
		}
		if last := f.lastRequest(); last.GetId() != 3 || last.WaitForNanos == nil || last.GetWaitForNanos() != int64(250*time.Millisecond) {
			t.Errorf("request %v: want id 3 and wait_for_nanos 250ms", last)
		}
		f.set(nil, nil)
		if err := m.Abort(ctx, 4); err != nil || f.lastRequest().WaitForNanos != nil {
			t.Errorf("abort: %v, request %v: want no wait_for_nanos", err, f.lastRequest())
		}
		if err := m.AbortWait(ctx, 4, 0); err != nil || f.lastRequest().WaitForNanos == nil || f.lastRequest().GetWaitForNanos() != 0 {
			t.Errorf("abort wait 0: %v, request %v: want wait_for_nanos 0", err, f.lastRequest())
		}
	}
}

// TestCreateAnswerChecked: an answer that names another manager, no id or
// no lease is refused; a state that is not one is too.
func TestCreateAnswerChecked(t *testing.T) {
	ctx := context.Background()
	f := &fakeManager{}
	m := serveFake(t, f)
	lease := &djinnpb.Lease{Landlord: RefToProto(m.Ref()), Cookie: make([]byte, 16), DurationNanos: int64(time.Minute)}
	other := m.Ref()
	other.Service = djinn.ID{9}
	for _, tc := range []struct {
		name    string
		created *djinnpb.CreatedTransaction
		want    string
	}{
		{"another manager", &djinnpb.CreatedTransaction{Id: 1, Lease: lease, Manager: RefToProto(other)}, "created transaction manager"},
		{"no id", &djinnpb.CreatedTransaction{Lease: lease}, "id: missing"},
		{"no lease", &djinnpb.CreatedTransaction{Id: 1}, "lease: missing"},
	} {
		f.set(nil, tc.created)
		if _, err := m.Create(ctx, time.Minute); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	f.set(nil, &djinnpb.CreatedTransaction{Id: 1, Lease: lease, Manager: RefToProto(m.Ref())})
	tx, err := m.Create(ctx, time.Minute)
	if err != nil || tx.ID() != 1 || !tx.Manager().Equal(m) || tx.Lease() == nil {
		t.Fatalf("create: %v, %v", tx, err)
	}
	if _, err := tx.State(ctx); !errors.Is(err, djinn.ErrInternal) || !strings.Contains(err.Error(), "TransactionState(42)") {
		t.Errorf("state 42: %v, want internal naming it", err)
	}
	if req := f.lastCreateRequest(); req.GetParentManager() != nil || req.GetParentId() != 0 {
		t.Errorf("top-level create sent %v: want no parent", req)
	}
}

// TestCreateNestedRequest: TX.2.2's create(parentMgr, parentID, leaseFor)
// sends the parent's manager, which is this one, and id; the answer is a
// nested transaction whose parent is the one asked for.
func TestCreateNestedRequest(t *testing.T) {
	ctx := context.Background()
	f := &fakeManager{}
	m := serveFake(t, f)
	lease := &djinnpb.Lease{Landlord: RefToProto(m.Ref()), Cookie: make([]byte, 16), DurationNanos: int64(time.Minute)}
	f.set(nil, &djinnpb.CreatedTransaction{Id: 8, Lease: lease, Manager: RefToProto(m.Ref())})
	check := func(how string, tx *Transaction, err error, parent *Transaction) {
		t.Helper()
		if err != nil || tx.ID() != 8 || !tx.IsNested() || !tx.Parent().Equal(parent) || tx.Lease() == nil {
			t.Fatalf("%s: %v (parent %v), %v; want transaction 8 nested in %v", how, tx, tx.Parent(), err, parent)
		}
		req := f.lastCreateRequest()
		got, rerr := RefFromProto("parent manager", req.GetParentManager())
		if rerr != nil || !got.Equal(m.Ref()) || got.Endpoint != m.Ref().Endpoint || req.GetParentId() != parent.ID() ||
			req.GetLeaseDurationNanos() != int64(time.Minute) {
			t.Errorf("%s: sent %v, want parent %v of %v", how, req, parent.ID(), m.Ref())
		}
	}
	tx, err := m.CreateNested(ctx, 3, djinn.ID{}, time.Minute)
	check("manager's CreateNested", tx, err, m.Transaction(3))
	parent := m.Transaction(5)
	tx, err = parent.CreateNested(ctx, time.Minute)
	check("parent's CreateNested", tx, err, parent)
	if tx.Parent() != parent {
		t.Errorf("parent %p, want the transaction it was created from %p", tx.Parent(), parent)
	}

	f.set(djinn.Errorf(djinn.UnknownTransaction, "transaction 3: unknown"), nil)
	if _, err := m.CreateNested(ctx, 3, djinn.ID{}, time.Minute); !errors.Is(err, djinn.ErrUnknownTransaction) {
		t.Errorf("unknown parent: %v, want unknown transaction", err)
	}
}

func TestWithTransaction(t *testing.T) {
	m := NewTransactionManager(nil, testManagerRef())
	a, b := m.Transaction(1), m.Transaction(2)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "other", "kept")
	if _, ok := TransactionFrom(ctx); ok {
		t.Fatal("a transaction in a bare context")
	}
	ctxA := WithTransaction(ctx, a)
	ctxB := WithTransaction(ctxA, b)
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want *Transaction
	}{
		{"set", ctxA, a},
		{"replaced", ctxB, b},
		{"cleared", WithTransaction(ctxB, nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := TransactionFrom(tc.ctx)
			if ok != (tc.want != nil) || !got.Equal(tc.want) {
				t.Errorf("TransactionFrom: %v, %v; want %v", got, ok, tc.want)
			}
			md, _ := metadata.FromOutgoingContext(tc.ctx)
			if v := md.Get("other"); len(v) != 1 || v[0] != "kept" {
				t.Errorf("other metadata: %v", v)
			}
			// What the server would read.
			mgr, id, ok, err := parseTxnMetadata(md)
			if err != nil || ok != (tc.want != nil) {
				t.Fatalf("parse %v: %v, %v", md, ok, err)
			}
			if tc.want != nil && (!mgr.Equal(tc.want.mgr.ref) || mgr.Endpoint != tc.want.mgr.ref.Endpoint || id != tc.want.id) {
				t.Errorf("parsed %v %d, want %v", mgr, id, tc.want)
			}
		})
	}
	// The parent context is unchanged.
	if got, _ := TransactionFrom(ctxA); !got.Equal(a) {
		t.Errorf("parent context now holds %v", got)
	}
}

// TestTransactionFromIncoming: the metadata rules, one row each.
func TestTransactionFromIncoming(t *testing.T) {
	ref := testManagerRef().String()
	zero := djinn.Ref{Endpoint: "127.0.0.1:1"}.String()
	for _, tc := range []struct {
		name string
		md   metadata.MD
		want string // "" for success
	}{
		{"none", metadata.MD{}, ""},
		{"both", metadata.Pairs(TxnManagerMetadataKey, ref, TxnIDMetadataKey, "7"), ""},
		{"id without manager", metadata.Pairs(TxnIDMetadataKey, "7"), TxnManagerMetadataKey + ": missing"},
		{"manager without id", metadata.Pairs(TxnManagerMetadataKey, ref), TxnIDMetadataKey + ": missing"},
		{"two managers", metadata.Pairs(TxnManagerMetadataKey, ref, TxnManagerMetadataKey, ref, TxnIDMetadataKey, "7"), "2 values"},
		{"two ids", metadata.Pairs(TxnManagerMetadataKey, ref, TxnIDMetadataKey, "7", TxnIDMetadataKey, "8"), "2 values"},
		{"manager not a reference", metadata.Pairs(TxnManagerMetadataKey, "mgr", TxnIDMetadataKey, "7"), `"mgr"`},
		{"manager names nothing", metadata.Pairs(TxnManagerMetadataKey, zero, TxnIDMetadataKey, "7"), "names no object"},
		{"id not a number", metadata.Pairs(TxnManagerMetadataKey, ref, TxnIDMetadataKey, "seven"), `"seven"`},
		{"id negative", metadata.Pairs(TxnManagerMetadataKey, ref, TxnIDMetadataKey, "-1"), `"-1"`},
		{"id zero", metadata.Pairs(TxnManagerMetadataKey, ref, TxnIDMetadataKey, "0"), `"0"`},
		{"id too large", metadata.Pairs(TxnManagerMetadataKey, ref, TxnIDMetadataKey, "18446744073709551616"), "18446744073709551616"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := metadata.NewIncomingContext(context.Background(), tc.md)
			tx, err := TransactionFromIncoming(ctx, nil)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if (tx != nil) != (len(tc.md) > 0) {
					t.Errorf("transaction %v", tx)
				}
				return
			}
			if tx != nil || !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, %v: want invalid argument naming %q", tx, err, tc.want)
			}
		})
	}
}

func FuzzTransactionMetadata(f *testing.F) {
	ref := testManagerRef().String()
	f.Add(ref, "7", "")
	f.Add(ref, "18446744073709551615", "")
	f.Add(ref, "0", "")
	f.Add("", "7", "")
	f.Add(ref, "", "")
	f.Add(ref, "7", "8")
	f.Add("djinn://h:1/"+strings.Repeat("0", 32)+"/"+strings.Repeat("f", 32), "007", "")
	f.Fuzz(func(t *testing.T, mgr, id, extraID string) {
		md := metadata.MD{}
		if mgr != "" {
			md.Append(TxnManagerMetadataKey, mgr)
		}
		if id != "" {
			md.Append(TxnIDMetadataKey, id)
		}
		if extraID != "" {
			md.Append(TxnIDMetadataKey, extraID)
		}
		ref, n, ok, err := parseTxnMetadata(md)
		if err != nil {
			if ok || !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("ok=%v, error of kind %v: %v", ok, djinn.KindOf(err), err)
			}
			return
		}
		if !ok {
			if len(md) != 0 {
				t.Fatalf("%v: no transaction and no error", md)
			}
			return
		}
		// What WithTransaction sends for it parses back to it.
		out, _ := metadata.FromOutgoingContext(WithTransaction(context.Background(), NewTransactionManager(nil, ref).Transaction(n)))
		again, m, ok, err := parseTxnMetadata(out)
		if err != nil || !ok || again != ref || m != n {
			t.Fatalf("round trip of %v %d: %v %d %v %v", ref, n, again, m, ok, err)
		}
		if want := strconv.FormatUint(n, 10); out.Get(TxnIDMetadataKey)[0] != want {
			t.Fatalf("id sent as %q, want %q", out.Get(TxnIDMetadataKey)[0], want)
		}
	})
}

// TestListPagesMoveOn: List reads the manager's pages by id, each page's
// next_after_id the following one's after_id; a page that does not move
// past its after_id (a next at or before it, or no transaction and a
// next) is the manager's fault, an error — not transactions listed twice,
// out of order, or a loop. Before, List took any next_after_id.
func TestListPagesMoveOn(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		pages map[uint64]fakePage
		want  []uint64 // nil: the error
	}{
		{"pages by id, the last naming no next", map[uint64]fakePage{0: {[]uint64{2, 5}, 5}, 5: {[]uint64{7}, 7}, 7: {[]uint64{9}, 0}}, []uint64{2, 5, 7, 9}},
		{"a next before the page's after_id", map[uint64]fakePage{0: {[]uint64{5}, 5}, 5: {[]uint64{6}, 3}, 3: {[]uint64{5}, 0}}, nil},
		{"a next equal to the page's after_id", map[uint64]fakePage{0: {[]uint64{5}, 5}, 5: {[]uint64{6}, 5}}, nil},
		{"a page of none with a next", map[uint64]fakePage{0: {nil, 5}, 5: {[]uint64{6}, 0}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeManager{pages: c.pages}
			ds, err := serveFake(t, f).List(ctx, 0, 0)
			var got []uint64
			for _, d := range ds {
				got = append(got, d.ID)
			}
			switch {
			case c.want == nil && (!errors.Is(err, djinn.ErrInternal) || !strings.Contains(err.Error(), "does not move on")):
				t.Errorf("List: %v, %v; want an internal error saying the manager does not move on", got, err)
			case c.want != nil && (err != nil || !slices.Equal(got, c.want)):
				t.Errorf("List: %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
