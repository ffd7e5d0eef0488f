package server

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Resources.List: what a cluster holds, one kind at a time, a page at a
// time. Each part that holds resources lists its kinds: with its part's
// list hook, every resource of the kind, with its principal, which this
// file pages and filters; or, for a kind its state keeps in name order by
// principal (transactions), with its pages hook, the page asked alone. A
// caller sees its own resources; every principal's, or another's, is the
// operator role's (resourcesRules).

// A lister lists every resource of one kind, with its principal and its
// kind's facts, in any order; filter is the request's.
type lister func(filter map[string]string) ([]*djinnpb.Resource, error)

// A pager lists one page of a kind whose state keeps it in name order,
// looking at what the page holds rather than at every resource of the
// kind: the resources of q's principal (every principal's with q.all)
// named after q.after, in name order, at most q.limit; next, the name
// the following page starts after ("" on the last; past the page's last
// name when resources the filter leaves out were passed on the way, and
// never with an empty page); and total, how many the listing covers over
// every page.
type pager func(q pageQuery) (rows []*djinnpb.Resource, next string, total int, err error)

// pageQuery is a page a pager lists.
type pageQuery struct {
	filter    map[string]string
	principal string
	all       bool // every principal's (principal is not read)
	after     string
	limit     int
}

// The bounds of a page: at most mostListMax resources (defaultListMax
// unless asked), and no more than pageBytes of them.
const (
	defaultListMax = 100
	mostListMax    = 1000
	// pageBytes bounds a page's resources: the bound of one reply
	// (wire.MaxReply, which leaves room for a session's reply around it),
	// less 1 KiB for the framing of the rest of the page: its next (a
	// resource's name) and total. A page of large resources ends sooner,
	// its next naming where the following page starts, as for a page of
	// many.
	pageBytes = wire.MaxReply - 1<<10
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
	list := owner(func(ctx context.Context, req *djinnpb.ListResourcesRequest) error {
		if req.GetAll() || req.GetIsPrincipal() {
			return s.guard.operator(ctx, "listing other principals' resources (ls --all, --principal)")
		}
		return nil
	})
	list.AnyMember = true // any member lists from its state
	return Rules{"List": list}
}

type resourcesRPC struct {
	djinnpb.UnimplementedResourcesServer
	s *Server
}

// listers are the kinds the enabled parts list, by kind.
func (s *Server) listers() map[string]lister {
	return enabledKinds(s.parts, func(p *part) map[string]lister { return p.list })
}

// pagers are the kinds the enabled parts list a page at a time, by kind.
func (s *Server) pagers() map[string]pager {
	return enabledKinds(s.parts, func(p *part) map[string]pager { return p.pages })
}

// enabledKinds merges, by kind, what of's map holds for each enabled part.
func enabledKinds[T any](parts []*part, of func(*part) map[string]T) map[string]T {
	out := map[string]T{}
	for _, p := range parts {
		if p.enabled {
			maps.Copy(out, of(p))
		}
	}
	return out
}

// checkFilter refuses a filter key the kind's lister does not read: it
// would be ignored, and the page answer every resource as if narrowed.
func (s *Server) checkFilter(kind string, filter map[string]string) error {
	var takes string
	for _, p := range s.parts {
		if k, ok := p.listFilter[kind]; ok && p.enabled {
			takes = k
		}
	}
	for key := range filter {
		if key == takes {
			continue
		}
		if takes == "" {
			return djinn.Errorf(djinn.InvalidArgument, "filter %q: %s take no filter", key, kind)
		}
		return djinn.Errorf(djinn.InvalidArgument, "filter %q: %s take only the filter %q", key, kind, takes)
	}
	return nil
}

func (r *resourcesRPC) List(ctx context.Context, req *djinnpb.ListResourcesRequest) (*djinnpb.ListResourcesResponse, error) {
	ls, pgs := r.s.listers(), r.s.pagers()
	l, ok := ls[req.GetKind()]
	pg, paged := pgs[req.GetKind()]
	if !ok && !paged {
		kinds := slices.Sorted(func(yield func(string) bool) {
			for k := range ls {
				if !yield(k) {
					return
				}
			}
			for k := range pgs {
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
	if err := r.s.checkFilter(req.GetKind(), req.GetFilter()); err != nil {
		return nil, err
	}
	mine := principal.From(ctx)
	if req.GetIsPrincipal() {
		mine = req.GetPrincipal()
	}
	if paged {
		return r.page(ctx, pg, pageQuery{filter: req.GetFilter(), principal: mine, all: req.GetAll(), after: req.GetAfter(), limit: limit}, req.GetKind())
	}
	rows, err := l(req.GetFilter())
	if err != nil {
		return nil, err
	}
	rows = slices.DeleteFunc(rows, func(res *djinnpb.Resource) bool { return !req.GetAll() && res.GetPrincipal() != mine })
	caller := principal.From(ctx)
	for i, res := range rows {
		if res.GetPrincipal() != caller {
			rows[i] = redact(req.GetKind(), res)
		}
	}
	slices.SortFunc(rows, func(a, b *djinnpb.Resource) int { return compareNames(a.GetName(), b.GetName()) })
	resp := &djinnpb.ListResourcesResponse{Total: int64(len(rows))}
	start := 0
	if after := req.GetAfter(); after != "" {
		start = sort.Search(len(rows), func(i int) bool { return compareNames(rows[i].GetName(), after) > 0 })
	}
	end := pageEnd(rows, start, fitting(rows[start:], limit))
	resp.Resources = rows[start:end]
	if end < len(rows) {
		resp.Next = rows[end-1].GetName()
	}
	return resp, nil
}

// page answers a List of a kind a pager lists: the page it reads, redacted
// as List redacts, ending sooner when its rows pass pageBytes.
func (r *resourcesRPC) page(ctx context.Context, pg pager, q pageQuery, kind string) (*djinnpb.ListResourcesResponse, error) {
	rows, next, total, err := pg(q)
	if err != nil {
		return nil, err
	}
	caller := principal.From(ctx)
	for i, res := range rows {
		if !q.all && res.GetPrincipal() != q.principal {
			return nil, djinn.Errorf(djinn.Internal, "listing %s: %s %s of %q listed for %q", kind, kind, res.GetName(), res.GetPrincipal(), q.principal)
		}
		if res.GetPrincipal() != caller {
			rows[i] = redact(kind, res)
		}
	}
	// A pager's names are unique: a page may end between any two rows.
	if end := min(fitting(rows, q.limit), len(rows)); end < len(rows) {
		rows, next = rows[:end], rows[end-1].GetName()
	}
	return &djinnpb.ListResourcesResponse{Resources: rows, Next: next, Total: int64(total)}, nil
}

// The kinds whose names are capabilities: a lease's cookie, a mailbox
// registration's, renewal set's or lock set's id. A transaction's id and
// a lookup item's service id are not.
var capabilityNames = map[string]bool{"leases": true, "mailboxes": true, "renewal-sets": true, "lock-sets": true, "lds-registrations": true}

// redact returns another principal's resource as an operator sees it:
// what it is, whose, and when its lease ends, without what would let the
// reader use it — its lease cookie, its name when the name is a capability
// (its fingerprint stands for it, as on the console), a mailbox's delivery
// target (a listener's reference).
func redact(kind string, res *djinnpb.Resource) *djinnpb.Resource {
	out := &djinnpb.Resource{Name: res.GetName(), Principal: res.GetPrincipal(), ExpiresUnixNanos: res.GetExpiresUnixNanos(),
		Details: maps.Clone(res.GetDetails()), Redacted: true}
	if id, err := djinn.ParseID(out.Name); err == nil && capabilityNames[kind] {
		out.Name = fingerprint(id)
	}
	if out.Details["target"] != "" {
		out.Details["target"] = "(redacted)"
	}
	return out
}

// fitting returns how many of the first rows, at most limit and at least
// one, a page may carry in pageBytes. A row that alone passes pageBytes
// is summarised in its place (summarised), so that its page still
// reaches a client that receives what it does by default.
func fitting(rows []*djinnpb.Resource, limit int) int {
	size := 0
	for i, r := range rows[:min(limit, len(rows))] {
		n := wire.FieldSize(1, r)
		if n > pageBytes {
			rows[i] = summarised(r)
			n = wire.FieldSize(1, rows[i])
		}
		if size += n; size > pageBytes && i > 0 {
			return i
		}
	}
	return limit
}

// summarised is a resource too large for a page alone (a row holds a few
// facts of bounded size; this keeps a listing whole should one ever be):
// its name, principal and lease as they are, each of its details longer
// than summaryBytes by its size and where to read it.
func summarised(res *djinnpb.Resource) *djinnpb.Resource {
	out := proto.Clone(res).(*djinnpb.Resource)
	for k, v := range out.Details {
		if len(v) > summaryBytes {
			out.Details[k] = fmt.Sprintf("(%d bytes, more than a page of resources holds: not listed; read the resource itself)", len(v))
		}
	}
	return out
}

// summaryBytes is the longest detail a summarised resource keeps.
const summaryBytes = 1 << 10

// pageEnd is where the page that starts at start ends: after at most
// limit rows, and never between two of the same name (fingerprints may,
// however rarely, repeat), which the next page's After could not tell apart — the page
// ends before such a pair, or, when they begin it, after the last of them.
func pageEnd(rows []*djinnpb.Resource, start, limit int) int {
	end := min(start+limit, len(rows))
	if end == len(rows) || rows[end].GetName() != rows[end-1].GetName() {
		return end
	}
	name := rows[end-1].GetName()
	back := end - 1
	for back > start && rows[back-1].GetName() == name {
		back--
	}
	if back > start {
		return back
	}
	for end < len(rows) && rows[end].GetName() == name {
		end++
	}
	return end
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
