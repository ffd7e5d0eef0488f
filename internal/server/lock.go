package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// LockID is the object id of the lock service (and its transaction
// participant).
var LockID = djinn.ID{'l', 'o', 'c', 'k'}

// LockConfig tunes the lock service.
type LockConfig struct {
	Enabled           bool     `toml:"enabled"`
	DefaultSetLease   Duration `toml:"default-set-lease"` // lock set lease granted for Any
	MaxSetLease       Duration `toml:"max-set-lease"`
	DefaultOwnerLease Duration `toml:"default-owner-lease"` // lock owner lease granted for Any
	MaxOwnerLease     Duration `toml:"max-owner-lease"`
	MaxSets           int      `toml:"max-sets"`
	MaxOwners         int      `toml:"max-owners"`

	// grace and voteCheck, when set (tests, which cannot wait the
	// defaults out), stand for the lock service's lock.Config Grace and
	// VoteCheck.
	grace, voteCheck time.Duration
}

func (c *LockConfig) check() error {
	if err := positive("lock max-sets", c.MaxSets); err != nil {
		return err
	}
	if err := positive("lock max-owners", c.MaxOwners); err != nil {
		return err
	}
	if err := leasePolicy("lock default-set-lease, max-set-lease", "", c.DefaultSetLease, c.MaxSetLease); err != nil {
		return err
	}
	return leasePolicy("lock default-owner-lease, max-owner-lease", "", c.DefaultOwnerLease, c.MaxOwnerLease)
}

// lockPart is the lock service (the OMG concurrency service): a lock
// set's id is the capability to lock and unlock in it (never to destroy:
// that is its lease's), a lock owner's lease cookie names the owner.
func lockPart(s *Server) *part {
	c := s.cfg.Lock
	var st *lock.State
	return &part{
		name:    "lock",
		joins:   &joinKind{typ: service.LockServiceType, title: "djinn lock service"},
		enabled: c.Enabled,
		state: func(m *state.Machine) error {
			st = lock.NewState(m.Leases, m.Rules)
			return m.Add(st.Part())
		},
		open: func() (err error) {
			s.lock, err = lock.NewService(st, s.lessor, s.node, s.now, s.ref(LockID), lock.Config{
				Sets:      lease.Policy{Default: time.Duration(c.DefaultSetLease), Max: time.Duration(c.MaxSetLease)},
				Owners:    lease.Policy{Default: time.Duration(c.DefaultOwnerLease), Max: time.Duration(c.MaxOwnerLease)},
				MaxSets:   c.MaxSets,
				MaxOwners: c.MaxOwners,
				Joiner:    lockJoiner{s: s},
				Grace:     c.grace,
				VoteCheck: c.voteCheck,
				Logger:    s.log,
			})
			return err
		},
		serve: func(r *registrar) error {
			return r.serve(&djinnpb.LockService_ServiceDesc, &lockRPC{s: s}, Rules{
				"CreateSet": authenticated, "CreateOwner": authenticated,
				"Lock": checking(capability, func(req *djinnpb.LockRequest) error {
					return s.lockArgs(req.GetHolder(), lockModeArg{"mode", req.GetMode(), false})
				}),
				"ChangeMode": checking(capability, func(req *djinnpb.ChangeModeRequest) error {
					if req.GetHeld() == djinnpb.LockMode_LOCK_MODE_UNSPECIFIED {
						return errHeldMissing
					}
					return s.lockArgs(req.GetHolder(), lockModeArg{"mode", req.GetMode(), false}, lockModeArg{"held mode", req.GetHeld(), true})
				}),
				"Unlock": checking(capability, func(req *djinnpb.UnlockRequest) error {
					return s.lockArgs(req.GetHolder(), lockModeArg{"mode", req.GetMode(), false})
				}),
				"DropLocks": capability,
				"Describe":  capability, "ValidateFence": capability,
			})
		},
		run:     func(ctx context.Context) { s.lock.Run(ctx) },
		ref:     s.ref(LockID),
		metrics: func() []prometheus.Collector { return lockMetrics(st) },
		list:    map[string]lister{"lock-sets": func(f map[string]string) ([]*djinnpb.Resource, error) { return s.listLockSets(st)(f) }},
		page: &page{title: "Lock sets", actions: drop(s), view: func(ctx context.Context, _ url.Values) (any, error) {
			return s.lockView(ctx, st), nil
		}},
		status: func(resp *djinnpb.StatusResponse) {
			sets, owners := st.Len()
			resp.Counts["lock_sets"], resp.Counts["lock_owners"] = int64(sets), int64(owners)
			if c.Enabled {
				resp.Lock = refProto(s.ref(LockID)())
			}
		},
	}
}

func lockMetrics(st *lock.State) []prometheus.Collector {
	const name, help = "djinn_lock_requests_total", "Lock requests as this node applied them, by outcome: granted (at once or after waiting), queued, refused (a try), deadlock."
	c := &st.Counts
	return []prometheus.Collector{
		gauge("djinn_lock_sets", "Lock sets.", func() float64 { n, _ := st.Len(); return float64(n) }),
		gauge("djinn_lock_owners", "Lock owners.", func() float64 { _, n := st.Len(); return float64(n) }),
		gauge("djinn_lock_waiters", "Lock requests waiting in a queue.", func() float64 { return float64(len(st.Waiting())) }),
		gauge("djinn_lock_aborted_votes", "ABORTED votes kept until their transaction managers have decided.", func() float64 { return float64(st.Votes()) }),
		labelled(name, help, "outcome", "granted", func() float64 { return float64(c.Granted.Load()) }),
		labelled(name, help, "outcome", "queued", func() float64 { return float64(c.Queued.Load()) }),
		labelled(name, help, "outcome", "refused", func() float64 { return float64(c.Refused.Load()) }),
		labelled(name, help, "outcome", "deadlock", func() float64 { return float64(c.Deadlocks.Load()) }),
	}
}

// The console's lock page in JSON: a set with its holders (their modes,
// counts and fencing tokens) and its FIFO queue of waiters.
type (
	lockHeldView struct {
		Mode  string `json:"mode"`
		Fence uint64 `json:"fence"`
	}
	lockHolderView struct {
		Holder string         `json:"holder"`
		Counts map[string]int `json:"counts"`
		Locks  []lockHeldView `json:"locks"`
	}
	lockWaiterView struct {
		Holder  string `json:"holder"`
		Mode    string `json:"mode"`
		From    string `json:"from,omitempty"`
		Request string `json:"request"`
	}
	lockSetView struct {
		ID            string           `json:"id"`
		Lease         string           `json:"lease"`
		Principal     string           `json:"principal"`
		Transactional bool             `json:"transactional"`
		Fence         uint64           `json:"fence"`
		Holders       []lockHolderView `json:"holders"`
		Waiters       []lockWaiterView `json:"waiters"`
		Expires       *int64           `json:"expires"`
	}
)

// lockView is the console's lock page: every set with its holders and
// waiters: the sets the reader sees (sees); the totals count every one.
func (s *Server) lockView(ctx context.Context, st *lock.State) any {
	_, owners := st.Len()
	v := struct {
		Now       int64         `json:"now"`
		Owners    int           `json:"owners"`
		Waiting   int           `json:"waiting"`
		Deadlocks uint64        `json:"deadlocks"`
		Sets      []lockSetView `json:"sets"`
	}{Now: s.nowMs(), Owners: owners, Waiting: len(st.Waiting()), Deadlocks: st.Counts.Deadlocks.Load(), Sets: []lockSetView{}}
	for _, sv := range st.Sets() {
		if len(v.Sets) == maxListed {
			break
		}
		if !sees(ctx, s.principalOf(sv.Cookie)) {
			continue
		}
		v.Sets = append(v.Sets, s.lockSetView(sv))
	}
	return v
}

// lockSetView is one set as the console shows it: ids and leases by
// fingerprint, holders and waiters by name.
func (s *Server) lockSetView(sv lock.SetView) lockSetView {
	g := lockSetView{ID: fingerprint(sv.ID), Lease: fingerprint(sv.Cookie), Principal: s.principalOf(sv.Cookie), Transactional: sv.Transactional, Fence: sv.Fence,
		Holders: []lockHolderView{}, Waiters: []lockWaiterView{}, Expires: s.expiresMs(sv.Cookie)}
	for _, h := range sv.Holders {
		hv := lockHolderView{Holder: lockHolderName(h), Counts: map[string]int{}, Locks: []lockHeldView{}}
		for _, l := range h.Locks {
			hv.Counts[l.Mode.String()]++
			hv.Locks = append(hv.Locks, lockHeldView{Mode: l.Mode.String(), Fence: l.Fence})
		}
		g.Holders = append(g.Holders, hv)
	}
	for _, w := range sv.Waiters {
		wv := lockWaiterView{Holder: lockHolderName(w.HolderView), Mode: w.Mode.String(), Request: fmt.Sprintf("%016x", w.Request)}
		if w.From.Valid() {
			wv.From = w.From.String()
		}
		g.Waiters = append(g.Waiters, wv)
	}
	return g
}

// lockHolderName names a holder on the console: a transaction by its id,
// an owner by the fingerprint of its cookie.
func lockHolderName(h lock.HolderView) string {
	if h.IsTxn {
		return fmt.Sprintf("transaction %d", h.Txn.ID)
	}
	return "owner " + fingerprint(h.Owner)
}

// lockRPC serves the LockService.
type lockRPC struct {
	djinnpb.UnimplementedLockServiceServer
	s *Server
}

func (r *lockRPC) CreateSet(ctx context.Context, req *djinnpb.CreateLockSetRequest) (*djinnpb.LockSetCreated, error) {
	c, err := r.s.lock.CreateSet(ctx, req.GetRelated(), req.GetTransactional(), time.Duration(req.GetLeaseDurationNanos()))
	if err != nil {
		return nil, err
	}
	return &djinnpb.LockSetCreated{SetId: c.ID[:], Lease: c.Lease, Service: refProto(r.s.ref(LockID)())}, nil
}

func (r *lockRPC) CreateOwner(ctx context.Context, req *djinnpb.CreateLockOwnerRequest) (*djinnpb.LockOwner, error) {
	c, err := r.s.lock.CreateOwner(ctx, time.Duration(req.GetLeaseDurationNanos()))
	if err != nil {
		return nil, err
	}
	return &djinnpb.LockOwner{Lease: c.Lease}, nil
}

// holder returns the request's holder; with neither an owner nor a
// transaction, the transaction in the call's metadata (the spec's current
// transaction, implicit mode).
func (r *lockRPC) holder(ctx context.Context, h *djinnpb.LockHolder) (*djinnpb.LockHolder, error) {
	if h != nil && (len(h.GetOwner()) > 0 || h.GetTransaction() != nil) {
		return h, nil
	}
	tx, err := client.TransactionFromIncoming(ctx, r.s.pool)
	if err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "the call's transaction: %v", err)
	}
	if tx == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lock holder: missing: name an owner or a transaction, or call within a transaction")
	}
	return &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{Manager: refProto(tx.Manager().Ref()), Id: tx.ID(), Secret: wire.TxnSecretBytes(tx.Secret())}}, nil
}

// lockModeArg is a mode a request names: what names it, and whether 0
// (none) is taken.
type lockModeArg struct {
	what string
	mode djinnpb.LockMode
	zero bool
}

// errHeldMissing refuses a ChangeMode without the mode held.
var errHeldMissing = djinn.Errorf(djinn.InvalidArgument, "held mode: missing")

// lockArgs checks the arguments of a lock request that do not depend on
// its set: its holder's form and its modes. The rule of the call runs it
// before the set is looked at (Rule.Args). A transaction's manager
// reference is checked as the lock service checks it (lock.Service.
// CheckHolder): strictly for a transaction new to it, as stored for one it
// holds already — whatever the set.
func (s *Server) lockArgs(h *djinnpb.LockHolder, modes ...lockModeArg) error {
	for _, m := range modes {
		mode, err := lockMode(m.what, m.mode)
		if err != nil {
			return err
		}
		if err := lock.CheckMode(m.what, mode, m.zero); err != nil {
			return err
		}
	}
	return s.lock.CheckHolder(h)
}

// lockMode is a request's mode as the lock service takes it. Proto enums
// are open: a number no mode has arrives as sent, and past a byte it is
// refused here, naming it, rather than cut to another mode (261 to w);
// the lock service checks the rest.
func lockMode(what string, m djinnpb.LockMode) (lock.Mode, error) {
	if m < 0 || m > math.MaxUint8 {
		return 0, djinn.Errorf(djinn.InvalidArgument, "%s %d: want a lock mode (ir, r, u, iw or w)", what, m)
	}
	return lock.Mode(m), nil
}

func (r *lockRPC) Lock(ctx context.Context, req *djinnpb.LockRequest) (*djinnpb.LockResponse, error) {
	h, err := r.holder(ctx, req.GetHolder())
	if err != nil {
		return nil, err
	}
	mode, err := lockMode("mode", req.GetMode())
	if err != nil {
		return nil, err
	}
	ok, fence, err := r.s.lock.Lock(ctx, req.GetSetId(), h, mode, 0, req.GetTry(), req.GetRequestId())
	if err != nil {
		return nil, err
	}
	return &djinnpb.LockResponse{Granted: ok, Fence: fence}, nil
}

func (r *lockRPC) ChangeMode(ctx context.Context, req *djinnpb.ChangeModeRequest) (*djinnpb.LockResponse, error) {
	h, err := r.holder(ctx, req.GetHolder())
	if err != nil {
		return nil, err
	}
	if req.GetHeld() == djinnpb.LockMode_LOCK_MODE_UNSPECIFIED {
		return nil, errHeldMissing
	}
	mode, err := lockMode("mode", req.GetMode())
	if err != nil {
		return nil, err
	}
	held, err := lockMode("held mode", req.GetHeld())
	if err != nil {
		return nil, err
	}
	ok, fence, err := r.s.lock.Lock(ctx, req.GetSetId(), h, mode, held, false, req.GetRequestId())
	if err != nil {
		return nil, err
	}
	return &djinnpb.LockResponse{Granted: ok, Fence: fence}, nil
}

func (r *lockRPC) Unlock(ctx context.Context, req *djinnpb.UnlockRequest) (*djinnpb.UnlockResponse, error) {
	h, err := r.holder(ctx, req.GetHolder())
	if err != nil {
		return nil, err
	}
	mode, err := lockMode("mode", req.GetMode())
	if err != nil {
		return nil, err
	}
	if err := r.s.lock.Unlock(ctx, req.GetSetId(), h, mode); err != nil {
		return nil, err
	}
	return &djinnpb.UnlockResponse{}, nil
}

func (r *lockRPC) DropLocks(ctx context.Context, req *djinnpb.DropLocksRequest) (*djinnpb.DropLocksResponse, error) {
	t := req.GetTransaction()
	if t == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "transaction: missing")
	}
	if err := r.s.lock.DropLocks(ctx, req.GetSetId(), t.GetManager(), t.GetId(), t.GetSecret()); err != nil {
		return nil, err
	}
	return &djinnpb.DropLocksResponse{}, nil
}

// Describe answers a lock set's description (describeLockSet), within
// wire.MaxReply: what a client receives by default less room around it.
func (r *lockRPC) Describe(ctx context.Context, req *djinnpb.LockSetRequest) (*djinnpb.LockSetDescription, error) {
	v, l, err := r.s.lock.Describe(ctx, req.GetSetId())
	if err != nil {
		return nil, err
	}
	return describeLockSet(v, l, wire.MaxReply, req.GetPartial())
}

// describeLockSet is set v's description, with lease l, of at most
// maxBytes: its holders, then its waiters in queue order, while they fit,
// the totals counting them all. A description that does not fit whole is
// answered only when partial is asked for; to a request without it (a
// client's before the totals, which would take the part for the whole)
// it is refused ResourceExhausted naming the counts. Paging would make a
// description of moments apart; it is a diagnostic, so the first of them
// and the counts are what is kept.
func describeLockSet(v lock.SetView, l *djinnpb.Lease, maxBytes int, partial bool) (*djinnpb.LockSetDescription, error) {
	d := &djinnpb.LockSetDescription{SetId: v.ID[:], Transactional: v.Transactional, Lease: l, LastFence: v.Fence,
		HoldersTotal: int64(len(v.Holders)), WaitersTotal: int64(len(v.Waiters))}
	for _, id := range v.Related {
		d.Related = append(d.Related, id[:])
	}
	size := proto.Size(d)
	fits := func(field protowire.Number, m proto.Message) bool {
		n := wire.FieldSize(field, m)
		if size+n > maxBytes {
			return false
		}
		size += n
		return true
	}
	grants := 0
	for _, h := range v.Holders {
		grants += len(h.Locks)
	}
	for _, h := range v.Holders {
		hd := &djinnpb.LockHolding{Holder: holderProto(h), Counts: make([]uint32, lock.W+1)}
		for _, l := range h.Locks {
			hd.Counts[l.Mode]++
			hd.Fences = append(hd.Fences, l.Fence)
		}
		if !fits(5, hd) {
			break
		}
		d.Holders = append(d.Holders, hd)
	}
	for _, w := range v.Waiters {
		wd := &djinnpb.LockWaiter{Holder: holderProto(w.HolderView), Mode: djinnpb.LockMode(w.Mode),
			Held: djinnpb.LockMode(w.From), RequestId: w.Request}
		if !fits(6, wd) {
			break
		}
		d.Waiters = append(d.Waiters, wd)
	}
	if (len(d.Holders) < len(v.Holders) || len(d.Waiters) < len(v.Waiters)) && !partial {
		return nil, djinn.Errorf(djinn.ResourceExhausted,
			"lock set %s: %d holders (of %d locks) and %d waiters pass the %d bytes a description holds (what a client receives by default less room around it): ask with partial for the first of them and the counts (the client library's Describe does)",
			v.ID, len(v.Holders), grants, len(v.Waiters), maxBytes)
	}
	return d, nil
}

// holderProto names a holder on the wire: an owner by a fingerprint of its
// cookie (the cookie is a capability, and anyone who knows the set may
// describe it); a transaction's manager by its identity (service and
// object ids), not its endpoint.
func holderProto(h lock.HolderView) *djinnpb.LockHolder {
	if !h.IsTxn {
		sum := sha256.Sum256(h.Owner[:])
		return &djinnpb.LockHolder{OwnerFingerprint: sum[:16]}
	}
	return &djinnpb.LockHolder{Transaction: &djinnpb.TransactionRef{
		Manager: &djinnpb.Ref{ServiceId: h.Txn.Manager[:16], ObjectId: h.Txn.Manager[16:]}, Id: h.Txn.ID}}
}

func (r *lockRPC) ValidateFence(ctx context.Context, req *djinnpb.ValidateFenceRequest) (*djinnpb.ValidateFenceResponse, error) {
	ok, err := r.s.lock.Validate(req.GetSetId(), req.GetFence())
	if err != nil {
		return nil, err
	}
	return &djinnpb.ValidateFenceResponse{Valid: ok}, nil
}

// lockJoiner joins the lock service to transactions: of this server's
// manager in process while it leads, of others over the pool.
type lockJoiner struct {
	s *Server
}

func (j lockJoiner) Join(ctx context.Context, mgr djinn.Ref, id uint64, secret djinn.ID, self *djinnpb.Ref, crash int64) (*djinnpb.JoinTransactionResponse, error) {
	if j.s.localManager(mgr) {
		err := j.s.txn.Join(ctx, id, secret, self, crash)
		if err == nil {
			ids, mgrs, err := j.s.txn.Ancestors(id)
			if err != nil {
				return nil, err
			}
			return &djinnpb.JoinTransactionResponse{Ancestors: ids, AncestorManagers: mgrs}, nil
		}
		if djinn.KindOf(err) != djinn.Unavailable {
			return nil, err
		}
	}
	return j.s.otherManagers().Join(ctx, mgr, id, secret, self, crash)
}

// GetState asks a transaction's state: of this server's manager in
// process while it leads, of others over the pool.
func (j lockJoiner) GetState(ctx context.Context, mgr djinn.Ref, id uint64, secret djinn.ID) (djinnpb.TransactionState, error) {
	if j.s.localManager(mgr) {
		st, err := j.s.txn.GetState(ctx, id, secret)
		if djinn.KindOf(err) != djinn.Unavailable {
			return st, err
		}
	}
	return j.s.otherManagers().GetState(ctx, mgr, id, secret)
}

// listLockSets lists the lock service's sets.
func (s *Server) listLockSets(st *lock.State) lister {
	return func(map[string]string) ([]*djinnpb.Resource, error) {
		var out []*djinnpb.Resource
		for _, v := range st.Sets() {
			d := map[string]string{"transactional": strconv.FormatBool(v.Transactional), "holders": itoa(len(v.Holders)), "waiters": itoa(len(v.Waiters))}
			if res, ok := s.leaseResource(v.ID.String(), v.Cookie, d); ok {
				out = append(out, res)
			}
		}
		return out, nil
	}
}
