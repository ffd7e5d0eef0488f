package server

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/console"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/wire"
)

// The web console on the admin port (package console). Each part that
// has a page provides it: a read-only view of its state, read in process,
// and the actions an operator may take on it. The console shows no
// capability: lease cookies and the ids that are capabilities appear as
// fingerprints (fingerprint), by which actions name them too.

// page is a part's console page.
type page struct {
	title string
	// view returns the page's JSON view, given its search terms.
	view func(ctx context.Context, q url.Values) (any, error)
	// actions are the operator's, by name; each takes the name of the
	// object as the page shows it.
	actions map[string]func(ctx context.Context, target string) error
}

// consoleSource gathers the enabled parts' pages for the console.
func (s *Server) consoleSource() console.Source {
	byName := map[string]*page{}
	src := console.Source{
		Operator: s.operatorHTTP,
		Reader:   s.consoleReader,
		Version:  s.node.AppliedIndex,
		Done:     s.stop,
	}
	for _, p := range s.parts {
		if p.page != nil && (p.enabled || p.name == "admin") {
			byName[p.name] = p.page
			src.Pages = append(src.Pages, console.Page{Name: pageName(p.name), Title: p.page.title})
		}
	}
	// The cluster first: the page an operator opens first.
	first := func(p console.Page) int {
		if p.Name == "cluster" {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(src.Pages, func(a, b console.Page) int { return cmp.Compare(first(a), first(b)) })
	find := func(name string) *page { return byName[partName(name)] }
	src.View = func(ctx context.Context, name string, q url.Values) (any, error) {
		return find(name).view(ctx, q)
	}
	src.Act = func(ctx context.Context, name, action, target string) error {
		do, ok := find(name).actions[action]
		if !ok {
			return djinn.Errorf(djinn.InvalidArgument, "action %q: the %s page has no such action", action, name)
		}
		return do(ctx, target)
	}
	return src
}

// The console names the admin part's page "cluster" and the landlord's
// "leases"; every other page is its part's name.
func pageName(part string) string {
	switch part {
	case "admin":
		return "cluster"
	case "landlord":
		return "leases"
	}
	return part
}

func partName(page string) string {
	switch page {
	case "cluster":
		return "admin"
	case "leases":
		return "landlord"
	}
	return page
}

// consoleReader decides whether r may read the console, and what it shows
// the reader (its viewer, in the context the views get). Without TLS there
// is one local principal: whoever reaches the admin port reads it all, as
// /metrics. Under TLS an operator reads it all; any other reader sees its
// own principal's resources (that of its verified client certificate, or
// the anonymous principal's without one): other principals' are not
// shown, as their services answer "not found" to it. Under mutual TLS the
// console wants a verified client certificate, as the client port does.
func (s *Server) consoleReader(r *http.Request) (context.Context, error) {
	verified := r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0
	if s.cfg.TLS.ClientAuth && !verified {
		return nil, djinn.Errorf(djinn.PermissionDenied, "the console needs a client certificate from the cluster's CA, as the client port does")
	}
	if s.adminTLS == nil || s.operatorHTTP(r) == nil {
		return withViewer(r.Context(), viewer{all: true}), nil
	}
	var p string
	if verified {
		p = principal.OfCertificate(r.TLS.VerifiedChains[0][0])
	}
	return withViewer(r.Context(), viewer{principal: p}), nil
}

// A viewer is who reads the console: all of it, or one principal's
// resources. A context without one sees nobody's.
type viewer struct {
	all       bool
	principal string
	set       bool
}

type viewerKey struct{}

func withViewer(ctx context.Context, v viewer) context.Context {
	v.set = true
	return context.WithValue(ctx, viewerKey{}, v)
}

// sees reports whether the console's reader in ctx may see a resource of
// principal p.
func sees(ctx context.Context, p string) bool {
	v, _ := ctx.Value(viewerKey{}).(viewer)
	return v.set && (v.all || p == v.principal)
}

// fingerprint names a capability without giving it away, as the logs
// name it (wire.Fingerprint).
func fingerprint(id djinn.ID) string { return wire.Fingerprint(id) }

// expiresMs returns when the lease with cookie c expires, in ms since the
// epoch: nil for Forever, now for a lease gone.
func (s *Server) expiresMs(c djinn.ID) *int64 {
	now := s.now()
	in, ok := s.machine.Leases.Lookup(c, now)
	if !ok {
		ms := now.UnixMilli()
		return &ms
	}
	if !in.Expires.Before(djinn.EndOfTime) {
		return nil
	}
	ms := in.Expires.UnixMilli()
	return &ms
}

// cancelLease is the operator's cancel of the lease whose cookie has
// fingerprint fp: it ends whatever the lease guards.
func (s *Server) cancelLease(ctx context.Context, fp string) error {
	for _, l := range s.machine.Leases.List() {
		if fingerprint(l.Cookie) == strings.ToLower(fp) {
			return s.lessor.Cancel(ctx, []djinn.ID{l.Cookie})[0]
		}
	}
	return djinn.Errorf(djinn.UnknownLease, "lease %s: no live lease has this fingerprint (expired or cancelled already)", fp)
}

// drop is the action that ends an object by cancelling its lease.
var drop = func(s *Server) map[string]func(context.Context, string) error {
	return map[string]func(context.Context, string) error{"drop": s.cancelLease}
}

// principalOf returns the principal of the lease with cookie c ("" when
// gone).
func (s *Server) principalOf(c djinn.ID) string {
	p, _ := s.machine.Leases.Principal(c)
	return p
}

// nowMs is the server's clock for the page's countdowns.
func (s *Server) nowMs() int64 { return s.now().UnixMilli() }

// refString prints a reference's endpoint and object.
func refString(endpoint string, obj djinn.ID) string {
	if obj.IsZero() {
		return endpoint
	}
	return endpoint + "/" + obj.String()[:8]
}
