package txn

import (
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"unique"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// States and votes (TX.2.4).
const (
	Active     = djinnpb.TransactionState_TRANSACTION_STATE_ACTIVE
	Voting     = djinnpb.TransactionState_TRANSACTION_STATE_VOTING
	Prepared   = djinnpb.TransactionState_TRANSACTION_STATE_PREPARED
	NotChanged = djinnpb.TransactionState_TRANSACTION_STATE_NOTCHANGED
	Committed  = djinnpb.TransactionState_TRANSACTION_STATE_COMMITTED
	Aborted    = djinnpb.TransactionState_TRANSACTION_STATE_ABORTED
)

// participant is a joined participant, as the log has it. Its ref is
// shared with every other participant of the same reference (see refs).
type participant struct {
	ref      *djinnpb.Ref
	crash    int64
	vote     djinnpb.TransactionState // unspecified until it voted
	notified bool                     // told the outcome, or needs no telling
}

func partKey(r *djinnpb.Ref) [32]byte {
	var k [32]byte
	copy(k[:16], r.GetServiceId())
	copy(k[16:], r.GetObjectId())
	return k
}

// transaction is one transaction of the state. A settled one is kept
// compact (settleLocked): its participants' references are shared ones,
// its channels the one closed channel, its principal an interned handle,
// so that remembering it for the retention time costs a few hundred bytes
// (BENCHMARKS.md, "Memory of a remembered transaction").
type transaction struct {
	id        uint64
	cookie    djinn.ID
	principal unique.Handle[string]
	// secret is the capability to work under the transaction (zero for
	// one logged before transactions had secrets).
	secret djinn.ID
	state  djinnpb.TransactionState
	// version counts the changes to parts (joins, promotions): a vote
	// commits only the list it asked.
	version uint32
	parts   []participant
	parent  uint64 // 0: top-level, or nested in another manager's
	ended   int64  // when it was decided (unix nanos; 0 for a lease end)
	// prepareOnly: VOTING from a vote that asks prepare only, never
	// prepareAndCommit.
	prepareOnly bool
	// nest, for the few transactions that have either, holds the
	// transactions nested in this one and its parent at another manager.
	nest *nesting
	// decided is closed when the transaction is COMMITTED or ABORTED;
	// settled when, besides, every participant has been told.
	decided, settled chan struct{}
}

// nesting is what only some transactions have, kept out of transaction
// so that the others, remembered by the million, are smaller.
type nesting struct {
	children []uint64 // nested transactions, by id
	// remote, when set, is the parent at another manager: transaction
	// remoteID there (TX.2.2).
	remote   *statepb.TxnRemoteParent
	remoteID uint64
}

// kids returns the transactions nested in t, by id.
func (t *transaction) kids() []uint64 {
	if t.nest == nil {
		return nil
	}
	return t.nest.children
}

// remote returns t's parent at another manager and its id there; nil for
// a transaction that is top-level or nested at this manager.
func (t *transaction) remote() (*statepb.TxnRemoteParent, uint64) {
	if t.nest == nil {
		return nil, 0
	}
	return t.nest.remote, t.nest.remoteID
}

// hasRemote reports whether t's parent is at another manager.
func (t *transaction) hasRemote() bool {
	remote, _ := t.remote()
	return remote != nil
}

// nested returns t's nesting, made if need be.
func (t *transaction) nested() *nesting {
	if t.nest == nil {
		t.nest = &nesting{}
	}
	return t.nest
}

// State is the replicated state of the transaction manager.
type State struct {
	mu sync.Mutex
	// Guarded by mu.
	txns map[uint64]*transaction
	// owned indexes txns by principal (see list.go): kept by addLocked
	// and removeLocked, which every change to txns goes through.
	owned ownedIDs
	next  uint64 // the last id given
	// undecided counts the ACTIVE and VOTING transactions.
	undecided int
	// unsettled holds decided transactions with participants still to
	// tell; wake is signalled when it grows.
	unsettled map[uint64]*transaction
	// settled holds the settled top-level transactions, oldest first: the
	// next to forget. forgotten ones leave it from its head. remembered
	// counts those of them not forgotten.
	settled    []*transaction
	remembered int
	// refs holds the participants' references, one of each, with the
	// number of participants that hold it: most transactions are joined
	// by the same few participants, and a settled one is remembered for
	// the retention time. Sharing changes nothing Apply decides: a
	// shared reference is equal to the one it stands for.
	refs map[refKey]*sharedRef

	// orphans holds, while a snapshot is restored, the children restored
	// before their parent, by parent.
	orphans map[uint64][]uint64
	// remoteKids indexes the transactions nested in other managers'
	// transactions, by parent.
	remoteKids map[remoteKey]map[uint64]struct{}

	table *lease.Table
	wake  chan struct{}

	// Outcomes count the transactions this node saw decided, for metrics;
	// they are not replicated state.
	Outcomes Outcomes
}

// Outcomes count decided transactions by their outcome.
type Outcomes struct {
	Committed, Aborted atomic.Uint64
}

// NewState returns an empty state whose transaction leases live in t.
func NewState(t *lease.Table) *State {
	return &State{txns: map[uint64]*transaction{}, owned: newOwnedIDs(), unsettled: map[uint64]*transaction{}, refs: map[refKey]*sharedRef{}, table: t, wake: make(chan struct{}, 1)}
}

// OwnerID is the lease owner id of transaction id.
func OwnerID(id uint64) djinn.ID {
	var o djinn.ID
	binary.BigEndian.PutUint64(o[8:], id)
	return o
}

func unknown(id uint64) error {
	return djinn.Errorf(djinn.UnknownTransaction, "transaction %d: unknown (never created, or completed and forgotten)", id)
}

// Info is a transaction as callers see it.
type Info struct {
	ID        uint64
	Cookie    djinn.ID
	Principal string
	Secret    djinn.ID
	State     djinnpb.TransactionState
	Parts     []PartInfo
	Parent    uint64
	Children  []uint64
	Depth     int // 0 for a top-level transaction
	// Remote is the parent at another manager, transaction RemoteID there;
	// nil for a transaction that is top-level or nested at this manager.
	Remote   *statepb.TxnRemoteParent
	RemoteID uint64
	// Version is the participant list's: it changes with every join and
	// promotion.
	Version uint32
	// PrepareOnly marks a VOTING transaction whose vote asks prepare only.
	PrepareOnly bool
	Decided     <-chan struct{}
	Settled     <-chan struct{}
}

// PartInfo is a participant as callers see it.
type PartInfo struct {
	Ref      *djinnpb.Ref
	Crash    int64
	Vote     djinnpb.TransactionState
	Notified bool
}

func (t *transaction) info() Info {
	remote, remoteID := t.remote()
	in := Info{ID: t.id, Cookie: t.cookie, Principal: t.principal.Value(), Secret: t.secret, State: t.state, Decided: t.decided, Settled: t.settled,
		Parent: t.parent, Children: append([]uint64(nil), t.kids()...), Remote: remote, RemoteID: remoteID,
		Version: t.version, PrepareOnly: t.prepareOnly}
	in.Parts = make([]PartInfo, len(t.parts))
	for i, p := range t.parts {
		in.Parts[i] = PartInfo{Ref: p.ref, Crash: p.crash, Vote: p.vote, Notified: p.notified}
	}
	return in
}

// Has reports whether transaction id is known.
func (s *State) Has(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.txns[id]
	return ok
}

// StateOf returns a transaction's state: Get without the copy of the rest.
func (s *State) StateOf(id uint64) (djinnpb.TransactionState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.txns[id]
	if !ok {
		return 0, unknown(id)
	}
	return t.state, nil
}

// Get returns a transaction.
func (s *State) Get(id uint64) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.txns[id]
	if !ok {
		return Info{}, unknown(id)
	}
	in := t.info()
	for p := t.parent; p != 0; in.Depth++ {
		pt, ok := s.txns[p]
		if !ok {
			break
		}
		p = pt.parent
	}
	return in, nil
}

// remoteKey names a transaction of another manager.
type remoteKey struct {
	mgr [32]byte // partKey of the manager's reference
	id  uint64
}

func remoteKeyOf(mgr *djinnpb.Ref, id uint64) remoteKey { return remoteKey{partKey(mgr), id} }

func (s *State) indexRemoteLocked(t *transaction) {
	if s.remoteKids == nil {
		s.remoteKids = map[remoteKey]map[uint64]struct{}{}
	}
	remote, remoteID := t.remote()
	k := remoteKeyOf(remote.GetManager(), remoteID)
	if s.remoteKids[k] == nil {
		s.remoteKids[k] = map[uint64]struct{}{}
	}
	s.remoteKids[k][t.id] = struct{}{}
}

// NestedIn returns, by id, the transactions nested in transaction id of
// the manager mgr (another manager).
func (s *State) NestedIn(mgr *djinnpb.Ref, id uint64) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	kids := s.remoteKids[remoteKeyOf(mgr, id)]
	out := make([]uint64, 0, len(kids))
	for k := range kids {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Len returns the number of transactions known, and of those not decided.
func (s *State) Len() (all, active int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.txns), s.undecided
}

func newTransaction(id uint64, cookie djinn.ID, principal string) *transaction {
	return &transaction{id: id, cookie: cookie, principal: unique.Make(principal), state: Active, decided: make(chan struct{}), settled: make(chan struct{})}
}

// ApplyCreate creates a transaction, ACTIVE, with the id the leader drew
// (an id in use is refused), and grants its lease.
func (s *State) ApplyCreate(c *statepb.TxnCreate) (Info, error) {
	cookie, err := djinn.IDFromBytes("lease cookie", c.GetCookie())
	if err != nil {
		return Info{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var parent *transaction
	if c.GetRemote() != nil {
		if c.GetParentId() == 0 {
			return Info{}, djinn.Errorf(djinn.InvalidArgument, "remote parent: no parent id")
		}
	} else if pid := c.GetParentId(); pid != 0 {
		p, ok := s.txns[pid]
		if !ok {
			return Info{}, unknown(pid)
		}
		if p.state != Active {
			return Info{}, djinn.Errorf(djinn.CannotJoin, "parent transaction %d: %s, no longer active: nest under an ACTIVE transaction", pid, stateName(p.state))
		}
		parent = p
	}
	id := c.GetId()
	if id == 0 {
		id = s.next + 1
	}
	if _, used := s.txns[id]; used {
		return Info{}, djinn.Errorf(djinn.Unavailable, "transaction id %d: in use; draw another", id)
	}
	if err := s.table.ApplyGrant(cookie, lease.Owner{Kind: LeaseKind, ID: OwnerID(id)}, c.GetPrincipal(), c.GetExpiresUnixNanos(), c.GetHorizonUnixNanos()); err != nil {
		return Info{}, err
	}
	if c.GetId() == 0 {
		s.next = id
	}
	t := newTransaction(id, cookie, c.GetPrincipal())
	copy(t.secret[:], c.GetSecret())
	if parent != nil {
		t.parent = parent.id
		parent.nested().children = insertSorted(parent.kids(), id)
	}
	if c.GetRemote() != nil {
		n := t.nested()
		n.remote, n.remoteID = c.GetRemote(), c.GetParentId()
		s.indexRemoteLocked(t)
	}
	s.addLocked(t)
	s.undecided++
	return t.info(), nil
}

// ApplyJoin adds a participant (TX.2.3): only while ACTIVE (CannotJoin);
// a second join with the same crash count is accepted and ignored, with
// another one CrashCount, and the transaction aborts.
func (s *State) ApplyJoin(now int64, c *statepb.TxnJoin) error {
	p := c.GetParticipant()
	if p == nil {
		return djinn.Errorf(djinn.InvalidArgument, "participant: missing")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.txns[c.GetId()]
	if !ok {
		return unknown(c.GetId())
	}
	k := partKey(p)
	for _, q := range t.parts {
		if partKey(q.ref) != k {
			continue
		}
		if q.crash == c.GetCrashCount() && t.state == Active {
			return nil
		}
		if q.crash != c.GetCrashCount() {
			if t.state == Active || t.state == Voting {
				s.decideLocked(now, t, Aborted)
			}
			return djinn.Errorf(djinn.CrashCount, "transaction %d: participant joined with crash count %d, now %d: it lost its state; the transaction aborts", t.id, q.crash, c.GetCrashCount())
		}
	}
	if t.state != Active {
		return djinn.Errorf(djinn.CannotJoin, "transaction %d: %s, no longer active: join an ACTIVE transaction", t.id, stateName(t.state))
	}
	if m := int(c.GetMaxParticipants()); m > 0 && len(t.parts) >= m {
		return djinn.Errorf(djinn.ResourceExhausted, "transaction %d has %d participants, the most allowed", t.id, len(t.parts))
	}
	// A transaction's participants are its owner's to hold, whoever
	// joined them with its capability.
	if err := s.table.Quotas().Take(t.principal.Value(), quota.Participants, 1); err != nil {
		return err
	}
	t.parts = append(t.parts, participant{ref: s.shareRefLocked(p), crash: c.GetCrashCount()})
	t.version++
	return nil
}

func stateName(s djinnpb.TransactionState) string {
	switch s {
	case Active:
		return "ACTIVE"
	case Voting:
		return "VOTING"
	case Prepared:
		return "PREPARED"
	case NotChanged:
		return "NOTCHANGED"
	case Committed:
		return "COMMITTED"
	case Aborted:
		return "ABORTED"
	}
	return "UNKNOWN"
}

// ApplyVoting moves an ACTIVE transaction to VOTING and returns its state
// after the command.
func (s *State) ApplyVoting(c *statepb.TxnVoting) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.txns[c.GetId()]
	if !ok {
		return Info{}, unknown(c.GetId())
	}
	if t.state == Active {
		s.setStateLocked(t, Voting)
		t.prepareOnly = c.GetPrepareOnly()
		// A parent's vote settles its nested transactions: those not yet
		// decided abort (their participants would have to vote ABORTED in
		// the parent anyway, TX.2.7).
		s.abortChildrenLocked(0, t)
	}
	return t.info(), nil
}

// abortChildrenLocked aborts t's undecided nested transactions, and
// theirs (TX.2.7: aborting a transaction aborts its nested ones).
func (s *State) abortChildrenLocked(now int64, t *transaction) {
	for _, cid := range t.kids() {
		if c, ok := s.txns[cid]; ok && (c.state == Active || c.state == Voting) {
			s.decideLocked(now, c, Aborted)
		}
	}
}

// ApplyDecide records an outcome. A commit applies only to a VOTING
// transaction (an ABORTED one gives CannotCommit); an abort to an ACTIVE
// or VOTING one (a COMMITTED one gives CannotAbort). Deciding what is
// already decided that way is accepted.
func (s *State) ApplyDecide(now int64, c *statepb.TxnDecide) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.txns[c.GetId()]
	if !ok {
		return Info{}, unknown(c.GetId())
	}
	if v := c.GetVersion(); c.GetCommit() && v != 0 && v-1 != t.version && (t.state == Active || t.state == Voting) {
		// The list the vote asked is no longer the transaction's: whoever
		// joined meanwhile was not asked, so it cannot commit.
		s.decideLocked(now, t, Aborted)
		return t.info(), djinn.Errorf(djinn.CannotCommit, "transaction %d: a participant joined while the vote was taken, unasked, so it aborted; run the transaction again", t.id)
	}
	if votes := c.GetVotes(); len(votes) == len(t.parts) && (t.state == Active || t.state == Voting) {
		for i, v := range votes {
			t.parts[i].vote = djinnpb.TransactionState(v)
		}
	}
	if c.GetCommit() && c.GetVersion() != 0 && t.state == Active && t.parent == 0 && !t.hasRemote() {
		// A vote taken without a VOTING record: the decision is the first
		// the log hears of it, and a parent's vote settles its nested
		// transactions (as ApplyVoting does).
		s.setStateLocked(t, Voting)
		s.abortChildrenLocked(now, t)
	}
	switch {
	case c.GetCommit() && t.state == Voting && t.parent != 0:
		// A nested transaction commits into its parent: its PREPARED
		// participants become the parent's, atomically (TX.2.7).
		p, ok := s.txns[t.parent]
		if !ok || p.state != Active {
			s.decideLocked(now, t, Aborted)
			return t.info(), djinn.Errorf(djinn.CannotCommit, "transaction %d: its parent %d is no longer active, so it aborted", t.id, t.parent)
		}
		var refs []*djinnpb.Ref
		var crashes []int64
		for _, i := range c.GetPrepared() {
			if int(i) < len(t.parts) {
				refs, crashes = append(refs, t.parts[i].ref), append(crashes, t.parts[i].crash)
			}
		}
		if err := s.promoteLocked(now, p, refs, crashes, nil); err != nil {
			return t.info(), djinn.Errorf(djinn.CannotCommit, "transaction %d: promoting into parent %d: %v", t.id, p.id, err)
		}
		s.commitLocked(now, t, c.GetPrepared())
	case c.GetCommit() && t.state == Voting:
		s.commitLocked(now, t, c.GetPrepared())
	case c.GetCommit() && t.state == Aborted:
		return t.info(), djinn.Errorf(djinn.CannotCommit, "transaction %d: aborted", t.id)
	case c.GetCommit() && t.state == Active:
		return t.info(), djinn.Errorf(djinn.Internal, "transaction %d: commit decided while ACTIVE", t.id)
	case !c.GetCommit() && t.state == Committed:
		return t.info(), djinn.Errorf(djinn.CannotAbort, "transaction %d: committed", t.id)
	case !c.GetCommit() && (t.state == Active || t.state == Voting):
		s.decideLocked(now, t, Aborted)
	}
	return t.info(), nil
}

// commitLocked moves a VOTING transaction to COMMITTED: the participants
// that voted PREPARED are to be told to roll forward; the others need no
// telling (NOTCHANGED: dropped, TX.2.7; COMMITTED by prepareAndCommit:
// done).
func (s *State) commitLocked(now int64, t *transaction, prepared []uint32) {
	keep := map[uint32]bool{}
	for _, i := range prepared {
		keep[i] = true
	}
	for i := range t.parts {
		if !keep[uint32(i)] {
			t.parts[i].notified = true
		}
	}
	s.decideLocked(now, t, Committed)
}

// promoteLocked adds participants to the ACTIVE transaction t (TX.2.7
// promote): one already joined with the same crash count is kept, with
// another the transaction aborts (CrashCount). drop, if set, leaves.
func (s *State) promoteLocked(now int64, t *transaction, refs []*djinnpb.Ref, crashes []int64, drop *djinnpb.Ref) error {
	if t.state != Active {
		return djinn.Errorf(djinn.CannotJoin, "transaction %d: %s, no longer active: nothing can be promoted into it", t.id, stateName(t.state))
	}
	known := map[[32]byte]int64{} // crash counts
	for _, p := range t.parts {
		known[partKey(p.ref)] = p.crash
	}
	for i, r := range refs {
		if crash, ok := known[partKey(r)]; ok && crash != crashes[i] {
			s.decideLocked(now, t, Aborted)
			return djinn.Errorf(djinn.CrashCount, "transaction %d: participant known with crash count %d, promoted with %d: it lost its state; the transaction aborts", t.id, crash, crashes[i])
		}
	}
	added := int64(0)
	for _, r := range refs {
		if _, ok := known[partKey(r)]; !ok {
			added++
		}
	}
	if err := s.table.Quotas().Take(t.principal.Value(), quota.Participants, added); err != nil {
		return err
	}
	for i, r := range refs {
		if _, ok := known[partKey(r)]; !ok {
			t.parts = append(t.parts, participant{ref: s.shareRefLocked(r), crash: crashes[i]})
			known[partKey(r)] = crashes[i]
			t.version++
		}
	}
	if drop != nil {
		kept := t.parts[:0]
		for _, p := range t.parts {
			if partKey(p.ref) != partKey(drop) {
				kept = append(kept, p)
			} else {
				s.releaseRefLocked(p.ref)
			}
		}
		if len(kept) < len(t.parts) {
			t.version++
		}
		clear(t.parts[len(kept):])
		s.table.Quotas().Release(t.principal.Value(), quota.Participants, int64(len(t.parts)-len(kept)))
		t.parts = kept
	}
	return nil
}

// ApplyPromote is NestableTransactionManager.promote (TX.2.7).
func (s *State) ApplyPromote(now int64, c *statepb.TxnPromote) error {
	if len(c.GetParticipants()) != len(c.GetCrashCounts()) {
		return djinn.Errorf(djinn.InvalidArgument, "promote: %d participants, %d crash counts", len(c.GetParticipants()), len(c.GetCrashCounts()))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.txns[c.GetId()]
	if !ok {
		return unknown(c.GetId())
	}
	return s.promoteLocked(now, t, c.GetParticipants(), c.GetCrashCounts(), c.GetDrop())
}

// decideLocked moves t to COMMITTED or ABORTED. An abort needs telling
// every participant that did not vote NOTCHANGED or ABORTED (TX.2.7: those
// that voted PREPARED and those not yet asked).
func (s *State) decideLocked(now int64, t *transaction, to djinnpb.TransactionState) {
	if to == Committed {
		s.Outcomes.Committed.Add(1)
	} else {
		s.Outcomes.Aborted.Add(1)
	}
	s.setStateLocked(t, to)
	t.ended = now
	s.undecided--
	// A lease holds an ACTIVE transaction open, and has nothing to do
	// after that.
	s.table.ApplyRelease(t.cookie[:])
	if to == Aborted {
		s.abortChildrenLocked(now, t)
		for i, p := range t.parts {
			if p.vote == NotChanged || p.vote == Aborted {
				t.parts[i].notified = true
			}
		}
	}
	close(t.decided)
	s.settleLocked(t)
}

// LeaseEnded aborts the transaction whose lease ended before the manager
// received a commit or abort (TX.2.1): an ACTIVE one. A VOTING one is
// past that point; its vote decides.
func (s *State) LeaseEnded(owner djinn.ID) {
	id := binary.BigEndian.Uint64(owner[8:])
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.txns[id]; ok && t.state == Active {
		s.decideLocked(0, t, Aborted)
	}
}

// Voting returns the transactions in VOTING: a new leader resumes their
// vote.
func (s *State) Voting() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []uint64
	for id, t := range s.txns {
		if t.state == Voting {
			out = append(out, id)
		}
	}
	return out
}
