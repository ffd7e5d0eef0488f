package participant

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
)

// Resource is the application's side of a participant: the data that
// operations under transactions change. The Participant calls it for one
// transaction at a time (never two calls about the same transaction at
// once) and never while an operation under that transaction runs (between
// Join and its done). Calls about different transactions run concurrently.
type Resource interface {
	// Prepare is the resource's part of the vote (TX.2.6). It returns
	// changed false when tx changed nothing here: the vote is NOTCHANGED,
	// and Abort follows to release what tx held. Otherwise it returns the
	// record of tx's changes from which Commit, or Recover after a crash,
	// can roll them forward; the Participant stores the record durably
	// before it votes PREPARED. An error means the resource cannot
	// guarantee a roll forward: the vote is ABORTED and Abort follows.
	// Prepare must not change tx: it is asked again when it fails with a
	// context error (the vote stays open for the manager's retry).
	Prepare(ctx context.Context, tx Tx) (record []byte, changed bool, err error)
	// Commit rolls a prepared tx forward (TX.2.6). It puts in a batch the
	// changes that make tx's effects part of the resource's durable data
	// (under keys outside ReservedPrefix; none when the resource has made
	// them durable elsewhere, idempotently, before calling write) and calls
	// write with it: write adds the removal of tx's prepared record and
	// applies the batch to the Store atomically. Only once write returned
	// nil may Commit make the effects visible, and it must then return nil.
	// If write fails, Commit returns its error and keeps tx prepared: it
	// will be asked again.
	Commit(ctx context.Context, tx Tx, write func(*Batch) error) error
	// Abort rolls tx back and forgets it: its changes are dropped and what
	// it held is released (TX.2.6). It also releases a transaction that
	// voted NOTCHANGED, and may be called for a transaction that did
	// nothing here. It cannot fail: changes not yet committed live in
	// memory or in the prepared record, which the Participant removes.
	Abort(ctx context.Context, tx Tx)
	// Merge rolls the nested transaction child forward into its parent
	// (TX.2.6, TX.2.7): child's changes, and what it holds, become
	// parent's, as if made under parent — still uncommitted, visible only
	// to parent and the transactions nested in it — and child is
	// forgotten. parent may be unknown to the resource (nothing was done
	// under it here); it is then made, nested in what child's other
	// ancestors were. Merge follows child's PREPARED vote and cannot fail:
	// nested transactions live in memory. Operations under parent may run
	// meanwhile; none under child.
	Merge(ctx context.Context, child, parent Tx)
	// Recover restores a prepared transaction from its record when the
	// Participant starts (TX.2.8.1), before any other call: tx is PREPARED
	// again, holding what it held, until Commit or Abort. An error stops
	// the Participant from starting: a prepared record must not be
	// dropped.
	Recover(tx Tx, record []byte) error
}

// Config configures a Participant. Zero durations take the defaults.
type Config struct {
	// Endpoint is where managers reach the participant's
	// TransactionParticipant service (host:port). Required. A participant
	// that must recover prepared transactions after a restart must come
	// back at the same endpoint.
	Endpoint string
	// Store holds the participant's durable state. Required.
	Store Store
	// Resource is the application's data. Required.
	Resource Resource
	// Managers calls transaction managers, usually Remote(pool). Required.
	Managers Managers
	// Service and Object, when set, are the participant's identity in its
	// reference. Unset, they are taken from the Store, where they are made
	// and kept the first time: a participant keeps its reference across
	// restarts, so that managers find it to finish what it prepared.
	Service, Object djinn.ID
	// Remember is how long a transaction that reached NOTCHANGED,
	// COMMITTED or ABORTED is remembered, so that a repeated prepare gets
	// the same answer (TX.2.6's well-behaved participant). Default 10m.
	Remember time.Duration
	// Idle is how long a transaction may go without any call or operation
	// before the participant asks its manager about it (TX.2.6): an ACTIVE
	// or VOTING one the manager no longer knows or has aborted is rolled
	// back; a PREPARED one is rolled as the manager decided, never dropped.
	// Default 10m.
	Idle time.Duration
	// CallTimeout bounds one call to a manager from the background.
	// Default 10s.
	CallTimeout time.Duration
	// MinRetry and MaxRetry bound the pause between attempts of the roll
	// decision after a restart when the manager cannot answer (TX.2.8.1).
	// Default 100ms and 30s.
	MinRetry, MaxRetry time.Duration
	// MaxTransactions bounds the transactions held (default 1,000,000):
	// beyond it a new transaction's first operation fails with
	// djinn.ErrResourceExhausted.
	MaxTransactions int
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Participant takes part in transactions on behalf of a Resource: it joins
// them, votes, rolls forward or back, keeps its prepared records durable
// and recovers them after a restart. See the package documentation. It is
// safe for concurrent use.
type Participant struct {
	cfg   Config
	ref   djinn.Ref
	crash int64
	stop  context.CancelFunc
	wg    sync.WaitGroup // background goroutines
	calls sync.WaitGroup // calls and operations under way
	sem   chan struct{}  // bounds background calls to managers

	mu sync.Mutex
	// Guarded by mu.
	txs    map[TxKey]*entry
	kids   map[TxKey]map[*entry]struct{} // nested transactions by parent
	closed bool
}

// entry is what the participant holds about one transaction.
type entry struct {
	// turn is held by the one completion call (prepare, commit, abort, or
	// a background roll) working on the transaction.
	turn chan struct{}

	// Guarded by Participant.mu.
	tx        Tx    // with the latest manager endpoint seen
	state     State // Active, Voting, Prepared, NotChanged, Committed or Aborted
	anc       []Tx  // the transactions tx is nested in, parent first
	ops       int   // operations under way
	drained   chan struct{}
	joined    chan struct{} // closed when the join ended, with joinErr
	joinErr   error
	undone    bool // ABORTED and the resource rolled back
	durable   bool // its prepared record is in the Store
	marked    bool // committed by prepareAndCommit; its marker is in the Store
	checking  bool // a background call asks its manager about it
	last      time.Time
	ended     time.Time
	recovered bool
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// New starts a participant: it takes its identity and crash count from the
// Store, restores every prepared record through Resource.Recover, and
// starts the background work: the roll decision for the restored
// transactions (TX.2.8.1), questions about idle ones, and forgetting old
// outcomes. Close stops it.
func New(cfg Config) (*Participant, error) {
	switch {
	case cfg.Store == nil:
		return nil, djinn.Errorf(djinn.InvalidArgument, "participant store: missing")
	case cfg.Resource == nil:
		return nil, djinn.Errorf(djinn.InvalidArgument, "participant resource: missing")
	case cfg.Managers == nil:
		return nil, djinn.Errorf(djinn.InvalidArgument, "participant managers: missing")
	}
	if err := djinn.CheckEndpoint(cfg.Endpoint); err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "participant %v", err)
	}
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.Remember, 10*time.Minute)
	def(&cfg.Idle, 10*time.Minute)
	def(&cfg.CallTimeout, 10*time.Second)
	def(&cfg.MinRetry, 100*time.Millisecond)
	def(&cfg.MaxRetry, 30*time.Second)
	if cfg.MaxRetry < cfg.MinRetry {
		cfg.MaxRetry = cfg.MinRetry
	}
	if cfg.MaxTransactions <= 0 {
		cfg.MaxTransactions = 1_000_000
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Participant{cfg: cfg, crash: cfg.Store.CrashCount(), txs: map[TxKey]*entry{}, kids: map[TxKey]map[*entry]struct{}{}, sem: make(chan struct{}, 16)}
	var err error
	if p.ref, err = identity(cfg); err != nil {
		return nil, err
	}
	now := cfg.Now()
	var restored []*entry
	err = cfg.Store.Range(preparedPrefix, func(key string, value []byte) error {
		tx, rec, err := decodeRecord(value)
		if err != nil {
			return djinn.Errorf(djinn.Internal, "participant store record %q: %v", key, err)
		}
		if err := cfg.Resource.Recover(tx, rec); err != nil {
			return djinn.Errorf(djinn.Internal, "participant: restoring prepared %s: %v", tx, err)
		}
		e := &entry{turn: make(chan struct{}, 1), tx: tx, state: Prepared, joined: closedChan,
			durable: true, recovered: true, checking: true, last: now}
		p.txs[tx.Key()] = e
		restored = append(restored, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = cfg.Store.Range(committedPrefix, func(key string, value []byte) error {
		tx, _, err := decodeRecord(value)
		if err != nil {
			return djinn.Errorf(djinn.Internal, "participant store record %q: %v", key, err)
		}
		// Committed by prepareAndCommit; confirmed with its manager at the
		// first sweep.
		p.txs[tx.Key()] = &entry{turn: make(chan struct{}, 1), tx: tx, state: Committed, joined: closedChan,
			marked: true, recovered: true, last: now}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	p.stop = stop
	for _, e := range restored {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.recoverLoop(ctx, e)
		}()
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.sweepLoop(ctx)
	}()
	return p, nil
}

// identity returns the participant's reference: the configured ids, or
// those kept in the Store, made and kept there the first time.
func identity(cfg Config) (djinn.Ref, error) {
	ref := djinn.Ref{Endpoint: cfg.Endpoint, Service: cfg.Service, Object: cfg.Object}
	if !ref.Service.IsZero() && !ref.Object.IsZero() {
		return ref, nil
	}
	var stored []byte
	err := cfg.Store.Range(selfKey, func(key string, value []byte) error {
		if key == selfKey {
			stored = append([]byte(nil), value...)
		}
		return nil
	})
	if err != nil {
		return ref, err
	}
	if len(stored) != 32 {
		svc, obj := djinn.NewID(), djinn.NewID()
		stored = append(svc[:], obj[:]...)
		var b Batch
		b.Put(selfKey, stored)
		if err := cfg.Store.Apply(context.Background(), &b); err != nil {
			return ref, err
		}
	}
	if ref.Service.IsZero() {
		copy(ref.Service[:], stored[:16])
	}
	if ref.Object.IsZero() {
		copy(ref.Object[:], stored[16:])
	}
	return ref, nil
}

// Ref returns the participant's reference, the one it joins with.
func (p *Participant) Ref() djinn.Ref { return p.ref }

// CrashCount returns the crash count it joins with (TX.2.3).
func (p *Participant) CrashCount() int64 { return p.crash }

// State returns what the participant holds of tx: its state, and false
// when it knows nothing of it.
func (p *Participant) State(tx Tx) (State, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.txs[tx.Key()]; ok {
		return e.state, true
	}
	return 0, false
}

// Len returns the number of transactions held.
func (p *Participant) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.txs)
}

// Close stops the participant: later calls fail with djinn.ErrUnavailable
// (so managers try again, after a restart), background work stops, and
// Close returns once calls and operations under way have ended (every done
// that Join returned has been called). The Store stays open.
func (p *Participant) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.stop()
	p.wg.Wait()
	p.calls.Wait()
	return nil
}

func (p *Participant) errClosed() error {
	return djinn.Errorf(djinn.Unavailable, "participant %s: closed", p.ref)
}

func unknownTx(tx Tx) error {
	return djinn.Errorf(djinn.UnknownTransaction, "transaction %d of manager %s: unknown to this participant (never joined here, or forgotten)", tx.ID, tx.Manager)
}

// Join is called by the application at the start of every operation under
// tx, and done when the operation ends. The first time, it joins tx at its
// manager with the participant's reference and crash count (TX.2.3);
// concurrent first operations share that one join. A failed join fails the
// operation with the manager's error (djinn.ErrUnknownTransaction,
// ErrCannotJoin, ErrCrashCount, ErrNoSuchObject, ErrUnavailable, ...), which
// the application should return to its client as it is. An operation is
// valid only while tx is ACTIVE here (TX.2.6): otherwise Join fails with
// djinn.ErrCannotJoin. A vote or an abort waits until the operations under
// way have called done.
func (p *Participant) Join(ctx context.Context, tx Tx) (done func(), err error) {
	if err := tx.check(); err != nil {
		return nil, err
	}
	k := tx.Key()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, p.errClosed()
	}
	e := p.txs[k]
	if e == nil {
		if len(p.txs) >= p.cfg.MaxTransactions {
			p.mu.Unlock()
			return nil, djinn.Errorf(djinn.ResourceExhausted, "participant holds %d transactions, the most allowed", len(p.txs))
		}
		e = &entry{turn: make(chan struct{}, 1), tx: tx, state: Active, joined: make(chan struct{}), last: p.cfg.Now()}
		p.txs[k] = e
		e.ops++
		p.calls.Add(1)
		p.mu.Unlock()
		anc, err := p.cfg.Managers.Join(ctx, tx, p.ref, p.crash)
		p.mu.Lock()
		e.joinErr = err
		if err == nil && len(anc) > 0 {
			e.anc = slices.Clone(anc)
			p.addKidLocked(e)
		}
		close(e.joined)
		if err != nil {
			p.leaveLocked(e)
			if e.state == Active && e.ops == 0 && p.txs[k] == e {
				delete(p.txs, k)
			}
			p.mu.Unlock()
			return nil, err
		}
	} else {
		joined := e.joined
		p.mu.Unlock()
		select {
		case <-joined:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		p.mu.Lock()
		if e.joinErr != nil && (p.txs[k] != e || e.state == Active) {
			// The join this operation waited for failed. (An entry kept
			// after a failed join is one the manager aborted meanwhile: the
			// state check below answers for it.)
			p.mu.Unlock()
			return nil, e.joinErr
		}
		if p.closed {
			p.mu.Unlock()
			return nil, p.errClosed()
		}
		e.ops++
		p.calls.Add(1)
	}
	if e.state != Active {
		st := e.state
		p.leaveLocked(e)
		p.mu.Unlock()
		return nil, djinn.Errorf(djinn.CannotJoin, "transaction %d: %s at this participant; work under it needs it ACTIVE: start a new transaction", tx.ID, st)
	}
	if err := p.enclosingLocked(e); err != nil {
		p.leaveLocked(e)
		p.mu.Unlock()
		return nil, err
	}
	e.last = p.cfg.Now()
	p.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			p.leaveLocked(e)
			p.mu.Unlock()
		})
	}, nil
}

// enclosingLocked checks that the transactions e is nested in are ACTIVE
// here, or unknown here: an enclosing transaction being prepared completes
// the nested ones (TX.2.6), and one that ended ended them.
func (p *Participant) enclosingLocked(e *entry) error {
	for _, at := range e.anc {
		if a := p.txs[at.Key()]; a != nil && a.state != Active {
			return djinn.Errorf(djinn.CannotJoin, "transaction %d: the enclosing transaction %d is %s at this participant; work under it needs it ACTIVE: start a new transaction", e.tx.ID, at.ID, a.state)
		}
	}
	return nil
}

// Ancestors returns the transactions tx is nested in, parent first, as
// its manager answered tx's join here (of tx's manager, or of another when
// tx is nested in another manager's transaction): none for a top-level
// transaction or one unknown here. A Resource calls it, during
// an operation under tx, to let tx see its ancestors' changes and pass
// their locks (TX.3).
func (p *Participant) Ancestors(tx Tx) []Tx {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.txs[tx.Key()]
	if e == nil {
		return nil
	}
	return slices.Clone(e.anc)
}

// parentKey returns the key of e's parent; false for a top-level e.
func (e *entry) parentKey() (TxKey, bool) {
	if len(e.anc) == 0 {
		return TxKey{}, false
	}
	return e.anc[0].Key(), true
}

// addKidLocked records the nested e under its parent.
func (p *Participant) addKidLocked(e *entry) {
	if pk, ok := e.parentKey(); ok {
		m := p.kids[pk]
		if m == nil {
			m = map[*entry]struct{}{}
			p.kids[pk] = m
		}
		m[e] = struct{}{}
	}
}

// forgetLocked drops e, held under k.
func (p *Participant) forgetLocked(k TxKey, e *entry) {
	delete(p.txs, k)
	if pk, ok := e.parentKey(); ok {
		delete(p.kids[pk], e)
		if len(p.kids[pk]) == 0 {
			delete(p.kids, pk)
		}
	}
}

// kidsOf returns the transactions nested in e (directly) that are not
// final here.
func (p *Participant) kidsOf(e *entry) []*entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*entry
	for c := range p.kids[e.tx.Key()] {
		if !c.state.final() {
			out = append(out, c)
		}
	}
	return out
}

// parentLocked returns the entry of the nested e's parent, making it
// ACTIVE when unknown here: the manager promoted this participant into the
// parent when it committed e (TX.2.7), with the same crash count, so
// operations under the parent need no join.
func (p *Participant) parentLocked(e *entry) *entry {
	k, _ := e.parentKey()
	if pe := p.txs[k]; pe != nil {
		return pe
	}
	pe := &entry{turn: make(chan struct{}, 1), tx: e.anc[0], state: Active,
		joined: closedChan, anc: e.anc[1:], last: p.cfg.Now()}
	p.txs[k] = pe
	p.addKidLocked(pe)
	return pe
}

// leaveLocked ends an operation under e.
func (p *Participant) leaveLocked(e *entry) {
	e.ops--
	if e.ops == 0 && e.drained != nil {
		close(e.drained)
		e.drained = nil
	}
	p.calls.Done()
}

// waitDrained waits until no operation runs under e. Only the holder of
// e's turn waits.
func (p *Participant) waitDrained(ctx context.Context, e *entry) error {
	p.mu.Lock()
	for e.ops > 0 {
		if e.drained == nil {
			e.drained = make(chan struct{})
		}
		ch := e.drained
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}

// begin starts a completion call about tx: it returns tx's entry, counted
// as a call under way (the caller calls p.calls.Done).
func (p *Participant) begin(tx Tx) (*entry, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, p.errClosed()
	}
	e := p.txs[tx.Key()]
	if e == nil {
		return nil, unknownTx(tx)
	}
	if tx.Manager.Endpoint != "" {
		e.tx.Manager.Endpoint = tx.Manager.Endpoint
	}
	e.last = p.cfg.Now()
	p.calls.Add(1)
	return e, nil
}

func take(ctx context.Context, e *entry) error {
	select {
	case e.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func release(e *entry) { <-e.turn }

// look returns e's state and transaction.
func (p *Participant) look(e *entry) (State, Tx) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return e.state, e.tx
}

// settle moves e to a final state.
func (p *Participant) settle(e *entry, to State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.state, e.ended = to, p.cfg.Now()
	if to != Prepared {
		e.durable = false
	}
}

// Prepare is TX.2.6's prepare: the participant votes PREPARED (its record
// durable), NOTCHANGED or ABORTED, after the operations under way end. A
// transaction past voting gets its state again; an unknown one
// djinn.ErrUnknownTransaction. A context error leaves the vote open.
func (p *Participant) Prepare(ctx context.Context, tx Tx) (State, error) {
	return p.vote(ctx, tx, false)
}

// PrepareAndCommit is TX.2.6's prepareAndCommit, equivalent to
//
//	result := Prepare(tx)
//	if result == PREPARED { Commit(tx); result = COMMITTED }
//
// but it rolls an ACTIVE transaction forward with one write to the Store
// instead of two (the prepared record is never written): a crash before
// that write leaves the transaction unknown here, as a crash before
// Prepare's write would; after it, committed, as a crash after Commit's
// write would. That write also keeps a marker of the outcome, so a manager
// that asks again — after its own crash or this participant's — hears
// COMMITTED, not UnknownTransaction (which it would take for a lost
// vote); the marker is dropped once the manager says it decided.
//
// A manager never sends it for a nested transaction (TX.2.7); if one does,
// it is Prepare then Commit: the changes roll forward into the parent.
func (p *Participant) PrepareAndCommit(ctx context.Context, tx Tx) (State, error) {
	if len(p.Ancestors(tx)) > 0 {
		st, err := p.vote(ctx, tx, false)
		if err != nil || st != Prepared {
			return st, err
		}
		if err := p.Commit(ctx, tx); err != nil {
			return 0, err
		}
		return Committed, nil
	}
	return p.vote(ctx, tx, true)
}

func (p *Participant) vote(ctx context.Context, tx Tx, andCommit bool) (State, error) {
	e, err := p.begin(tx)
	if err != nil {
		return 0, err
	}
	defer p.calls.Done()
	if err := take(ctx, e); err != nil {
		return 0, err
	}
	defer release(e)
	p.mu.Lock()
	st := e.state
	if st == Active {
		e.state = Voting // no operation starts from here on
	}
	tx = e.tx
	nested := len(e.anc) > 0
	p.mu.Unlock()
	switch st {
	case Prepared:
		if !andCommit {
			return Prepared, nil
		}
		if err := p.rollForward(ctx, e); err != nil {
			return 0, err
		}
		return Committed, nil
	case NotChanged, Committed, Aborted:
		// Past voting: the same answer again (TX.2.6).
		return st, nil
	}
	if err := p.waitDrained(ctx, e); err != nil {
		return 0, err
	}
	if err := p.completeKids(ctx, e); err != nil {
		return 0, err // the vote stays open for the manager's retry
	}
	rec, changed, err := p.cfg.Resource.Prepare(ctx, tx)
	if err != nil && ctx.Err() != nil {
		return 0, err
	}
	if err != nil {
		p.cfg.Logger.Warn("participant: the resource cannot prepare; voting ABORTED", "tx", tx, "err", err)
		p.rollBack(ctx, e, tx)
		return Aborted, nil
	}
	if !changed {
		p.cfg.Resource.Abort(context.WithoutCancel(ctx), tx)
		p.settle(e, NotChanged)
		return NotChanged, nil
	}
	if andCommit {
		wrote := false
		err := p.cfg.Resource.Commit(ctx, tx, func(b *Batch) error {
			if err := b.checkApp(); err != nil {
				return err
			}
			b.Put(committedKey(tx), encodeRecord(tx, nil))
			err := p.cfg.Store.Apply(ctx, b)
			wrote = wrote || err == nil
			return err
		})
		if wrote {
			if err != nil {
				p.cfg.Logger.Error("participant: the resource failed after its commit was written; it is committed", "tx", tx, "err", err)
			}
			p.mu.Lock()
			e.marked = true
			p.mu.Unlock()
			p.settle(e, Committed)
			return Committed, nil
		}
		// Not rolled forward, and no record: as if the prepared record could
		// not be written.
		p.cfg.Logger.Warn("participant: prepareAndCommit could not write; voting ABORTED", "tx", tx, "err", err)
		p.rollBack(ctx, e, tx)
		return Aborted, nil
	}
	if nested {
		// Ready to roll forward into the parent (TX.2.6), whose changes
		// live in memory while ACTIVE: no record to write.
		p.mu.Lock()
		e.state = Prepared
		p.mu.Unlock()
		return Prepared, nil
	}
	var b Batch
	b.Put(preparedKey(tx), encodeRecord(tx, rec))
	if err := p.cfg.Store.Apply(ctx, &b); err != nil {
		// The record may or may not be on disk: if it is, the roll decision
		// after a restart rolls it back (this vote aborts the transaction).
		p.cfg.Logger.Warn("participant: storing the prepared record failed; voting ABORTED", "tx", tx, "err", err)
		p.rollBack(ctx, e, tx)
		return Aborted, nil
	}
	p.mu.Lock()
	e.state, e.durable = Prepared, true
	p.mu.Unlock()
	return Prepared, nil
}

// rollBack aborts e, which has no prepared record, with the resource.
func (p *Participant) rollBack(ctx context.Context, e *entry, tx Tx) {
	p.cfg.Resource.Abort(context.WithoutCancel(ctx), tx)
	p.settle(e, Aborted)
	p.mu.Lock()
	e.undone = true
	p.mu.Unlock()
}

// Commit is TX.2.6's commit: a PREPARED transaction rolls forward (once;
// a repeated commit returns nil). An unknown one gives
// djinn.ErrUnknownTransaction, which tells a manager it rolled forward
// already; one that is not PREPARED here, djinn.ErrCannotCommit.
func (p *Participant) Commit(ctx context.Context, tx Tx) error {
	e, err := p.begin(tx)
	if err != nil {
		return err
	}
	defer p.calls.Done()
	return p.commitEntry(ctx, e)
}

func (p *Participant) commitEntry(ctx context.Context, e *entry) error {
	p.mu.Lock()
	nested := len(e.anc) > 0
	p.mu.Unlock()
	if nested {
		return p.commitNested(ctx, e)
	}
	if err := take(ctx, e); err != nil {
		return err
	}
	defer release(e)
	st, tx := p.look(e)
	switch st {
	case Committed, NotChanged:
		return nil
	case Prepared:
		return p.rollForward(ctx, e)
	case Aborted:
		return djinn.Errorf(djinn.CannotCommit, "transaction %d: aborted at this participant", tx.ID)
	}
	return djinn.Errorf(djinn.CannotCommit, "transaction %d: %s at this participant, not PREPARED: it can commit only after voting PREPARED", tx.ID, st)
}

// commitNested is commit for the nested e: PREPARED, it rolls forward
// into its parent (TX.2.6). Turns are taken parent first, as everywhere.
func (p *Participant) commitNested(ctx context.Context, e *entry) error {
	for waited := false; ; waited = true {
		p.mu.Lock()
		st, tx := e.state, e.tx
		var pe *entry
		if st == Prepared {
			pe = p.parentLocked(e)
		}
		p.mu.Unlock()
		switch {
		case st == Committed || st == NotChanged:
			return nil
		case st == Aborted && p.enclosingAborted(e):
			// Aborted with an enclosing transaction: committing into it
			// would have dropped the changes just the same (TX.2.7).
			return nil
		case st == Aborted:
			return djinn.Errorf(djinn.CannotCommit, "transaction %d: aborted at this participant", tx.ID)
		case pe == nil && waited:
			return djinn.Errorf(djinn.CannotCommit, "transaction %d: %s at this participant, not PREPARED: it can commit only after voting PREPARED", tx.ID, st)
		case pe == nil:
			// A vote may be under way: wait for it, and look again.
			if err := take(ctx, e); err != nil {
				return err
			}
			release(e)
			continue
		}
		if err := take(ctx, pe); err != nil {
			return err
		}
		if err := take(ctx, e); err != nil {
			release(pe)
			return err
		}
		st, _ = p.look(e)
		if st == Prepared {
			p.merge(ctx, e, pe)
		}
		release(e)
		release(pe)
		if st == Prepared {
			return nil
		}
	}
}

// enclosingAborted reports whether a transaction e is nested in has
// aborted here.
func (p *Participant) enclosingAborted(e *entry) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, at := range e.anc {
		if a := p.txs[at.Key()]; a != nil && a.state == Aborted {
			return true
		}
	}
	return false
}

// merge rolls the nested c forward into its parent pe; the caller holds
// both turns, and no operation runs under c. If pe is past voting here
// (aborted), c's changes are dropped instead: they went with it (TX.2.7).
func (p *Participant) merge(ctx context.Context, c, pe *entry) {
	p.mu.Lock()
	pst, ptx, tx := pe.state, pe.tx, c.tx
	p.mu.Unlock()
	if pst == Active || pst == Voting {
		p.cfg.Resource.Merge(context.WithoutCancel(ctx), tx, ptx)
	} else {
		p.cfg.Logger.Debug("participant: a nested transaction committed into an ended parent; its changes are dropped", "tx", tx, "parent", ptx, "parentState", pst)
		p.cfg.Resource.Abort(context.WithoutCancel(ctx), tx)
	}
	p.settle(c, Committed)
}

// completeKids completes the transactions nested in e that are not final
// here, as their manager decided (TX.2.6: a participant asked to prepare
// an enclosing transaction completes the nested ones, using getState):
// COMMITTED (or NOTCHANGED) rolls a nested transaction forward into e;
// any other state, or a manager that does not know it, rolls it back (it
// can no longer commit into e, which is voting). A failed getState fails
// the call, so that the manager asks again. The caller holds e's turn, and
// e is not ACTIVE here: no operation starts under e's descendants.
func (p *Participant) completeKids(ctx context.Context, e *entry) error {
	for _, c := range p.kidsOf(e) {
		if err := take(ctx, c); err != nil {
			return err
		}
		err := p.completeKid(ctx, c, e)
		release(c)
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *Participant) completeKid(ctx context.Context, c, e *entry) error {
	st, tx := p.look(c)
	if st.final() {
		return nil
	}
	if err := p.waitDrained(ctx, c); err != nil {
		return err
	}
	if err := p.completeKids(ctx, c); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
	ms, err := p.cfg.Managers.GetState(cctx, tx)
	cancel()
	switch {
	case err == nil && (ms == Committed || ms == NotChanged):
		p.merge(ctx, c, e)
	case err == nil || isGone(err):
		p.rollBack(ctx, c, tx)
	default:
		return err
	}
	return nil
}

// rollForward commits the PREPARED e with the resource; the caller holds
// e's turn.
func (p *Participant) rollForward(ctx context.Context, e *entry) error {
	_, tx := p.look(e)
	key := preparedKey(tx)
	wrote := false
	write := func(b *Batch) error {
		if err := b.checkApp(); err != nil {
			return err
		}
		b.Delete(key)
		err := p.cfg.Store.Apply(ctx, b)
		wrote = wrote || err == nil
		return err
	}
	err := p.cfg.Resource.Commit(ctx, tx, write)
	switch {
	case wrote && err != nil:
		p.cfg.Logger.Error("participant: the resource failed after its commit was written; it is committed", "tx", tx, "err", err)
	case !wrote && err == nil:
		// The resource made its changes durable itself: drop the record.
		err = write(&Batch{})
	}
	if !wrote {
		return err
	}
	p.settle(e, Committed)
	return nil
}

// Abort is TX.2.6's abort: an ACTIVE, VOTING or PREPARED transaction rolls
// back (after the operations under way end); a repeated abort returns nil.
// An unknown one gives djinn.ErrUnknownTransaction; a committed one
// djinn.ErrCannotAbort.
func (p *Participant) Abort(ctx context.Context, tx Tx) error {
	e, err := p.begin(tx)
	if err != nil {
		if e = p.abortedParent(tx); e == nil {
			return err
		}
	}
	defer p.calls.Done()
	return p.abortEntry(ctx, e)
}

// abortedParent returns, counted as a call under way, an ABORTED entry for
// tx, unknown here, when transactions nested in it are known here: they
// abort with it (TX.2.7), and a late commit of one of them must not make
// tx ACTIVE here again. Otherwise nil.
func (p *Participant) abortedParent(tx Tx) *entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := tx.Key()
	if p.closed || p.txs[k] != nil || len(p.kids[k]) == 0 {
		return nil
	}
	now := p.cfg.Now()
	e := &entry{turn: make(chan struct{}, 1), tx: tx, state: Aborted, joined: closedChan, undone: true, last: now, ended: now}
	p.txs[k] = e
	p.calls.Add(1)
	return e
}

func (p *Participant) abortEntry(ctx context.Context, e *entry) error {
	if err := take(ctx, e); err != nil {
		return err
	}
	defer release(e)
	p.mu.Lock()
	st, tx, durable, undone := e.state, e.tx, e.durable, e.undone
	p.mu.Unlock()
	if st != Committed {
		// Aborting a transaction aborts those nested in it (TX.2.7); turns
		// are taken parent first (this deferred call runs before release).
		defer p.abortKids(ctx, e)
	}
	switch {
	case st == Committed:
		return djinn.Errorf(djinn.CannotAbort, "transaction %d: committed at this participant", tx.ID)
	case st == NotChanged || (st == Aborted && undone):
		return nil
	}
	if durable {
		var b Batch
		b.Delete(preparedKey(tx))
		if err := p.cfg.Store.Apply(ctx, &b); err != nil {
			return err // still PREPARED: the manager asks again
		}
	}
	p.mu.Lock()
	if e.state != Aborted {
		e.state, e.ended = Aborted, p.cfg.Now() // no operation starts from here on
	}
	e.durable = false
	p.mu.Unlock()
	if err := p.waitDrained(ctx, e); err != nil {
		return err // the next abort, or the sweep, finishes the roll back
	}
	p.cfg.Resource.Abort(context.WithoutCancel(ctx), tx)
	p.mu.Lock()
	e.undone = true
	p.mu.Unlock()
	return nil
}

// abortKids aborts the transactions nested in e that are not final here.
// The caller holds e's turn. A failure is left to the manager's abort of
// the nested transaction, or to the sweep.
func (p *Participant) abortKids(ctx context.Context, e *entry) {
	for _, c := range p.kidsOf(e) {
		if err := p.abortEntry(ctx, c); err != nil && ctx.Err() == nil {
			p.cfg.Logger.Warn("participant: aborting a nested transaction with its parent failed", "tx", c.tx, "err", err)
		}
	}
}

// isGone reports whether err says the manager does not know the
// transaction (or is not there): the transaction aborted (TX.2.6,
// TX.2.8.1).
func isGone(err error) bool {
	return errors.Is(err, djinn.ErrUnknownTransaction) || errors.Is(err, djinn.ErrNoSuchObject)
}
