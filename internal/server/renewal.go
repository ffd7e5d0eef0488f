package server

import (
	"context"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/batch"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// RenewalID is the object id of the lease renewal service.
var RenewalID = djinn.ID{'r', 'e', 'n', 'e', 'w', 'a', 'l'}

// renewalRPC serves the LeaseRenewalService.
type renewalRPC struct {
	djinnpb.UnimplementedLeaseRenewalServiceServer
	s *Server
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
	st, err := r.s.renewal.Create(ctx, time.Duration(req.GetLeaseDurationNanos()))
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
	st, err := r.s.renewal.Get(ctx, id)
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
	err = r.s.renewal.RenewFor(ctx, id, req.GetLease(), time.Duration(req.GetDesiredDurationNanos()), time.Duration(req.GetRenewDurationNanos()))
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
	l, err := r.s.renewal.Remove(ctx, id, req.GetLease())
	if err != nil {
		return nil, err
	}
	return &djinnpb.RemoveResponse{Lease: l}, nil
}

func (r *renewalRPC) GetLeases(ctx context.Context, req *djinnpb.SetRequest) (*djinnpb.GetLeasesResponse, error) {
	id, err := setID(req.GetSetId())
	if err != nil {
		return nil, err
	}
	ls, err := r.s.renewal.Leases(ctx, id)
	if err != nil {
		return nil, err
	}
	return &djinnpb.GetLeasesResponse{Leases: ls}, nil
}

func (r *renewalRPC) SetExpirationWarningListener(ctx context.Context, req *djinnpb.SetExpirationWarningListenerRequest) (*djinnpb.EventRegistration, error) {
	id, err := setID(req.GetSetId())
	if err != nil {
		return nil, err
	}
	return r.s.renewal.Listen(ctx, id, renewal.WarningEventID, req.GetListener(), time.Duration(req.GetMinWarningNanos()), req.GetHandback())
}

func (r *renewalRPC) ClearExpirationWarningListener(ctx context.Context, req *djinnpb.SetRequest) (*djinnpb.ClearListenerResponse, error) {
	return r.clear(ctx, req, renewal.WarningEventID)
}

func (r *renewalRPC) SetRenewalFailureListener(ctx context.Context, req *djinnpb.SetRenewalFailureListenerRequest) (*djinnpb.EventRegistration, error) {
	id, err := setID(req.GetSetId())
	if err != nil {
		return nil, err
	}
	return r.s.renewal.Listen(ctx, id, renewal.FailureEventID, req.GetListener(), 0, req.GetHandback())
}

func (r *renewalRPC) ClearRenewalFailureListener(ctx context.Context, req *djinnpb.SetRequest) (*djinnpb.ClearListenerResponse, error) {
	return r.clear(ctx, req, renewal.FailureEventID)
}

func (r *renewalRPC) clear(ctx context.Context, req *djinnpb.SetRequest, eid int64) (*djinnpb.ClearListenerResponse, error) {
	id, err := setID(req.GetSetId())
	if err != nil {
		return nil, err
	}
	if err := r.s.renewal.Clear(ctx, id, eid); err != nil {
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
