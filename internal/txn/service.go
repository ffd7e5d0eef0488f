package txn

import (
	"context"
	crand "crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Proposer appends a command to the replicated log and returns its result
// once applied here (an error result comes back as the error).
type Proposer interface {
	Propose(ctx context.Context, cmd *statepb.Command) (any, error)
}

// Config configures the manager. Zero values take the defaults.
type Config struct {
	// Lease is the transaction lease policy (default: Any is a minute, at
	// most an hour).
	Lease lease.Policy
	// MaxActive bounds undecided transactions (default 1,000,000);
	// MaxParticipants the participants of one (default 1000); MaxDepth
	// the nesting of transactions (default 16).
	MaxActive, MaxParticipants, MaxDepth int
	// Participants calls participants. Required.
	Participants Participants
	// Workers bounds the goroutines that run the votes and tell the
	// outcomes (default 64): each runs a vote's steps and calls, one after
	// another, and a call that waits on the network holds none.
	Workers int
	// CallTimeout bounds one call to a participant (default 10s).
	CallTimeout time.Duration
	// VoteTimeout is how long a vote may retry a participant that fails
	// indefinitely before the manager aborts (default 30s).
	VoteTimeout time.Duration
	// MinRetry and MaxRetry bound the backoff between attempts to tell a
	// participant the outcome (default 100ms and 30s); the manager never
	// stops trying.
	MinRetry, MaxRetry time.Duration
	// Abandon is how long a participant may stay unreachable before it is
	// reported (default 10m).
	Abandon time.Duration
	// Retention is how long a settled transaction is remembered, so a
	// repeated commit or abort gets its outcome (default 10m).
	Retention time.Duration
	// MaxRemembered bounds the settled top-level transactions remembered
	// (default 1,000,000): beyond it the oldest are forgotten before the
	// retention time, and a repeated commit or abort of one gets
	// UnknownTransaction.
	MaxRemembered int
	// Managers calls other transaction managers, for transactions nested
	// in theirs (TX.2.2); nil refuses those as unsupported.
	Managers Managers
	// ErrorProto gives an error's wire form for Describe (the server's
	// error table; default: the kind and message).
	ErrorProto func(error) *djinnpb.Error
	Logger     *slog.Logger
}

// Service is the transaction manager (TX.2).
type Service struct {
	state  *State
	lessor *lease.Lessor
	log    Proposer
	now    func() time.Time
	self   func() djinn.Ref
	cfg    Config

	mu sync.Mutex
	// votes holds the votes in progress on this leader, by transaction.
	votes map[uint64]*vote
	// term is closed when the current (or next) run as leader ends: a
	// vote stops then, undecided.
	term chan struct{}
	// running is set while Run runs: votes start only then, each counted
	// in voting, which Run waits for before it returns. work and termCtx
	// are the run's workers and its term (ended as it ends).
	running bool
	voting  sync.WaitGroup
	work    *workers
	termCtx context.Context
	// calls holds the leader's record of failing participant calls.
	calls map[callKey]*callState

	// Counters for metrics.
	Created, Commits, Aborts atomic.Uint64
	Unreachable              atomic.Int64  // participants failing past Abandon
	MixedOutcomes            atomic.Uint64 // participants that refused an abort as committed
}

type callKey struct {
	id   uint64
	part int
}

type callState struct {
	next     time.Time
	attempts int
	since    time.Time
	lastErr  error
	busy     bool
	// unreachable is set once the participant has failed for longer than
	// Abandon: it counts in Unreachable until it takes the outcome.
	unreachable bool
}

// New returns the manager over state s.
func New(s *State, l *lease.Lessor, log Proposer, now func() time.Time, self func() djinn.Ref, cfg Config) (*Service, error) {
	if cfg.Lease == (lease.Policy{}) {
		cfg.Lease = lease.Policy{Default: time.Minute, Max: time.Hour}
	}
	if err := l.Table().SetPolicy(LeaseKind, cfg.Lease); err != nil {
		return nil, err
	}
	if cfg.Participants == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "transaction manager: no participant client")
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt(&cfg.MaxActive, 1_000_000)
	defInt(&cfg.MaxParticipants, 1000)
	defInt(&cfg.MaxDepth, 16)
	defInt(&cfg.MaxRemembered, 1_000_000)
	defInt(&cfg.Workers, 64)
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur(&cfg.CallTimeout, 10*time.Second)
	defDur(&cfg.VoteTimeout, 30*time.Second)
	defDur(&cfg.MinRetry, 100*time.Millisecond)
	defDur(&cfg.MaxRetry, 30*time.Second)
	defDur(&cfg.Abandon, 10*time.Minute)
	defDur(&cfg.Retention, 10*time.Minute)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ErrorProto == nil {
		cfg.ErrorProto = func(err error) *djinnpb.Error {
			return &djinnpb.Error{Kind: string(djinn.KindOf(err)), Message: err.Error()}
		}
	}
	return &Service{state: s, lessor: l, log: log, now: now, self: self, cfg: cfg, votes: map[uint64]*vote{}, term: make(chan struct{}), calls: map[callKey]*callState{}}, nil
}

func (s *Service) leading() error { return s.lessor.Serving("transaction manager") }

// Created is what Create returns (TX.2.1), with the transaction's secret:
// the capability to join it, ask its state and nest in it.
type Created struct {
	ID     uint64
	Lease  *djinnpb.Lease
	Secret djinn.ID
}

// capable returns transaction id for a caller that presents secret, and
// UnknownTransaction — the transaction does not exist for it — unless the
// secret is the transaction's: its id alone is no capability.
func (s *Service) capable(id uint64, secret djinn.ID) (Info, error) {
	in, err := s.get(id)
	if err != nil {
		return Info{}, err
	}
	if subtle.ConstantTimeCompare(in.Secret[:], secret[:]) != 1 {
		return Info{}, unknown(id)
	}
	return in, nil
}

// Create starts a top-level transaction, ACTIVE, with a lease of at most d
// (positive, Forever or Any).
func (s *Service) Create(ctx context.Context, d time.Duration) (Created, error) {
	return s.CreateNested(ctx, 0, djinn.ID{}, d)
}

// CreateNested starts a transaction nested in transaction parent of this
// manager (TX.2.2; 0: top-level), whose secret the caller presents:
// UnknownTransaction for an unknown parent, or without its secret,
// CannotJoin for one no longer ACTIVE.
func (s *Service) CreateNested(ctx context.Context, parent uint64, parentSecret djinn.ID, d time.Duration) (Created, error) {
	if d <= 0 && d != djinn.Any {
		return Created{}, djinn.Errorf(djinn.InvalidArgument, "lease duration %s: must be positive, Forever or Any", djinn.FormatDuration(d))
	}
	if err := s.leading(); err != nil {
		return Created{}, err
	}
	if _, n := s.state.Len(); n >= s.cfg.MaxActive {
		return Created{}, djinn.Errorf(djinn.LeaseDenied, "transaction manager holds %d active transactions, the most its server allows ([txn] max-active); try again once some complete, or ask the operator to raise it", n)
	}
	if parent != 0 {
		in, err := s.capable(parent, parentSecret)
		if err != nil {
			return Created{}, err
		}
		if s.leaseEnded(in) {
			return Created{}, djinn.Errorf(djinn.CannotJoin, "parent transaction %d: its lease ended, so it aborted: nest under an ACTIVE transaction", parent)
		}
		if in.Depth+1 >= s.cfg.MaxDepth {
			return Created{}, djinn.Errorf(djinn.ResourceExhausted, "transaction %d is nested %d deep: at most %d levels", parent, in.Depth+1, s.cfg.MaxDepth)
		}
	}
	granted := s.cfg.Lease.Grant(d)
	now := s.now()
	exp := djinn.AddDuration(now, granted)
	cookie, secret := djinn.NewID(), djinn.NewID()
	res, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: now.UnixNano(), Op: &statepb.Command_TxnCreate{TxnCreate: &statepb.TxnCreate{
		Cookie: cookie[:], ExpiresUnixNanos: wire.Nanos(exp), HorizonUnixNanos: s.lessor.Horizon(exp), Principal: principal.From(ctx),
		ParentId: parent, Id: s.newID(), Secret: secret[:],
	}}})
	if err != nil {
		return Created{}, err
	}
	s.Created.Add(1)
	return Created{ID: res.(Info).ID, Lease: lease.Proto(s.self(), cookie, granted), Secret: secret}, nil
}

// newID draws a transaction id: random, so that knowing one transaction
// tells nothing of another's, positive as a Java long, and not in use. It
// names the transaction; its secret is the capability to work under it.
func (s *Service) newID() uint64 {
	for {
		var b [8]byte
		_, _ = crand.Read(b[:]) // never fails
		id := binary.BigEndian.Uint64(b[:]) >> 1
		if id != 0 && !s.state.Has(id) {
			return id
		}
	}
}

// get returns a transaction on the leader.
func (s *Service) get(id uint64) (Info, error) {
	if err := s.leading(); err != nil {
		return Info{}, err
	}
	return s.state.Get(id)
}

// Ancestors returns the transactions id is nested in, parent first.
//
// Each comes with its manager: this one's reference, or, past a
// transaction nested in another manager's, that manager's (TX.2.2).
func (s *Service) Ancestors(id uint64) (ids []uint64, mgrs []*djinnpb.Ref, err error) {
	var self *djinnpb.Ref // made for the first parent here: most have none
	for {
		in, err := s.state.Get(id)
		if err != nil {
			return nil, nil, err
		}
		if in.Remote != nil {
			ids = append(ids, in.RemoteID)
			mgrs = append(mgrs, in.Remote.GetManager())
			ids = append(ids, in.Remote.GetAncestorIds()...)
			mgrs = append(mgrs, in.Remote.GetAncestorManagers()...)
			return ids, mgrs, nil
		}
		if in.Parent == 0 {
			return ids, mgrs, nil
		}
		if self == nil {
			self = wire.Ref(s.self())
		}
		ids = append(ids, in.Parent)
		mgrs = append(mgrs, self)
		id = in.Parent
	}
}

// Join adds a participant (TX.2.3) for a caller that presents the
// transaction's secret; without it the transaction does not exist
// (UnknownTransaction), so no one without the capability can join, or
// change a participant's crash count and abort the transaction.
func (s *Service) Join(ctx context.Context, id uint64, secret djinn.ID, p *djinnpb.Ref, crash int64) error {
	if p == nil {
		return djinn.Errorf(djinn.InvalidArgument, "participant: missing (null)")
	}
	if _, err := djinn.IDFromBytes("participant service id", p.GetServiceId()); err != nil {
		return err
	}
	if _, err := djinn.IDFromBytes("participant object id", p.GetObjectId()); err != nil {
		return err
	}
	if err := djinn.CheckEndpoint(p.GetEndpoint()); err != nil {
		return djinn.Errorf(djinn.InvalidArgument, "participant: %v", err)
	}
	in, err := s.capable(id, secret)
	if err != nil {
		return err
	}
	if s.leaseEnded(in) {
		return djinn.Errorf(djinn.CannotJoin, "transaction %d: its lease ended, so it aborted: join an ACTIVE transaction", id)
	}
	if in.State == Active && s.voteRuns(id) && !crashCountChanged(in, p, crash) {
		// Voting without a VOTING record yet: a join is refused as it would
		// be after one. A known participant with another crash count goes
		// on to the log, which aborts the transaction (TX.2.3).
		return djinn.Errorf(djinn.CannotJoin, "transaction %d: its commit is under way (VOTING), so it takes no new participant; do the work under another transaction", id)
	}
	if in.State == Active && len(in.Parts) >= s.cfg.MaxParticipants {
		return djinn.Errorf(djinn.ResourceExhausted, "transaction %d has %d participants, the most allowed", id, len(in.Parts))
	}
	_, err = s.log.Propose(ctx, &statepb.Command{NowUnixNanos: s.now().UnixNano(), Op: &statepb.Command_TxnJoin{TxnJoin: &statepb.TxnJoin{
		Id: id, Participant: p, CrashCount: crash, MaxParticipants: uint32(s.cfg.MaxParticipants),
	}}})
	return err
}

// GetState returns a transaction's state (TX.2.7) to a caller that
// presents its secret. An ACTIVE transaction whose lease has ended is
// ABORTED, even before its end is logged; a VOTING one is not (the commit
// came first, TX.2.1).
func (s *Service) GetState(ctx context.Context, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	st, err := s.stateOf(id, secret)
	if err == nil || errors.Is(err, djinn.ErrUnknownTransaction) {
		// A participant acts on the answer (an unknown or aborted
		// transaction is rolled back): a deposed leader must not give
		// one its successor's state contradicts.
		if cerr := s.lessor.Confirm("transaction manager"); cerr != nil {
			return 0, cerr
		}
	}
	return st, err
}

// stateOf is GetState from this node's state.
func (s *Service) stateOf(id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	in, err := s.capable(id, secret)
	if err != nil {
		return 0, err
	}
	switch {
	case in.State == Active && s.voteRuns(id):
		return Voting, nil // a vote without a VOTING record (yet)
	case in.State == Active && !s.lessor.Table().Alive(in.Cookie, s.now()):
		return Aborted, nil
	}
	return in.State, nil
}

// leaseEnded reports whether transaction in is ACTIVE with its lease
// ended: aborted (TX.2.1), though its expiry may not have reached the log
// yet. One voting without a VOTING record is not: the commit came first.
func (s *Service) leaseEnded(in Info) bool {
	return in.State == Active && !s.voteRuns(in.ID) && !s.lessor.Table().Alive(in.Cookie, s.now())
}

// crashCountChanged reports whether p joined in with another crash count.
func crashCountChanged(in Info, p *djinnpb.Ref, crash int64) bool {
	k := partKey(p)
	for _, q := range in.Parts {
		if partKey(q.Ref) == k {
			return q.Crash != crash
		}
	}
	return false
}

// voteRuns reports whether a vote of transaction id runs on this leader.
func (s *Service) voteRuns(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.votes[id]
	return ok
}

// Describe returns a transaction with its participants and, on the
// leader, the failing calls to them.
// Only the principal that created the transaction sees it; others get
// UnknownTransaction.
func (s *Service) Describe(ctx context.Context, id uint64) (*djinnpb.TransactionDescription, error) {
	in, err := s.owned(ctx, id)
	// A deposed leader must not describe as ACTIVE a transaction its
	// successor may have decided, nor deny one its successor created.
	if err = s.lessor.ConfirmRead("transaction manager", err); err != nil {
		return nil, err
	}
	return s.describe(in, true), nil
}

func (s *Service) describe(in Info, calls bool) *djinnpb.TransactionDescription {
	d := &djinnpb.TransactionDescription{Id: in.ID, State: in.State, ParentId: in.Parent, Children: in.Children}
	if in.Remote != nil {
		d.ParentId, d.ParentManager = in.RemoteID, in.Remote.GetManager()
	}
	now := s.now()
	if li, ok := s.lessor.Table().Lookup(in.Cookie, now); ok {
		d.Lease = lease.Proto(s.self(), in.Cookie, djinn.Remaining(li.Expires, now))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range in.Parts {
		ps := &djinnpb.ParticipantStatus{Participant: p.Ref, CrashCount: p.Crash, Vote: p.Vote, Notified: p.Notified}
		if c, ok := s.calls[callKey{in.ID, i}]; calls && ok && c.lastErr != nil {
			ps.LastError = s.cfg.ErrorProto(c.lastErr)
			ps.FailingSinceUnixNanos = c.since.UnixNano()
		}
		d.Participants = append(d.Participants, ps)
	}
	return d
}

// MaxList bounds one page of List.
const MaxList = 10000

// listBytes bounds a page of List as a ListTransactionsResponse carries
// it: wire.MaxReply (tests make it smaller).
var listBytes = wire.MaxReply

// List returns a page of the caller's transactions, by id: those above
// after, in state (0: any), at most limit (0: 1000), and the id to pass as
// after for the next page (0: none; one may lead to an empty page, the
// last). A page in a state ends sooner when many of the caller's
// transactions in other states lie on the way (State.List); one of large
// descriptions, before the ListTransactionsResponse carrying it passes
// wire.MaxReply (what a client receives by default less room around it);
// one description past it alone is refused ResourceExhausted, naming the
// transaction and the after to list past it.
func (s *Service) List(ctx context.Context, after uint64, limit int, state djinnpb.TransactionState) ([]*djinnpb.TransactionDescription, uint64, error) {
	switch {
	case limit < 0 || limit > MaxList:
		return nil, 0, djinn.Errorf(djinn.InvalidArgument, "limit %d: must be 0 (the default, 1000) to %d", limit, MaxList)
	case limit == 0:
		limit = 1000
	}
	if _, ok := djinnpb.TransactionState_name[int32(state)]; !ok {
		return nil, 0, djinn.Errorf(djinn.InvalidArgument, "state %d: unknown", state)
	}
	if err := s.leading(); err != nil {
		return nil, 0, err
	}
	ins, next := s.state.List(principal.From(ctx), after, limit, state)
	out := make([]*djinnpb.TransactionDescription, 0, len(ins))
	size := 0
	for _, in := range ins {
		d := s.describe(in, false)
		size += wire.FieldSize(listTransactions, d)
		// The page's next, should it end here, names this one.
		if size+protowire.SizeTag(listNext)+protowire.SizeVarint(in.ID) > listBytes {
			if len(out) == 0 {
				return nil, 0, djinn.Errorf(djinn.ResourceExhausted, "transaction %d: its description takes %d bytes, past the %d a page holds (what a client receives by default less room around it); list past it with after_id %d",
					in.ID, proto.Size(d), listBytes, in.ID)
			}
			next = out[len(out)-1].GetId()
			break
		}
		out = append(out, d)
	}
	return out, next, nil
}

// The field numbers of a ListTransactionsResponse's transactions and
// next_after_id.
const (
	listTransactions protowire.Number = 1
	listNext         protowire.Number = 2
)

// Promote adds participants to an ACTIVE transaction and drops one, as a
// nested transaction's manager does when it commits (TX.2.7): a crash
// count other than the one already known aborts the transaction
// (CrashCount).
func (s *Service) Promote(ctx context.Context, id uint64, secret djinn.ID, parts []*djinnpb.Ref, crashes []int64, drop *djinnpb.Ref) error {
	if len(parts) != len(crashes) {
		return djinn.Errorf(djinn.InvalidArgument, "promote: %d participants but %d crash counts", len(parts), len(crashes))
	}
	// Each participant as Join checks it: ids of 16 bytes (its key) and
	// an endpoint to call; drop names one by its ids.
	for i, p := range parts {
		if p == nil {
			return djinn.Errorf(djinn.InvalidArgument, "promote: participant %d missing (null)", i)
		}
		if _, err := wire.RefTo(fmt.Sprintf("promote: participant %d", i), p); err != nil {
			return err
		}
	}
	if drop != nil {
		if _, err := wire.RefFrom("promote: drop", drop); err != nil {
			return err
		}
	}
	in, err := s.capable(id, secret)
	if err != nil {
		return err
	}
	if in.State == Active && s.voteRuns(id) {
		return djinn.Errorf(djinn.CannotJoin, "transaction %d: its commit is under way (VOTING), so nothing can be promoted into it", id)
	}
	if s.leaseEnded(in) {
		return djinn.Errorf(djinn.CannotJoin, "transaction %d: its lease ended, so it aborted: nothing can be promoted into it", id)
	}
	if len(in.Parts)+len(parts) > s.cfg.MaxParticipants {
		return djinn.Errorf(djinn.ResourceExhausted, "transaction %d would have %d participants, the most allowed is %d", id, len(in.Parts)+len(parts), s.cfg.MaxParticipants)
	}
	_, err = s.log.Propose(ctx, &statepb.Command{NowUnixNanos: s.now().UnixNano(), Op: &statepb.Command_TxnPromote{TxnPromote: &statepb.TxnPromote{
		Id: id, Participants: parts, CrashCounts: crashes, Drop: drop,
	}}})
	return err
}

// CheckOwner is the ownership rule of commit, abort and describe: it
// answers UnknownTransaction when transaction id belongs to another
// principal than the caller's (for the caller it does not exist), and nil
// otherwise — a transaction that does not exist is left to the call.
func (s *Service) CheckOwner(ctx context.Context, id uint64) error {
	if in, err := s.state.Get(id); err == nil && in.Principal != principal.From(ctx) {
		return unknown(id)
	}
	return nil
}

func (s *Service) owned(ctx context.Context, id uint64) (Info, error) {
	in, err := s.get(id)
	if err != nil {
		return Info{}, err
	}
	if in.Principal != principal.From(ctx) {
		return Info{}, unknown(id)
	}
	return in, nil
}

// Commit commits a transaction (TX.2.5): it returns once the transaction
// is COMMITTED (CannotCommit if it aborts), and with waitFor, once every
// participant has been told, or TimeoutExpired{committed} after waitFor.
//
// A top-level transaction is voted without a VOTING record (vote.go); a
// nested one records VOTING first.
func (s *Service) Commit(ctx context.Context, id uint64, waitFor *time.Duration) error {
	if err := CheckWaitFor(waitFor); err != nil {
		return err
	}
	in, err := s.owned(ctx, id)
	if err != nil {
		return err
	}
	resumed := in.State == Voting // a vote another leader may have begun
	if in.State == Active {
		if !s.lessor.Table().Alive(in.Cookie, s.now()) {
			return djinn.Errorf(djinn.CannotCommit, "transaction %d: its lease ended, so it aborted; renew a transaction's lease while the work goes on", id)
		}
		if in.Parent != 0 || in.Remote != nil {
			res, err := s.log.Propose(ctx, &statepb.Command{Op: &statepb.Command_TxnVoting{TxnVoting: &statepb.TxnVoting{Id: id, PrepareOnly: true}}})
			if err != nil {
				return err
			}
			in = res.(Info)
		}
	}
	var voted <-chan struct{}
	if in.State == Active || in.State == Voting {
		voted = s.startVote(id, resumed)
	}
	select {
	case <-in.Decided:
	case <-voted:
		select {
		case <-in.Decided:
		default:
			return djinn.Errorf(djinn.Unavailable, "transaction %d: the vote stopped undecided (this node stopped leading); commit again", id)
		}
	case <-ctx.Done():
		return ctx.Err()
	}
	st, err := s.state.StateOf(id)
	if err != nil {
		return err
	}
	if st != Committed {
		return djinn.Errorf(djinn.CannotCommit, "transaction %d: aborted", id)
	}
	s.Commits.Add(1)
	return s.wait(ctx, in, waitFor, true)
}

// Abort aborts a transaction (TX.2.5): CannotAbort once it committed.
func (s *Service) Abort(ctx context.Context, id uint64, waitFor *time.Duration) error {
	if err := CheckWaitFor(waitFor); err != nil {
		return err
	}
	if _, err := s.owned(ctx, id); err != nil {
		return err
	}
	res, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: s.now().UnixNano(), Op: &statepb.Command_TxnDecide{TxnDecide: &statepb.TxnDecide{Id: id}}})
	if err != nil {
		return err
	}
	s.Aborts.Add(1)
	return s.wait(ctx, res.(Info), waitFor, false)
}

// CheckWaitFor refuses a negative waitFor, before a commit or an abort
// does anything: refused, the call must have changed nothing.
func CheckWaitFor(waitFor *time.Duration) error {
	if waitFor != nil && *waitFor < 0 {
		// Not FormatDuration: a waitFor has no Any, and -1ns is named so.
		return djinn.Errorf(djinn.InvalidArgument, "waitFor %s: must not be negative; give 0 or more, or leave it out to return once the outcome is decided", waitFor.String())
	}
	return nil
}

// wait waits, for the waitFor forms (checked by CheckWaitFor), until
// every participant has been told the outcome.
func (s *Service) wait(ctx context.Context, in Info, waitFor *time.Duration, committed bool) error {
	if waitFor == nil {
		return nil
	}
	select {
	case <-in.Settled:
		return nil // settled already: no race with a zero wait
	default:
	}
	t := time.NewTimer(*waitFor)
	defer t.Stop()
	select {
	case <-in.Settled:
		return nil
	case <-t.C:
		return &djinn.Error{Kind: djinn.TimeoutExpired, Committed: committed,
			Message: "the transaction's outcome was not told to every participant within waitFor; the manager goes on telling them"}
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startVote runs the vote of transaction id, once per leader, and
// returns a channel closed when it ends (decided, or undecided because
// this node stopped leading); resumed if an earlier leader may have begun
// it. A transaction no longer ACTIVE or VOTING is not voted: the channel
// is then closed at once.
//
// Only while Run runs: a transaction moved to VOTING just before (or
// after) is voted by the Run that starts next, which resumes every VOTING
// transaction. Run waits for the votes it owns before it returns.
func (s *Service) startVote(id uint64, resumed bool) <-chan struct{} {
	in, err := s.state.Get(id)
	if err != nil || (in.State != Active && in.State != Voting) {
		return closedChan
	}
	s.mu.Lock()
	if v, ok := s.votes[id]; ok {
		s.mu.Unlock()
		return v.done
	}
	if !s.running {
		s.mu.Unlock()
		return closedChan
	}
	v := s.newVote(in, resumed, s.work, s.termCtx)
	s.votes[id] = v
	s.voting.Add(1)
	s.mu.Unlock()
	v.begin()
	return v.done
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (s *Service) backoff(attempt int) time.Duration {
	d := s.cfg.MinRetry << min(attempt, 20)
	if d <= 0 || d > s.cfg.MaxRetry {
		d = s.cfg.MaxRetry
	}
	return d/2 + rand.N(d/2+1)
}

// ForceAbort aborts a transaction whoever owns it: an operator's action.
// CannotAbort once it committed.
func (s *Service) ForceAbort(ctx context.Context, id uint64) error {
	if _, err := s.get(id); err != nil {
		return err
	}
	if _, err := s.log.Propose(ctx, &statepb.Command{NowUnixNanos: s.now().UnixNano(), Op: &statepb.Command_TxnDecide{TxnDecide: &statepb.TxnDecide{Id: id}}}); err != nil {
		return err
	}
	s.Aborts.Add(1)
	return nil
}
