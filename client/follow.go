package client

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The clusters a Pool follows: found by Dial, or learnt from the
// references that ConnFor is given.

// learnState is what a pool knows of a service id it asked about.
type learnState struct {
	pending bool      // a question is out
	never   bool      // the answer was no: not a djinn cluster's service
	at      time.Time // when the last question was asked
}

// follow makes the connection of the cluster reached at seeds, owned by
// the pool (closed at Close) and found by its seeds' endpoints.
func (p *Pool) follow(seeds []string) (*cluster, error) {
	cl, err := p.newCluster(seeds)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		cl.cc.Close()
		return nil, errClosed("pool")
	}
	p.owned = append(p.owned, cl)
	for _, ep := range seeds {
		if _, ok := p.byEndpoint[ep]; !ok {
			p.byEndpoint[ep] = cl
		}
	}
	return cl, nil
}

// Follow makes the pool follow the djinn cluster reached at endpoints, as
// Dial does for a Client: references to its services reach whichever
// member serves. It returns at once; the member list comes in the
// background.
func (p *Pool) Follow(endpoints ...string) error {
	if len(endpoints) == 0 {
		return djinn.Errorf(djinn.InvalidArgument, "follow: no endpoint given")
	}
	for _, ep := range endpoints {
		if err := djinn.CheckEndpoint(ep); err != nil {
			return err
		}
	}
	cl, err := p.follow(endpoints)
	if err != nil {
		return err
	}
	cl.refreshSoon()
	p.start(cl)
	return nil
}

// start runs cl's refresh loop until the pool closes.
func (p *Pool) start(cl *cluster) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		cl.run(p.ctx)
	}()
}

// adopt makes cl the pool's cluster for its service id, and for those of
// the clusters it was restored from, unless another cluster already is or
// the pool follows as many as it may.
func (p *Pool) adopt(cl *cluster) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range cl.ids() {
		if _, ok := p.clusters[id]; ok || len(p.clusters) >= maxClusters {
			continue
		}
		p.clusters[id] = cl
		p.learning[id] = &learnState{at: time.Now()}
	}
}

// indexMembers finds cl by its members' endpoints: old ones are dropped,
// new ones added.
func (p *Pool) indexMembers(cl *cluster, old, members []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ep := range old {
		if p.byEndpoint[ep] == cl {
			delete(p.byEndpoint, ep)
		}
	}
	for _, ep := range cl.seeds {
		if _, ok := p.byEndpoint[ep]; !ok {
			p.byEndpoint[ep] = cl
		}
	}
	for _, ep := range members {
		if _, ok := p.byEndpoint[ep]; !ok {
			p.byEndpoint[ep] = cl
		}
	}
}

// ConnFor returns a connection for the object ref names. When ref's
// service is that of a djinn cluster the pool follows (or ref names no
// service, and its endpoint is such a cluster's member), it is the
// cluster's connection: calls go to the leader, or to any member up when
// the leader is not, whichever member ref's endpoint names. Otherwise it is
// the connection to ref's endpoint, and the pool asks that endpoint in the
// background whether it is a member of a cluster with ref's service id, so
// that later calls follow that cluster.
func (p *Pool) ConnFor(ref djinn.Ref) (*grpc.ClientConn, error) {
	if cl := p.clusterFor(ref); cl != nil {
		return cl.cc, nil
	}
	cc, err := p.Conn(ref.Endpoint)
	if err == nil && !ref.Service.IsZero() {
		p.learnLater(ref)
	}
	return cc, err
}

// Follows reports whether the pool follows the djinn cluster whose service
// id is service: whether references to its services reach any member.
func (p *Pool) Follows(service djinn.ID) bool {
	return p.clusterFor(djinn.Ref{Service: service}) != nil
}

// clusterFor returns the cluster that serves ref, nil if none is known.
func (p *Pool) clusterFor(ref djinn.Ref) *cluster {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ref.Service.IsZero() {
		return p.byEndpoint[ref.Endpoint]
	}
	return p.clusters[ref.Service]
}

// knownConn returns the cluster's connection when ref's service is a
// cluster the pool follows, and the connection to ref's endpoint
// otherwise; it never asks anything. Event senders use it: a listener is
// most often a client's, which serves no member list.
func (p *Pool) knownConn(ref djinn.Ref) (*grpc.ClientConn, error) {
	if !ref.Service.IsZero() {
		p.mu.Lock()
		cl := p.clusters[ref.Service]
		p.mu.Unlock()
		if cl != nil {
			return cl.cc, nil
		}
	}
	return p.Conn(ref.Endpoint)
}

// learnLater asks ref's endpoint for its member list in the background,
// unless that was done, is under way, or was tried lately.
func (p *Pool) learnLater(ref djinn.Ref) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if l, ok := p.learning[ref.Service]; ok && (l.pending || l.never || time.Since(l.at) < learnRetry) {
		return
	}
	if len(p.learning) >= maxLearning {
		for id, l := range p.learning { // forget one answer to make room
			if !l.pending {
				delete(p.learning, id)
				break
			}
		}
	}
	p.learning[ref.Service] = &learnState{pending: true, at: time.Now()}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.learn(ref)
	}()
}

// learn asks ref's endpoint for its member list and, if it is a member of
// the cluster ref's service names, follows that cluster.
func (p *Pool) learn(ref djinn.Ref) {
	ctx, cancel := context.WithTimeout(p.ctx, refreshTimeout)
	defer cancel()
	state := &learnState{at: time.Now()}
	defer func() {
		p.mu.Lock()
		p.learning[ref.Service] = state
		p.mu.Unlock()
	}()
	cc, err := p.Conn(ref.Endpoint)
	if err != nil {
		return
	}
	resp, err := djinnpb.NewAdminClient(cc).Members(ctx, &djinnpb.MembersRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		state.never = true
		return
	case err != nil:
		return // unreachable: ask again later
	}
	if !namesService(resp, ref.Service) {
		state.never = true // another service lives at that endpoint
		return
	}
	var seeds []string
	for _, m := range resp.GetMembers() {
		if ep := m.GetGrpcAddress(); djinn.CheckEndpoint(ep) == nil {
			seeds = append(seeds, ep)
		}
	}
	if len(seeds) == 0 {
		seeds = []string{ref.Endpoint}
	}
	if p.clusterFor(ref) != nil {
		return // found meanwhile
	}
	cl, err := p.follow(seeds)
	if err != nil {
		return
	}
	cl.refresh(ctx)
	p.start(cl)
}

// noteLeader tells c, if it follows the cluster of ref's service, that a
// member named leader as the leader: calls made outside the interceptors
// that follow hints (streams) use it.
func noteLeader(c Connector, ref djinn.Ref, leader string) {
	var p *Pool
	switch c := c.(type) {
	case *Pool:
		p = c
	case *Client:
		p = c.pool
	default:
		return
	}
	if cl := p.clusterFor(ref); cl != nil {
		cl.setLeader(leader)
		cl.refreshSoon()
	}
}

// namesService reports whether a member list is of the cluster with
// service id service, or of one restored from it.
func namesService(resp *djinnpb.MembersResponse, service djinn.ID) bool {
	if string(resp.GetServiceId()) == string(service[:]) {
		return true
	}
	for _, b := range resp.GetPreviousServiceIds() {
		if string(b) == string(service[:]) {
			return true
		}
	}
	return false
}
