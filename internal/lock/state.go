package lock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/internal/slab"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// State is the lock service's replicated state: the lock table, with the
// names the world uses for its sets (16-byte ids), owners (lease cookies)
// and transactions (a manager's reference and an id). Every change comes
// from the log, through the Apply methods; they are deterministic.
type State struct {
	mu sync.Mutex
	// Guarded by mu.
	table *Table
	// sets finds a set's table id by its id: the index holds table ids
	// alone, and reads their set ids from setInfo.
	sets *slab.Index[djinn.ID]
	// setInfo holds each set's names by table id (index 0 unused); the
	// ids of removed sets are in freeSets, taken again last-freed first, so
	// the slice stays as long as the most sets ever live at once.
	setInfo  []setInfo
	freeSets []uint64
	nextSet  uint64              // the highest table id given
	owners   map[djinn.ID]uint64 // owner cookie → holder id
	txns     map[TxnKey]uint64   // transaction → holder id
	holders  map[uint64]holderName
	nextID   uint64 // holder ids, shared by owners and transactions
	recent   recentGrants
	// waiting holds the principal of each waiting request, by request
	// id: a waiter counts towards its principal's quota.
	waiting map[uint64]string
	// votes are the transactions voted ABORTED (votes.go).
	votes abortedVotes

	// restoring is the snapshot restore under way, if any.
	restoring *docDecoder
	// views are the open views of the state (view.go); epoch counts the
	// states it was replaced by (Reset, a restore), whose views end.
	views []*stateView
	epoch uint64

	leases *lease.Table
	// rules is the cluster's rules version (internal/state/rules.go).
	rules func() uint32
	// notify, when set, hears what became of waiting requests. It is
	// called outside mu, in log order; the leader's service sets it.
	notify func([]Event)

	// Counts are what this node has applied, for metrics; they are not
	// replicated state (a restart counts again from its snapshot).
	Counts Counts
}

// Counts are lock requests as applied: granted (at once or after
// waiting), queued to wait, refused (a try that could not be granted)
// and refused as a deadlock.
type Counts struct {
	Granted, Queued, Refused, Deadlocks atomic.Uint64
}

type setInfo struct {
	id     djinn.ID
	cookie djinn.ID
}

// holderName is what a table holder id stands for: an owner's cookie, or a
// transaction.
type holderName struct {
	owner djinn.ID
	txn   TxnKey
	isTxn bool
	// secret is a transaction's capability, as a lock request under it
	// presented it; zero when no request did (an ancestor, known from its
	// nested transactions' requests).
	secret djinn.ID
}

// TxnKey names a transaction: its manager's identity (djinn.Ref.Key) and
// id.
type TxnKey struct {
	Manager [32]byte
	ID      uint64
}

// TxnKeyOf returns the key of transaction id of manager mgr.
func TxnKeyOf(mgr *djinnpb.Ref, id uint64) TxnKey {
	var k TxnKey
	copy(k.Manager[:16], mgr.GetServiceId())
	copy(k.Manager[16:], mgr.GetObjectId())
	k.ID = id
	return k
}

// Event is what became of a waiting request: granted with Fence, or
// refused with Err (TransactionRolledBack when its transaction aborted,
// CannotJoin when it committed, UnknownLease when its owner's lease ended, NoSuchObject when its set
// went). An event with Waits set is none of these: it tells that the
// request waits, from then on, for the holder Waits (it was queued, or a
// retry of it found it waiting), so that the next event of the request
// is that holder's to hear.
type Event struct {
	Request uint64
	Fence   uint64
	Err     error
	Waits   *statepb.LockHolderState
}

// maxRecent bounds the grants remembered for retried requests.
const maxRecent = 1 << 16

// recentGrants remembers the last grants by request id, so that a request
// retried after its answer was lost gets the same grant.
type recentGrants struct {
	fence map[uint64]uint64
	order []uint64 // ring of request ids, oldest at head
	head  int
}

func (r *recentGrants) add(req, fence uint64) {
	if r.fence == nil {
		r.fence = map[uint64]uint64{}
	}
	if _, ok := r.fence[req]; ok {
		return
	}
	if len(r.order) < maxRecent {
		r.order = append(r.order, req)
	} else {
		delete(r.fence, r.order[r.head])
		r.order[r.head] = req
		r.head = (r.head + 1) % maxRecent
	}
	r.fence[req] = fence
}

// NewState returns an empty state whose set and owner leases live in t,
// applying entries by the cluster's rules version rules tells
// (state.Machine.Rules; nil: this binary's latest, for a state alone).
func NewState(t *lease.Table, rules func() uint32) *State {
	if rules == nil {
		rules = state.MaxRules
	}
	s := &State{table: New(), setInfo: []setInfo{{}}, rules: rules,
		owners: map[djinn.ID]uint64{}, txns: map[TxnKey]uint64{}, holders: map[uint64]holderName{}, waiting: map[uint64]string{}, leases: t}
	s.sets = s.newSetIndex()
	return s
}

// newSetIndex returns an empty index of the sets by id, over setInfo.
func (s *State) newSetIndex() *slab.Index[djinn.ID] {
	return slab.NewIndex(func(tid uint32) djinn.ID { return s.setInfo[tid].id })
}

// SetNotify sets the function that hears what became of waiting requests.
func (s *State) SetNotify(fn func([]Event)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notify = fn
}

func (s *State) tell(evs []Event) {
	if len(evs) == 0 {
		return
	}
	s.mu.Lock()
	fn := s.notify
	s.mu.Unlock()
	if fn != nil {
		fn(evs)
	}
}

// grantsLocked records grants as recent and returns them as events.
func (s *State) grantsLocked(gs []Grant) []Event {
	evs := make([]Event, 0, len(gs))
	s.Counts.Granted.Add(uint64(len(gs)))
	for _, g := range gs {
		s.unwaitLocked(g.Request)
		s.recent.add(g.Request, g.Fence)
		evs = append(evs, Event{Request: g.Request, Fence: g.Fence})
	}
	return evs
}

// ownerName names an owner in messages by a fingerprint of its cookie, as
// its lease prints it: the cookie is a capability, and messages are
// logged.
func ownerName(cookie djinn.ID) string {
	sum := sha256.Sum256(cookie[:])
	return "owner " + hex.EncodeToString(sum[:4])
}

// describe names holder h of the request in messages.
func describe(h *statepb.LockHolderState) string {
	if len(h.GetOwner()) > 0 {
		var c djinn.ID
		copy(c[:], h.GetOwner())
		return ownerName(c)
	}
	return fmt.Sprintf("transaction %d", h.GetTxn())
}

// rename gives an error of the table, which knows sets and holders by
// numbers of its own, the names the caller knows them by.
func rename(err error, set djinn.ID, h *statepb.LockHolderState, what string) error {
	switch djinn.KindOf(err) {
	case djinn.LockNotHeld:
		return djinn.Errorf(djinn.LockNotHeld, "lock set %s: %s holds no %s lock to give up: nothing released (djinn lock show lists the set's holders)", set, describe(h), what)
	case djinn.Deadlock:
		return djinn.Errorf(djinn.Deadlock, "lock set %s: %s waiting for %s would deadlock (a cycle of waiting requests): refused, nothing changed", set, describe(h), what)
	}
	return err
}

func unknownSet(id djinn.ID) error {
	return djinn.Errorf(djinn.NoSuchObject, "lock set %s: unknown (never created, or its lease ended)", id)
}

func (s *State) setLocked(b []byte) (uint64, djinn.ID, error) {
	id, err := djinn.IDFromBytes("lock set id", b)
	if err != nil {
		return 0, id, err
	}
	tid, ok := s.sets.Find(id)
	if !ok {
		return 0, id, unknownSet(id)
	}
	return uint64(tid), id, nil
}

// ApplyCreateSet creates a lock set, related to another when asked (of
// the same kind), and grants its lease.
func (s *State) ApplyCreateSet(c *statepb.LockCreateSet) error {
	id, err := djinn.IDFromBytes("lock set id", c.GetSetId())
	if err != nil {
		return err
	}
	cookie, err := djinn.IDFromBytes("lease cookie", c.GetCookie())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.sets.Find(id); ok {
		return djinn.Errorf(djinn.InvalidArgument, "lock set %s: exists", id)
	}
	var related uint64
	if len(c.GetRelated()) > 0 {
		var rid djinn.ID
		if related, rid, err = s.setLocked(c.GetRelated()); err != nil {
			return err
		}
		// Told here by the sets' ids: the table knows them by number.
		if r, ok := s.table.sets.get(related); ok && r.txn != c.GetTransactional() {
			return djinn.Errorf(djinn.InvalidArgument, "related lock set %s: %s, and a set related to it must be of its kind", rid, kindName(r.txn))
		}
	}
	tid := s.nextSet + 1
	if n := len(s.freeSets); n > 0 {
		tid = s.freeSets[n-1]
	}
	if tid > math.MaxUint32 {
		return djinn.Errorf(djinn.ResourceExhausted, "lock set %s: the service holds as many sets as it can number: remove some first", id)
	}
	if err := s.table.CreateSet(tid, related, c.GetTransactional()); err != nil {
		return err
	}
	if err := s.leases.ApplyGrant(cookie, lease.Owner{Kind: SetLeaseKind, ID: id}, c.GetPrincipal(), c.GetExpiresUnixNanos(), c.GetHorizonUnixNanos()); err != nil {
		_, _ = s.table.RemoveSet(tid)
		return err
	}
	if n := len(s.freeSets); n > 0 && s.freeSets[n-1] == tid {
		s.freeSets = s.freeSets[:n-1]
	} else {
		s.nextSet = tid
		s.setInfo = append(s.setInfo, setInfo{})
	}
	s.nameChanging(tid)
	s.setInfo[tid] = setInfo{id: id, cookie: cookie}
	s.sets.Insert(uint32(tid))
	return nil
}

// ApplyCreateOwner grants a lock owner's lease; the cookie names the owner.
func (s *State) ApplyCreateOwner(c *statepb.LockCreateOwner) error {
	cookie, err := djinn.IDFromBytes("lease cookie", c.GetCookie())
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.owners[cookie]; ok {
		return djinn.Errorf(djinn.InvalidArgument, "%s: exists", ownerName(cookie))
	}
	if err := s.leases.ApplyGrant(cookie, lease.Owner{Kind: OwnerLeaseKind, ID: cookie}, c.GetPrincipal(), c.GetExpiresUnixNanos(), c.GetHorizonUnixNanos()); err != nil {
		return err
	}
	s.nextID++
	s.owners[cookie] = s.nextID
	s.holders[s.nextID] = holderName{owner: cookie}
	return nil
}

// holderLocked resolves a holder, making table ids for a transaction and
// its ancestors the first time they are seen.
func (s *State) holderLocked(h *statepb.LockHolderState) (Holder, error) {
	switch {
	case len(h.GetOwner()) > 0 && h.GetManager() != nil:
		return Holder{}, djinn.Errorf(djinn.InvalidArgument, "lock holder: both an owner and a transaction")
	case len(h.GetOwner()) > 0:
		cookie, err := djinn.IDFromBytes("lock owner", h.GetOwner())
		if err != nil {
			return Holder{}, err
		}
		id, ok := s.owners[cookie]
		if !ok {
			return Holder{}, djinn.Errorf(djinn.UnknownLease, "lock %s: unknown (its lease ended, or it never existed)", ownerName(cookie))
		}
		return Holder{ID: id}, nil
	case h.GetManager() != nil:
		if h.GetTxn() == 0 {
			return Holder{}, djinn.Errorf(djinn.InvalidArgument, "lock holder: transaction id 0")
		}
		if len(h.GetAncestorIds()) != len(h.GetAncestorManagers()) {
			return Holder{}, djinn.Errorf(djinn.InvalidArgument, "lock holder: %d ancestors, %d ancestor managers", len(h.GetAncestorIds()), len(h.GetAncestorManagers()))
		}
		out := Holder{Txn: true, ID: s.txnIDLocked(TxnKeyOf(h.GetManager(), h.GetTxn()))}
		if n := s.holders[out.ID]; n.secret.IsZero() && len(h.GetSecret()) == len(n.secret) {
			copy(n.secret[:], h.GetSecret())
			s.holderChanging(out.ID)
			s.holders[out.ID] = n
		}
		for i, a := range h.GetAncestorIds() {
			out.Lineage = append(out.Lineage, s.txnIDLocked(TxnKeyOf(h.GetAncestorManagers()[i], a)))
		}
		return out, nil
	}
	return Holder{}, djinn.Errorf(djinn.InvalidArgument, "lock holder: neither an owner nor a transaction")
}

func (s *State) txnIDLocked(k TxnKey) uint64 {
	if id, ok := s.txns[k]; ok {
		return id
	}
	s.nextID++
	s.txns[k] = s.nextID
	s.holders[s.nextID] = holderName{txn: k, isTxn: true}
	return s.nextID
}

// ApplyAcquire is lock, try_lock and change_mode. A request id granted
// lately gets the same grant again (a retry after a lost answer); one
// still waiting is left waiting — from requestRules on, for the request's
// own holder only (requests.go).
func (s *State) ApplyAcquire(c *statepb.LockAcquire) (Result, error) {
	var evs []Event
	defer func() { s.tell(evs) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	owned := s.rules() >= requestRules
	if f, ok := s.recent.fence[c.GetRequestId()]; ok {
		if owned && !s.grantedToLocked(c.GetSetId(), c.GetHolder(), f) {
			return Result{}, notHolders(c.GetRequestId())
		}
		return Result{Outcome: Granted, Fence: f}, nil
	}
	if h := c.GetHolder(); h.GetManager() != nil && s.rules() >= votesRules {
		if _, ok := s.votes.by[TxnKeyOf(h.GetManager(), h.GetTxn())]; ok {
			return Result{}, votedAborted(h.GetTxn())
		}
	}
	tid, ext, err := s.setLocked(c.GetSetId())
	if err != nil {
		return Result{}, err
	}
	h, err := s.holderLocked(c.GetHolder())
	if err != nil {
		return Result{}, err
	}
	if k, ok := s.table.waiterOf(c.GetRequestId()); ok && owned && k != key(h) {
		return Result{}, notHolders(c.GetRequestId())
	}
	if s.table.waitingIn(c.GetRequestId(), tid) {
		evs = []Event{{Request: c.GetRequestId(), Waits: c.GetHolder()}}
		return Result{Outcome: Queued}, nil
	}
	res, err := s.table.Acquire(Request{ID: c.GetRequestId(), Set: tid, Holder: h, Mode: Mode(c.GetMode()), From: Mode(c.GetFrom()), Try: c.GetTry()})
	if err != nil {
		if djinn.KindOf(err) == djinn.Deadlock {
			s.Counts.Deadlocks.Add(1)
		}
		what := Mode(c.GetMode()).String()
		if djinn.KindOf(err) == djinn.LockNotHeld {
			what = Mode(c.GetFrom()).String()
		}
		return Result{}, rename(err, ext, c.GetHolder(), what)
	}
	if res.Outcome == Queued {
		// A waiter past its principal's quota is taken back out and
		// refused; nothing else changed when it queued.
		if err := s.leases.Quotas().Take(c.GetPrincipal(), quota.LockWaiters, 1); err != nil {
			gs, _ := s.table.Cancel(c.GetRequestId())
			evs = s.grantsLocked(gs)
			return Result{}, err
		}
		s.waiting[c.GetRequestId()] = c.GetPrincipal()
	}
	switch res.Outcome {
	case Granted:
		s.Counts.Granted.Add(1)
		s.recent.add(c.GetRequestId(), res.Fence)
	case Queued:
		s.Counts.Queued.Add(1)
	case Refused:
		s.Counts.Refused.Add(1)
	}
	evs = s.grantsLocked(res.Grants)
	if res.Outcome == Queued {
		evs = append(evs, Event{Request: c.GetRequestId(), Waits: c.GetHolder()})
	}
	return res, nil
}

// Waits reports whether a blocking lock request of the owner whose lease
// cookie is owner, in mode m (no change of mode), would wait in set as the
// state stands: the set has waiting requests, or another holder holds a
// lock in a conflicting mode (Table.Acquire's test, for an owner). It is a
// guess about a request still to be applied (false when the set or the
// owner is unknown, or the holder is a transaction): what the log applies
// meanwhile may change the answer.
func (s *State) Waits(set, owner []byte, m Mode) bool {
	if len(set) != len(djinn.ID{}) || len(owner) != len(djinn.ID{}) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tid, ok := s.sets.Find(djinn.ID(set))
	if !ok {
		return false
	}
	id, ok := s.owners[djinn.ID(owner)]
	if !ok {
		return false
	}
	return s.table.waits(uint64(tid), partyKey(id), m)
}

// unwaitLocked forgets a request that no longer waits, giving back its
// place in its principal's quota.
func (s *State) unwaitLocked(id uint64) {
	if p, ok := s.waiting[id]; ok {
		delete(s.waiting, id)
		s.leases.Quotas().Release(p, quota.LockWaiters, 1)
	}
}

// ApplyRelease is unlock.
func (s *State) ApplyRelease(c *statepb.LockRelease) error {
	var evs []Event
	defer func() { s.tell(evs) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	tid, ext, err := s.setLocked(c.GetSetId())
	if err != nil {
		return err
	}
	h, err := s.holderLocked(c.GetHolder())
	if err != nil {
		return err
	}
	gs, err := s.table.Release(tid, h, Mode(c.GetMode()))
	if err != nil {
		return rename(err, ext, c.GetHolder(), Mode(c.GetMode()).String())
	}
	evs = s.grantsLocked(gs)
	return nil
}

// ApplyCancel takes waiting requests out of their queues; ids not waiting
// are skipped. From requestRules on, a cancel that names a holder skips
// the requests of other holders too (requests.go); one that names none
// is the service's own, of requests nobody came back for. The calls that
// wait for a request cancelled hear so (an event: a word to the calls
// under way, no change of the state): a call that came back for a
// request as the service's cancel was under way (orphaned), and, before
// requestRules, a call of any holder under the id when another call
// under it gave up (leftBy; the leaving call pays it no heed). From
// requestRules on, a cancel that names a holder is its own call's, which
// gave up: no other call waits for the request, and none hears.
func (s *State) ApplyCancel(c *statepb.LockCancel) {
	var evs []Event
	defer func() { s.tell(evs) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	var want partyKey
	owned := s.rules() >= requestRules && c.GetHolder() != nil
	if owned {
		k, ok := s.holderKeyLocked(c.GetHolder())
		if !ok {
			return // a holder unknown here waits for nothing
		}
		want = k
	}
	for _, id := range c.GetRequestIds() {
		if k, ok := s.table.waiterOf(id); owned && (!ok || k != want) {
			continue
		}
		gs, err := s.table.Cancel(id)
		if err != nil {
			continue
		}
		s.unwaitLocked(id)
		switch {
		case c.GetHolder() == nil:
			evs = append(evs, Event{Request: id, Err: orphaned(id)})
		case !owned:
			evs = append(evs, Event{Request: id, Err: leftBy(id)})
		}
		evs = append(evs, s.grantsLocked(gs)...)
	}
}

// orphaned is the answer of a call that waits for a request the service
// cancelled as nobody had come back for it by the end of a new leader's
// grace period (Service.Run): the call came back as the cancel was on
// its way. Its retry under the id queues a new request.
func orphaned(id uint64) error {
	return djinn.Errorf(djinn.Unavailable, "lock request %d: cancelled as it waited: its caller was not back by the end of the new leader's grace period, and this call came as the cancel was under way; retry it with the same request id to queue it anew, behind the requests queued since", id)
}

// leftBy is the answer of a call that waits for a request another call
// under its id cancelled as it gave up: before requestRules, a call of
// any holder under an id was the request's. Its retry under the id
// queues a new request.
func leftBy(id uint64) error {
	return djinn.Errorf(djinn.Unavailable, "lock request %d: cancelled as it waited, by another call under its id that gave up (under this cluster's rules version, before 3, an id alone named a request, whichever holder called under it); retry it with the same request id to queue it anew, behind the requests queued since", id)
}

// effectsLocked turns a table change's effects into events: grants, and
// the cancelled waiters refused with err.
func (s *State) effectsLocked(e Effects, err error) []Event {
	evs := s.grantsLocked(e.Grants)
	for _, id := range e.Cancelled {
		s.unwaitLocked(id)
		evs = append(evs, Event{Request: id, Err: err})
	}
	return evs
}

// ApplyTxnEnd applies a transaction's outcome. Unknown transactions (that
// never locked here) change nothing. The service's own rollback as it
// votes ABORTED keeps the vote, at now; the manager's outcome forgets it
// (votes.go).
func (s *State) ApplyTxnEnd(now int64, c *statepb.LockTxnEnd) {
	var evs []Event
	defer func() { s.tell(evs) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	k := TxnKeyOf(c.GetManager(), c.GetTxn())
	switch {
	case s.rules() < votesRules:
	case c.GetVotedAborted():
		var sec djinn.ID
		copy(sec[:], c.GetSecret())
		s.votes.keep(k, c.GetManager().GetEndpoint(), sec, now)
	default:
		s.votes.forget(k)
	}
	id, ok := s.txns[k]
	if !ok {
		return
	}
	var e Effects
	var err error
	if c.GetCommit() {
		own := s.table.waitIDs(id)
		if e, err = s.table.CommitTxn(id); err == nil {
			evs = s.effectsLocked(e, djinn.Errorf(djinn.TransactionRolledBack, "transaction %d committed while a transaction nested in it still waited for a lock: the nested one aborted", c.GetTxn()))
			committedWhileWaiting(evs, own, c.GetTxn())
		}
	} else if e, err = s.table.AbortTxn(id); err == nil {
		evs = s.effectsLocked(e, djinn.Errorf(djinn.TransactionRolledBack, "transaction %d: aborted while its lock request waited", c.GetTxn()))
	}
	delete(s.txns, k)
	s.holderChanging(id)
	delete(s.holders, id)
}

// committedWhileWaiting answers the requests in own, of a transaction
// that committed while they waited, with CannotJoin: the transaction is no
// longer ACTIVE, so it takes no new lock (TX.2.6), and it did not roll
// back, which TransactionRolledBack would tell its caller.
func committedWhileWaiting(evs []Event, own []uint64, txn uint64) {
	for i := range evs {
		if evs[i].Err != nil && slices.Contains(own, evs[i].Request) {
			evs[i].Err = djinn.Errorf(djinn.CannotJoin, "transaction %d: committed while its lock request waited, so the request is refused: a transaction takes no lock once its commit has begun; lock under an ACTIVE transaction", txn)
		}
	}
}

// ApplyDrop is a lock coordinator's drop_locks.
func (s *State) ApplyDrop(c *statepb.LockDrop) error {
	var evs []Event
	defer func() { s.tell(evs) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	tid, _, err := s.setLocked(c.GetSetId())
	if err != nil {
		return err
	}
	id, ok := s.txns[TxnKeyOf(c.GetManager(), c.GetTxn())]
	if !ok {
		return nil // holds nothing here
	}
	e, err := s.table.DropGroup(tid, Holder{Txn: true, ID: id})
	if err != nil {
		return err
	}
	evs = s.effectsLocked(e, djinn.Errorf(djinn.TransactionRolledBack, "transaction %d: its locks were dropped while its request waited", c.GetTxn()))
	return nil
}

// LeaseEnded removes the set or owner whose lease ended: a set's waiters
// are refused, an owner's locks released and its waiters refused.
func (s *State) LeaseEnded(o lease.Owner) {
	var evs []Event
	defer func() { s.tell(evs) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch o.Kind {
	case SetLeaseKind:
		slot, ok := s.sets.Find(o.ID)
		if !ok {
			return
		}
		tid := uint64(slot)
		cancelled, err := s.table.RemoveSet(tid)
		if err != nil {
			return
		}
		s.sets.Delete(o.ID)
		s.nameChanging(tid)
		s.setInfo[tid] = setInfo{}
		s.freeSets = append(s.freeSets, tid)
		evs = s.effectsLocked(Effects{Cancelled: cancelled}, unknownSet(o.ID))
	case OwnerLeaseKind:
		id, ok := s.owners[o.ID]
		if !ok {
			return
		}
		e, err := s.table.DropHolder(Holder{ID: id})
		if err == nil {
			evs = s.effectsLocked(e, djinn.Errorf(djinn.UnknownLease, "lock %s: its lease ended while its request waited", ownerName(o.ID)))
		}
		delete(s.owners, o.ID)
		s.holderChanging(id)
		delete(s.holders, id)
	}
}

// waitingIn reports whether request id waits in set id: a retried
// request found where it queued. A lookup by id, not a walk of the queue:
// every request applied asks it, and a contended set's queue is long.
func (t *Table) waitingIn(id, set uint64) bool {
	w, ok := t.waiting[id]
	return ok && w.set == set
}

// transactional reports whether set id takes requests from transactions
// only.
func (t *Table) transactional(id uint64) (bool, error) {
	s, err := t.set(id)
	if err != nil {
		return false, err
	}
	return s.txn, nil
}

// waitersOf returns set id's waiting requests (none for an unknown set).
func (t *Table) waitersOf(id uint64) []Request {
	w, _ := t.Waiters(id)
	return w
}

// groupOf returns the sets related to set id, itself included, by id.
func (t *Table) groupOf(id uint64) []uint64 {
	if s, ok := t.sets.get(id); ok {
		return s.members(id)
	}
	return nil
}
