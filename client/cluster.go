package client

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// How a client follows a cluster (DESIGN.md 7a).
//
// Every member of a djinn cluster serves the same services under the same
// service id: the cluster's. A reference to a cluster service (a landlord,
// the mailbox, the transaction manager, a lock set, the lookup service, a
// renewal set, ...) is equal wherever it was made, and its endpoint only
// says which member made it. So a Pool keys the clusters it knows by
// service id: a reference whose service is a known cluster reaches the
// cluster, over one gRPC connection spread across every member, and not the
// one member its endpoint names. When that member dies, calls go on at the
// others: a lease granted by a node that later died is renewed through the
// rest with no change to the lease or the caller.
//
// A cluster becomes known when a Client is dialled to it, when a call
// through ConnFor reaches a member by a reference's endpoint (the pool then
// asks that member for the member list in the background), or when Learn
// asks that member and waits for the answer. Its member list
// is kept fresh: every refreshEvery, and soon after any call fails as
// Unavailable. The leader is followed as before: a follower that refuses a
// call names the leader in the djinn-leader trailer, the call is sent there
// once, and later calls go to it first.

// Member list freshness and bounds.
const (
	refreshEvery   = 10 * time.Second       // the member list's age at most, while all is well
	refreshMinGap  = 250 * time.Millisecond // between two refreshes asked for by failures
	refreshTimeout = 2 * time.Second        // one refresh's member-list call
	learnRetry     = 5 * time.Second        // before asking an unreachable endpoint again
	maxLearning    = 1024                   // service ids remembered as learnt or not clusters
	maxClusters    = 64                     // clusters a pool follows
)

// SplitEndpoints splits a comma-separated list of endpoints (host:port),
// checking each. A host may be a DNS name that resolves to several
// addresses: a cluster dialled by it is reached at all of them.
func SplitEndpoints(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	eps := strings.Split(list, ",")
	for i, ep := range eps {
		eps[i] = strings.TrimSpace(ep)
		if err := djinn.CheckEndpoint(eps[i]); err != nil {
			return nil, err
		}
	}
	return eps, nil
}

// RefConnector is a Connector that reaches an object by its reference, so
// that a reference to a service of a djinn cluster reaches whichever
// member serves, not only the one its endpoint names. *Pool and *Client
// implement it.
type RefConnector interface {
	Connector
	ConnFor(ref djinn.Ref) (*grpc.ClientConn, error)
}

// Learner is a RefConnector that learns the djinn cluster of a
// reference's service and waits for the answer (Pool.Learn): callers that
// keep a reference for later calls, when the member it names may be gone,
// check for it with a type assertion, so that other Connectors still
// serve them (at the reference's endpoint). *Pool and *Client implement it.
type Learner interface {
	RefConnector
	Learn(ctx context.Context, ref djinn.Ref) error
}

var (
	_ RefConnector = (*Pool)(nil)
	_ RefConnector = (*Client)(nil)
	_ Learner      = (*Pool)(nil)
	_ Learner      = (*Client)(nil)
)

// ConnFor returns c's connection for the object ref names: through c's
// ConnFor when c is a RefConnector, to ref's endpoint otherwise.
func ConnFor(c Connector, ref djinn.Ref) (*grpc.ClientConn, error) {
	if c == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "connector: missing")
	}
	if rc, ok := c.(RefConnector); ok {
		return rc.ConnFor(ref)
	}
	return c.Conn(ref.Endpoint)
}

// cluster is a djinn cluster a pool follows: one gRPC connection over all
// its members (and the endpoints it was first reached by), and the member
// list that keeps that connection's addresses fresh.
type cluster struct {
	pool  *Pool
	seeds []string // the endpoints it was reached by
	told  bool     // Dial or Follow reached it, not a reference: its calls carry the join secret (joinsecret.go)
	res   *manual.Resolver
	cc    *grpc.ClientConn
	kick  chan struct{} // asks for a refresh now

	leader atomic.Pointer[string]          // the leader's endpoint, as last heard
	ready  atomic.Pointer[map[string]bool] // the addresses whose connection is up (from the balancer)
	plain  atomic.Bool                     // the endpoints serve no member list: not a djinn cluster
	// onReady, when set before the connection connects (tests), hears
	// each new map of the addresses up.
	onReady func(ready map[string]bool)

	mu       sync.Mutex
	id       djinn.ID   // guarded by mu: zero until the member list names it
	previous []djinn.ID // guarded by mu: the service ids of the clusters it was restored from
	members  []string   // guarded by mu: the members' endpoints, as last listed
}

// newCluster makes the connection of a cluster reached at seeds. It does
// not connect: the first call (or Client's Dial) does.
func (p *Pool) newCluster(seeds []string, told bool) (*cluster, error) {
	cl := &cluster{pool: p, seeds: slices.Clone(seeds), told: told, kick: make(chan struct{}, 1)}
	cl.res = manual.NewBuilderWithScheme("djinn-cluster")
	cl.res.InitialState(resolver.State{Addresses: cl.addresses(context.Background(), nil)})
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(p.opts.transportCreds()),
		grpc.WithResolvers(cl.res),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"` + leaderFirst + `":{}}]}`),
		grpc.WithChainUnaryInterceptor(cl.unaryInterceptor),
		grpc.WithChainStreamInterceptor(p.streamInterceptor),
	}, windows...)
	opts = append(opts, p.opts.linkOptions()...) // keepalive finds a member gone silent without waiting for a call to fail
	opts = append(opts, p.opts.dialOpts...)
	opts = append(opts, p.secretOption(func() bool { return told })...)
	opts = append(opts, p.sessionOption(cl.sessionLeader)...)
	cc, err := grpc.NewClient("djinn-cluster:///"+strings.Join(seeds, ","), opts...)
	if err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "endpoints %q: %v", seeds, err)
	}
	cl.cc = cc
	return cl, nil
}

// addresses returns the cluster's addresses: its seeds, each DNS name
// resolved to all its addresses (kept as it is when it does not resolve),
// and its members' endpoints. Each address names its endpoint for TLS.
func (cl *cluster) addresses(ctx context.Context, members []string) []resolver.Address {
	var out []resolver.Address
	seen := map[string]bool{}
	add := func(addr, name string) {
		if !seen[addr] {
			seen[addr] = true
			out = append(out, withCluster(resolver.Address{Addr: addr, ServerName: name}, cl))
		}
	}
	for _, seed := range cl.seeds {
		for _, addr := range resolveEndpoint(ctx, seed) {
			add(addr, seed)
		}
	}
	for _, m := range members {
		add(m, m)
	}
	return out
}

// resolveEndpoint returns the addresses a host:port endpoint names: itself
// for an IP address, every address of a DNS name, or itself when the name
// does not resolve (the connection tries again).
func resolveEndpoint(ctx context.Context, ep string) []string {
	host, port, err := net.SplitHostPort(ep)
	if err != nil || net.ParseIP(host) != nil {
		return []string{ep}
	}
	ctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupHost(ctx, host)
	if err != nil || len(ips) == 0 {
		return []string{ep}
	}
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = net.JoinHostPort(ip, port)
	}
	return out
}

// leaderEndpoint returns the leader's endpoint as last heard ("" unknown).
func (cl *cluster) leaderEndpoint() string {
	if l := cl.leader.Load(); l != nil {
		return *l
	}
	return ""
}

func (cl *cluster) setLeader(ep string) {
	if ep != cl.leaderEndpoint() {
		cl.leader.Store(&ep)
	}
}

// isReady reports whether the connection to ep is up.
func (cl *cluster) isReady(ep string) bool {
	r := cl.ready.Load()
	return r != nil && (*r)[ep]
}

// serviceID returns the cluster's service id (zero until known).
func (cl *cluster) serviceID() djinn.ID {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.id
}

// ids returns the cluster's service id and those of the clusters it was
// restored from: references with any of them name its resources.
func (cl *cluster) ids() []djinn.ID {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.id.IsZero() {
		return nil
	}
	return append([]djinn.ID{cl.id}, cl.previous...)
}

// sessionLeader gives the cluster's session its leader: the endpoint,
// and whether the connection to it is up. With no leader known yet (the
// cluster was still electing one when the member list was read, say),
// calls go on their own until a refresh names it: it asks for one now,
// not at the next periodic refresh, so a client started beside its
// cluster does not spend its first seconds without a session.
func (cl *cluster) sessionLeader() (string, bool) {
	ep := cl.leaderEndpoint()
	if ep == "" {
		cl.refreshSoon()
		return "", false
	}
	return ep, cl.isReady(ep)
}

// refreshSoon asks the refresh loop for a refresh now.
func (cl *cluster) refreshSoon() {
	select {
	case cl.kick <- struct{}{}:
	default:
	}
}

// unaryInterceptor converts errors, and follows a follower's leader hint
// once: the hinted leader becomes the cluster's first choice, and the call
// goes there through the cluster's connection if it is up, or over a
// connection of its own.
func (cl *cluster) unaryInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	t := newTrailerOpts(opts)
	err := invoker(ctx, method, req, reply, cc, t.opts...)
	trailer := t.trailer
	t.release()
	if err == nil || status.Code(err) != codes.Unavailable {
		return cl.pool.fromCall(ctx, err)
	}
	cl.refreshSoon()
	hint := leaderOf(trailer)
	if hint == "" || ctx.Value(redirectedKey{}) != nil {
		return fromRPC(err)
	}
	cl.setLeader(hint)
	rctx := leaderOnly(context.WithValue(ctx, redirectedKey{}, true))
	if cl.isReady(hint) {
		return fromRPC(invoker(rctx, method, req, reply, cc, opts...))
	}
	leader, cerr := cl.pool.Conn(hint)
	if cerr != nil {
		return fromRPC(err)
	}
	return leader.Invoke(rctx, method, req, reply, opts...)
}

// trailerOpts is a call's options with a trailer option added, to read
// the leader hint of a failed call. They are pooled: a call's options are
// let go of when its invoker returns.
type trailerOpts struct {
	trailer metadata.MD
	opts    []grpc.CallOption
}

var trailerOptsPool = sync.Pool{New: func() any { return new(trailerOpts) }}

func newTrailerOpts(opts []grpc.CallOption) *trailerOpts {
	t := trailerOptsPool.Get().(*trailerOpts)
	t.opts = append(append(t.opts[:0], opts...), hintTrailer{grpc.TrailerCallOption{TrailerAddr: &t.trailer}})
	return t
}

// hintTrailer is the trailer option this package's interceptors add to a
// call to read a failed call's leader hint. A unary call fills it as
// grpc.Trailer; a session call only when its reply carries a trailer, so
// a call answered without one makes no metadata for it (a nil trailer
// holds no hint). A caller's own grpc.Trailer always gets metadata.
type hintTrailer struct{ grpc.TrailerCallOption }

func (t *trailerOpts) release() {
	clear(t.opts)
	t.trailer, t.opts = nil, t.opts[:0]
	trailerOptsPool.Put(t)
}

// run keeps the member list fresh until the pool closes.
func (cl *cluster) run(ctx context.Context) {
	t := time.NewTimer(refreshEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-cl.kick:
		}
		cl.refresh(ctx)
		if cl.plain.Load() {
			return
		}
		if cl.serviceID().IsZero() {
			t.Reset(refreshMinGap) // a cluster not yet initialised, or not reached: ask again soon
		} else {
			t.Reset(refreshEvery)
		}
		select { // a burst of failures asks once
		case <-ctx.Done():
			return
		case <-time.After(refreshMinGap):
		}
	}
}

// refresh asks any member for the member list, and takes it: the
// cluster's service id (once), its members' endpoints, and its leader.
func (cl *cluster) refresh(ctx context.Context) {
	rctx, cancel := context.WithTimeout(anyMember(ctx), refreshTimeout)
	defer cancel()
	resp, err := djinnpb.NewAdminClient(cl.cc).Members(rctx, &djinnpb.MembersRequest{})
	if err != nil {
		if status.Code(err) == codes.Unimplemented {
			cl.plain.Store(true)
		}
		return
	}
	cl.take(ctx, resp)
}

// take takes a member list: the cluster's service id (once), its
// members' endpoints, and its leader.
func (cl *cluster) take(ctx context.Context, resp *djinnpb.MembersResponse) {
	id, err := djinn.IDFromBytes("service id", resp.GetServiceId())
	if err != nil || id.IsZero() {
		return // a cluster not yet initialised: ask again later
	}
	var previous []djinn.ID
	for _, b := range resp.GetPreviousServiceIds() {
		if p, err := djinn.IDFromBytes("previous service id", b); err == nil {
			previous = append(previous, p)
		}
	}
	cl.mu.Lock()
	if cl.id.IsZero() {
		cl.id = id
	}
	same := cl.id == id
	if same {
		cl.previous = previous
	}
	cl.mu.Unlock()
	if !same {
		return // the seeds now reach another cluster; keep following this one's members
	}
	var members []string
	for _, m := range resp.GetMembers() {
		if ep := m.GetGrpcAddress(); djinn.CheckStoredEndpoint(ep) == nil {
			members = append(members, ep)
		}
	}
	if l := resp.GetLeaderAddress(); l != "" {
		cl.setLeader(l)
	}
	cl.setMembers(ctx, members)
	cl.pool.adopt(cl)
}

// setMembers takes a new member list.
func (cl *cluster) setMembers(ctx context.Context, members []string) {
	slices.Sort(members)
	cl.mu.Lock()
	old := cl.members
	cl.members = members
	cl.mu.Unlock()
	cl.pool.indexMembers(cl, old, members)
	cl.res.UpdateState(resolver.State{Addresses: cl.addresses(ctx, members)})
}
