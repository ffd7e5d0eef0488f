package server

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/principal"
)

// Who may call an RPC is decided in one place (DESIGN.md 7): each service
// declares a rule for every method it serves, the server refuses to start
// with a method that has none, and the edge looks the rule up on every call
// (authorize).

// Access is the kind of right an RPC needs.
type Access int

// The kinds of right.
const (
	// Public: anyone who reaches the port — health checks, reflection.
	Public Access = iota + 1
	// Authenticated: any principal the transport authenticated (without
	// TLS, the one local principal) — creating a resource, lookups, status.
	Authenticated
	// Owner: the principal that created the resource the request names,
	// found by the rule's ownership hook; others get "not found".
	Owner
	// Capability: whoever presents the unguessable value the request
	// carries (a lease cookie, a lock set id, a mailbox listener, a
	// transaction's manager and id); the service checks the value names
	// something.
	Capability
	// Operator: under mutual TLS the principals configuration names as
	// operators, without it whoever presents the cluster's join secret —
	// membership, snapshots, destroying, runtime administration.
	Operator
	// Peer: another server of this cluster (its peer certificate, or
	// without mutual TLS the join secret says so), or an operator.
	Peer
)

func (a Access) String() string {
	switch a {
	case Public:
		return "public"
	case Authenticated:
		return "authenticated"
	case Owner:
		return "owner"
	case Capability:
		return "capability"
	case Operator:
		return "operator"
	case Peer:
		return "peer"
	}
	return fmt.Sprintf("access(%d)", int(a))
}

// Rule is the authorization declared for one RPC.
type Rule struct {
	Access Access
	// Owns is an Owner rule's ownership hook, which the service provides:
	// given the call's context (its principal) and a request, it answers
	// the service's own "not found" error when the resource the request
	// names belongs to another principal, and nil otherwise (a resource
	// that does not exist is left to the handler to answer).
	Owns func(ctx context.Context, req any) error
	// Args, of a rule whose calls name a resource (Owner, Capability),
	// checks the request's arguments that do not depend on that resource
	// (a duration, a mode, a field's size, an id's or a reference's form).
	// The edge runs it before the ownership hook and the handler: a
	// malformed argument is answered InvalidArgument naming it, the same
	// whoever's resource the call names and whether or not it exists. A
	// check that depends on the resource's state stays in the handler,
	// after the hook, where it tells another principal nothing.
	Args func(req any) error
	// AnyMember marks an Owner rule whose hook any member may decide, as
	// it names no resource (Resources.List's). Every other hook decides
	// by a resource only the serving leader answers for, and off it the
	// call is refused Unavailable before the hook looks: a follower's
	// copy of the state would answer "not found" for another principal's
	// resource where the handler answers Unavailable for one that never
	// existed, telling them apart (guard.authorize).
	AnyMember bool
	// Node, of a Peer rule, names the node a request acts on: a peer
	// certificate proves one node, whose holder acts on that node alone
	// (joins as it, removes it); an operator on any (guard.authorize).
	Node func(req any) (string, error)
	// Carrier marks a stream whose messages carry calls, each admitted
	// on its own (a session's): the stream is not refused for a caller
	// whose certificate is revoked, its calls are, one by one.
	Carrier bool
}

// The rules without a hook.
var (
	public        = Rule{Access: Public}
	authenticated = Rule{Access: Authenticated}
	capability    = Rule{Access: Capability}
	operator      = Rule{Access: Operator}
)

// owner returns the Owner rule whose hook is owns, on requests of type R.
func owner[R any](owns func(ctx context.Context, req R) error) Rule {
	return Rule{Access: Owner, Owns: func(ctx context.Context, req any) error {
		r, ok := req.(R)
		if !ok {
			return djinn.Errorf(djinn.Internal, "ownership hook for %T given a %T", *new(R), req)
		}
		return owns(ctx, r)
	}}
}

// checking returns rule with args as its argument check (Rule.Args) on
// requests of type R.
func checking[R any](rule Rule, args func(R) error) Rule {
	rule.Args = func(req any) error {
		r, ok := req.(R)
		if !ok {
			return djinn.Errorf(djinn.Internal, "argument check for %T given a %T", *new(R), req)
		}
		return args(r)
	}
	return rule
}

// peerSelf returns the Peer rule of calls on requests of type R that act
// on the node node(req) names.
func peerSelf[R any](node func(R) string) Rule {
	return Rule{Access: Peer, Node: func(req any) (string, error) {
		r, ok := req.(R)
		if !ok {
			return "", djinn.Errorf(djinn.Internal, "peer rule for %T given a %T", *new(R), req)
		}
		return node(r), nil
	}}
}

// leaseOwner returns the Owner rule of calls on requests of type R that
// name what they act on by its lease's cookie (cookie gets it): the
// lease's principal owns it, and for any other the hook answers
// notFound(cookie). A cookie that does not parse, or names no live
// lease, is left to the handler.
func leaseOwner[R any](s *Server, cookie func(R) []byte, notFound func(djinn.ID) error) Rule {
	return owner(func(ctx context.Context, req R) error {
		c, err := djinn.IDFromBytes("lease cookie", cookie(req))
		if err != nil {
			return nil
		}
		if p, ok := s.machine.Leases.Principal(c); ok && p != principal.From(ctx) {
			return notFound(c)
		}
		return nil
	})
}

// Rules are a gRPC service's rules, by method name ("Register").
type Rules map[string]Rule

// anyMethod is the key of a rule for every method of a service. Only
// services djinn does not define (health, reflection), whose methods are
// all Public, use it.
const anyMethod = "*"

// check reports whether rule is complete.
func (r Rule) check(method string) error {
	switch {
	case r.Access < Public || r.Access > Peer:
		return djinn.Errorf(djinn.Internal, "rpc %s: authorization rule with no access kind", method)
	case r.Access == Owner && r.Owns == nil:
		return djinn.Errorf(djinn.Internal, "rpc %s: owner rule without an ownership hook", method)
	case r.Args != nil && r.Access != Owner && r.Access != Capability:
		return djinn.Errorf(djinn.Internal, "rpc %s: an argument check on a %v rule, which names no resource: check its arguments in the handler", method, r.Access)
	}
	return nil
}

// registrar registers gRPC services with the server, each with a rule for
// every method; it refuses a service with a method without one.
type registrar struct {
	g     *grpc.Server
	rules map[string]Rule // by full method name, "/djinn.v1.EventMailbox/Register"
	// unary are the unary methods registered, by full method name: what a
	// session may call (session.go).
	unary map[string]sessionMethod
	// undecoded, when set, holds the requests the server's codec could not
	// decode (requestCodec): the services' handlers answer them.
	undecoded *sync.Map
}

func newRegistrar(g *grpc.Server) *registrar {
	return &registrar{g: g, rules: map[string]Rule{}, unary: map[string]sessionMethod{}}
}

// serve registers impl as the service desc describes, with rules: every
// method and stream of desc must have one.
func (r *registrar) serve(desc *grpc.ServiceDesc, impl any, rules Rules) error {
	full := map[string]Rule{}
	for _, name := range methodNames(desc) {
		method := "/" + desc.ServiceName + "/" + name
		rule, ok := rules[name]
		if !ok {
			rule, ok = rules[anyMethod]
		}
		if !ok {
			return djinn.Errorf(djinn.Internal, "rpc %s: no authorization rule; declare one with the service's registration", method)
		}
		if err := rule.check(method); err != nil {
			return err
		}
		full[method] = rule
	}
	for name := range rules {
		if name != anyMethod && !hasMethod(desc, name) {
			return djinn.Errorf(djinn.Internal, "service %s: a rule for %q, which it does not serve", desc.ServiceName, name)
		}
	}
	for m, rule := range full {
		r.rules[m] = rule
	}
	for _, m := range desc.Methods {
		r.unary["/"+desc.ServiceName+"/"+m.MethodName] = sessionMethod{srv: impl, handler: m.Handler}
	}
	if r.undecoded != nil {
		desc = decoding(desc, r.undecoded)
	}
	r.g.RegisterService(desc, impl)
	return nil
}

// with lets register, which registers services itself (a package's
// Register(grpc.ServiceRegistrar)), register them under rules.
func (r *registrar) with(rules Rules, register func(grpc.ServiceRegistrar)) error {
	w := &ruled{r: r, rules: rules}
	register(w)
	return w.err
}

// ruled is a grpc.ServiceRegistrar that registers through its registrar
// with the same rules, keeping the first error.
type ruled struct {
	r     *registrar
	rules Rules
	err   error
}

func (w *ruled) RegisterService(desc *grpc.ServiceDesc, impl any) {
	if err := w.r.serve(desc, impl, w.rules); err != nil && w.err == nil {
		w.err = err
	}
}

// GetServiceInfo lets reflection.Register take a ruled registrar.
func (w *ruled) GetServiceInfo() map[string]grpc.ServiceInfo { return w.r.g.GetServiceInfo() }

// verify checks that every method the gRPC server serves has a rule, so
// nothing registered around the registrar goes unruled.
func (r *registrar) verify() error {
	var missing []string
	for svc, info := range r.g.GetServiceInfo() {
		for _, m := range info.Methods {
			if _, ok := r.rules["/"+svc+"/"+m.Name]; !ok {
				missing = append(missing, "/"+svc+"/"+m.Name)
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return djinn.Errorf(djinn.Internal, "rpcs without an authorization rule: %v", missing)
	}
	return nil
}

func methodNames(desc *grpc.ServiceDesc) []string {
	var out []string
	for _, m := range desc.Methods {
		out = append(out, m.MethodName)
	}
	for _, s := range desc.Streams {
		out = append(out, s.StreamName)
	}
	return out
}

func hasMethod(desc *grpc.ServiceDesc, name string) bool {
	for _, n := range methodNames(desc) {
		if n == name {
			return true
		}
	}
	return false
}
