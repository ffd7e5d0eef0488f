package server

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// TxnID is the object id of the transaction manager.
var TxnID = djinn.ID{'t', 'x', 'n'}

// TxnConfig tunes the transaction manager.
type TxnConfig struct {
	Enabled      bool     `toml:"enabled"`
	DefaultLease Duration `toml:"default-lease"` // transaction lease granted for Any
	MaxLease     Duration `toml:"max-lease"`
	MaxActive    int      `toml:"max-active"`
	// MaxRemembered bounds the settled transactions remembered for a
	// repeated commit or abort: beyond it the oldest are forgotten before
	// the retention time.
	MaxRemembered int `toml:"max-remembered"`
	// Abandon is how long a participant may stay unreachable before it is
	// reported (it is still retried).
	Abandon Duration `toml:"abandon"`
}

func (c *TxnConfig) check() error {
	if err := positive("txn max-active", c.MaxActive); err != nil {
		return err
	}
	if err := positive("txn max-remembered", c.MaxRemembered); err != nil {
		return err
	}
	if err := leasePolicy("txn default-lease", "max-lease", c.DefaultLease, c.MaxLease); err != nil {
		return err
	}
	if a := time.Duration(c.Abandon); a <= 0 {
		return djinn.Errorf(djinn.InvalidArgument, "txn abandon %s: must be positive", djinn.FormatDuration(a))
	}
	return nil
}

// txnPart is the transaction manager (TX): a transaction's creator owns
// it (commit, abort, describe); its manager's reference and id are the
// capability participants and nested managers join, ask and promote by.
func txnPart(s *Server) *part {
	c := s.cfg.Txn
	var st *txn.State
	return &part{
		name:    "txn",
		joins:   &joinKind{typ: service.TransactionManagerType, title: "djinn transaction manager"},
		enabled: c.Enabled,
		state: func(m *state.Machine) error {
			st = txn.NewState(m.Leases)
			s.txnSt = st
			return m.Add(st.Part())
		},
		open: func() (err error) {
			s.txn, err = txn.New(st, s.lessor, s.node, s.now, s.ref(TxnID), txn.Config{
				Lease:         lease.Policy{Default: time.Duration(c.DefaultLease), Max: time.Duration(c.MaxLease)},
				MaxActive:     c.MaxActive,
				MaxRemembered: c.MaxRemembered,
				Participants:  participants{s: s},
				Managers:      s.otherManagers(),
				Abandon:       time.Duration(c.Abandon),
				ErrorProto:    grpcerr.ToProto,
				Logger:        s.log,
			})
			return err
		},
		serve: func(r *registrar) error {
			owns := owner(func(ctx context.Context, req interface{ GetId() uint64 }) error {
				return s.txn.CheckOwner(ctx, req.GetId())
			})
			complete := checking(owns, func(req *djinnpb.CompleteTransactionRequest) error { return txn.CheckWaitFor(waitFor(req)) })
			return r.serve(&djinnpb.TransactionManager_ServiceDesc, &txnRPC{s: s}, Rules{
				"Create": authenticated, "List": authenticated, // a principal lists its own
				"Join": capability, "GetState": capability, "Promote": capability,
				"Commit": complete, "Abort": complete, "Describe": owns,
			})
		},
		run: func(ctx context.Context) { s.txn.Run(ctx) },
		ref: s.ref(TxnID),
		status: func(resp *djinnpb.StatusResponse) {
			txns, active := st.Len()
			resp.Counts["transactions"], resp.Counts["transactions_active"] = int64(txns), int64(active)
			// Decided, with participants still to tell (phase 2 under way).
			resp.Counts["transactions_unsettled"] = int64(st.UnsettledLen())
			if c.Enabled {
				resp.Txn = refProto(s.ref(TxnID)())
			}
		},
		metrics: func() []prometheus.Collector { return txnMetrics(st, s.txn) },
		pages: map[string]pager{"transactions": func(q pageQuery) ([]*djinnpb.Resource, string, int, error) {
			return s.pageTransactions(st)(q)
		}},
		listFilter: map[string]string{"transactions": "state"},
		page: &page{
			title:   "Transactions",
			view:    func(ctx context.Context, q url.Values) (any, error) { return s.txnView(ctx, st, q), nil },
			actions: map[string]func(context.Context, string) error{"abort": s.abortTxn},
		},
	}
}

func txnMetrics(st *txn.State, svc *txn.Service) []prometheus.Collector {
	return []prometheus.Collector{
		gauge("djinn_txn_transactions", "Transactions the manager remembers.", func() float64 { n, _ := st.Len(); return float64(n) }),
		gauge("djinn_txn_active", "Transactions not yet decided.", func() float64 { _, n := st.Len(); return float64(n) }),
		gauge("djinn_txn_unsettled", "Decided transactions with participants still to tell the outcome.", func() float64 { return float64(st.UnsettledLen()) }),
		gauge("djinn_txn_remembered", "Settled top-level transactions remembered for a repeated commit or abort, until the retention time or [txn] max-remembered.", func() float64 { return float64(st.Remembered()) }),
		counter("djinn_txn_created_total", "Transactions created through this node as leader.", func() float64 { return float64(svc.Created.Load()) }),
		counter("djinn_txn_commits_total", "Commits that returned COMMITTED on this node as leader.", func() float64 { return float64(svc.Commits.Load()) }),
		counter("djinn_txn_aborts_total", "Aborts requested through this node as leader.", func() float64 { return float64(svc.Aborts.Load()) }),
		counter("djinn_txn_mixed_outcomes_total", "Participants that answered an abort with CannotAbort (they committed).", func() float64 { return float64(svc.MixedOutcomes.Load()) }),
		labelled("djinn_txn_outcomes_total", "Transactions decided, by outcome, as this node applied them.", "state", "COMMITTED", func() float64 { return float64(st.Outcomes.Committed.Load()) }),
		labelled("djinn_txn_outcomes_total", "Transactions decided, by outcome, as this node applied them.", "state", "ABORTED", func() float64 { return float64(st.Outcomes.Aborted.Load()) }),
		gauge("djinn_txn_unreachable_participants", "Participants failing to take an outcome for longer than the abandon time (still retried).", func() float64 { return float64(svc.Unreachable.Load()) }),
	}
}

// txnView is the console's transaction page: the transactions of the
// highest ids (maxListed of them, by id down, read a step at a time: ids
// are random, so these are a sample of them, not the newest), their
// participants' votes and who has not been told the outcome yet;
// searched by state and principal. It lists the transactions the reader
// sees (sees); the totals count every one.
func (s *Server) txnView(ctx context.Context, st *txn.State, q url.Values) any {
	type part struct {
		Ref      string `json:"ref"`
		Vote     string `json:"vote"`
		Notified bool   `json:"notified"`
	}
	type transaction struct {
		ID           uint64 `json:"id,string"` // above 2^53: a string for JavaScript
		State        string `json:"state"`
		Principal    string `json:"principal"`
		Parent       uint64 `json:"parent,string"`
		Participants []part `json:"participants"`
		Untold       int    `json:"untold"`
	}
	v := struct {
		Now          int64         `json:"now"`
		Active       int           `json:"active"`
		Committed    uint64        `json:"committed"`
		Aborted      uint64        `json:"aborted"`
		Unreachable  int64         `json:"unreachable"`
		Transactions []transaction `json:"transactions"`
	}{Now: s.nowMs(), Committed: st.Outcomes.Committed.Load(), Aborted: st.Outcomes.Aborted.Load(), Unreachable: s.txn.Unreachable.Load(), Transactions: []transaction{}}
	_, v.Active = st.Len()
	for _, in := range highestSeen(ctx, st) {
		t := transaction{ID: in.ID, State: stateName(in.State), Principal: in.Principal, Parent: in.Parent, Participants: []part{}}
		if !sees(ctx, t.Principal) || q.Get("state") != "" && q.Get("state") != t.State || q.Get("principal") != "" && !strings.Contains(t.Principal, q.Get("principal")) {
			continue
		}
		decided := in.State == txn.Committed || in.State == txn.Aborted
		for _, p := range in.Parts {
			obj, _ := djinn.IDFromBytes("participant", p.Ref.GetObjectId())
			t.Participants = append(t.Participants, part{Ref: refString(p.Ref.GetEndpoint(), obj), Vote: stateName(p.Vote), Notified: p.Notified})
			if decided && !p.Notified {
				t.Untold++
			}
		}
		v.Transactions = append(v.Transactions, t)
	}
	return v
}

// stateName is a transaction state as the console prints it: ACTIVE,
// VOTING, PREPARED, NOTCHANGED, COMMITTED, ABORTED; "not voted" for a
// participant's vote not yet given.
func stateName(st djinnpb.TransactionState) string {
	if st == djinnpb.TransactionState_TRANSACTION_STATE_UNSPECIFIED {
		return "not voted"
	}
	return strings.TrimPrefix(st.String(), "TRANSACTION_STATE_")
}

// abortTxn is the operator's abort of transaction id, whoever owns it.
func (s *Server) abortTxn(ctx context.Context, id string) error {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		return djinn.Errorf(djinn.InvalidArgument, "transaction id %q: not a number", id)
	}
	return s.txn.ForceAbort(ctx, n)
}

// txnRPC serves the TransactionManager.
type txnRPC struct {
	djinnpb.UnimplementedTransactionManagerServer
	s *Server
}

func (r *txnRPC) Create(ctx context.Context, req *djinnpb.CreateTransactionRequest) (*djinnpb.CreatedTransaction, error) {
	d := time.Duration(req.GetLeaseDurationNanos())
	var c txn.Created
	var err error
	if pm := req.GetParentManager(); pm != nil {
		if req.GetParentId() == 0 {
			return nil, djinn.Errorf(djinn.InvalidArgument, "parent id: missing")
		}
		mgr, rerr := client.RefFromProto("parent manager", pm)
		if rerr != nil {
			return nil, rerr
		}
		secret, serr := wire.TxnSecret(req.GetParentSecret())
		if serr != nil {
			return nil, serr
		}
		c, err = r.s.txn.CreateUnder(ctx, mgr, req.GetParentId(), secret, d)
	} else if req.GetParentId() != 0 || len(req.GetParentSecret()) > 0 {
		// Not a top-level transaction the caller did not ask for: its
		// commit would not wait for the parent's.
		return nil, djinn.Errorf(djinn.InvalidArgument, "parent id %d and a parent secret of %d bytes without a parent manager: name the parent's manager (this one's reference for its own transactions), or leave the parent out for a top-level transaction", req.GetParentId(), len(req.GetParentSecret()))
	} else {
		c, err = r.s.txn.Create(ctx, d)
	}
	if err != nil {
		return nil, err
	}
	return &djinnpb.CreatedTransaction{Id: c.ID, Lease: c.Lease, Manager: refProto(r.s.ref(TxnID)()), Secret: c.Secret[:]}, nil
}

func (r *txnRPC) Join(ctx context.Context, req *djinnpb.JoinTransactionRequest) (*djinnpb.JoinTransactionResponse, error) {
	secret, err := wire.TxnSecret(req.GetSecret())
	if err != nil {
		return nil, err
	}
	if err := r.s.txn.Join(ctx, req.GetId(), secret, req.GetParticipant(), req.GetCrashCount()); err != nil {
		return nil, err
	}
	participants{r.s}.learnParticipant(ctx, req.GetParticipant())
	ids, mgrs, err := r.s.txn.Ancestors(req.GetId())
	if err != nil {
		return nil, err
	}
	return &djinnpb.JoinTransactionResponse{Ancestors: ids, AncestorManagers: mgrs}, nil
}

func (r *txnRPC) GetState(ctx context.Context, req *djinnpb.TransactionRequest) (*djinnpb.TransactionStateResponse, error) {
	secret, err := wire.TxnSecret(req.GetSecret())
	if err != nil {
		return nil, err
	}
	st, err := r.s.txn.GetState(ctx, req.GetId(), secret)
	if err != nil {
		return nil, err
	}
	return &djinnpb.TransactionStateResponse{State: st}, nil
}

func waitFor(req *djinnpb.CompleteTransactionRequest) *time.Duration {
	if req.WaitForNanos == nil {
		return nil
	}
	d := time.Duration(req.GetWaitForNanos())
	return &d
}

func (r *txnRPC) Commit(ctx context.Context, req *djinnpb.CompleteTransactionRequest) (*djinnpb.CompleteTransactionResponse, error) {
	if err := r.s.txn.Commit(ctx, req.GetId(), waitFor(req)); err != nil {
		return nil, err
	}
	return &djinnpb.CompleteTransactionResponse{}, nil
}

func (r *txnRPC) Abort(ctx context.Context, req *djinnpb.CompleteTransactionRequest) (*djinnpb.CompleteTransactionResponse, error) {
	if err := r.s.txn.Abort(ctx, req.GetId(), waitFor(req)); err != nil {
		return nil, err
	}
	return &djinnpb.CompleteTransactionResponse{}, nil
}

func (r *txnRPC) Promote(ctx context.Context, req *djinnpb.PromoteRequest) (*djinnpb.PromoteResponse, error) {
	secret, err := wire.TxnSecret(req.GetSecret())
	if err != nil {
		return nil, err
	}
	if err := r.s.txn.Promote(ctx, req.GetId(), secret, req.GetParticipants(), req.GetCrashCounts(), req.GetDrop()); err != nil {
		return nil, err
	}
	// The promoted participants are the transaction's now, as if they had
	// joined it: their clusters are learnt as a join's are, while the
	// members that joined them answer.
	for _, p := range req.GetParticipants() {
		participants{r.s}.learnParticipant(ctx, p)
	}
	return &djinnpb.PromoteResponse{}, nil
}

func (r *txnRPC) Describe(ctx context.Context, req *djinnpb.TransactionRequest) (*djinnpb.TransactionDescription, error) {
	return r.s.txn.Describe(ctx, req.GetId())
}

func (r *txnRPC) List(ctx context.Context, req *djinnpb.ListTransactionsRequest) (*djinnpb.ListTransactionsResponse, error) {
	txs, next, err := r.s.txn.List(ctx, req.GetAfterId(), int(req.GetLimit()), req.GetState())
	if err != nil {
		return nil, err
	}
	return &djinnpb.ListTransactionsResponse{Transactions: txs, NextAfterId: next}, nil
}

// pageTransactions lists the transaction manager's transactions a page
// at a time, named by id: the caller's own (or the principal's an
// operator names) from that principal's ids, every principal's from all
// of them, by id from the page's after; filter "state" keeps those in one
// state (ACTIVE, COMMITTED, …). A page looks at the transactions it holds
// and those of other states it skips on the way, never at other
// principals' (txn.State.List).
func (s *Server) pageTransactions(st *txn.State) pager {
	return func(q pageQuery) ([]*djinnpb.Resource, string, int, error) {
		var want djinnpb.TransactionState
		if name, ok := q.filter["state"]; ok {
			v, known := djinnpb.TransactionState_value["TRANSACTION_STATE_"+strings.ToUpper(name)]
			if !known || v == 0 {
				return nil, "", 0, djinn.Errorf(djinn.InvalidArgument, "state %q: want ACTIVE, VOTING, PREPARED, NOTCHANGED, COMMITTED or ABORTED", name)
			}
			want = djinnpb.TransactionState(v)
		}
		var after uint64
		if q.after != "" {
			n, err := strconv.ParseUint(q.after, 10, 64)
			if err != nil || strconv.FormatUint(n, 10) != q.after {
				return nil, "", 0, djinn.Errorf(djinn.InvalidArgument, "after %q: not a transaction id; ask after a page's next, or nothing for the first page", q.after)
			}
			after = n
		}
		var ins []txn.Info
		var next uint64
		var total int
		if q.all {
			ins, next = st.ListEvery(after, q.limit, want)
			total = st.CountEvery(want)
		} else {
			ins, next = st.List(q.principal, after, q.limit, want)
			total = st.Count(q.principal, want)
		}
		out := make([]*djinnpb.Resource, 0, len(ins))
		for _, in := range ins {
			out = append(out, s.txnResource(in))
		}
		if next == 0 {
			return out, "", total, nil
		}
		return out, strconv.FormatUint(next, 10), total, nil
	}
}

// txnResource is transaction in as Resources.List lists it.
func (s *Server) txnResource(in txn.Info) *djinnpb.Resource {
	parent := ""
	if in.Parent != 0 {
		parent = strconv.FormatUint(in.Parent, 10)
	}
	state := strings.TrimPrefix(in.State.String(), "TRANSACTION_STATE_")
	d := map[string]string{"state": state, "parent": parent, "participants": itoa(len(in.Parts))}
	res := &djinnpb.Resource{Name: strconv.FormatUint(in.ID, 10), Principal: in.Principal, LeaseCookie: in.Cookie[:], Details: d}
	if l, ok := s.leaseResource(res.Name, in.Cookie, d); ok {
		res.ExpiresUnixNanos = l.ExpiresUnixNanos
	} else {
		res.LeaseCookie = nil // decided: its lease ended
	}
	return res
}

// highestSeen returns the transactions of the console's transaction view:
// the highest ids of every principal's for a reader who sees them all, of
// its own principal's for one who sees its own alone (so that the others'
// do not crowd its own out of the view).
func highestSeen(ctx context.Context, st *txn.State) []txn.Info {
	if v, _ := ctx.Value(viewerKey{}).(viewer); v.set && !v.all {
		return st.HighestOf(v.principal, maxListed)
	}
	return st.Highest(maxListed)
}
