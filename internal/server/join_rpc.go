package server

import (
	"context"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/join"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// joinRPC serves JoinAdmin: it reads the cluster's join settings and
// proposes operators' changes of them, on the leader.
type joinRPC struct {
	djinnpb.UnimplementedJoinAdminServer
	j *joins
}

// service returns the part the request names, on the leader.
func (r *joinRPC) service(name string) (*part, error) {
	if err := r.j.s.lessor.Serving("join admin"); err != nil {
		return nil, err
	}
	return r.j.s.joinPartNamed(name)
}

// settings returns the settings of the part the request names.
func (r *joinRPC) settings(name string) (*part, join.Join, error) {
	p, err := r.service(name)
	if err != nil {
		return nil, join.Join{}, err
	}
	return p, r.j.current(p), nil
}

// propose proposes an operator's change and returns the settings it left.
func (r *joinRPC) propose(ctx context.Context, name string, cmd func(svc string) *statepb.Command) (*part, join.Join, error) {
	p, err := r.service(name)
	if err != nil {
		return nil, join.Join{}, err
	}
	res, err := r.j.s.node.Propose(ctx, cmd(p.name))
	if err != nil {
		return nil, join.Join{}, err
	}
	st, ok := res.(join.Join)
	if !ok {
		return nil, join.Join{}, djinn.Errorf(djinn.Internal, "join admin: the log answered %T", res)
	}
	return p, st, nil
}

func groupsOf(st join.Join) *djinnpb.JoinGroups {
	return &djinnpb.JoinGroups{Groups: slices.Clone(st.Groups), Configured: !st.GroupsSet}
}

func locatorsOf(st join.Join) *djinnpb.JoinLocators {
	return &djinnpb.JoinLocators{Locators: slices.Clone(st.Locators), Configured: !st.LocatorsSet}
}

func (r *joinRPC) attributesOf(p *part, st join.Join) *djinnpb.JoinAttributes {
	return &djinnpb.JoinAttributes{Attributes: entriesProto(st.Attributes), Configured: !st.AttributesSet,
		ServiceAttributes: entriesProto(r.j.s.serviceEntries(p))}
}

// info describes p's join.
func (r *joinRPC) info(p *part, st join.Join) *djinnpb.JoinInfo {
	out := &djinnpb.JoinInfo{Service: p.name, Types: joinTypes(p), Groups: groupsOf(st), Locators: locatorsOf(st),
		Attributes: r.attributesOf(p, st), Running: p.enabled && r.j.s.cfg.LookupJoin.Enabled}
	id := st.ID
	if p.joins.nodeID != nil {
		id = p.joins.nodeID()
	}
	if !id.IsZero() {
		out.ServiceId = id[:]
	}
	for _, info := range r.j.registrars(p.name) {
		out.Registrars = append(out.Registrars, registrarProto(info))
	}
	return out
}

func registrarProto(info discovery.RegistrarInfo) *djinnpb.DiscoveredRegistrar {
	pb := &djinnpb.DiscoveredRegistrar{ServiceId: info.ServiceID[:], Endpoint: info.Endpoint, Groups: slices.Clone(info.Groups)}
	if info.Locator != (discovery.Locator{}) {
		pb.Locator = info.Locator.String()
	}
	return pb
}

func (r *joinRPC) ListJoins(context.Context, *djinnpb.ListJoinsRequest) (*djinnpb.ListJoinsResponse, error) {
	if err := r.j.s.lessor.Serving("join admin"); err != nil {
		return nil, err
	}
	resp := &djinnpb.ListJoinsResponse{}
	for _, p := range r.j.s.joining() {
		resp.Joins = append(resp.Joins, r.info(p, r.j.current(p)))
	}
	return resp, nil
}

func (r *joinRPC) ResetJoin(ctx context.Context, req *djinnpb.JoinServiceRequest) (*djinnpb.JoinInfo, error) {
	p, err := r.service(req.GetService())
	if err != nil {
		return nil, err
	}
	c, err := r.j.configuration(p, true)
	if err != nil {
		return nil, err
	}
	res, err := r.j.s.node.Propose(ctx, &statepb.Command{Op: &statepb.Command_JoinConfigure{JoinConfigure: c}})
	if err != nil {
		return nil, err
	}
	st, ok := res.(join.Join)
	if !ok {
		return nil, djinn.Errorf(djinn.Internal, "join admin: the log answered %T", res)
	}
	return r.info(p, st), nil
}

func (r *joinRPC) GetLookupGroups(_ context.Context, req *djinnpb.JoinServiceRequest) (*djinnpb.JoinGroups, error) {
	_, st, err := r.settings(req.GetService())
	if err != nil {
		return nil, err
	}
	return groupsOf(st), nil
}

func (r *joinRPC) groups(ctx context.Context, req *djinnpb.JoinGroupsRequest, op djinnpb.SetOp) (*djinnpb.JoinGroups, error) {
	_, st, err := r.propose(ctx, req.GetService(), func(svc string) *statepb.Command {
		return &statepb.Command{Op: &statepb.Command_JoinGroups{JoinGroups: &statepb.JoinGroupsChange{Service: svc, Op: op, Groups: req.GetGroups()}}}
	})
	if err != nil {
		return nil, err
	}
	return groupsOf(st), nil
}

func (r *joinRPC) AddLookupGroups(ctx context.Context, req *djinnpb.JoinGroupsRequest) (*djinnpb.JoinGroups, error) {
	return r.groups(ctx, req, djinnpb.SetOp_SET_OP_ADD)
}

func (r *joinRPC) RemoveLookupGroups(ctx context.Context, req *djinnpb.JoinGroupsRequest) (*djinnpb.JoinGroups, error) {
	return r.groups(ctx, req, djinnpb.SetOp_SET_OP_REMOVE)
}

func (r *joinRPC) SetLookupGroups(ctx context.Context, req *djinnpb.JoinGroupsRequest) (*djinnpb.JoinGroups, error) {
	return r.groups(ctx, req, djinnpb.SetOp_SET_OP_SET)
}

func (r *joinRPC) GetLookupLocators(_ context.Context, req *djinnpb.JoinServiceRequest) (*djinnpb.JoinLocators, error) {
	_, st, err := r.settings(req.GetService())
	if err != nil {
		return nil, err
	}
	return locatorsOf(st), nil
}

func (r *joinRPC) locators(ctx context.Context, req *djinnpb.JoinLocatorsRequest, op djinnpb.SetOp) (*djinnpb.JoinLocators, error) {
	_, st, err := r.propose(ctx, req.GetService(), func(svc string) *statepb.Command {
		return &statepb.Command{Op: &statepb.Command_JoinLocators{JoinLocators: &statepb.JoinLocatorsChange{Service: svc, Op: op, Locators: req.GetLocators()}}}
	})
	if err != nil {
		return nil, err
	}
	return locatorsOf(st), nil
}

func (r *joinRPC) AddLookupLocators(ctx context.Context, req *djinnpb.JoinLocatorsRequest) (*djinnpb.JoinLocators, error) {
	return r.locators(ctx, req, djinnpb.SetOp_SET_OP_ADD)
}

func (r *joinRPC) RemoveLookupLocators(ctx context.Context, req *djinnpb.JoinLocatorsRequest) (*djinnpb.JoinLocators, error) {
	return r.locators(ctx, req, djinnpb.SetOp_SET_OP_REMOVE)
}

func (r *joinRPC) SetLookupLocators(ctx context.Context, req *djinnpb.JoinLocatorsRequest) (*djinnpb.JoinLocators, error) {
	return r.locators(ctx, req, djinnpb.SetOp_SET_OP_SET)
}

func (r *joinRPC) GetLookupAttributes(_ context.Context, req *djinnpb.JoinServiceRequest) (*djinnpb.JoinAttributes, error) {
	p, st, err := r.settings(req.GetService())
	if err != nil {
		return nil, err
	}
	return r.attributesOf(p, st), nil
}

func (r *joinRPC) attributes(ctx context.Context, name string, op int32, entries []*djinnpb.Entry, templates []*djinnpb.EntryTemplate) (*djinnpb.JoinAttributes, error) {
	p, st, err := r.propose(ctx, name, func(svc string) *statepb.Command {
		return &statepb.Command{Op: &statepb.Command_JoinAttributes{JoinAttributes: &statepb.JoinAttributesChange{
			Service: svc, Op: op, Entries: entries, Templates: templates}}}
	})
	if err != nil {
		return nil, err
	}
	return r.attributesOf(p, st), nil
}

func (r *joinRPC) AddLookupAttributes(ctx context.Context, req *djinnpb.JoinAttributesRequest) (*djinnpb.JoinAttributes, error) {
	return r.attributes(ctx, req.GetService(), join.OpAdd, req.GetAttributes(), nil)
}

func (r *joinRPC) ModifyLookupAttributes(ctx context.Context, req *djinnpb.JoinModifyRequest) (*djinnpb.JoinAttributes, error) {
	if len(req.GetTemplates()) != len(req.GetChanges()) {
		return nil, djinn.Errorf(djinn.InvalidArgument, "modify attributes: %d templates and %d changes; they go in pairs", len(req.GetTemplates()), len(req.GetChanges()))
	}
	return r.attributes(ctx, req.GetService(), join.OpModify, req.GetChanges(), req.GetTemplates())
}

func (r *joinRPC) SetLookupAttributes(ctx context.Context, req *djinnpb.JoinAttributesRequest) (*djinnpb.JoinAttributes, error) {
	return r.attributes(ctx, req.GetService(), join.OpSet, req.GetAttributes(), nil)
}
