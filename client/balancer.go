package client

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
	"google.golang.org/grpc/resolver"
)

// A cluster's connection spreads over every member: gRPC keeps a
// connection to each, and this picker sends each call to the leader while
// its connection is up, else to any member that is up (which points the
// call at the leader, or serves it when it may). Calls that may be served
// by any member (reads that allow staleness, the member list itself) go
// round-robin over every member that is up.

// leaderFirst is the name of the picking policy of cluster connections.
const leaderFirst = "djinn_leader_first"

func init() {
	balancer.Register(readyBuilder{base.NewBalancerBuilder(leaderFirst, pickerBuilder{}, base.Config{})})
}

// readyBuilder builds gRPC's base balancer with the picker below, and
// keeps its cluster's map of the members that are up (cluster.ready) true
// to every picker the balancer sets, the error picker of a cluster with
// no member up included (the picker builder is not asked for that one),
// and empties it when the balancer closes (the connection went idle or
// closed): a leader whose connection failed is never read as up.
type readyBuilder struct{ balancer.Builder }

func (b readyBuilder) Build(cc balancer.ClientConn, opts balancer.BuildOptions) balancer.Balancer {
	rc := &readyConn{ClientConn: cc}
	return &readyBalancer{Balancer: b.Builder.Build(rc, opts), cc: rc}
}

// readyBalancer learns its cluster from the addresses it is given.
type readyBalancer struct {
	balancer.Balancer
	cc *readyConn
}

func (b *readyBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	for _, a := range s.ResolverState.Addresses {
		if cl := clusterOf(a); cl != nil {
			b.cc.cl = cl
			break
		}
	}
	return b.Balancer.UpdateClientConnState(s)
}

func (b *readyBalancer) Close() {
	b.Balancer.Close()
	b.cc.setReady(map[string]bool{})
}

// readyConn passes the balancer's pickers on, first setting the cluster's
// map of members up from each. gRPC calls a balancer, and so this, from
// one goroutine at a time.
type readyConn struct {
	balancer.ClientConn
	cl *cluster
}

func (c *readyConn) UpdateState(s balancer.State) {
	ready := map[string]bool{}
	if p, ok := s.Picker.(*picker); ok {
		for addr := range p.byAddr {
			ready[addr] = true
		}
	}
	c.setReady(ready)
	c.ClientConn.UpdateState(s)
}

func (c *readyConn) setReady(ready map[string]bool) {
	if c.cl == nil {
		return
	}
	c.cl.ready.Store(&ready)
	if c.cl.onReady != nil {
		c.cl.onReady(ready)
	}
}

// clusterKey carries a member address's cluster in its attributes, so the
// picker finds the cluster's leader.
type clusterKey struct{}

func withCluster(a resolver.Address, cl *cluster) resolver.Address {
	a.Attributes = a.Attributes.WithValue(clusterKey{}, cl)
	return a
}

func clusterOf(a resolver.Address) *cluster {
	cl, _ := a.Attributes.Value(clusterKey{}).(*cluster)
	return cl
}

// anyMemberKey marks a call that any member may serve.
type anyMemberKey struct{}

// anyMember lets any member of a cluster serve the calls made with ctx.
func anyMember(ctx context.Context) context.Context {
	return context.WithValue(ctx, anyMemberKey{}, true)
}

// leaderOnly undoes anyMember.
func leaderOnly(ctx context.Context) context.Context {
	if ctx.Value(anyMemberKey{}) == nil {
		return ctx
	}
	return context.WithValue(ctx, anyMemberKey{}, nil)
}

type pickerBuilder struct{}

func (pickerBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	if len(info.ReadySCs) == 0 {
		return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
	}
	p := &picker{byAddr: make(map[string]balancer.SubConn, len(info.ReadySCs))}
	for sc, sci := range info.ReadySCs {
		p.all = append(p.all, sc)
		p.byAddr[sci.Address.Addr] = sc
		if cl := clusterOf(sci.Address); cl != nil {
			p.cl = cl
		}
	}
	return p
}

type picker struct {
	cl     *cluster
	all    []balancer.SubConn
	byAddr map[string]balancer.SubConn
	next   atomic.Uint32
}

func (p *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if p.cl != nil && info.Ctx.Value(anyMemberKey{}) == nil {
		if sc, ok := p.byAddr[p.cl.leaderEndpoint()]; ok {
			return balancer.PickResult{SubConn: sc}, nil
		}
	}
	i := p.next.Add(1)
	return balancer.PickResult{SubConn: p.all[int(i)%len(p.all)]}, nil
}

var _ balancer.Picker = (*picker)(nil)
