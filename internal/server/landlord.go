package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// landlordPart is the lessor — the lease table's leader side, through
// which every service grants and renews — and the Landlord service that
// renews and cancels any lease this server grants. A lease cookie is a
// capability: any holder may renew or cancel (the renewal service must).
func landlordPart(s *Server) *part {
	c := s.cfg.Lease
	return &part{
		name:    "landlord",
		joins:   &joinKind{typ: service.LandlordType, title: "djinn landlord"},
		enabled: true,
		open: func() error {
			s.lessor = lease.NewLessor(s.machine.Leases, s.node, lease.Config{
				Slack: time.Duration(c.Checkpoint), Grace: s.node.ElectionTimeout(),
				ExpiryBatch: c.ExpiryBatch, ExpiryRate: c.ExpiryRate, Now: s.now, Logger: s.log,
			})
			return nil
		},
		serve: func(r *registrar) error {
			return r.serve(&djinnpb.Landlord_ServiceDesc, &landlordRPC{s: s}, landlordRules(s))
		},
		run:     func(ctx context.Context) { s.lessor.Run(ctx) },
		serving: func() bool { return s.lessor.Active() },
		ref:     s.ref(lease.LandlordID),
		status: func(resp *djinnpb.StatusResponse) {
			resp.Landlord = refProto(s.ref(lease.LandlordID)())
			resp.Counts["leases"] = int64(s.machine.Leases.Len())
		},
		list:       map[string]lister{"leases": s.listLeases},
		listFilter: map[string]string{"leases": "kind"},
		page:       &page{title: "Leases", view: s.leasesView, actions: map[string]func(context.Context, string) error{"cancel": s.cancelLease}},
		metrics: func() []prometheus.Collector {
			l := s.lessor
			return []prometheus.Collector{
				gauge("djinn_leases", "Live leases.", func() float64 { return float64(s.machine.Leases.Len()) }),
				counter("djinn_lease_renewals_total", "Lease renewals granted by this node as leader.", func() float64 { return float64(l.Renewals.Load()) }),
				counter("djinn_lease_expired_total", "Leases expired by this node as leader.", func() float64 { return float64(l.Expired.Load()) }),
				counter("djinn_lease_cancelled_total", "Leases cancelled through this node.", func() float64 { return float64(l.Cancelled.Load()) }),
				counter("djinn_lease_horizon_syncs_total", "Renewals that waited for a horizon write.", func() float64 { return float64(l.HorizonSyncs.Load()) }),
				counter("djinn_lease_checkpoints_total", "Lease horizons raised ahead of need.", func() float64 { return float64(l.Checkpoints.Load()) }),
				counter("djinn_lease_leadership_confirmations_total", "Answers from the leader's memory that waited for a quorum round trip (no leader lease held).", func() float64 { return float64(l.Confirmations.Load()) }),
			}
		},
	}
}

// maxListed bounds the rows of a console page.
const maxListed = 500

// leasesView is the console's lease list: every live lease with its
// kind, the fingerprint of what it guards, its principal and its
// expiration; searched by kind, principal and owner. It lists the leases
// the reader sees (sees); the totals count every lease.
func (s *Server) leasesView(ctx context.Context, q url.Values) (any, error) {
	type listed struct {
		Lease     string `json:"lease"`
		Kind      string `json:"kind"`
		Owner     string `json:"owner"`
		Principal string `json:"principal"`
		Expires   *int64 `json:"expires"`
	}
	kinds := map[string]bool{}
	all := s.machine.Leases.List()
	rows := []listed{}
	for _, l := range all {
		if !sees(ctx, l.Principal) {
			continue
		}
		kind := s.machine.LeaseKindName(l.Owner.Kind)
		kinds[kind] = true
		row := listed{Lease: fingerprint(l.Cookie), Kind: kind, Owner: fingerprint(l.Owner.ID), Principal: l.Principal}
		if l.Expires.Before(djinn.EndOfTime) {
			ms := l.Expires.UnixMilli()
			row.Expires = &ms
		}
		if k := q.Get("kind"); k != "" && k != kind ||
			q.Get("principal") != "" && !strings.Contains(row.Principal, q.Get("principal")) ||
			q.Get("owner") != "" && row.Owner != q.Get("owner") && row.Lease != q.Get("owner") {
			continue
		}
		if len(rows) < maxListed {
			rows = append(rows, row)
		}
	}
	l := s.lessor
	return struct {
		Now       int64    `json:"now"`
		Total     int      `json:"total"`
		Kinds     []string `json:"kinds"`
		Renewals  uint64   `json:"renewals"`
		Expired   uint64   `json:"expired"`
		Cancelled uint64   `json:"cancelled"`
		Leases    []listed `json:"leases"`
	}{s.nowMs(), len(all), slices.Sorted(maps.Keys(kinds)), l.Renewals.Load(), l.Expired.Load(), l.Cancelled.Load(), rows}, nil
}

// landlordRules: a lease's cookie is a capability to renew it — any
// holder may, as a renewal service does for its clients (a holder that is
// not the lease's owner only ever extends it: lease.Table.Renew). Ending
// a lease is its owner's: for another principal, a lease it cancels does
// not exist (UnknownLease). CancelAll checks each lease, answering for
// each.
func landlordRules(s *Server) Rules {
	return Rules{
		"Renew": capability, "RenewAll": capability, "RenewStream": capability,
		"Remaining": capability, // like Renew: the cookie is the capability
		"Cancel":    leaseOwner(s, (*djinnpb.CancelRequest).GetCookie, lease.UnknownLease),
		"CancelAll": owner(func(context.Context, *djinnpb.CancelAllRequest) error { return nil }), // per lease, in the handler
	}
}

// landlordRPC serves the Landlord service for every lease this server
// grants.
type landlordRPC struct {
	djinnpb.UnimplementedLandlordServer
	s *Server
}

func (l *landlordRPC) Renew(ctx context.Context, r *djinnpb.RenewRequest) (*djinnpb.RenewResponse, error) {
	c, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
	if err != nil {
		return nil, err
	}
	g, err := l.s.lessor.Renew(ctx, c, time.Duration(r.GetDurationNanos()))
	if err != nil {
		return nil, err
	}
	return &djinnpb.RenewResponse{GrantedNanos: int64(g)}, nil
}

func (l *landlordRPC) Remaining(_ context.Context, r *djinnpb.RemainingRequest) (*djinnpb.RemainingResponse, error) {
	c, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
	if err != nil {
		return nil, err
	}
	d, owner, err := l.s.lessor.Remaining(c)
	if err != nil {
		return nil, err
	}
	return &djinnpb.RemainingResponse{RemainingNanos: int64(d), Covers: l.s.machine.LeaseKindName(owner.Kind)}, nil
}

func (l *landlordRPC) Cancel(ctx context.Context, r *djinnpb.CancelRequest) (*djinnpb.CancelResponse, error) {
	c, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
	if err != nil {
		return nil, err
	}
	if err := l.s.lessor.Cancel(ctx, []djinn.ID{c})[0]; err != nil {
		return nil, err
	}
	return &djinnpb.CancelResponse{}, nil
}

func (l *landlordRPC) RenewAll(ctx context.Context, r *djinnpb.RenewAllRequest) (*djinnpb.RenewAllResponse, error) {
	cookies, err := batch.Cookies(r.GetCookies())
	if err != nil {
		return nil, err
	}
	ds := r.GetDurationNanos()
	if len(ds) != len(cookies) {
		return nil, djinn.Errorf(djinn.InvalidArgument, "renewAll: %d cookies but %d durations", len(cookies), len(ds))
	}
	if c, dup := duplicate(cookies); dup {
		return nil, djinn.Errorf(djinn.InvalidArgument, "renewAll: lease %s listed twice: a lease map holds each lease once; send it once, with the duration it should get", c)
	}
	durations := make([]time.Duration, len(ds))
	for i, d := range ds {
		durations[i] = time.Duration(d)
	}
	res := l.s.lessor.RenewAll(ctx, cookies, durations)
	out := &djinnpb.RenewAllResponse{GrantedNanos: make([]int64, len(res))}
	for i, r := range res {
		if r.Err != nil {
			out.Errors = append(out.Errors, &djinnpb.IndexedError{Index: uint32(i), Error: grpcerr.ToProto(r.Err)})
			continue
		}
		out.GrantedNanos[i] = int64(r.Granted)
	}
	return out, nil
}

// duplicate returns a cookie listed more than once in cookies, if any.
// RenewAll and CancelAll refuse such a batch: a LeaseMap is a map, holding
// each lease once with one duration (LE.2.2). Two renewals of one lease in
// one call would answer the first with an expiration the second replaced;
// two cancellations, the lease both cancelled and unknown.
func duplicate(cookies []djinn.ID) (djinn.ID, bool) {
	if len(cookies) < 2 {
		return djinn.ID{}, false
	}
	sorted := slices.Clone(cookies)
	slices.SortFunc(sorted, func(a, b djinn.ID) int { return bytes.Compare(a[:], b[:]) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return sorted[i], true
		}
	}
	return djinn.ID{}, false
}

func (l *landlordRPC) CancelAll(ctx context.Context, r *djinnpb.CancelAllRequest) (*djinnpb.CancelAllResponse, error) {
	cookies, err := batch.Cookies(r.GetCookies())
	if err != nil {
		return nil, err
	}
	if c, dup := duplicate(cookies); dup {
		return nil, djinn.Errorf(djinn.InvalidArgument, "cancelAll: lease %s listed twice: a lease map holds each lease once; send it once", c)
	}
	// Leases of another principal's are unknown to the caller: answered
	// so, and not cancelled.
	errs := make([]error, len(cookies))
	var mine []djinn.ID
	var at []int
	for i, c := range cookies {
		if p, ok := l.s.machine.Leases.Principal(c); ok && p != principal.From(ctx) {
			errs[i] = lease.UnknownLease(c)
			continue
		}
		mine, at = append(mine, c), append(at, i)
	}
	for j, err := range l.s.lessor.Cancel(ctx, mine) {
		errs[at[j]] = err
	}
	return &djinnpb.CancelAllResponse{Errors: batch.Errors(errs)}, nil
}

func (l *landlordRPC) RenewStream(stream djinnpb.Landlord_RenewStreamServer) error {
	for {
		r, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		resp := &djinnpb.RenewStreamResponse{}
		c, err := djinn.IDFromBytes("lease cookie", r.GetCookie())
		if err == nil {
			var g time.Duration
			g, err = l.s.lessor.Renew(stream.Context(), c, time.Duration(r.GetDurationNanos()))
			resp.GrantedNanos = int64(g)
		}
		if err != nil {
			if djinn.KindOf(err) == djinn.Unavailable {
				return err // not the leader: end the stream so the holder goes elsewhere
			}
			resp.Error = grpcerr.ToProto(err)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}
