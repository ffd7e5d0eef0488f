package client

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// This file is the client of the lock service: the OMG Concurrency Control
// Service Specification (cited as CC n.n; docs/specs.md) bound to djinn
// transactions and leases.

// LockMode is a lock mode (CC 2.1.1's lock_mode, CC 1.3.1). Its values are
// the wire's: LockMode(pb) and djinnpb.LockMode(m) convert between the two.
// The zero LockMode is no mode, which no call accepts.
type LockMode int32

// The lock modes, weakest first, with Table 1-1's compatibility (CC
// 1.3.1.3): IR conflicts with W; R with IW and W; U with U, IW and W; IW
// with R, U and W; W with everything.
const (
	LockIR = LockMode(djinnpb.LockMode_LOCK_MODE_INTENTION_READ)  // intention read (CC 1.3.1.2)
	LockR  = LockMode(djinnpb.LockMode_LOCK_MODE_READ)            // read (CC 1.3.1.1)
	LockU  = LockMode(djinnpb.LockMode_LOCK_MODE_UPGRADE)         // upgrade: a read lock that conflicts with itself
	LockIW = LockMode(djinnpb.LockMode_LOCK_MODE_INTENTION_WRITE) // intention write (CC 1.3.1.2)
	LockW  = LockMode(djinnpb.LockMode_LOCK_MODE_WRITE)           // write (CC 1.3.1.1)
)

// LockModes returns the five modes, weakest first.
func LockModes() []LockMode { return []LockMode{LockIR, LockR, LockU, LockIW, LockW} }

var (
	lockModeNames = [...]string{LockIR: "ir", LockR: "r", LockU: "u", LockIW: "iw", LockW: "w"}
	// lockModeIDLNames are the IDL's names (CC 2.1), which ParseLockMode
	// accepts too.
	lockModeIDLNames = [...]string{LockIR: "intention_read", LockR: "read", LockU: "upgrade", LockIW: "intention_write", LockW: "write"}
)

// String returns the mode's short name: "ir", "r", "u", "iw" or "w";
// "none" for the zero mode and "LockMode(N)" for a value that is no mode.
func (m LockMode) String() string {
	switch {
	case m == 0:
		return "none"
	case m.valid():
		return lockModeNames[m]
	}
	return "LockMode(" + strconv.Itoa(int(m)) + ")"
}

func (m LockMode) valid() bool { return m >= LockIR && m <= LockW }

// ParseLockMode parses a mode's short name (ir, r, u, iw, w) or its IDL
// name (intention_read, read, upgrade, intention_write, write; CC 2.1), in
// any case. Anything else is djinn.ErrInvalidArgument naming s.
func ParseLockMode(s string) (LockMode, error) {
	l := strings.ToLower(s)
	for _, m := range LockModes() {
		if l == lockModeNames[m] || l == lockModeIDLNames[m] {
			return m, nil
		}
	}
	return 0, djinn.Errorf(djinn.InvalidArgument, "lock mode %q: want ir, r, u, iw or w (or the IDL's intention_read, read, upgrade, intention_write, write)", abbrev(s))
}

// checkLockMode refuses a value that is no mode; what names the argument.
func checkLockMode(what string, m LockMode) error {
	if !m.valid() {
		return djinn.Errorf(djinn.InvalidArgument, "%s %s: want ir, r, u, iw or w", what, m)
	}
	return nil
}

// LockService is a client of a lock service (CC 2.5's LockSetFactory and
// the lock sets it makes). A lock set is named by its id, which is a
// capability: whoever knows it may lock in it. Sets and lock owners are
// leased from the service; renew their leases (Lease.Renew, or a Renewer)
// while they are needed. A set whose lease ends goes with its locks and
// waiters (calls on it fail with djinn.ErrNoSuchObject); an owner whose
// lease ends loses its locks (calls naming it fail with
// djinn.ErrUnknownLease), which is how a crashed client's locks are freed.
//
// It is safe for concurrent use and holds no connection of its own: calls
// go through its Connector.
type LockService struct {
	c   Connector
	ref djinn.Ref
	rpc djinnpb.LockServiceClient // when set, calls go to it in process (tests)
}

// NewLockService returns a client for the lock service named by ref (the
// reference Status gives: the service's transaction participant), reached
// at ref's endpoint.
func NewLockService(c Connector, ref djinn.Ref) *LockService {
	return &LockService{c: c, ref: ref}
}

// LockService returns a client for the lock service of the server c is
// dialled to, as its Status names it, reached at the dialled address (a
// follower points calls at the leader). A server that does not run the
// lock service gives djinn.ErrUnsupported.
func (c *Client) LockService(ctx context.Context) (*LockService, error) {
	st, err := djinnpb.NewAdminClient(c.cluster.cc).Status(ctx, &djinnpb.StatusRequest{})
	if err != nil {
		return nil, err
	}
	if st.GetLock() == nil {
		return nil, djinn.Errorf(djinn.Unsupported, "server at %s does not run the lock service (services %v)", c.addr, st.GetServices())
	}
	ref, err := RefFromProto("lock service", st.GetLock())
	if err != nil {
		return nil, err
	}
	ref.Endpoint = c.addr
	return NewLockService(c, ref), nil
}

// Ref returns the service's reference.
func (s *LockService) Ref() djinn.Ref { return s.ref }

// String names the service by its reference.
func (s *LockService) String() string { return "lock service " + s.ref.String() }

func (s *LockService) client() (djinnpb.LockServiceClient, error) {
	if s == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lock service: missing (nil)")
	}
	if s.rpc != nil {
		return s.rpc, nil
	}
	if s.c == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "connector: missing")
	}
	cc, err := ConnFor(s.c, s.ref)
	if err != nil {
		return nil, err
	}
	return djinnpb.NewLockServiceClient(cc), nil
}

// LockSetOptions are CreateSet's choices.
type LockSetOptions struct {
	// Transactional makes a TransactionalLockSet (CC 2.4): only
	// transactions hold its locks. Otherwise the set is a LockSet (CC
	// 2.3), whose locks are held by lock owners or transactions.
	Transactional bool
	// Related, when not nil, relates the new set to that one, which must be
	// of the same kind (CC 2.5's create_related and
	// create_transactional_related): related sets share a lock coordinator
	// and drop their locks together (CC 2.2).
	Related *LockSet
	// Lease is the duration asked for the set's lease: positive,
	// djinn.Forever or djinn.Any; zero asks for djinn.Any. The service
	// may grant less.
	Lease time.Duration
}

// CreateSet creates a lock set (CC 2.5's create, create_related,
// create_transactional and create_transactional_related). Two calls never
// return the same set. A Related set that is gone gives
// djinn.ErrNoSuchObject.
func (s *LockService) CreateSet(ctx context.Context, opts LockSetOptions) (*LockSet, error) {
	d := opts.Lease
	if d == 0 {
		d = djinn.Any
	}
	if err := djinn.CheckLeaseDuration("lock set lease duration", d); err != nil {
		return nil, err
	}
	req := &djinnpb.CreateLockSetRequest{LeaseDurationNanos: int64(d), Transactional: opts.Transactional}
	if opts.Related != nil {
		if opts.Related.id.IsZero() {
			return nil, djinn.Errorf(djinn.InvalidArgument, "related lock set: zero id")
		}
		req.Related = opts.Related.id[:]
	}
	lc, err := s.client()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	pb, err := lc.CreateSet(ctx, req)
	if err != nil {
		return nil, err
	}
	id, err := djinn.IDFromBytes("created lock set id", pb.GetSetId())
	if err != nil {
		return nil, err
	}
	l, err := LeaseFromProto(pb.GetLease(), sent)
	if err != nil {
		return nil, err
	}
	return &LockSet{s: s, id: id, lease: l, transactional: opts.Transactional}, nil
}

// Set returns the lock set id of this service, for a set created
// elsewhere or by an earlier run. It makes no remote call, so the set need
// not exist (calls on it then fail with djinn.ErrNoSuchObject); its Lease
// is nil, and Transactional reports false whatever the set is (Describe
// tells).
func (s *LockService) Set(id djinn.ID) *LockSet { return &LockSet{s: s, id: id} }

// CreateOwner leases a lock owner: a client identity that holds locks in
// sets that are not transactional, named by its lease's cookie. Its locks
// last as long as its lease: renew the lease while the owner works, and
// cancel it to drop every lock it holds. d is positive, djinn.Forever or
// djinn.Any; the service may grant less.
func (s *LockService) CreateOwner(ctx context.Context, d time.Duration) (*LockOwner, error) {
	if err := djinn.CheckLeaseDuration("lock owner lease duration", d); err != nil {
		return nil, err
	}
	lc, err := s.client()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	pb, err := lc.CreateOwner(ctx, &djinnpb.CreateLockOwnerRequest{LeaseDurationNanos: int64(d)})
	if err != nil {
		return nil, err
	}
	l, err := LeaseFromProto(pb.GetLease(), sent)
	if err != nil {
		return nil, err
	}
	return &LockOwner{lease: l}, nil
}

// LockOwner is a lock owner: the non-transactional client of CC 1.2.1, a
// leased identity. Its lease's cookie names it (HeldByOwner); like any
// cookie it is a capability, so whoever has the owner's lease token may
// lock and unlock as the owner.
type LockOwner struct {
	lease *Lease
}

// Lease returns the owner's lease.
func (o *LockOwner) Lease() *Lease { return o.lease }

// Cookie returns the cookie that names the owner: its lease's.
func (o *LockOwner) Cookie() djinn.ID {
	if o == nil || o.lease == nil {
		return djinn.ID{}
	}
	return o.lease.Cookie()
}

// String names the owner by a fingerprint of its cookie, the one its
// lease's String prints.
func (o *LockOwner) String() string { return HeldByOwner(o).String() }

// LockHolder is who holds, asks for or gives up a lock (CC 1.2.1, 1.2.2): a
// lock owner, a transaction of any djinn transaction manager, or — the
// zero LockHolder, Implicit — the transaction in the call's context (CC
// 2.3's implicit mode: the caller's current transaction, set with
// WithTransaction). Build one with HeldByOwner, HeldByOwnerCookie or
// HeldByTransaction. A builder given nothing (a nil owner or transaction,
// a zero cookie) returns a holder with which every call fails with
// djinn.ErrInvalidArgument.
//
// In a transactional set (CC 2.4) only transactions hold locks; in the
// others owners and transactions both do. A transaction's locks are held
// until it commits or aborts (strict two-phase locking, CC 1.4), when the
// service, a participant in it, drops them or (for a nested transaction
// that commits) passes them to its parent (CC 1.5).
type LockHolder struct {
	kind  holderKind
	owner djinn.ID     // holderOwner
	seen  [16]byte     // holderSeenOwner: the first bytes of SHA-256 of the cookie
	tx    *Transaction // holderTxn
	bad   string       // why every call with this holder fails; "" when it is usable
}

type holderKind uint8

const (
	holderImplicit holderKind = iota
	holderOwner
	holderTxn
	// holderSeenOwner is an owner as Describe names it: by a fingerprint
	// of its cookie, which the service never gives out.
	holderSeenOwner
)

// Implicit is the holder of CC 2.3's implicit mode: the transaction in the
// call's context (WithTransaction). It is the zero LockHolder. A call with
// it and a context that carries no transaction fails with
// djinn.ErrInvalidArgument.
var Implicit LockHolder

// HeldByOwner returns the holder that is lock owner o.
func HeldByOwner(o *LockOwner) LockHolder {
	if o == nil || o.lease == nil {
		return LockHolder{kind: holderOwner, bad: "lock owner: missing (nil)"}
	}
	return HeldByOwnerCookie(o.lease.Cookie())
}

// HeldByOwnerCookie returns the holder that is the lock owner named by
// cookie, its lease's cookie: for an owner created elsewhere, whose lease
// token was passed along (ParseToken gives its Lease, and Cookie the
// cookie).
func HeldByOwnerCookie(cookie djinn.ID) LockHolder {
	h := LockHolder{kind: holderOwner, owner: cookie}
	if cookie.IsZero() {
		h.bad = "lock owner cookie: zero"
	}
	return h
}

// HeldByTransaction returns the holder that is transaction tx, of any
// manager: TransactionalLockSet's explicit mode (CC 2.4). The service
// joins tx as a participant at its first lock.
func HeldByTransaction(tx *Transaction) LockHolder {
	h := LockHolder{kind: holderTxn, tx: tx}
	switch {
	case tx == nil:
		h.bad = "lock holder transaction: missing (nil)"
	case tx.id == 0:
		h.bad = "lock holder transaction id 0: want a transaction id, from 1"
	case tx.mgr == nil || tx.mgr.ref.Service.IsZero() || tx.mgr.ref.Object.IsZero():
		h.bad = fmt.Sprintf("lock holder %s: its manager names no object (zero service or object id)", tx)
	}
	return h
}

// IsImplicit reports whether h is Implicit: the transaction of the call's
// context.
func (h LockHolder) IsImplicit() bool { return h.kind == holderImplicit }

// Owner returns the cookie of the lock owner h is, and whether h is an
// owner named by its cookie. An owner read by Describe is named only by a
// fingerprint (IsOwner, String): the cookie is a capability.
func (h LockHolder) Owner() (djinn.ID, bool) { return h.owner, h.kind == holderOwner }

// IsOwner reports whether h is a lock owner, named by its cookie or, as
// Describe names holders, by its fingerprint.
func (h LockHolder) IsOwner() bool { return h.kind == holderOwner || h.kind == holderSeenOwner }

// fingerprint names an owner: the hex of the first four bytes of SHA-256
// of its cookie, as its lease's String prints it.
func (h LockHolder) fingerprint() string {
	if h.kind == holderSeenOwner {
		return hex.EncodeToString(h.seen[:4])
	}
	return (&Lease{cookie: h.owner}).fingerprint()
}

// Transaction returns the transaction h is, or nil if h is not one. A
// holder read by Describe names its transaction's manager by identity
// only: its reference has no endpoint.
func (h LockHolder) Transaction() *Transaction {
	if h.kind != holderTxn {
		return nil
	}
	return h.tx
}

// Equal reports whether h and o are the same holder: the same owner, the
// same transaction (Transaction.Equal: whatever endpoint names the
// manager), or both Implicit.
func (h LockHolder) Equal(o LockHolder) bool {
	if h.kind != o.kind {
		return false
	}
	switch h.kind {
	case holderOwner:
		return h.owner == o.owner
	case holderSeenOwner:
		return h.seen == o.seen
	case holderTxn:
		return h.tx.Equal(o.tx)
	}
	return true
}

// String names the holder: "owner 1a2b3c4d" (a fingerprint of the cookie,
// the one the owner's lease's String prints: the cookie is a capability),
// "transaction 7 of djinn://…", or "implicit".
func (h LockHolder) String() string {
	switch h.kind {
	case holderOwner, holderSeenOwner:
		return "owner " + h.fingerprint()
	case holderTxn:
		if h.tx == nil {
			return "transaction (nil)"
		}
		return h.tx.String()
	}
	return "implicit"
}

// proto returns h's wire form for a call made with ctx: nil for Implicit,
// once ctx is seen to carry a transaction.
func (h LockHolder) proto(ctx context.Context) (*djinnpb.LockHolder, error) {
	if h.bad != "" {
		return nil, djinn.Errorf(djinn.InvalidArgument, "%s", h.bad)
	}
	switch h.kind {
	case holderOwner:
		return &djinnpb.LockHolder{Owner: h.owner[:]}, nil
	case holderTxn:
		return txnRefProto(h.tx), nil
	case holderSeenOwner:
		return nil, djinn.Errorf(djinn.InvalidArgument, "lock holder %s: known by its fingerprint only; name it by its cookie (HeldByOwnerCookie)", h)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	_, _, ok, err := parseTxnMetadata(md)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lock holder: implicit, but the context carries no transaction: "+
			"name an owner (HeldByOwner) or a transaction (HeldByTransaction), or call within one (WithTransaction)")
	}
	return nil, nil
}

func txnRefProto(tx *Transaction) *djinnpb.LockHolder {
	return &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: RefToProto(tx.mgr.ref), Id: tx.id}}
}

// holderFromProto converts a holder the service named; c reaches the
// managers of transactions.
func holderFromProto(what string, c Connector, pb *djinnpb.LockHolder) (LockHolder, error) {
	owner, t := pb.GetOwner(), pb.GetTransaction()
	if fp := pb.GetOwnerFingerprint(); len(fp) > 0 {
		if len(fp) != 16 || len(owner) > 0 || t != nil {
			return LockHolder{}, djinn.Errorf(djinn.InvalidArgument, "%s: owner fingerprint of %d bytes (want 16, alone)", what, len(fp))
		}
		h := LockHolder{kind: holderSeenOwner}
		copy(h.seen[:], fp)
		return h, nil
	}
	switch {
	case len(owner) > 0 && t != nil:
		return LockHolder{}, djinn.Errorf(djinn.InvalidArgument, "%s: names both an owner and a transaction", what)
	case len(owner) > 0:
		id, err := djinn.IDFromBytes(what+" owner", owner)
		if err != nil {
			return LockHolder{}, err
		}
		return HeldByOwnerCookie(id), nil
	case t != nil:
		ref, err := RefFromProto(what+" transaction manager", t.GetManager())
		if err != nil {
			return LockHolder{}, err
		}
		if t.GetId() == 0 {
			return LockHolder{}, djinn.Errorf(djinn.InvalidArgument, "%s transaction id: missing", what)
		}
		return HeldByTransaction(NewTransactionManager(c, ref).Transaction(t.GetId())), nil
	}
	return LockHolder{}, djinn.Errorf(djinn.InvalidArgument, "%s: names neither an owner nor a transaction", what)
}

// LockSet is a lock set of a lock service: CC 2.3's LockSet, or CC 2.4's
// TransactionalLockSet when Transactional. The spec's two interfaces
// differ only in how the transaction is named, which here is the
// LockHolder every call takes: a set of either kind takes a transaction
// named explicitly (HeldByTransaction) or implicitly (Implicit), and a set
// that is not transactional takes lock owners too.
//
// It is a handle, safe for concurrent use: the locks live at the service.
// Every method but ID, Lease, Transactional, Service, Coordinator and
// String calls the service, and fails with djinn.ErrNoSuchObject once the
// set is gone (its lease ended or was cancelled).
type LockSet struct {
	s             *LockService
	id            djinn.ID
	lease         *Lease // as granted to this program; nil when named by id
	transactional bool
}

// ID returns the set's id: the capability that names it (LockService.Set).
func (s *LockSet) ID() djinn.ID { return s.id }

// Lease returns the set's lease as CreateSet returned it, or nil for a set
// named by id (LockService.Set). Renew it to keep the set; cancelling it
// destroys the set with its locks.
func (s *LockSet) Lease() *Lease { return s.lease }

// Transactional reports whether the set was created transactional (CC
// 2.4); a set named by id reports false.
func (s *LockSet) Transactional() bool { return s.transactional }

// Service returns the lock service the set belongs to.
func (s *LockSet) Service() *LockService { return s.s }

// String names the set: "lock set " and its id.
func (s *LockSet) String() string { return "lock set " + s.id.String() }

// client returns the service's client, after the checks every call makes.
func (s *LockSet) client() (djinnpb.LockServiceClient, error) {
	if s == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lock set: missing (nil)")
	}
	if s.id.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lock set id: zero")
	}
	return s.s.client()
}

// prepare checks a call's arguments and returns the client and holder.
func (s *LockSet) prepare(ctx context.Context, h LockHolder, mode LockMode) (djinnpb.LockServiceClient, *djinnpb.LockHolder, error) {
	lc, err := s.client()
	if err != nil {
		return nil, nil, err
	}
	if err := checkLockMode("lock mode", mode); err != nil {
		return nil, nil, err
	}
	hp, err := h.proto(ctx)
	if err != nil {
		return nil, nil, err
	}
	return lc, hp, nil
}

// Lock acquires a lock in mode for h (CC 2.3's lock), blocking until it is
// granted, ctx's deadline passes or ctx is cancelled — when the request
// leaves the queue. Requests are granted first come, first served, except
// that a transaction is not held up by the queue behind a member of its
// family that holds a lock here (CC 1.3.1.3). Locks are counted (CC 1.3.2):
// each Lock needs its own Unlock. It returns the grant's fencing token,
// which grows with every grant in the set and stays valid
// (ValidateFence) while the lock is held.
//
// The call draws a request id and, when it fails with
// djinn.ErrUnavailable (the service changed leader, or the answer was
// lost), retries with the same id, after a backoff growing from 50ms to
// 2s, until ctx ends: the service finds the same request, granted or
// still queued. Other errors pass through:
// djinn.ErrTransactionRolledBack when h's transaction aborts while it
// waits, djinn.ErrDeadlock when waiting would close a cycle of waiters (h
// is the victim; nothing changed), djinn.ErrUnknownLease when h is an
// owner whose lease ended, djinn.ErrNoSuchObject when the set is gone.
func (s *LockSet) Lock(ctx context.Context, h LockHolder, mode LockMode) (fence uint64, err error) {
	lc, hp, err := s.prepare(ctx, h, mode)
	if err != nil {
		return 0, err
	}
	req := &djinnpb.LockRequest{SetId: s.id[:], Holder: hp, Mode: djinnpb.LockMode(mode), RequestId: newRequestID()}
	resp, err := retryLost(ctx, func(ctx context.Context) (*djinnpb.LockResponse, error) { return lc.Lock(ctx, req) })
	if err != nil {
		return 0, err
	}
	if !resp.GetGranted() {
		return 0, djinn.Errorf(djinn.Internal, "%s: request %d for %s in mode %s answered not granted without try", s, req.RequestId, h, mode)
	}
	return resp.GetFence(), nil
}

// TryLock acquires a lock in mode for h if it can be granted at once (CC
// 2.3's try_lock): ok is false, with no error, when it cannot. It retries
// lost answers as Lock does.
func (s *LockSet) TryLock(ctx context.Context, h LockHolder, mode LockMode) (fence uint64, ok bool, err error) {
	lc, hp, err := s.prepare(ctx, h, mode)
	if err != nil {
		return 0, false, err
	}
	req := &djinnpb.LockRequest{SetId: s.id[:], Holder: hp, Mode: djinnpb.LockMode(mode), Try: true, RequestId: newRequestID()}
	resp, err := retryLost(ctx, func(ctx context.Context) (*djinnpb.LockResponse, error) { return lc.Lock(ctx, req) })
	if err != nil {
		return 0, false, err
	}
	return resp.GetFence(), resp.GetGranted(), nil
}

// Unlock drops one lock h holds in mode (CC 2.3's unlock; a lock held
// several times is counted, CC 1.3.2): the one granted last, whose fencing
// token stops validating. A lock h does not hold gives
// djinn.ErrLockNotHeld (CC 2.1.1). A nested transaction drops only locks
// it took itself, never its parent's (CC 1.5). Unlock is not retried: a
// lost answer may have dropped the lock.
func (s *LockSet) Unlock(ctx context.Context, h LockHolder, mode LockMode) error {
	lc, hp, err := s.prepare(ctx, h, mode)
	if err != nil {
		return err
	}
	_, err = lc.Unlock(ctx, &djinnpb.UnlockRequest{SetId: s.id[:], Holder: hp, Mode: djinnpb.LockMode(mode)})
	return err
}

// ChangeMode changes one lock h holds in mode held to mode (CC 2.3's
// change_mode), atomically: the held lock stays held, and counts in
// conflicts, until the new mode is granted, which may block as Lock does
// (ctx ends it; a lost answer is retried with the same request id). It
// returns the new grant's fencing token; the old lock's stops validating.
// A lock h does not hold in mode held gives djinn.ErrLockNotHeld; the other
// errors are Lock's.
func (s *LockSet) ChangeMode(ctx context.Context, h LockHolder, held, mode LockMode) (fence uint64, err error) {
	if err := checkLockMode("held lock mode", held); err != nil {
		return 0, err
	}
	lc, hp, err := s.prepare(ctx, h, mode)
	if err != nil {
		return 0, err
	}
	req := &djinnpb.ChangeModeRequest{SetId: s.id[:], Holder: hp, Held: djinnpb.LockMode(held), Mode: djinnpb.LockMode(mode), RequestId: newRequestID()}
	resp, err := retryLost(ctx, func(ctx context.Context) (*djinnpb.LockResponse, error) { return lc.ChangeMode(ctx, req) })
	if err != nil {
		return 0, err
	}
	if !resp.GetGranted() {
		return 0, djinn.Errorf(djinn.Internal, "%s: change of %s from %s to %s (request %d) answered not granted", s, h, held, mode, req.RequestId)
	}
	return resp.GetFence(), nil
}

// ValidateFence reports whether the grant that returned fencing token
// fence still holds its lock: a resource guarded by the set can refuse a
// writer whose token no longer validates (its owner's lease ended while it
// was paused, say). Tokens start at 1.
func (s *LockSet) ValidateFence(ctx context.Context, fence uint64) (bool, error) {
	lc, err := s.client()
	if err != nil {
		return false, err
	}
	if fence == 0 {
		return false, djinn.Errorf(djinn.InvalidArgument, "fencing token 0: tokens start at 1")
	}
	resp, err := lc.ValidateFence(ctx, &djinnpb.ValidateFenceRequest{SetId: s.id[:], Fence: fence})
	if err != nil {
		return false, err
	}
	return resp.GetValid(), nil
}

// Coordinator returns the lock coordinator of transaction tx for the set
// and the sets related to it (CC 2.3's get_coordinator). It makes no
// remote call.
func (s *LockSet) Coordinator(tx *Transaction) *LockCoordinator {
	return &LockCoordinator{set: s, tx: tx}
}

// LockCoordinator drops every lock a transaction holds in a set and the
// sets related to it (CC 2.2).
type LockCoordinator struct {
	set *LockSet
	tx  *Transaction
}

// DropLocks releases every lock the transaction holds in the set and the
// sets related to it (CC 2.2's drop_locks). The service does it itself
// when the transaction commits or aborts, being a participant in it; call
// it to release the locks before (giving up the isolation they gave, CC
// 1.4), or for a nested transaction that aborted.
func (c *LockCoordinator) DropLocks(ctx context.Context) error {
	if c == nil {
		return djinn.Errorf(djinn.InvalidArgument, "lock coordinator: missing (nil)")
	}
	lc, err := c.set.client()
	if err != nil {
		return err
	}
	h := HeldByTransaction(c.tx)
	if h.bad != "" {
		return djinn.Errorf(djinn.InvalidArgument, "lock coordinator: %s", h.bad)
	}
	_, err = lc.DropLocks(ctx, &djinnpb.DropLocksRequest{SetId: c.set.id[:], Transaction: txnRefProto(c.tx).GetTransaction()})
	return err
}

// LockSetDescription is what the service holds for a lock set, for
// operators (Describe).
type LockSetDescription struct {
	ID            djinn.ID
	Transactional bool
	// Related are the other sets sharing the set's lock coordinator (CC
	// 2.5's create_related).
	Related []djinn.ID
	// Lease is the set's lease as the service holds it, with the time it
	// had left; nil once it ended, and for anyone but the set's creator
	// (its principal): a set's id lets one lock in it, not keep it alive
	// or end it.
	Lease *Lease
	// Holders hold locks, in the service's order; Waiters wait for one, in
	// queue order (CC 1.3.1.3).
	Holders []LockHolding
	Waiters []LockWaiter
	// LastFence is the fencing token of the set's last grant (0 before
	// the first).
	LastFence uint64
}

// LockHolding is what one holder holds in a set.
type LockHolding struct {
	Holder LockHolder
	// Counts is the number of locks held in each mode, for the modes held
	// (CC 1.3.2's multiple possession).
	Counts map[LockMode]int
	// Fences are the fencing tokens of the live grants.
	Fences []uint64
}

// LockWaiter is a request waiting in a set's queue.
type LockWaiter struct {
	Holder LockHolder
	Mode   LockMode
	// Held is the mode of the lock a change_mode changes (CC 2.3), zero
	// for a lock request.
	Held      LockMode
	RequestID uint64
}

// Describe returns the set's holders with their locks, its waiters in
// queue order, its related sets and its lease.
func (s *LockSet) Describe(ctx context.Context) (*LockSetDescription, error) {
	lc, err := s.client()
	if err != nil {
		return nil, err
	}
	sent := time.Now()
	pb, err := lc.Describe(ctx, &djinnpb.LockSetRequest{SetId: s.id[:]})
	if err != nil {
		return nil, err
	}
	return lockSetDescriptionFrom(s.s.c, pb, sent)
}

// lockSetDescriptionFrom converts Describe's answer to a request sent at
// sent; c reaches the holders' transaction managers.
func lockSetDescriptionFrom(c Connector, pb *djinnpb.LockSetDescription, sent time.Time) (*LockSetDescription, error) {
	id, err := djinn.IDFromBytes("lock set id", pb.GetSetId())
	if err != nil {
		return nil, err
	}
	d := &LockSetDescription{ID: id, Transactional: pb.GetTransactional(), LastFence: pb.GetLastFence()}
	for i, b := range pb.GetRelated() {
		r, err := djinn.IDFromBytes(fmt.Sprintf("related lock set %d", i), b)
		if err != nil {
			return nil, err
		}
		d.Related = append(d.Related, r)
	}
	if pb.GetLease() != nil {
		if d.Lease, err = LeaseFromProto(pb.GetLease(), sent); err != nil {
			return nil, err
		}
	}
	for i, hp := range pb.GetHolders() {
		what := fmt.Sprintf("lock holder %d", i)
		h, err := holderFromProto(what, c, hp.GetHolder())
		if err != nil {
			return nil, err
		}
		hd := LockHolding{Holder: h, Counts: map[LockMode]int{}, Fences: hp.GetFences()}
		for m, n := range hp.GetCounts() {
			if n == 0 {
				continue
			}
			if !LockMode(m).valid() {
				return nil, djinn.Errorf(djinn.InvalidArgument, "%s: %d locks in %s", what, n, LockMode(m))
			}
			hd.Counts[LockMode(m)] = int(n)
		}
		d.Holders = append(d.Holders, hd)
	}
	for i, wp := range pb.GetWaiters() {
		what := fmt.Sprintf("lock waiter %d", i)
		h, err := holderFromProto(what, c, wp.GetHolder())
		if err != nil {
			return nil, err
		}
		w := LockWaiter{Holder: h, Mode: LockMode(wp.GetMode()), Held: LockMode(wp.GetHeld()), RequestID: wp.GetRequestId()}
		if err := checkLockMode(what+" mode", w.Mode); err != nil {
			return nil, err
		}
		if w.Held != 0 {
			if err := checkLockMode(what+" held mode", w.Held); err != nil {
				return nil, err
			}
		}
		d.Waiters = append(d.Waiters, w)
	}
	return d, nil
}

// The backoff between retries of a lock request whose answer was lost:
// from lockRetryMin, doubling, up to lockRetryMax (a leader election's
// worth), each drawn between half and all of it.
const (
	lockRetryMin = 50 * time.Millisecond
	lockRetryMax = 2 * time.Second
)

// retryLost calls call until it succeeds, fails with an error other than
// djinn.ErrUnavailable, or ctx ends; the last error is returned, with
// ctx's when ctx ended between tries.
func retryLost(ctx context.Context, call func(context.Context) (*djinnpb.LockResponse, error)) (*djinnpb.LockResponse, error) {
	backoff := lockRetryMin
	for {
		resp, err := call(ctx)
		if err == nil || !errors.Is(err, djinn.ErrUnavailable) || ctx.Err() != nil {
			return resp, err
		}
		t := time.NewTimer(backoff/2 + rand.N(backoff/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (after %w)", ctx.Err(), err)
		case <-t.C:
		}
		backoff = min(2*backoff, lockRetryMax)
	}
}

// newRequestID draws a lock request's id: random, never 0 (which asks the
// service to draw one).
func newRequestID() uint64 {
	for {
		var b [8]byte
		_, _ = crand.Read(b[:]) // never fails (Go 1.24+)
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}
