package client

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// This file is the client of the lock service: the OMG Concurrency Control
// Service Specification (cited as CC n.n; docs/specs.md) bound to djinn
// transactions and leases.

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

	last atomic.Pointer[lockClient] // the client of the connection calls went on last
}

// lockClient is the generated client of one connection.
type lockClient struct {
	cc  *grpc.ClientConn
	rpc djinnpb.LockServiceClient
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
// lock service gives djinn.ErrUnsupported; one still starting, with no
// cluster service id yet, djinn.ErrUnavailable.
func (c *Client) LockService(ctx context.Context) (*LockService, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	return st.LockService()
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
	if l := s.last.Load(); l != nil && l.cc == cc {
		return l.rpc, nil
	}
	l := &lockClient{cc: cc, rpc: djinnpb.NewLockServiceClient(cc)}
	s.last.Store(l)
	return l.rpc, nil
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
// still queued — or, when a new leader cancelled it because no call came
// back for it by the end of its grace period, queues it anew, behind the
// requests queued since. Other errors pass through:
// djinn.ErrTransactionRolledBack when h's transaction aborts while it
// waits (djinn.ErrCannotJoin when it commits), djinn.ErrDeadlock when waiting would close a cycle of waiters (h
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
