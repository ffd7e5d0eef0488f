package client

import (
	"context"
	"crypto/sha256"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The tests of this file run the lock client alone, against fakeLocks: an
// in-process stand-in for the service that records what reaches it and
// answers what the test scripted. The CLI's tests run it against a real
// server.

// fakeLocks is a djinnpb.LockServiceClient in process: calls reach it
// without a network, so tests run under testing/synctest.
type fakeLocks struct {
	mu    sync.Mutex
	calls []fakeLockCall // guarded by mu: every call, in order
	// answers are Lock's and ChangeMode's answers, one a call, in order;
	// past the last, calls are granted fence 1. Guarded by mu.
	answers []fakeAnswer
	reply   proto.Message // what the other methods answer; nil for an empty answer
}

type fakeLockCall struct {
	method string
	req    proto.Message
	md     metadata.MD // the outgoing metadata of the call's context
}

type fakeAnswer struct {
	resp *djinnpb.LockResponse
	err  error
}

var _ djinnpb.LockServiceClient = (*fakeLocks)(nil)

func (f *fakeLocks) record(ctx context.Context, method string, req proto.Message) {
	md, _ := metadata.FromOutgoingContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fakeLockCall{method: method, req: req, md: md})
}

func (f *fakeLocks) answer() (*djinnpb.LockResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.answers) == 0 {
		return &djinnpb.LockResponse{Granted: true, Fence: 1}, nil
	}
	a := f.answers[0]
	f.answers = f.answers[1:]
	return a.resp, a.err
}

func (f *fakeLocks) recorded() []fakeLockCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func replyAs[T proto.Message](f *fakeLocks, empty T) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.reply.(T); ok {
		return r, nil
	}
	return empty, nil
}

func (f *fakeLocks) CreateSet(ctx context.Context, in *djinnpb.CreateLockSetRequest, _ ...grpc.CallOption) (*djinnpb.LockSetCreated, error) {
	f.record(ctx, "CreateSet", in)
	return replyAs(f, &djinnpb.LockSetCreated{})
}

func (f *fakeLocks) CreateOwner(ctx context.Context, in *djinnpb.CreateLockOwnerRequest, _ ...grpc.CallOption) (*djinnpb.LockOwner, error) {
	f.record(ctx, "CreateOwner", in)
	return replyAs(f, &djinnpb.LockOwner{})
}

func (f *fakeLocks) Lock(ctx context.Context, in *djinnpb.LockRequest, _ ...grpc.CallOption) (*djinnpb.LockResponse, error) {
	f.record(ctx, "Lock", in)
	return f.answer()
}

func (f *fakeLocks) ChangeMode(ctx context.Context, in *djinnpb.ChangeModeRequest, _ ...grpc.CallOption) (*djinnpb.LockResponse, error) {
	f.record(ctx, "ChangeMode", in)
	return f.answer()
}

func (f *fakeLocks) Unlock(ctx context.Context, in *djinnpb.UnlockRequest, _ ...grpc.CallOption) (*djinnpb.UnlockResponse, error) {
	f.record(ctx, "Unlock", in)
	return &djinnpb.UnlockResponse{}, nil
}

func (f *fakeLocks) DropLocks(ctx context.Context, in *djinnpb.DropLocksRequest, _ ...grpc.CallOption) (*djinnpb.DropLocksResponse, error) {
	f.record(ctx, "DropLocks", in)
	return &djinnpb.DropLocksResponse{}, nil
}

func (f *fakeLocks) Describe(ctx context.Context, in *djinnpb.LockSetRequest, _ ...grpc.CallOption) (*djinnpb.LockSetDescription, error) {
	f.record(ctx, "Describe", in)
	return replyAs(f, &djinnpb.LockSetDescription{})
}

func (f *fakeLocks) ValidateFence(ctx context.Context, in *djinnpb.ValidateFenceRequest, _ ...grpc.CallOption) (*djinnpb.ValidateFenceResponse, error) {
	f.record(ctx, "ValidateFence", in)
	return replyAs(f, &djinnpb.ValidateFenceResponse{Valid: true})
}

func testLockRef() djinn.Ref {
	return djinn.Ref{Endpoint: "127.0.0.1:4161", Service: djinn.ID{1}, Object: djinn.ID{'l', 'o', 'c', 'k'}}
}

// fakeLockService returns a lock service whose calls reach a new fake.
func fakeLockService() (*LockService, *fakeLocks) {
	f := &fakeLocks{}
	return &LockService{ref: testLockRef(), rpc: f}, f
}

// TestLockModeNames: CC 2.1's lock_mode, both ways.
func TestLockModeNames(t *testing.T) {
	for _, tc := range []struct {
		m         LockMode
		short     string
		idl       string
		wire      djinnpb.LockMode
		mustBeIth int
	}{
		{LockIR, "ir", "intention_read", djinnpb.LockMode_LOCK_MODE_INTENTION_READ, 0},
		{LockR, "r", "read", djinnpb.LockMode_LOCK_MODE_READ, 1},
		{LockU, "u", "upgrade", djinnpb.LockMode_LOCK_MODE_UPGRADE, 2},
		{LockIW, "iw", "intention_write", djinnpb.LockMode_LOCK_MODE_INTENTION_WRITE, 3},
		{LockW, "w", "write", djinnpb.LockMode_LOCK_MODE_WRITE, 4},
	} {
		t.Run(tc.short, func(t *testing.T) {
			if got := tc.m.String(); got != tc.short {
				t.Errorf("String() = %q, want %q", got, tc.short)
			}
			if djinnpb.LockMode(tc.m) != tc.wire || LockMode(tc.wire) != tc.m {
				t.Errorf("%s converts to %v on the wire, want %v", tc.m, djinnpb.LockMode(tc.m), tc.wire)
			}
			if LockModes()[tc.mustBeIth] != tc.m {
				t.Errorf("LockModes() = %v: %s not at %d (weakest first)", LockModes(), tc.m, tc.mustBeIth)
			}
			for _, s := range []string{tc.short, strings.ToUpper(tc.short), tc.idl, strings.ToUpper(tc.idl)} {
				got, err := ParseLockMode(s)
				if err != nil || got != tc.m {
					t.Errorf("ParseLockMode(%q) = %v, %v; want %v", s, got, err, tc.m)
				}
			}
		})
	}
	for m, want := range map[LockMode]string{0: "none", 6: "LockMode(6)", -1: "LockMode(-1)"} {
		if got := m.String(); got != want {
			t.Errorf("LockMode(%d).String() = %q, want %q", int32(m), got, want)
		}
	}
	for _, s := range []string{"", "x", "rw", " r", "r ", "none", "intention-read", "1", strings.Repeat("w", 100)} {
		m, err := ParseLockMode(s)
		if !errors.Is(err, djinn.ErrInvalidArgument) || m != 0 {
			t.Errorf("ParseLockMode(%q) = %v, %v; want an invalid argument", s, m, err)
			continue
		}
		if !strings.Contains(err.Error(), "lock mode \"") || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseLockMode(%q): %q does not name the bad value on one line", s, err)
		}
	}
}

// TestLockHolderEncoding: who holds a lock, on the wire (CC 1.2.1, 1.2.2,
// 2.3's implicit and 2.4's explicit modes).
func TestLockHolderEncoding(t *testing.T) {
	mgr := NewTransactionManager(nil, testManagerRef())
	tx := mgr.Transaction(7)
	cookie := djinn.NewID()
	owner := &LockOwner{lease: NewLease(testLockRef(), cookie, time.Now().Add(time.Minute))}
	bg := context.Background()
	for _, tc := range []struct {
		name    string
		h       LockHolder
		ctx     context.Context
		want    *djinnpb.LockHolder // nil: nothing named (implicit)
		wantErr string              // an invalid argument naming this
	}{
		{name: "CC 1.2.1 an owner, by its lease's cookie", h: HeldByOwner(owner), ctx: bg, want: &djinnpb.LockHolder{Owner: cookie[:]}},
		{name: "CC 1.2.1 an owner named by cookie", h: HeldByOwnerCookie(cookie), ctx: bg, want: &djinnpb.LockHolder{Owner: cookie[:]}},
		{name: "CC 2.4 an explicit transaction", h: HeldByTransaction(tx), ctx: bg,
			want: &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: RefToProto(testManagerRef()), Id: 7}}},
		{name: "CC 2.4 an explicit transaction outranks the context's", h: HeldByTransaction(tx), ctx: WithTransaction(bg, mgr.Transaction(9)),
			want: &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: RefToProto(testManagerRef()), Id: 7}}},
		{name: "CC 2.3 implicit: the context's transaction travels in metadata", h: Implicit, ctx: WithTransaction(bg, tx)},
		{name: "CC 2.3 the zero holder is implicit", h: LockHolder{}, ctx: WithTransaction(bg, tx)},
		{name: "CC 2.3 implicit with no current transaction", h: Implicit, ctx: bg, wantErr: "the context carries no transaction"},
		{name: "CC 2.3 implicit, the transaction taken away", h: Implicit, ctx: WithTransaction(WithTransaction(bg, tx), nil), wantErr: "the context carries no transaction"},
		{name: "CC 2.3 implicit with half a transaction in metadata", h: Implicit,
			ctx: metadata.AppendToOutgoingContext(bg, TxnIDMetadataKey, "7"), wantErr: TxnManagerMetadataKey + ": missing"},
		{name: "nil owner", h: HeldByOwner(nil), ctx: bg, wantErr: "lock owner: missing (nil)"},
		{name: "owner without a lease", h: HeldByOwner(&LockOwner{}), ctx: bg, wantErr: "lock owner: missing (nil)"},
		{name: "zero owner cookie", h: HeldByOwnerCookie(djinn.ID{}), ctx: bg, wantErr: "lock owner cookie: zero"},
		{name: "nil transaction", h: HeldByTransaction(nil), ctx: bg, wantErr: "transaction: missing (nil)"},
		{name: "transaction id 0", h: HeldByTransaction(mgr.Transaction(0)), ctx: bg, wantErr: "transaction id 0"},
		{name: "transaction of a manager that names nothing", h: HeldByTransaction(NewTransactionManager(nil, djinn.Ref{Endpoint: "127.0.0.1:1"}).Transaction(3)),
			ctx: bg, wantErr: "names no object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.h.proto(tc.ctx)
			if tc.wantErr != "" {
				if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("proto: %v, %v; want an invalid argument naming %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil && got != nil || tc.want != nil && !proto.Equal(got, tc.want) {
				t.Fatalf("proto = %v, want %v", got, tc.want)
			}
			// What the wire names comes back as the same holder.
			if got != nil {
				back, err := holderFromProto("holder", nil, got)
				if err != nil || !back.Equal(tc.h) {
					t.Errorf("holderFromProto(%v) = %v, %v; want %v", got, back, err, tc.h)
				}
			}
		})
	}
}

func TestLockHolderAccessors(t *testing.T) {
	cookie := djinn.NewID()
	tx := NewTransactionManager(nil, testManagerRef()).Transaction(7)
	elsewhere := testManagerRef()
	elsewhere.Endpoint = ""
	sameTx := NewTransactionManager(nil, elsewhere).Transaction(7)

	if !Implicit.IsImplicit() || Implicit.Transaction() != nil || Implicit.String() != "implicit" {
		t.Errorf("Implicit: %v, transaction %v", Implicit, Implicit.Transaction())
	}
	if c, ok := Implicit.Owner(); ok || !c.IsZero() {
		t.Errorf("Implicit.Owner() = %v, %v", c, ok)
	}
	o := HeldByOwnerCookie(cookie)
	if c, ok := o.Owner(); !ok || c != cookie || o.IsImplicit() || o.Transaction() != nil {
		t.Errorf("owner holder: Owner() = %v, %v; transaction %v", c, ok, o.Transaction())
	}
	// The owner prints as its lease does, without the cookie.
	l := NewLease(testLockRef(), cookie, time.Now().Add(time.Minute))
	if s := o.String(); !strings.HasPrefix(s, "owner ") || strings.Contains(s, cookie.String()) || !strings.Contains(l.String(), strings.TrimPrefix(s, "owner ")) {
		t.Errorf("owner holder prints %q; its lease %q", s, l)
	}
	if s := (&LockOwner{lease: l}).String(); s != o.String() {
		t.Errorf("LockOwner prints %q, its holder %q", s, o)
	}
	th := HeldByTransaction(tx)
	if th.Transaction() != tx || th.String() != tx.String() {
		t.Errorf("transaction holder: %v, %v", th.Transaction(), th)
	}
	for _, tc := range []struct {
		name string
		a, b LockHolder
		want bool
	}{
		{"the same owner", o, HeldByOwner(&LockOwner{lease: l}), true},
		{"another owner", o, HeldByOwnerCookie(djinn.NewID()), false},
		{"TX.3.3 the same transaction, whatever endpoint names its manager", th, HeldByTransaction(sameTx), true},
		{"another transaction", th, HeldByTransaction(NewTransactionManager(nil, testManagerRef()).Transaction(8)), false},
		{"an owner is not a transaction", o, th, false},
		{"implicit is implicit", Implicit, LockHolder{}, true},
		{"implicit is not an owner", Implicit, o, false},
	} {
		if got := tc.a.Equal(tc.b); got != tc.want {
			t.Errorf("%s: %v.Equal(%v) = %v", tc.name, tc.a, tc.b, got)
		}
	}
}

// TestLockArguments: what is refused before any call, one row per rule.
func TestLockArguments(t *testing.T) {
	ctx := context.Background()
	svc, f := fakeLockService()
	set := svc.Set(djinn.NewID())
	owner := HeldByOwnerCookie(djinn.NewID())
	tx := NewTransactionManager(nil, testManagerRef()).Transaction(7)
	var nilSet *LockSet
	var nilSvc *LockService
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"CC 2.5 create: a lease duration that is none", func() error {
			_, err := svc.CreateSet(ctx, LockSetOptions{Lease: -5 * time.Second})
			return err
		}, "lock set lease duration -5s"},
		{"CC 2.5 create_related: a related set with no id", func() error {
			_, err := svc.CreateSet(ctx, LockSetOptions{Related: &LockSet{s: svc}})
			return err
		}, "related lock set: zero id"},
		{"create on a nil service", func() error {
			_, err := nilSvc.CreateSet(ctx, LockSetOptions{})
			return err
		}, "lock service: missing (nil)"},
		{"an owner's lease duration 0", func() error {
			_, err := svc.CreateOwner(ctx, 0)
			return err
		}, "lock owner lease duration 0s"},
		{"a service without a connector", func() error {
			_, err := NewLockService(nil, testLockRef()).CreateOwner(ctx, time.Minute)
			return err
		}, "connector: missing"},
		{"CC 2.3 lock on a nil set", func() error {
			_, err := nilSet.Lock(ctx, owner, LockW)
			return err
		}, "lock set: missing (nil)"},
		{"lock on a set with a zero id", func() error {
			_, err := svc.Set(djinn.ID{}).Lock(ctx, owner, LockW)
			return err
		}, "lock set id: zero"},
		{"CC 2.1.1 lock in no mode", func() error {
			_, err := set.Lock(ctx, owner, 0)
			return err
		}, "lock mode none"},
		{"CC 2.1.1 lock in a mode past W", func() error {
			_, err := set.Lock(ctx, owner, LockW+1)
			return err
		}, "lock mode LockMode(6)"},
		{"lock for a nil owner", func() error {
			_, err := set.Lock(ctx, HeldByOwner(nil), LockW)
			return err
		}, "lock owner: missing (nil)"},
		{"CC 2.3 implicit lock outside a transaction", func() error {
			_, err := set.Lock(ctx, Implicit, LockR)
			return err
		}, "the context carries no transaction"},
		{"CC 2.3 try_lock in no mode", func() error {
			_, _, err := set.TryLock(ctx, owner, 0)
			return err
		}, "lock mode none"},
		{"try_lock for a nil transaction", func() error {
			_, _, err := set.TryLock(ctx, HeldByTransaction(nil), LockR)
			return err
		}, "transaction: missing (nil)"},
		{"CC 2.3 unlock in a mode that is none", func() error { return set.Unlock(ctx, owner, 9) }, "lock mode LockMode(9)"},
		{"unlock on a nil set", func() error { return nilSet.Unlock(ctx, owner, LockR) }, "lock set: missing (nil)"},
		{"CC 2.3 change_mode from no mode", func() error {
			_, err := set.ChangeMode(ctx, owner, 0, LockW)
			return err
		}, "held lock mode none"},
		{"CC 2.3 change_mode to no mode", func() error {
			_, err := set.ChangeMode(ctx, owner, LockR, 0)
			return err
		}, "lock mode none"},
		{"a fencing token 0", func() error {
			_, err := set.ValidateFence(ctx, 0)
			return err
		}, "fencing token 0"},
		{"describe a nil set", func() error {
			_, err := nilSet.Describe(ctx)
			return err
		}, "lock set: missing (nil)"},
		{"CC 2.2 drop_locks of a nil transaction", func() error { return set.Coordinator(nil).DropLocks(ctx) }, "transaction: missing (nil)"},
		{"CC 2.2 drop_locks of transaction 0", func() error {
			return set.Coordinator(tx.Manager().Transaction(0)).DropLocks(ctx)
		}, "transaction id 0"},
		{"CC 2.2 drop_locks in a nil set", func() error { return nilSet.Coordinator(tx).DropLocks(ctx) }, "lock set: missing (nil)"},
		{"a nil coordinator", func() error {
			var c *LockCoordinator
			return c.DropLocks(ctx)
		}, "lock coordinator: missing (nil)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v; want an invalid argument naming %q", err, tc.want)
			}
		})
	}
	if calls := f.recorded(); len(calls) != 0 {
		t.Errorf("refused calls reached the service: %v", calls)
	}
}

// TestLockRequests: what each call sends, and how it reads the answer.
func TestLockRequests(t *testing.T) {
	ctx := context.Background()
	svc, f := fakeLockService()
	id, related, cookie := djinn.NewID(), djinn.NewID(), djinn.NewID()
	landlord := RefToProto(testLockRef())
	f.reply = &djinnpb.LockSetCreated{SetId: id[:], Lease: &djinnpb.Lease{Landlord: landlord, Cookie: cookie[:], DurationNanos: int64(time.Minute)}}
	before := time.Now()
	set, err := svc.CreateSet(ctx, LockSetOptions{Transactional: true, Related: svc.Set(related)})
	if err != nil {
		t.Fatal(err)
	}
	if set.ID() != id || !set.Transactional() || set.Service() != svc || set.Lease().Cookie() != cookie ||
		set.Lease().Expiration().Before(before.Add(time.Minute)) || set.String() != "lock set "+id.String() {
		t.Errorf("created %v: transactional %v, lease %v", set, set.Transactional(), set.Lease())
	}
	f.reply = &djinnpb.LockOwner{Lease: &djinnpb.Lease{Landlord: landlord, Cookie: cookie[:], DurationNanos: int64(djinn.Forever)}}
	owner, err := svc.CreateOwner(ctx, djinn.Forever)
	if err != nil {
		t.Fatal(err)
	}
	if owner.Cookie() != cookie || owner.Lease().Expiration() != djinn.EndOfTime {
		t.Errorf("owner %v, lease %v", owner, owner.Lease())
	}
	f.reply = &djinnpb.ValidateFenceResponse{Valid: false}
	if ok, err := set.ValidateFence(ctx, 12); ok || err != nil {
		t.Errorf("ValidateFence = %v, %v; want the service's false", ok, err)
	}

	f.answers = []fakeAnswer{{resp: &djinnpb.LockResponse{Granted: true, Fence: 5}}, {resp: &djinnpb.LockResponse{}}, {resp: &djinnpb.LockResponse{Granted: true, Fence: 6}}}
	holder := HeldByOwner(owner)
	if fence, err := set.Lock(ctx, holder, LockU); fence != 5 || err != nil {
		t.Errorf("Lock = %d, %v; want fence 5", fence, err)
	}
	if fence, ok, err := set.TryLock(ctx, holder, LockW); fence != 0 || ok || err != nil {
		t.Errorf("refused TryLock = %d, %v, %v; want not granted", fence, ok, err)
	}
	if fence, err := set.ChangeMode(ctx, holder, LockU, LockW); fence != 6 || err != nil {
		t.Errorf("ChangeMode = %d, %v; want fence 6", fence, err)
	}
	if err := set.Unlock(ctx, holder, LockW); err != nil {
		t.Error(err)
	}
	tx := NewTransactionManager(nil, testManagerRef()).Transaction(7)
	if err := set.Coordinator(tx).DropLocks(ctx); err != nil {
		t.Error(err)
	}
	// Implicit: no holder is named; the transaction travels in metadata.
	if _, err := set.Lock(WithTransaction(ctx, tx), Implicit, LockIR); err != nil {
		t.Error(err)
	}
	// Describe asks for a partial description: it reads the totals. (The
	// fake's empty answer names no set: refused, after the call.)
	if _, err := set.Describe(ctx); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("describe answered no set id: %v, want it refused", err)
	}

	ownerPB := &djinnpb.LockHolder{Owner: cookie[:]}
	txRef := &djinnpb.TransactionRef{Manager: RefToProto(testManagerRef()), Id: 7}
	want := []fakeLockCall{
		{method: "CreateSet", req: &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(djinn.Any), Transactional: true, Related: related[:]}},
		{method: "CreateOwner", req: &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(djinn.Forever)}},
		{method: "ValidateFence", req: &djinnpb.ValidateFenceRequest{SetId: id[:], Fence: 12}},
		{method: "Lock", req: &djinnpb.LockRequest{SetId: id[:], Holder: ownerPB, Mode: djinnpb.LockMode_LOCK_MODE_UPGRADE}},
		{method: "Lock", req: &djinnpb.LockRequest{SetId: id[:], Holder: ownerPB, Mode: djinnpb.LockMode_LOCK_MODE_WRITE, Try: true}},
		{method: "ChangeMode", req: &djinnpb.ChangeModeRequest{SetId: id[:], Holder: ownerPB, Held: djinnpb.LockMode_LOCK_MODE_UPGRADE, Mode: djinnpb.LockMode_LOCK_MODE_WRITE}},
		{method: "Unlock", req: &djinnpb.UnlockRequest{SetId: id[:], Holder: ownerPB, Mode: djinnpb.LockMode_LOCK_MODE_WRITE}},
		{method: "DropLocks", req: &djinnpb.DropLocksRequest{SetId: id[:], Transaction: txRef}},
		{method: "Lock", req: &djinnpb.LockRequest{SetId: id[:], Mode: djinnpb.LockMode_LOCK_MODE_INTENTION_READ},
			md: metadata.Pairs(TxnManagerMetadataKey, testManagerRef().String(), TxnIDMetadataKey, "7")},
		{method: "Describe", req: &djinnpb.LockSetRequest{SetId: id[:], Partial: true}},
	}
	got := f.recorded()
	if len(got) != len(want) {
		t.Fatalf("%d calls, want %d: %v", len(got), len(want), got)
	}
	ids := map[uint64]bool{}
	for i, g := range got {
		// Request ids are drawn: compare the rest, then check them.
		var rid *uint64
		switch r := g.req.(type) {
		case *djinnpb.LockRequest:
			rid = &r.RequestId
		case *djinnpb.ChangeModeRequest:
			rid = &r.RequestId
		}
		if rid != nil {
			if *rid == 0 || ids[*rid] {
				t.Errorf("call %d: request id %d, want a fresh one", i, *rid)
			}
			ids[*rid] = true
			*rid = 0
		}
		w := want[i]
		if g.method != w.method || !proto.Equal(g.req, w.req) {
			t.Errorf("call %d: %s %v, want %s %v", i, g.method, g.req, w.method, w.req)
		}
		for k, v := range w.md {
			if !slices.Equal(g.md.Get(k), v) {
				t.Errorf("call %d: metadata %s = %v, want %v", i, k, g.md.Get(k), v)
			}
		}
	}
}

// TestLockRetriesLostAnswers: a lock request whose call fails as
// unavailable (a leader change, a lost answer) is sent again with the
// same request id, after a growing, capped backoff, until ctx ends; other
// errors pass through at once.
func TestLockRetriesLostAnswers(t *testing.T) {
	lost := djinn.Errorf(djinn.Unavailable, "this node stopped leading")
	synctest.Test(t, func(t *testing.T) {
		svc, f := fakeLockService()
		set := svc.Set(djinn.NewID())
		owner := HeldByOwnerCookie(djinn.NewID())
		f.answers = []fakeAnswer{{err: lost}, {err: lost}, {err: lost}, {resp: &djinnpb.LockResponse{Granted: true, Fence: 9}}}
		start := time.Now()
		fence, err := set.Lock(context.Background(), owner, LockW)
		if fence != 9 || err != nil {
			t.Fatalf("Lock = %d, %v; want fence 9 after the retries", fence, err)
		}
		if waited := time.Since(start); waited < (25+50+100)*time.Millisecond || waited > (50+100+200)*time.Millisecond {
			t.Errorf("three retries took %s, want backoffs of about 50ms, 100ms, 200ms", waited)
		}
		calls := f.recorded()
		if len(calls) != 4 {
			t.Fatalf("%d calls, want 4", len(calls))
		}
		first := calls[0].req.(*djinnpb.LockRequest).GetRequestId()
		for i, c := range calls {
			if id := c.req.(*djinnpb.LockRequest).GetRequestId(); id != first || id == 0 {
				t.Errorf("call %d: request id %d, want the first call's %d", i, id, first)
			}
		}
	})

	synctest.Test(t, func(t *testing.T) {
		// The backoff is capped, and ctx ends the retries.
		svc, f := fakeLockService()
		set := svc.Set(djinn.NewID())
		for range 100 {
			f.answers = append(f.answers, fakeAnswer{err: lost})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		start := time.Now()
		_, err := set.ChangeMode(ctx, HeldByOwnerCookie(djinn.NewID()), LockR, LockW)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, djinn.ErrUnavailable) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ChangeMode after its deadline: %v; want the deadline and the last failure, on one line", err)
		}
		if waited := time.Since(start); waited != 20*time.Second {
			t.Errorf("gave up after %s, want at the deadline", waited)
		}
		calls := f.recorded()
		// 50ms doubling to 2s: about 6 calls to reach the cap, then one
		// every 1s to 2s.
		if n := len(calls); n < 12 || n > 25 {
			t.Errorf("%d calls in 20s, want a capped backoff", n)
		}
		ids := map[uint64]bool{}
		for _, c := range calls {
			ids[c.req.(*djinnpb.ChangeModeRequest).GetRequestId()] = true
		}
		if len(ids) != 1 {
			t.Errorf("request ids %v, want one", ids)
		}
	})

	for _, kind := range []djinn.Kind{djinn.Deadlock, djinn.TransactionRolledBack, djinn.LockNotHeld, djinn.NoSuchObject, djinn.UnknownLease, djinn.InvalidArgument} {
		t.Run(string(kind), func(t *testing.T) {
			svc, f := fakeLockService()
			f.answers = []fakeAnswer{{err: djinn.Errorf(kind, "refused")}}
			_, _, err := svc.Set(djinn.NewID()).TryLock(context.Background(), HeldByOwnerCookie(djinn.NewID()), LockR)
			if !errors.Is(err, kind) || len(f.recorded()) != 1 {
				t.Errorf("TryLock: %v after %d calls; want %s at once", err, len(f.recorded()), kind)
			}
		})
	}
}

func TestLockRequestIDs(t *testing.T) {
	seen := map[uint64]bool{}
	for range 1000 {
		id := newRequestID()
		if id == 0 || seen[id] {
			t.Fatalf("request id %d: drawn twice or zero", id)
		}
		seen[id] = true
	}
}

// TestLockSetDescriptionDecoding: Describe's answer, and what in it is
// refused.
func TestLockSetDescriptionDecoding(t *testing.T) {
	id, rel, owner := djinn.NewID(), djinn.NewID(), djinn.NewID()
	mgr := testManagerRef()
	mgrPB := &djinnpb.Ref{ServiceId: mgr.Service[:], ObjectId: mgr.Object[:]} // by identity: no endpoint
	sent := time.Now()
	good := func() *djinnpb.LockSetDescription {
		return &djinnpb.LockSetDescription{
			SetId: id[:], Transactional: false, Related: [][]byte{rel[:]}, LastFence: 12,
			Lease: &djinnpb.Lease{Landlord: RefToProto(testLockRef()), Cookie: owner[:], DurationNanos: int64(time.Minute)},
			Holders: []*djinnpb.LockHolding{
				{Holder: &djinnpb.LockHolder{Owner: owner[:]}, Counts: []uint32{0, 0, 2, 0, 0, 1}, Fences: []uint64{3, 9, 12}},
				{Holder: &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: mgrPB, Id: 7}}, Counts: []uint32{0, 1}, Fences: []uint64{4}},
			},
			Waiters: []*djinnpb.LockWaiter{
				{Holder: &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: mgrPB, Id: 8}}, Mode: djinnpb.LockMode_LOCK_MODE_WRITE, RequestId: 77},
				{Holder: &djinnpb.LockHolder{Owner: owner[:]}, Mode: djinnpb.LockMode_LOCK_MODE_WRITE, Held: djinnpb.LockMode_LOCK_MODE_READ, RequestId: 78},
			},
		}
	}
	d, err := lockSetDescriptionFrom(nil, good(), sent)
	if err != nil {
		t.Fatal(err)
	}
	tx := func(id uint64) LockHolder { return HeldByTransaction(NewTransactionManager(nil, mgr).Transaction(id)) }
	if d.ID != id || d.Transactional || !slices.Equal(d.Related, []djinn.ID{rel}) || d.LastFence != 12 ||
		d.Lease == nil || d.Lease.Expiration() != sent.Add(time.Minute) {
		t.Errorf("described %+v", d)
	}
	if len(d.Holders) != 2 || !d.Holders[0].Holder.Equal(HeldByOwnerCookie(owner)) || !d.Holders[1].Holder.Equal(tx(7)) {
		t.Fatalf("holders %+v", d.Holders)
	}
	if h := d.Holders[0]; len(h.Counts) != 2 || h.Counts[LockR] != 2 || h.Counts[LockW] != 1 || !slices.Equal(h.Fences, []uint64{3, 9, 12}) {
		t.Errorf("owner holds %v, fences %v; want r=2 w=1, fences 3 9 12", h.Counts, h.Fences)
	}
	if h := d.Holders[1]; len(h.Counts) != 1 || h.Counts[LockIR] != 1 {
		t.Errorf("transaction holds %v; want ir=1", h.Counts)
	}
	if len(d.Waiters) != 2 || d.Waiters[0] != (LockWaiter{Holder: d.Waiters[0].Holder, Mode: LockW, RequestID: 77}) || !d.Waiters[0].Holder.Equal(tx(8)) ||
		d.Waiters[1].Mode != LockW || d.Waiters[1].Held != LockR || d.Waiters[1].RequestID != 78 {
		t.Errorf("waiters %+v", d.Waiters)
	}
	ended := good()
	ended.Lease = nil
	if d, err := lockSetDescriptionFrom(nil, ended, sent); err != nil || d.Lease != nil {
		t.Errorf("a set whose lease ended: %+v, %v", d, err)
	}
	if d.HoldersTotal != 2 || d.WaitersTotal != 2 {
		t.Errorf("totals %d holders %d waiters from a service before totals, want the ones listed (2, 2)", d.HoldersTotal, d.WaitersTotal)
	}
	// A busy set's description lists the first holders and waiters that
	// fit; its totals count them all.
	busy := good()
	busy.HoldersTotal, busy.WaitersTotal = 9000, 120_000
	if d, err := lockSetDescriptionFrom(nil, busy, sent); err != nil || d.HoldersTotal != 9000 || d.WaitersTotal != 120_000 || len(d.Waiters) != 2 {
		t.Errorf("a partial description: %+v, %v; want totals 9000 and 120000 beside the 2 waiters listed", d, err)
	}

	for _, tc := range []struct {
		name  string
		spoil func(*djinnpb.LockSetDescription)
		want  string
	}{
		{"no set id", func(d *djinnpb.LockSetDescription) { d.SetId = nil }, "lock set id: missing"},
		{"a short related id", func(d *djinnpb.LockSetDescription) { d.Related[0] = rel[:3] }, "related lock set 0: 3 bytes"},
		{"a bad lease", func(d *djinnpb.LockSetDescription) { d.Lease.Cookie = nil }, "lease cookie: missing"},
		{"a holder that is nobody", func(d *djinnpb.LockSetDescription) { d.Holders[1].Holder = &djinnpb.LockHolder{} }, "lock holder 1: names neither"},
		{"a holder that is two", func(d *djinnpb.LockSetDescription) { d.Holders[0].Holder.Transaction = d.Holders[1].Holder.Transaction },
			"lock holder 0: names both"},
		{"a short owner cookie", func(d *djinnpb.LockSetDescription) { d.Holders[0].Holder.Owner = owner[:8] }, "lock holder 0 owner: 8 bytes"},
		{"a transaction 0", func(d *djinnpb.LockSetDescription) { d.Holders[1].Holder.Transaction.Id = 0 }, "lock holder 1 transaction id: missing"},
		{"a transaction without a manager", func(d *djinnpb.LockSetDescription) { d.Holders[1].Holder.Transaction.Manager = nil },
			"lock holder 1 transaction manager: missing"},
		{"locks in a mode past W", func(d *djinnpb.LockSetDescription) { d.Holders[0].Counts = append(d.Holders[0].Counts, 4) },
			"lock holder 0: 4 locks in LockMode(6)"},
		{"a waiter in no mode", func(d *djinnpb.LockSetDescription) { d.Waiters[0].Mode = 0 }, "lock waiter 0 mode none"},
		{"a waiter changing from no mode", func(d *djinnpb.LockSetDescription) { d.Waiters[1].Held = math.MaxInt32 },
			"lock waiter 1 held mode LockMode(2147483647)"},
		{"a waiter that is nobody", func(d *djinnpb.LockSetDescription) { d.Waiters[1].Holder = nil }, "lock waiter 1: names neither"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pb := good()
			tc.spoil(pb)
			if _, err := lockSetDescriptionFrom(nil, pb, sent); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v; want an invalid argument naming %q", err, tc.want)
			}
		})
	}
}

func FuzzLockSetDescriptionFrom(f *testing.F) {
	id := djinn.NewID()
	seed, _ := proto.Marshal(&djinnpb.LockSetDescription{SetId: id[:], Holders: []*djinnpb.LockHolding{{Holder: &djinnpb.LockHolder{Owner: id[:]}, Counts: []uint32{0, 1}}}})
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		var pb djinnpb.LockSetDescription
		if proto.Unmarshal(b, &pb) != nil {
			return
		}
		d, err := lockSetDescriptionFrom(nil, &pb, time.Now())
		if err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("error of kind %s: %v", djinn.KindOf(err), err)
			}
			return
		}
		for _, h := range d.Holders {
			for m := range h.Counts {
				if !m.valid() {
					t.Fatalf("holder %v holds mode %v", h.Holder, m)
				}
			}
		}
		for _, w := range d.Waiters {
			if !w.Mode.valid() || w.Holder.IsImplicit() {
				t.Fatalf("waiter %+v", w)
			}
		}
	})
}

// TestLockHolderFingerprint: Describe names owners by a fingerprint of
// their cookie, never the cookie (a capability); the holder it gives
// prints as the owner's lease does, equals other fingerprints of the same
// cookie, and cannot be used to lock.
func TestLockHolderFingerprint(t *testing.T) {
	cookie := djinn.NewID()
	sum := sha256.Sum256(cookie[:])
	h, err := holderFromProto("holder", nil, &djinnpb.LockHolder{OwnerFingerprint: sum[:16]})
	if err != nil {
		t.Fatal(err)
	}
	if h.String() != HeldByOwnerCookie(cookie).String() || !h.IsOwner() {
		t.Fatalf("described owner %q, want %q", h, HeldByOwnerCookie(cookie))
	}
	if _, ok := h.Owner(); ok {
		t.Fatal("a described owner gave a cookie")
	}
	again, _ := holderFromProto("holder", nil, &djinnpb.LockHolder{OwnerFingerprint: sum[:16]})
	if !h.Equal(again) || h.Equal(HeldByOwnerCookie(cookie)) {
		t.Fatal("equality of described owners")
	}
	if _, err := h.proto(context.Background()); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("locking with a described owner: %v, want InvalidArgument", err)
	}
	for _, bad := range []*djinnpb.LockHolder{
		{OwnerFingerprint: sum[:4]},
		{OwnerFingerprint: sum[:16], Owner: cookie[:]},
	} {
		if _, err := holderFromProto("holder", nil, bad); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("%v: %v, want InvalidArgument", bad, err)
		}
	}
}
