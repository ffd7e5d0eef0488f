package lock

import (
	"context"
	crand "crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Proposer appends commands to the replicated log and returns what
// applying them returned.
type Proposer interface {
	Propose(ctx context.Context, cmd *statepb.Command) (any, error)
}

// RiderProposer is a Proposer that also proposes commands that need not
// be written at once: ProposeRider's command rides in the log entry of the
// next command proposed, or goes alone after a short bound (the
// replicated log's rider delay), keeping its place among the commands
// proposed. A Service whose log is one proposes so a blocking lock
// request that will wait (Lock).
type RiderProposer interface {
	Proposer
	ProposeRider(ctx context.Context, cmd *statepb.Command) (any, error)
}

// Joiner reaches transaction managers for the lock service as a
// participant: Join joins it to transaction id of the manager mgr
// (TX.2.3), returning the manager's answer, the transaction's ancestors;
// GetState asks the manager the transaction's state (TX.2.7).
type Joiner interface {
	Join(ctx context.Context, mgr djinn.Ref, id uint64, secret djinn.ID, self *djinnpb.Ref, crash int64) (*djinnpb.JoinTransactionResponse, error)
	GetState(ctx context.Context, mgr djinn.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error)
}

// CrashCount is the lock service's crash count as a participant: its state
// is in the replicated log, so it never loses what it joined.
const CrashCount = 1

// Config configures the service. Zero values take the defaults.
type Config struct {
	// Sets and Owners are the lease policies of lock sets (default: Any
	// is Forever, up to Forever) and lock owners (default: Any is a
	// minute, at most a day).
	Sets, Owners lease.Policy
	// MaxSets and MaxOwners bound what the service holds (default
	// 10,000,000 and 1,000,000).
	MaxSets, MaxOwners int
	// Joiner joins transactions. Required.
	Joiner Joiner
	// Grace is how long a new leader keeps requests that were waiting under
	// the last one for their callers to come back (retrying with the same
	// request id) before it cancels them (default 10s).
	Grace time.Duration
	// VoteCheck is how long after an ABORTED vote, and then how often, the
	// leader asks the transaction's manager whether it has decided, to
	// forget the vote once it has (default a minute; votes.go).
	VoteCheck time.Duration
	Logger    *slog.Logger
}

// Service is the lock service on the leader.
type Service struct {
	state  *State
	lessor *lease.Lessor
	log    Proposer
	rider  RiderProposer // log, if it proposes riders; else nil
	now    func() time.Time
	self   func() djinn.Ref
	cfg    Config

	mu sync.Mutex
	// waiting holds the Lock calls under way on this node, by holder and
	// request id: a request id is its holder's (requests.go), and so is a
	// call's place here — another holder's call under the same id never
	// makes this one's retry wait.
	waiting map[waitKey]*acquireCall
	// armed holds, by request id, the calls whose request the state
	// queued, or found waiting, for their holder (an Event's Waits): what
	// becomes of the request next is theirs to hear, and no other call's.
	// From requestRules on, one holder's call at most; before, ids alone
	// matched, and every call that found the request waiting hears it.
	armed map[uint64][]*acquireCall
	// joined holds the transactions joined by this leader, with their
	// ancestry, by transaction, until they are asked to prepare.
	joined map[TxnKey]*statepb.LockHolderState
	// unkept holds the ABORTED votes of this leader while the cluster's
	// rules version keeps none in the state (a rolling upgrade): a
	// prepare repeated here still gets the vote.
	unkept abortedVotes
	// term is closed when this node's run as leader ends.
	term chan struct{}
}

// NewService returns the service over s; self is the lock service's reference
// (its participant's).
func NewService(s *State, l *lease.Lessor, log Proposer, now func() time.Time, self func() djinn.Ref, cfg Config) (*Service, error) {
	if cfg.Joiner == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lock service: no joiner")
	}
	if cfg.Sets == (lease.Policy{}) {
		cfg.Sets = lease.Policy{Default: djinn.Forever, Max: djinn.Forever}
	}
	if cfg.Owners == (lease.Policy{}) {
		cfg.Owners = lease.Policy{Default: time.Minute, Max: 24 * time.Hour}
	}
	if cfg.MaxSets <= 0 {
		cfg.MaxSets = 10_000_000
	}
	if cfg.MaxOwners <= 0 {
		cfg.MaxOwners = 1_000_000
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.VoteCheck <= 0 {
		cfg.VoteCheck = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := l.Table().SetPolicy(SetLeaseKind, cfg.Sets); err != nil {
		return nil, err
	}
	if err := l.Table().SetPolicy(OwnerLeaseKind, cfg.Owners); err != nil {
		return nil, err
	}
	rider, _ := log.(RiderProposer)
	svc := &Service{state: s, lessor: l, log: log, rider: rider, now: now, self: self, cfg: cfg,
		waiting: map[waitKey]*acquireCall{}, armed: map[uint64][]*acquireCall{}, joined: map[TxnKey]*statepb.LockHolderState{}, term: make(chan struct{})}
	s.SetNotify(svc.hear)
	return svc, nil
}

func (s *Service) leading() error { return s.lessor.Serving("lock service") }

// waitKey names a Lock call under way: its holder (an owner's cookie, or
// a transaction) and its request id.
type waitKey struct {
	owner   djinn.ID
	txn     TxnKey
	request uint64
}

func waitKeyOf(h *statepb.LockHolderState, request uint64) waitKey {
	k := waitKey{request: request}
	if h.GetManager() != nil {
		k.txn = TxnKeyOf(h.GetManager(), h.GetTxn())
	} else {
		copy(k.owner[:], h.GetOwner())
	}
	return k
}

// hear passes what became of waiting requests to their callers here: the
// calls armed for each (an event with Waits arms the call of its holder).
// An event of a request no call here is armed for — its caller is
// elsewhere, or gone, or the request was another holder's — is dropped.
func (s *Service) hear(evs []Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range evs {
		if ev.Waits != nil {
			if c, ok := s.waiting[waitKeyOf(ev.Waits, ev.Request)]; ok && !slices.Contains(s.armed[ev.Request], c) {
				s.armed[ev.Request] = append(s.armed[ev.Request], c)
			}
			continue
		}
		for _, c := range s.armed[ev.Request] {
			c.hear(ev)
		}
		delete(s.armed, ev.Request)
	}
}

// disarmLocked takes call c of request off the calls armed for it.
func (s *Service) disarmLocked(request uint64, c *acquireCall) {
	cs := s.armed[request]
	i := slices.Index(cs, c)
	switch {
	case i < 0:
	case len(cs) == 1:
		delete(s.armed, request)
	default:
		s.armed[request] = slices.Delete(cs, i, i+1)
	}
}

// acquireCall is a Lock call: the command it proposes with its op and,
// for an owner, its holder, and what it hears while it waits — made in
// one allocation (with its channel) rather than six.
type acquireCall struct {
	cmd statepb.Command
	op  statepb.Command_LockAcquire
	acq statepb.LockAcquire
	own statepb.LockHolderState // an owner's holder; a transaction's is the joined one

	// ev is the first event heard, set under Service.mu before ready is
	// signalled: the caller reads it once it has received from ready.
	ev    Event
	heard bool          // guarded by Service.mu
	ready chan struct{} // 1-buffered: ev was set
}

// hear keeps the first event of the call's request and signals it; the
// caller holds Service.mu.
func (c *acquireCall) hear(ev Event) {
	if c.heard {
		return
	}
	c.ev, c.heard = ev, true
	c.ready <- struct{}{}
}

// releaseCall is an Unlock's command with its op and, for an owner, its
// holder, made in one allocation.
type releaseCall struct {
	cmd statepb.Command
	op  statepb.Command_LockRelease
	rel statepb.LockRelease
	own statepb.LockHolderState
}

// Run serves as the leader's lock service until ctx ends: after Grace it
// cancels the requests left waiting by an earlier leader whose callers did
// not come back; every VoteCheck it asks the managers of the ABORTED
// votes kept whether they still may ask for them (checkVotes).
func (s *Service) Run(ctx context.Context) {
	s.mu.Lock()
	term := s.term
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		close(term)
		s.term = make(chan struct{})
		s.joined = map[TxnKey]*statepb.LockHolderState{}
		s.mu.Unlock()
	}()
	t := time.NewTimer(s.cfg.Grace)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	s.mu.Lock()
	orphans := s.orphansLocked()
	s.mu.Unlock()
	if len(orphans) > 0 {
		if _, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LockCancel{LockCancel: &statepb.LockCancel{RequestIds: orphans}}}); err != nil {
			s.cfg.Logger.Warn("lock: cancelling requests nobody waits for failed", "n", len(orphans), "err", err)
		}
	}
	for {
		t.Reset(s.cfg.VoteCheck)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.checkVotes(ctx)
	}
}

// orphansLocked returns, sorted, the waiting requests whose callers did
// not come back by the end of the grace period: no Lock call of the
// request's own holder is under way here under its id. A request, as the
// lock it waits for, is a single client's (spec CC 1.2.3; 1.5, a
// transaction's own), and lock blocks that client until it is granted
// (2.3): another holder's call under the id is no caller of it — it is
// answered NoSuchObject (requests.go) — and the request it kept would
// hold the lock from the others for a caller that is gone. Under rules
// before requestRules ids alone named requests, and a call of any holder
// under the id takes the request's answer: it keeps the request.
func (s *Service) orphansLocked() []uint64 {
	ws, owned := s.state.waitingCalls()
	anyHolder := make(map[uint64]bool)
	if !owned {
		for k := range s.waiting {
			anyHolder[k.request] = true
		}
	}
	var out []uint64
	for _, k := range ws {
		if _, back := s.waiting[k]; !back && !anyHolder[k.request] {
			out = append(out, k.request)
		}
	}
	slices.Sort(out)
	return out
}

// Created is a new lock set or owner: its id (a set's) and lease.
type Created struct {
	ID    djinn.ID
	Lease *djinnpb.Lease
}

func checkDuration(d time.Duration) error {
	if d <= 0 && d != djinn.Any {
		return djinn.Errorf(djinn.InvalidArgument, "lease duration %s: must be positive, Forever or Any", djinn.FormatDuration(d))
	}
	return nil
}

// CreateSet creates a lock set (LockSetFactory.create and its variants),
// related to the set related when that is not empty.
func (s *Service) CreateSet(ctx context.Context, related []byte, transactional bool, d time.Duration) (Created, error) {
	if err := checkDuration(d); err != nil {
		return Created{}, err
	}
	if err := s.leading(); err != nil {
		return Created{}, err
	}
	if n, _ := s.state.Len(); n >= s.cfg.MaxSets {
		return Created{}, djinn.Errorf(djinn.ResourceExhausted, "lock service holds %d lock sets, the most its server allows ([lock] max-sets); try again once some end, or ask the operator to raise it", n)
	}
	granted := s.cfg.Sets.Grant(d)
	now := s.now()
	exp := djinn.AddDuration(now, granted)
	id, cookie := djinn.NewID(), djinn.NewID()
	_, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: now.UnixNano(), Op: &statepb.Command_LockCreateSet{LockCreateSet: &statepb.LockCreateSet{
		SetId: id[:], Cookie: cookie[:], ExpiresUnixNanos: wire.Nanos(exp), HorizonUnixNanos: s.lessor.Horizon(exp),
		Related: related, Transactional: transactional, Principal: principal.From(ctx),
	}}})
	if err != nil {
		return Created{}, err
	}
	return Created{ID: id, Lease: lease.Proto(s.self(), cookie, granted)}, nil
}

// CreateOwner leases a lock owner; its lease's cookie names it.
func (s *Service) CreateOwner(ctx context.Context, d time.Duration) (Created, error) {
	if err := checkDuration(d); err != nil {
		return Created{}, err
	}
	if err := s.leading(); err != nil {
		return Created{}, err
	}
	if _, n := s.state.Len(); n >= s.cfg.MaxOwners {
		return Created{}, djinn.Errorf(djinn.ResourceExhausted, "lock service holds %d lock owners, the most its server allows ([lock] max-owners); try again once some end, or ask the operator to raise it", n)
	}
	granted := s.cfg.Owners.Grant(d)
	now := s.now()
	exp := djinn.AddDuration(now, granted)
	cookie := djinn.NewID()
	_, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: now.UnixNano(), Op: &statepb.Command_LockCreateOwner{LockCreateOwner: &statepb.LockCreateOwner{
		Cookie: cookie[:], ExpiresUnixNanos: wire.Nanos(exp), HorizonUnixNanos: s.lessor.Horizon(exp), Principal: principal.From(ctx),
	}}})
	if err != nil {
		return Created{}, err
	}
	return Created{ID: cookie, Lease: lease.Proto(s.self(), cookie, granted)}, nil
}

// holder resolves who asks: an owner, whose holder it sets in own, or a
// transaction, which the service joins (once per leader) to hear its
// outcome.
func (s *Service) holder(ctx context.Context, set []byte, h *djinnpb.LockHolder, own *statepb.LockHolderState) (*statepb.LockHolderState, error) {
	tx, err := s.state.Transactional(set)
	if err != nil {
		return nil, err
	}
	switch {
	case h == nil || (len(h.GetOwner()) == 0 && h.GetTransaction() == nil):
		return nil, djinn.Errorf(djinn.InvalidArgument, "lock holder: missing: name an owner or a transaction (none in the call's context either)")
	case len(h.GetOwner()) > 0 && h.GetTransaction() != nil:
		return nil, djinn.Errorf(djinn.InvalidArgument, "lock holder: both an owner and a transaction")
	case len(h.GetOwner()) > 0:
		if tx {
			return nil, djinn.Errorf(djinn.InvalidArgument, "lock set %x is transactional: its locks are held by transactions, not owners", set)
		}
		if err := s.CheckHolder(h); err != nil {
			return nil, err
		}
		own.Owner = h.GetOwner()
		return own, nil
	}
	t := h.GetTransaction()
	mgr, secret, err := s.txnArgs(t)
	if err != nil {
		return nil, err
	}
	k := TxnKeyOf(t.GetManager(), t.GetId())
	s.mu.Lock()
	hs, ok := s.joined[k]
	s.mu.Unlock()
	if ok {
		// The transaction's secret is its capability: a request under it
		// without the secret its manager accepted finds no transaction.
		if subtle.ConstantTimeCompare(hs.GetSecret(), wire.TxnSecretBytes(secret)) != 1 {
			return nil, unknownTxn(t.GetId())
		}
		return hs, nil
	}
	if err := s.checkSecret(k, t.GetId(), secret); err != nil {
		return nil, err
	}
	if s.state.VotedAborted(k) {
		return nil, votedAborted(t.GetId())
	}
	resp, err := s.cfg.Joiner.Join(ctx, mgr, t.GetId(), secret, wire.Ref(s.self()), CrashCount)
	if djinn.KindOf(err) == djinn.UnknownTransaction {
		// In the words of a transaction this service holds named without
		// its secret: the manager's own would tell the caller which of
		// the transactions it names hold or wait for locks here.
		return nil, unknownTxn(t.GetId())
	}
	if err != nil {
		return nil, err
	}
	hs = &statepb.LockHolderState{Manager: wire.Ref(mgr), Txn: t.GetId(), AncestorIds: resp.GetAncestors(), AncestorManagers: resp.GetAncestorManagers(),
		Secret: wire.TxnSecretBytes(secret)}
	if len(hs.AncestorManagers) == 0 {
		for range hs.AncestorIds {
			hs.AncestorManagers = append(hs.AncestorManagers, hs.Manager)
		}
	}
	s.mu.Lock()
	s.joined[k] = hs
	s.mu.Unlock()
	return hs, nil
}

// CheckHolder checks a holder a request names, on its own (nil or empty:
// the call's transaction, which the server fills in): not both an owner
// and a transaction, an owner's cookie of 16 bytes, a transaction's id,
// secret and manager reference (txnArgs).
func (s *Service) CheckHolder(h *djinnpb.LockHolder) error {
	switch {
	case h == nil || (len(h.GetOwner()) == 0 && h.GetTransaction() == nil):
		return nil
	case len(h.GetOwner()) > 0 && h.GetTransaction() != nil:
		return djinn.Errorf(djinn.InvalidArgument, "lock holder: both an owner and a transaction")
	case len(h.GetOwner()) > 0:
		_, err := djinn.IDFromBytes("lock owner", h.GetOwner())
		return err
	}
	_, _, err := s.txnArgs(h.GetTransaction())
	return err
}

// txnArgs reads the transaction a holder names: its manager's reference
// (managerRef), its id (not 0) and its secret (16 bytes, or none).
func (s *Service) txnArgs(t *djinnpb.TransactionRef) (djinn.Ref, djinn.ID, error) {
	if _, err := wire.RefFrom("transaction manager", t.GetManager()); err != nil {
		return djinn.Ref{}, djinn.ID{}, err
	}
	if t.GetId() == 0 {
		return djinn.Ref{}, djinn.ID{}, djinn.Errorf(djinn.InvalidArgument, "transaction id 0: want a transaction id")
	}
	secret, err := wire.TxnSecret(t.GetSecret())
	if err != nil {
		return djinn.Ref{}, djinn.ID{}, err
	}
	mgr, err := s.managerRef(t.GetManager(), t.GetId(), secret)
	return mgr, secret, err
}

// managerRef reads the reference to transaction id's manager that a call
// names with the transaction's secret. A transaction the state already
// holds (it holds or waits for a lock here, or is the ancestor of one
// that does, or its ABORTED vote is kept), named with its secret, is no
// new argument: its reference is read as a stored one is
// (wire.RefStored), so that a transaction joined before endpoints were
// checked strictly still locks, unlocks and drops its locks once they
// are. Any other transaction is new here, about to be joined: its
// manager's endpoint must be one a client could dial (wire.RefTo).
func (s *Service) managerRef(mgr *djinnpb.Ref, id uint64, secret djinn.ID) (djinn.Ref, error) {
	ref, err := wire.RefTo("transaction manager", mgr)
	if err == nil {
		return ref, nil
	}
	if k := TxnKeyOf(mgr, id); s.state.Knows(k) && s.checkSecret(k, id, secret) == nil {
		if ref, stored := wire.RefStored("transaction manager", mgr); stored == nil {
			return ref, nil
		}
	}
	return djinn.Ref{}, err
}

// CheckMode refuses a request's mode (what names it) that is no lock
// mode; with zero, 0 (none) is taken.
func CheckMode(what string, m Mode, zero bool) error {
	if (m == 0 && zero) || (m >= IR && m <= W) {
		return nil
	}
	return djinn.Errorf(djinn.InvalidArgument, "%s %d: want a lock mode (ir, r, u, iw or w)", what, m)
}

func drawRequest() uint64 {
	for {
		var b [8]byte
		_, _ = crand.Read(b[:]) // never fails
		if id := binary.BigEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}

// Lock is lock, try_lock (try) and change_mode (from not zero): it returns
// once the lock is granted, with its fencing token; a try that cannot be
// granted at once returns false. A blocking request waits until granted,
// ctx ends (it leaves the queue), its transaction aborts
// (TransactionRolledBack), its owner's lease or its set's ends, or this
// node stops leading (Unavailable: retry with the same request id to find
// the same request). A request left waiting by the last leader that its
// caller comes back for as this one cancels it as orphaned (Run) — or,
// under rules before requestRules, that another call under its id
// cancelled as it gave up — is answered Unavailable too: a retry under
// its id queues it anew.
// request 0 draws an id.
func (s *Service) Lock(ctx context.Context, set []byte, h *djinnpb.LockHolder, mode, from Mode, try bool, request uint64) (bool, uint64, error) {
	if err := CheckMode("mode", mode, false); err != nil {
		return false, 0, err
	}
	if err := CheckMode("held mode", from, true); err != nil {
		return false, 0, err
	}
	if err := s.leading(); err != nil {
		return false, 0, err
	}
	c := &acquireCall{ready: make(chan struct{}, 1)}
	hs, err := s.holder(ctx, set, h, &c.own)
	if err != nil {
		return false, 0, err
	}
	if request == 0 {
		request = drawRequest()
	}
	c.acq = statepb.LockAcquire{Principal: principal.From(ctx), SetId: set, Holder: hs, Mode: int32(mode), From: int32(from), Try: try, RequestId: request}
	c.op.LockAcquire = &c.acq
	c.cmd.Op = &c.op
	key := waitKeyOf(hs, request)
	s.mu.Lock()
	if _, busy := s.waiting[key]; busy {
		s.mu.Unlock()
		// A retry that overtook its lost first call: that one ends soon.
		return false, 0, djinn.Errorf(djinn.Unavailable, "request id %d: another call of this holder with it is still under way; retry", request)
	}
	s.waiting[key] = c
	term := s.term
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.waiting, key)
		s.disarmLocked(request, c)
		s.mu.Unlock()
	}()
	propose := s.log.Propose
	if s.rider != nil && !try && from == 0 && s.state.Waits(set, hs.GetOwner(), mode) {
		// It will wait: only a later command (an unlock, a lease's end)
		// can grant it, so it rides in that one's entry, rather than
		// taking a write of its own ahead of it: a hand-off's unlock
		// does not queue behind the last holder's next request.
		propose = s.rider.ProposeRider
	}
	res, err := propose(ctx, &c.cmd)
	if err != nil {
		return false, 0, err
	}
	r := res.(Result)
	switch r.Outcome {
	case Granted:
		return true, r.Fence, nil
	case Refused:
		return false, 0, nil
	}
	// Queued: the wait lasts as long as the holder holds, bounded by the
	// lock-waiters quota, not by the calls in flight of its principal,
	// whose other calls (the unlock that would grant it among them) must
	// not wait behind it.
	quota.Release(ctx)
	select {
	case <-c.ready:
		return c.ev.Err == nil, c.ev.Fence, c.ev.Err
	case <-term:
		return false, 0, djinn.Errorf(djinn.Unavailable, "lock request %d: this node stopped leading while it waited; retry it with the same request id", request)
	case <-ctx.Done():
	}
	// Gave up: leave the queue. A grant that came first is given back.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := s.log.Propose(cctx, &statepb.Command{Op: &statepb.Command_LockCancel{LockCancel: &statepb.LockCancel{RequestIds: []uint64{request}, Holder: hs}}}); err != nil {
		s.cfg.Logger.Warn("lock: leaving the queue failed", "request", request, "err", err)
	}
	select {
	case <-c.ready:
		if c.ev.Err == nil {
			if _, err := s.log.Propose(cctx, &statepb.Command{Op: &statepb.Command_LockRelease{LockRelease: &statepb.LockRelease{SetId: set, Holder: hs, Mode: int32(mode)}}}); err != nil {
				s.cfg.Logger.Warn("lock: giving back a grant nobody waits for failed", "request", request, "err", err)
			}
		}
	default:
	}
	return false, 0, ctx.Err()
}

// Unlock drops one lock of mode m (LockNotHeld if none is held).
func (s *Service) Unlock(ctx context.Context, set []byte, h *djinnpb.LockHolder, m Mode) error {
	if err := CheckMode("mode", m, false); err != nil {
		return err
	}
	if err := s.leading(); err != nil {
		return err
	}
	c := new(releaseCall)
	hs, err := s.holder(ctx, set, h, &c.own)
	if err != nil {
		return err
	}
	c.rel = statepb.LockRelease{SetId: set, Holder: hs, Mode: int32(m)}
	c.op.LockRelease = &c.rel
	c.cmd.Op = &c.op
	_, err = s.log.Propose(ctx, &c.cmd)
	return err
}

// DropLocks is the lock coordinator's drop_locks for transaction id of mgr
// over set's related sets.
func (s *Service) DropLocks(ctx context.Context, set []byte, mgr *djinnpb.Ref, id uint64, secret []byte) error {
	sec, err := wire.TxnSecret(secret)
	if err != nil {
		return err
	}
	if _, err := s.managerRef(mgr, id, sec); err != nil {
		return err
	}
	if err := s.leading(); err != nil {
		return err
	}
	if _, err := s.state.Transactional(set); err != nil {
		return err
	}
	if err := s.checkSecret(TxnKeyOf(mgr, id), id, sec); err != nil {
		// Named without its secret, a transaction this service holds is
		// one the caller cannot name: it has no locks to drop, as one
		// unknown here has none. Refused, it would tell the caller that
		// the transaction holds or waits for locks in some set here.
		return nil
	}
	_, err = s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_LockDrop{LockDrop: &statepb.LockDrop{SetId: set, Manager: mgr, Txn: id}}})
	return err
}

// Describe returns a lock set, with its lease as it stands — to the set's
// owner only: the set id is a capability to lock and unlock, and its
// lease's cookie one to keep it alive, which its creator hands out if it
// wants to, never Describe. Of the sets related to it, each its
// creator's capability too, it lists those of the caller's principal.
func (s *Service) Describe(ctx context.Context, set []byte) (SetView, *djinnpb.Lease, error) {
	if err := s.leading(); err != nil {
		return SetView{}, nil, err
	}
	v, err := s.state.Describe(set)
	// A deposed leader must not describe holders its successor may have
	// released, nor hide ones it granted, nor deny a set it created.
	if err = s.lessor.ConfirmRead("lock service", err); err != nil {
		return SetView{}, nil, err
	}
	caller := principal.From(ctx)
	var mine []djinn.ID
	for i, id := range v.Related {
		if p, _ := s.lessor.Table().Principal(v.relatedCookies[i]); p == caller {
			mine = append(mine, id)
		}
	}
	v.Related, v.relatedCookies = mine, nil
	var l *djinnpb.Lease
	now := s.now()
	if p, _ := s.lessor.Table().Principal(v.Cookie); p != caller {
		return v, nil, nil
	}
	if li, ok := s.lessor.Table().Lookup(v.Cookie, now); ok {
		l = lease.Proto(s.self(), v.Cookie, djinn.Remaining(li.Expires, now))
	}
	return v, l, nil
}

// Validate reports whether the grant that got fence in set is still held.
func (s *Service) Validate(set []byte, fence uint64) (bool, error) {
	if _, err := djinn.IDFromBytes("lock set id", set); err != nil {
		return false, err
	}
	if err := s.leading(); err != nil {
		return false, err
	}
	ok, err := s.state.Validate(set, fence)
	// A deposed leader must not vouch for a fence its successor ended,
	// nor deny a set or a fence its successor created or granted (the
	// set id is well formed: an InvalidArgument here is a fence this
	// node never granted).
	if err == nil || djinn.KindOf(err) == djinn.InvalidArgument {
		if cerr := s.lessor.Confirm("lock service"); cerr != nil {
			return false, cerr
		}
		return ok, err
	}
	if err = s.lessor.ConfirmRead("lock service", err); err != nil {
		return false, err
	}
	return ok, nil
}
