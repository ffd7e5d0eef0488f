package participant

import (
	"context"
	"log/slog"
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

// Config configures a Participant. Zero durations and bounds take the
// defaults; negative ones are refused (djinn.ErrInvalidArgument naming
// the field).
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

// defaults puts the defaults in place of zero values, and refuses
// negative ones naming the field.
func (cfg *Config) defaults() error {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Remember", &cfg.Remember, 10 * time.Minute},
		{"Idle", &cfg.Idle, 10 * time.Minute},
		{"CallTimeout", &cfg.CallTimeout, 10 * time.Second},
		{"MinRetry", &cfg.MinRetry, 100 * time.Millisecond},
		{"MaxRetry", &cfg.MaxRetry, 30 * time.Second},
	} {
		switch {
		case *d.v < 0:
			return djinn.Errorf(djinn.InvalidArgument, "participant config %s %s: negative; give a positive duration, or zero for the default (%s)", d.name, *d.v, d.def)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	if cfg.MaxRetry < cfg.MinRetry {
		cfg.MaxRetry = cfg.MinRetry
	}
	switch {
	case cfg.MaxTransactions < 0:
		return djinn.Errorf(djinn.InvalidArgument, "participant config MaxTransactions %d: negative; give a positive bound, or zero for the default (1000000)", cfg.MaxTransactions)
	case cfg.MaxTransactions == 0:
		cfg.MaxTransactions = 1_000_000
	}
	return nil
}

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
	if err := cfg.defaults(); err != nil {
		return nil, err
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

// begin starts a completion call about tx: it returns tx's entry, counted
// as a call under way (the caller calls p.calls.Done).
func (p *Participant) begin(tx Tx) (*entry, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, p.errClosed()
	}
	e := p.txs[tx.Key()]
	if e == nil || !e.tx.admits(tx) {
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
