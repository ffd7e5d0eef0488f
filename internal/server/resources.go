package server

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Resources.List: what a cluster holds, one kind at a time, a page at a
// time. Each part that holds resources lists its kinds (its part's list
// hook: every resource of the kind, with its principal); this file pages
// and filters them. A caller sees its own resources; every principal's,
// or another's, is the operator role's (resourcesRules).

// A lister lists every resource of one kind, with its principal and its
// kind's facts, in any order; filter is the request's.
type lister func(filter map[string]string) ([]*djinnpb.Resource, error)

// The bounds of a page.
const (
	defaultListMax = 100
	mostListMax    = 1000
)

// resourcesPart serves Resources over the kinds the other parts list.
func resourcesPart(s *Server) *part {
	return &part{
		name:    "resources",
		enabled: true,
		serve: func(r *registrar) error {
			return r.serve(&djinnpb.Resources_ServiceDesc, &resourcesRPC{s: s}, resourcesRules(s))
		},
	}
}

// resourcesRules: List answers the caller's own resources (an owner rule
// whose hook lets every caller list its own); listing every principal's,
// or another's, needs the operator role.
func resourcesRules(s *Server) Rules {
	return Rules{
		"List": owner(func(ctx context.Context, req *djinnpb.ListResourcesRequest) error {
			if req.GetAll() || req.GetIsPrincipal() {
				return s.guard.operator(ctx, "listing other principals' resources (ls --all, --principal)")
			}
			return nil
		}),
	}
}

type resourcesRPC struct {
	djinnpb.UnimplementedResourcesServer
	s *Server
}

// listers are the kinds the enabled parts list, by kind.
func (s *Server) listers() map[string]lister {
	out := map[string]lister{}
	for _, p := range s.parts {
		if !p.enabled {
			continue
		}
		for kind, l := range p.list {
			out[kind] = l
		}
	}
	return out
}

func (r *resourcesRPC) List(ctx context.Context, req *djinnpb.ListResourcesRequest) (*djinnpb.ListResourcesResponse, error) {
	ls := r.s.listers()
	l, ok := ls[req.GetKind()]
	if !ok {
		kinds := slices.Sorted(func(yield func(string) bool) {
			for k := range ls {
				if !yield(k) {
					return
				}
			}
		})
		return nil, djinn.Errorf(djinn.InvalidArgument, "kind %q: this server lists %s", req.GetKind(), strings.Join(kinds, ", "))
	}
	limit := int(req.GetMax())
	switch {
	case limit == 0:
		limit = defaultListMax
	case limit < 0 || limit > mostListMax:
		return nil, djinn.Errorf(djinn.InvalidArgument, "max %d: want 1 to %d", limit, mostListMax)
	}
	rows, err := l(req.GetFilter())
	if err != nil {
		return nil, err
	}
	mine := principal.From(ctx)
	if req.GetIsPrincipal() {
		mine = req.GetPrincipal()
	}
	rows = slices.DeleteFunc(rows, func(res *djinnpb.Resource) bool { return !req.GetAll() && res.GetPrincipal() != mine })
	slices.SortFunc(rows, func(a, b *djinnpb.Resource) int { return compareNames(a.GetName(), b.GetName()) })
	resp := &djinnpb.ListResourcesResponse{Total: int64(len(rows))}
	start := 0
	if after := req.GetAfter(); after != "" {
		start = sort.Search(len(rows), func(i int) bool { return compareNames(rows[i].GetName(), after) > 0 })
	}
	end := min(start+limit, len(rows))
	resp.Resources = rows[start:end]
	if end < len(rows) {
		resp.Next = rows[end-1].GetName()
	}
	return resp, nil
}

// compareNames orders names: decimal ones (transaction ids) by value,
// hex ones as text — both by length first, then as text.
func compareNames(a, b string) int {
	if c := cmp.Compare(len(a), len(b)); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// leaseResource is a resource whose lease has cookie c: its name, its
// principal and its expiration as the lease table has them, and ok false
// when the lease is gone (the resource is going).
func (s *Server) leaseResource(name string, c djinn.ID, details map[string]string) (*djinnpb.Resource, bool) {
	in, ok := s.machine.Leases.Lookup(c, s.now())
	if !ok {
		return nil, false
	}
	p, _ := s.machine.Leases.Principal(c)
	res := &djinnpb.Resource{Name: name, Principal: p, LeaseCookie: c[:], Details: details}
	if in.Expires.Before(djinn.EndOfTime) {
		res.ExpiresUnixNanos = in.Expires.UnixNano()
	}
	return res, true
}

// listLeases lists every live lease, with what it covers; filter "kind"
// keeps those of one kind ("mailbox registration").
func (s *Server) listLeases(filter map[string]string) ([]*djinnpb.Resource, error) {
	var out []*djinnpb.Resource
	for _, l := range s.machine.Leases.List() {
		covers := s.machine.LeaseKindName(l.Owner.Kind)
		if k, ok := filter["kind"]; ok && k != covers {
			continue
		}
		if res, ok := s.leaseResource(l.Cookie.String(), l.Cookie, map[string]string{"covers": covers}); ok {
			out = append(out, res)
		}
	}
	return out, nil
}

// itoa is a count in a resource's details.
func itoa(n int) string { return strconv.Itoa(n) }

// refText is a reference as text, or "" for none.
func refText(r *djinnpb.Ref) string {
	if r == nil {
		return ""
	}
	ref, err := wire.RefFrom("ref", r)
	if err != nil {
		return ""
	}
	return ref.String()
}
