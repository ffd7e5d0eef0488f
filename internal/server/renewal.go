package server

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// RenewalID is the object id of the lease renewal service.
var RenewalID = djinn.ID{'r', 'e', 'n', 'e', 'w', 'a', 'l'}

// RenewalConfig tunes the lease renewal service.
type RenewalConfig struct {
	Enabled      bool     `toml:"enabled"`
	DefaultLease Duration `toml:"default-lease"` // set lease granted for Any
	MaxLease     Duration `toml:"max-lease"`     // longest set lease
	MaxSets      int      `toml:"max-sets"`
	// MaxLeases bounds the client leases of all sets.
	MaxLeases int `toml:"max-leases"`
}

func (c *RenewalConfig) check() error {
	if err := positive("renewal max-sets", c.MaxSets); err != nil {
		return err
	}
	if err := positive("renewal max-leases", c.MaxLeases); err != nil {
		return err
	}
	return leasePolicy("renewal default-lease", "max-lease", c.DefaultLease, c.MaxLease)
}

// renewalPart is the lease renewal service (LR): renewal sets, which
// their creator owns.
func renewalPart(s *Server) *part {
	c := s.cfg.Renewal
	var (
		st  *renewal.State
		svc *renewal.Service
	)
	return &part{
		name:    "renewal",
		joins:   &joinKind{typ: service.LeaseRenewalServiceType, title: "djinn lease renewal service"},
		enabled: c.Enabled,
		state: func(m *state.Machine) error {
			st = renewal.NewState(m.Leases, m.ServiceID)
			return m.Add(st.Part())
		},
		open: func() (err error) {
			svc, err = renewal.New(st, s.lessor, s.node, s.now, s.ref(RenewalID), renewal.Config{
				Lease:     lease.Policy{Default: time.Duration(c.DefaultLease), Max: time.Duration(c.MaxLease)},
				MaxSets:   c.MaxSets,
				MaxLeases: c.MaxLeases,
				Landlords: landlords{pool: s.pool},
				Delivery: event.Config{
					Sender: client.NewEventSender(s.pool), MaxBatch: 64,
					MinBackoff: 100 * time.Millisecond, MaxBackoff: 30 * time.Second,
				},
				Logger: s.log,
			})
			return err
		},
		serve: func(r *registrar) error {
			owns := owner(func(ctx context.Context, req interface{ GetSetId() []byte }) error {
				id, err := setID(req.GetSetId())
				if err != nil {
					return nil // the handler names the bad id
				}
				return svc.CheckOwner(ctx, id)
			})
			return r.serve(&djinnpb.LeaseRenewalService_ServiceDesc, &renewalRPC{svc: svc}, Rules{
				"CreateSet": authenticated, "GetSet": owns,
				"GetLeases": checking(owns, func(req *djinnpb.GetLeasesRequest) error { return renewal.CheckPage(int(req.GetMax()), req.GetAfter()) }),
				"RenewFor": checking(owns, func(req *djinnpb.RenewForRequest) error {
					return renewal.CheckRenewFor(req.GetLease(), time.Duration(req.GetDesiredDurationNanos()), time.Duration(req.GetRenewDurationNanos()))
				}),
				"Remove": checking(owns, func(req *djinnpb.RemoveRequest) error { return renewal.CheckLease(req.GetLease()) }),
				"SetExpirationWarningListener": checking(owns, func(req *djinnpb.SetExpirationWarningListenerRequest) error {
					return renewal.CheckListen(req.GetListener(), time.Duration(req.GetMinWarningNanos()), req.GetHandback())
				}),
				"SetRenewalFailureListener": checking(owns, func(req *djinnpb.SetRenewalFailureListenerRequest) error {
					return renewal.CheckListen(req.GetListener(), 0, req.GetHandback())
				}),
				"ClearExpirationWarningListener": owns, "ClearRenewalFailureListener": owns,
			})
		},
		run: func(ctx context.Context) { svc.Run(ctx) },
		ref: s.ref(RenewalID),
		status: func(resp *djinnpb.StatusResponse) {
			sets, leases := st.Len()
			resp.Counts["renewal_sets"], resp.Counts["renewal_leases"] = int64(sets), int64(leases)
			if c.Enabled {
				resp.Renewal = refProto(s.ref(RenewalID)())
			}
		},
		metrics: func() []prometheus.Collector { return renewalMetrics(st, svc) },
		list:    map[string]lister{"renewal-sets": func(f map[string]string) ([]*djinnpb.Resource, error) { return s.listRenewalSets(st)(f) }},
		page: &page{title: "Renewal sets", actions: drop(s), view: func(ctx context.Context, _ url.Values) (any, error) {
			return s.renewalView(ctx, st, svc), nil
		}},
	}
}

func renewalMetrics(st *renewal.State, svc *renewal.Service) []prometheus.Collector {
	return []prometheus.Collector{
		gauge("djinn_renewal_sets", "Lease renewal sets.", func() float64 { n, _ := st.Len(); return float64(n) }),
		gauge("djinn_renewal_leases", "Client leases in renewal sets.", func() float64 { _, n := st.Len(); return float64(n) }),
		counter("djinn_renewal_calls_total", "Renewal calls made to landlords by this node as leader.", func() float64 { return float64(svc.Calls.Load()) }),
		counter("djinn_renewal_renewed_total", "Client leases renewed and recorded by this node as leader.", func() float64 { return float64(svc.Renewed.Load()) }),
		counter("djinn_renewal_retried_total", "Client lease renewals that failed indefinitely and will be retried.", func() float64 { return float64(svc.Retried.Load()) }),
		counter("djinn_renewal_failed_total", "Client leases removed with a renewal failure event.", func() float64 { return float64(svc.Failed.Load()) }),
		counter("djinn_renewal_unrecorded_total", "Renewal outcomes the log did not take (renewed again).", func() float64 { return float64(svc.Unrecorded.Load()) }),
		counter("djinn_renewal_events_overflowed_total", "Renewal events not kept because their registration held its maximum undelivered.", func() float64 { return float64(st.Overflowed()) }),
	}
}

// renewalView is the console's renewal page: every set with its client
// leases (the first maxListed, and how many there are), their desired
// expirations and last failures, and its listeners: the sets the reader
// sees (sees); the totals count every set's.
func (s *Server) renewalView(ctx context.Context, st *renewal.State, svc *renewal.Service) any {
	type clientLease struct {
		Lease    string `json:"lease"`
		Landlord string `json:"landlord"`
		Expires  *int64 `json:"expires"`
		Desired  *int64 `json:"desired"`
		Error    string `json:"error,omitempty"`
	}
	type set struct {
		ID              string        `json:"id"`
		Lease           string        `json:"lease"`
		Principal       string        `json:"principal"`
		Expires         *int64        `json:"expires"`
		FailureListener string        `json:"failureListener"`
		WarningListener string        `json:"warningListener"`
		Leases          []clientLease `json:"leases"` // the first maxListed
		LeasesTotal     int           `json:"leasesTotal"`
	}
	v := struct {
		Now     int64  `json:"now"`
		Leases  int    `json:"leases"`
		Renewed uint64 `json:"renewed"`
		Failed  uint64 `json:"failed"`
		Sets    []set  `json:"sets"`
	}{Now: s.nowMs(), Renewed: svc.Renewed.Load(), Failed: svc.Failed.Load(), Sets: []set{}}
	for _, in := range st.List() {
		v.Leases += in.Leases
		if len(v.Sets) == maxListed || !sees(ctx, in.Principal) {
			continue
		}
		g := set{ID: fingerprint(in.ID), Lease: fingerprint(in.Cookie), Principal: in.Principal, Expires: s.expiresMs(in.Cookie),
			FailureListener: renewalListener(in.Listeners[0], false), WarningListener: renewalListener(in.Listeners[1], true), Leases: []clientLease{},
			LeasesTotal: in.Leases}
		cls, _ := st.FirstLeases(in.ID, maxListed)
		for _, c := range cls {
			cl := clientLease{Lease: fingerprint(c.Cookie), Landlord: refString(c.Landlord.Endpoint, c.Landlord.Object), Expires: unixMsOrForever(c.Actual), Desired: unixMsOrForever(c.Desired)}
			if c.LastErr != nil {
				cl.Error = c.LastErr.GetMessage()
			}
			g.Leases = append(g.Leases, cl)
		}
		v.Sets = append(v.Sets, g)
	}
	return v
}

// unixMsOrForever is t in Unix milliseconds, or nil for forever.
func unixMsOrForever(t time.Time) *int64 {
	if !t.Before(djinn.EndOfTime) {
		return nil
	}
	v := t.UnixMilli()
	return &v
}

// renewalListener describes a set's listener on the console: its
// reference and pending events, and for the warning listener how far
// ahead it warns; "" for none.
func renewalListener(l renewal.ListenerInfo, warning bool) string {
	if l.Target == nil {
		return ""
	}
	obj, _ := djinn.IDFromBytes("listener", l.Target.GetObjectId())
	out := fmt.Sprintf("%s (%d pending)", refString(l.Target.GetEndpoint(), obj), l.Pending)
	if warning {
		out += ", warns " + djinn.FormatDuration(l.MinWarning) + " ahead"
	}
	return out
}

// renewalRPC serves the LeaseRenewalService.
type renewalRPC struct {
	djinnpb.UnimplementedLeaseRenewalServiceServer
	svc *renewal.Service
}

func setID(b []byte) (djinn.ID, error) { return djinn.IDFromBytes("set id", b) }

func setProto(st renewal.Set) *djinnpb.RenewalSet {
	pb := &djinnpb.RenewalSet{Set: refProto(st.Ref), Lease: st.Lease, Leases: int64(st.Info.Leases)}
	for eid, l := range st.Info.Listeners {
		if l.Target == nil {
			continue
		}
		rl := &djinnpb.RenewalListener{
			Listener: l.Target, Handback: l.Handback, MinWarningNanos: int64(l.MinWarning),
			NextSequence: l.Next, PendingEvents: int64(l.Pending),
		}
		if int64(eid) == renewal.WarningEventID {
			pb.ExpirationWarning = rl
		} else {
			pb.RenewalFailure = rl
		}
	}
	return pb
}

func (r *renewalRPC) CreateSet(ctx context.Context, req *djinnpb.CreateSetRequest) (*djinnpb.RenewalSet, error) {
	st, err := r.svc.Create(ctx, time.Duration(req.GetLeaseDurationNanos()))
	if err != nil {
		return nil, err
	}
	return setProto(st), nil
}

func (r *renewalRPC) GetSet(ctx context.Context, req *djinnpb.SetRequest) (*djinnpb.RenewalSet, error) {
	id, err := setID(req.GetSetId())
	if err != nil {
		return nil, err
	}
	st, err := r.svc.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return setProto(st), nil
}

func (r *renewalRPC) RenewFor(ctx context.Context, req *djinnpb.RenewForRequest) (*djinnpb.RenewForResponse, error) {
	id, err := setID(req.GetSetId())
	if err != nil {
		return nil, err
	}
	err = r.svc.RenewFor(ctx, id, req.GetLease(), time.Duration(req.GetDesiredDurationNanos()), time.Duration(req.GetRenewDurationNanos()))
	if err != nil {
		return nil, err
	}
	return &djinnpb.RenewForResponse{}, nil
}

func (r *renewalRPC) Remove(ctx context.Context, req *djinnpb.RemoveRequest) (*djinnpb.RemoveResponse, error) {
	id, err := setID(req.GetSetId())
	if err != nil {
		return nil, err
	}
	l, err := r.svc.Remove(ctx, id, req.GetLease())
	if err != nil {
		return nil, err
	}
	return &djinnpb.RemoveResponse{Lease: l}, nil
}

// GetLeases answers a page of a set's leases, of at most leasesPageBytes
// (what a client receives by default less room around it); a request
// without a max (a client's from before pages) gets every lease, or
// ResourceExhausted when they pass that bound — never a part of them.
func (r *renewalRPC) GetLeases(ctx context.Context, req *djinnpb.GetLeasesRequest) (*djinnpb.GetLeasesResponse, error) {
	id, err := setID(req.GetSetId())
	if err != nil {
		return nil, err
	}
	p, err := r.svc.LeasesPage(ctx, id, int(req.GetMax()), req.GetAfter(), leasesPageBytes)
	if err != nil {
		return nil, err
	}
	return &djinnpb.GetLeasesResponse{Leases: p.Leases, Next: p.Next, Total: int64(p.Total)}, nil
}

// leasesPageBytes bounds a GetLeases page's leases: one reply's bound,
// room left for the page's next and total.
const leasesPageBytes = wire.MaxReply - 1<<10

func (r *renewalRPC) SetExpirationWarningListener(ctx context.Context, req *djinnpb.SetExpirationWarningListenerRequest) (*djinnpb.EventRegistration, error) {
	id, err := setID(req.GetSetId())
	if err != nil {
		return nil, err
	}
	return r.svc.Listen(ctx, id, renewal.WarningEventID, req.GetListener(), time.Duration(req.GetMinWarningNanos()), req.GetHandback())
}

func (r *renewalRPC) ClearExpirationWarningListener(ctx context.Context, req *djinnpb.SetRequest) (*djinnpb.ClearListenerResponse, error) {
	return r.clear(ctx, req, renewal.WarningEventID)
}

func (r *renewalRPC) SetRenewalFailureListener(ctx context.Context, req *djinnpb.SetRenewalFailureListenerRequest) (*djinnpb.EventRegistration, error) {
	id, err := setID(req.GetSetId())
	if err != nil {
		return nil, err
	}
	return r.svc.Listen(ctx, id, renewal.FailureEventID, req.GetListener(), 0, req.GetHandback())
}

func (r *renewalRPC) ClearRenewalFailureListener(ctx context.Context, req *djinnpb.SetRequest) (*djinnpb.ClearListenerResponse, error) {
	return r.clear(ctx, req, renewal.FailureEventID)
}

func (r *renewalRPC) clear(ctx context.Context, req *djinnpb.SetRequest, eid int64) (*djinnpb.ClearListenerResponse, error) {
	id, err := setID(req.GetSetId())
	if err != nil {
		return nil, err
	}
	if err := r.svc.Clear(ctx, id, eid); err != nil {
		return nil, err
	}
	return &djinnpb.ClearListenerResponse{}, nil
}

// landlords renews client leases over the server's connection pool, with
// the compact RenewAll form every djinn landlord serves.
type landlords struct {
	pool *client.Pool
}

func (l landlords) RenewAll(ctx context.Context, landlord djinn.Ref, cookies []djinn.ID, durations []time.Duration) ([]time.Duration, []*djinnpb.Error, *djinnpb.Error) {
	conn, err := l.pool.ConnFor(landlord)
	if err != nil {
		return nil, nil, grpcerr.ToProto(djinn.Errorf(djinn.Unavailable, "landlord %s: %v", landlord.Endpoint, err))
	}
	req := &djinnpb.RenewAllRequest{Cookies: batch.PackCookies(cookies), DurationNanos: make([]int64, len(durations))}
	for i, d := range durations {
		req.DurationNanos[i] = int64(d)
	}
	resp, err := djinnpb.NewLandlordClient(conn).RenewAll(ctx, req)
	if err != nil {
		// The status's detail names the djinn kind; the code alone would
		// lose it (UNKNOWN_LEASE and NO_SUCH_OBJECT share NOT_FOUND).
		return nil, nil, grpcerr.ToProto(grpcerr.FromStatus(err))
	}
	if len(resp.GetGrantedNanos()) != len(cookies) {
		return nil, nil, grpcerr.ToProto(djinn.Errorf(djinn.Internal, "landlord %s answered %d leases of %d", landlord.Endpoint, len(resp.GetGrantedNanos()), len(cookies)))
	}
	granted := make([]time.Duration, len(cookies))
	for i, g := range resp.GetGrantedNanos() {
		granted[i] = time.Duration(g)
	}
	var errs []*djinnpb.Error
	for _, ie := range resp.GetErrors() {
		if i := int(ie.GetIndex()); i < len(cookies) {
			if errs == nil {
				errs = make([]*djinnpb.Error, len(cookies))
			}
			errs[i] = ie.GetError()
		}
	}
	return granted, errs, nil
}

// listRenewalSets lists the renewal service's sets.
func (s *Server) listRenewalSets(st *renewal.State) lister {
	return func(map[string]string) ([]*djinnpb.Resource, error) {
		var out []*djinnpb.Resource
		for _, in := range st.List() {
			if res, ok := s.leaseResource(in.ID.String(), in.Cookie, map[string]string{"leases": itoa(in.Leases)}); ok {
				res.Principal = in.Principal
				out = append(out, res)
			}
		}
		return out, nil
	}
}
