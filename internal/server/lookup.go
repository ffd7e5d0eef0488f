package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/backoff"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// LookupID is the object id of the lookup service (the registrar).
var LookupID = djinn.ID{'l', 'o', 'o', 'k', 'u', 'p'}

// lookupRPC serves the LookupService.
type lookupRPC struct {
	djinnpb.UnimplementedLookupServiceServer
	s *Server
}

func (r *lookupRPC) Register(ctx context.Context, req *djinnpb.RegisterRequest) (*djinnpb.ServiceRegistration, error) {
	reg, err := r.s.lookup.Register(ctx, req.GetItem(), time.Duration(req.GetLeaseDurationNanos()))
	if err != nil {
		return nil, err
	}
	return &djinnpb.ServiceRegistration{ServiceId: reg.ID[:], Lease: reg.Lease}, nil
}

// registerLookup registers the lookup service. Lookup is answered by
// lookupEncoded rather than the generated method: the description is the
// generated one with that method's handler replaced, so that the answer
// can carry the items' wire form (EncodedLookupResponse, the same bytes as
// a LookupResponse) without building a message per item, entry and field.
func registerLookup(g *grpc.Server, r *lookupRPC) {
	desc := djinnpb.LookupService_ServiceDesc
	desc.Methods = slices.Clone(desc.Methods)
	i := slices.IndexFunc(desc.Methods, func(m grpc.MethodDesc) bool { return m.MethodName == "Lookup" })
	if i < 0 {
		panic("server: the lookup service has no Lookup method to answer")
	}
	desc.Methods[i].Handler = r.lookupEncoded
	g.RegisterService(&desc, r)
}

// lookupEncoded is the Lookup method's handler (grpc.MethodDesc.Handler).
func (r *lookupRPC) lookupEncoded(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	req := new(djinnpb.LookupRequest)
	if err := dec(req); err != nil {
		return nil, err
	}
	h := func(_ context.Context, req any) (any, error) {
		total, items, err := r.lookup(req.(*djinnpb.LookupRequest))
		if err != nil {
			return nil, err
		}
		return &djinnpb.EncodedLookupResponse{Total: total, Items: items}, nil
	}
	if interceptor == nil {
		return h(ctx, req)
	}
	return interceptor(ctx, req, &grpc.UnaryServerInfo{Server: r, FullMethod: djinnpb.LookupService_Lookup_FullMethodName}, h)
}

// Lookup is not called: lookupEncoded answers the method.
func (r *lookupRPC) Lookup(context.Context, *djinnpb.LookupRequest) (*djinnpb.LookupResponse, error) {
	return nil, djinn.Errorf(djinn.Internal, "lookup: not registered through registerLookup")
}

func (r *lookupRPC) lookup(req *djinnpb.LookupRequest) (int64, [][]byte, error) {
	if req.GetMaxMatches() < 0 {
		return 0, nil, djinn.Errorf(djinn.InvalidArgument, "max matches %d: must not be negative", req.GetMaxMatches())
	}
	total, items, err := r.s.lookup.Lookup(req.GetTemplate(), int(req.GetMaxMatches()), req.GetOne())
	return int64(total), items, err
}

// maxLookupBatch is the most lookups one LookupBatch may carry.
const maxLookupBatch = 1024

// LookupStream answers each batch of lookups with one response, in order.
// A lookup that fails carries its error and the others and the stream go
// on, except when this node cannot answer (not the leader): the stream
// ends, so the client goes elsewhere; so does a batch over the limit.
// Responses are written as EncodedLookupBatchResponse, the same bytes as a
// LookupBatchResponse (see registerLookup).
func (r *lookupRPC) LookupStream(stream djinnpb.LookupService_LookupStreamServer) error {
	for {
		batch, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		lookups := batch.GetLookups()
		if len(lookups) > maxLookupBatch {
			return djinn.Errorf(djinn.InvalidArgument, "lookup batch of %d lookups: over the limit of %d", len(lookups), maxLookupBatch)
		}
		answers := make([]djinnpb.EncodedLookupAnswer, len(lookups))
		resp := &djinnpb.EncodedLookupBatchResponse{Answers: make([]*djinnpb.EncodedLookupAnswer, len(lookups))}
		for i, req := range lookups {
			a := &answers[i]
			a.Total, a.Items, err = r.lookup(req)
			if err != nil {
				if djinn.KindOf(err) == djinn.Unavailable {
					return err
				}
				a.Error = grpcerr.ToProto(err)
			}
			resp.Answers[i] = a
		}
		if err := stream.SendMsg(resp); err != nil {
			return err
		}
	}
}

func (r *lookupRPC) Notify(ctx context.Context, req *djinnpb.LookupNotifyRequest) (*djinnpb.EventRegistration, error) {
	n, err := r.s.lookup.Notify(ctx, req.GetTemplate(), req.GetTransitions(), req.GetListener(), req.GetHandback(), time.Duration(req.GetLeaseDurationNanos()))
	if err != nil {
		return nil, err
	}
	return &djinnpb.EventRegistration{EventId: n.EventID, Source: refProto(r.s.ref(LookupID)()), Lease: n.Lease, Sequence: n.Seq}, nil
}

func (r *lookupRPC) attributes(ctx context.Context, req *djinnpb.AttributesRequest, op int32) (*djinnpb.AttributesResponse, error) {
	if err := r.s.lookup.Attributes(ctx, req.GetLeaseCookie(), op, req.GetEntries(), req.GetTemplates()); err != nil {
		return nil, err
	}
	return &djinnpb.AttributesResponse{}, nil
}

func (r *lookupRPC) AddAttributes(ctx context.Context, req *djinnpb.AttributesRequest) (*djinnpb.AttributesResponse, error) {
	return r.attributes(ctx, req, lookup.OpAdd)
}

func (r *lookupRPC) ModifyAttributes(ctx context.Context, req *djinnpb.AttributesRequest) (*djinnpb.AttributesResponse, error) {
	return r.attributes(ctx, req, lookup.OpModify)
}

func (r *lookupRPC) SetAttributes(ctx context.Context, req *djinnpb.AttributesRequest) (*djinnpb.AttributesResponse, error) {
	return r.attributes(ctx, req, lookup.OpSet)
}

func (r *lookupRPC) GetEntryTypes(ctx context.Context, req *djinnpb.BrowseRequest) (*djinnpb.EntryTypesResponse, error) {
	tmpl, err := wire.TemplateFrom(req.GetTemplate())
	if err != nil {
		return nil, err
	}
	resp := &djinnpb.EntryTypesResponse{}
	err = r.s.lookup.Browse(func(reg *lookup.Registry) error {
		ts, err := reg.EntryTypes(tmpl)
		for _, t := range ts {
			resp.Types = append(resp.Types, &djinnpb.Entry{Type: t.Type, Supertypes: t.Supertypes})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (r *lookupRPC) GetFieldValues(ctx context.Context, req *djinnpb.BrowseRequest) (*djinnpb.FieldValuesResponse, error) {
	tmpl, err := wire.TemplateFrom(req.GetTemplate())
	if err != nil {
		return nil, err
	}
	resp := &djinnpb.FieldValuesResponse{}
	err = r.s.lookup.Browse(func(reg *lookup.Registry) error {
		vs, err := reg.FieldValues(tmpl, int(req.GetSetIndex()), req.GetField())
		for _, v := range vs {
			pv := wire.Value(v)
			if pv == nil {
				pv = &djinnpb.Value{}
			}
			resp.Values = append(resp.Values, pv)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (r *lookupRPC) GetServiceTypes(ctx context.Context, req *djinnpb.BrowseRequest) (*djinnpb.ServiceTypesResponse, error) {
	tmpl, err := wire.TemplateFrom(req.GetTemplate())
	if err != nil {
		return nil, err
	}
	resp := &djinnpb.ServiceTypesResponse{}
	err = r.s.lookup.Browse(func(reg *lookup.Registry) error {
		var err error
		resp.Types, err = reg.ServiceTypes(tmpl, req.GetPrefix())
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

func (r *lookupRPC) GetRegistrar(ctx context.Context, _ *djinnpb.GetRegistrarRequest) (*djinnpb.RegistrarInfo, error) {
	svc := r.s.machine.ServiceID()
	items, _ := r.s.states.lookup.Len()
	info := &djinnpb.RegistrarInfo{ServiceId: svc[:], Groups: r.s.cfg.Lookup.Groups, Registrar: refProto(r.s.ref(LookupID)()), Items: int64(items)}
	r.s.mu.Lock()
	if r.s.registrar != nil {
		info.Locator = r.s.registrar.Locator().String()
	}
	r.s.mu.Unlock()
	return info, nil
}

// discover runs the registrar's discovery side — unicast discovery and,
// when configured, multicast announcements and answers — while this node
// leads: clients find the lookup service of the leader.
//
// A registrar that cannot start (its port taken, an interface not there
// yet) is tried again, backing off to a minute, for as long as this node
// leads; meanwhile the lookup service is reachable by its gRPC address.
func (s *Server) discover(ctx context.Context) {
	var r *discovery.Registrar
	for b := backoff.New(100*time.Millisecond, time.Minute); ; {
		var err error
		r, err = discovery.NewRegistrar(discovery.RegistrarConfig{
			ServiceID: s.machine.ServiceID(), Groups: s.cfg.Lookup.Groups, Endpoint: s.advertise,
			ListenAddr: s.cfg.Lookup.Discovery, DisableMulticast: !s.cfg.Lookup.Multicast, Interfaces: s.cfg.Lookup.Interfaces,
			AnnouncementInterval: time.Duration(s.cfg.Lookup.Announce), Logger: s.log.With("part", "discovery"),
		})
		if err == nil {
			break
		}
		s.log.Error("discovery: cannot start; the lookup service is reachable only by its gRPC address until it does", "err", err, "retry within", b.Next())
		if !b.Wait(ctx) {
			return
		}
	}
	s.mu.Lock()
	s.registrar = r
	s.mu.Unlock()
	s.log.Log(ctx, slog.LevelInfo, "discovery: serving", "locator", r.Locator().String(), "groups", s.cfg.Lookup.Groups)
	<-ctx.Done()
	s.mu.Lock()
	s.registrar = nil
	s.mu.Unlock()
	if err := r.Close(); err != nil {
		s.log.Warn("discovery: closing", "err", err)
	}
}
