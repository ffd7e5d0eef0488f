package client

import (
	"context"
	"errors"
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
	pending  bool          // a question is out
	never    bool          // the answer was no: not a djinn cluster's service
	endpoint string        // the endpoint asked
	at       time.Time     // when the last question was asked, or answered
	err      error         // why the last question found no answer (nil: it found one)
	done     chan struct{} // closed once the question is answered
}

// follow makes the connection of the cluster reached at seeds, owned by
// the pool (closed at Close) and found by its seeds' endpoints. told is a
// cluster the pool was told to reach (Dial, Follow), not one it learnt
// from a reference: the join secret goes to told clusters alone.
func (p *Pool) follow(seeds []string, told bool) (*cluster, error) {
	cl, err := p.newCluster(seeds, told)
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
	if told {
		p.told = append(p.told, cl)
	}
	for _, ep := range seeds {
		p.indexLocked(cl, ep)
	}
	return cl, nil
}

// indexLocked finds cl by the endpoint ep, unless another cluster is
// found by it: a cluster the pool was told to reach keeps ep, and takes it
// from one learnt from a reference (which may have been learnt before the
// told cluster's member list came). p.mu is held.
func (p *Pool) indexLocked(cl *cluster, ep string) {
	if cur, ok := p.byEndpoint[ep]; !ok || cl.told && !cur.told {
		p.byEndpoint[ep] = cl
	}
}

// Follow makes the pool follow the djinn cluster reached at endpoints, as
// Dial does for a Client: references to its services reach whichever
// member serves, and the pool's join secret (WithJoinSecret) goes to its
// members. It returns at once; the member list comes in the
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
	cl, err := p.follow(endpoints, true)
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
// the pool follows as many as it may. A cluster the pool was told to reach
// (Dial, Follow) takes the service id from one learnt from a reference:
// a reference to its service learnt before its member list came (the
// learnt cluster, a second connection to it, carries no join secret).
func (p *Pool) adopt(cl *cluster) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range cl.ids() {
		cur, ok := p.clusters[id]
		switch {
		case ok && (cur.told || !cl.told):
			continue // cl already, or kept: told, or learnt first
		case !ok && len(p.clusters) >= maxClusters:
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
		p.indexLocked(cl, ep)
	}
	for _, ep := range members {
		p.indexLocked(cl, ep)
	}
}

// ConnFor returns a connection for the object ref names. When ref's
// service is that of a djinn cluster the pool follows (or ref names no
// service, and its endpoint is such a cluster's member), it is the
// cluster's connection: calls go to the leader, or to any member up when
// the leader is not, whichever member ref's endpoint names. Otherwise it is
// the connection to ref's endpoint, and the pool asks that endpoint in the
// background whether it is a member of a cluster with ref's service id, so
// that later calls follow that cluster. Learn asks and waits for the
// answer. A reference to the service of the cluster the pool was told to
// reach (Dial, Follow) reaches that cluster, with the join secret, also
// when it was learnt before that cluster's member list came.
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

// Learn asks ref's endpoint whether it is a member of a djinn cluster with
// ref's service id, as ConnFor does in the background, and waits for the
// answer, or for the question about that service already under way, until
// ctx ends. Once it returns nil, ConnFor(ref) reaches the cluster when
// ref's service is a cluster's, and ref's endpoint when it is not (the
// endpoint serves no member list, or names other services). Callers that
// must not go on with a bare endpoint use it: one that keeps a reference
// for later calls, when the member it names may be gone.
//
// The answer is kept, so a service id is asked about once: Learn returns
// at once for a service the pool follows or was told is no cluster's. An
// endpoint that could not answer is not asked again for a few seconds:
// meanwhile Learn returns that failure at once. Every error is
// djinn.ErrUnavailable (the endpoint could not be reached, or ctx ended);
// ConnFor then reaches ref's endpoint, and a later Learn asks again. A
// reference with no service id has nothing to learn: nil.
func (p *Pool) Learn(ctx context.Context, ref djinn.Ref) error {
	if ref.Service.IsZero() {
		return nil
	}
	if err := djinn.CheckStoredEndpoint(ref.Endpoint); err != nil {
		return err
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return errClosed("pool")
		}
		l := p.askLocked(ref)
		if l == nil {
			err := p.answerLocked(ref)
			p.mu.Unlock()
			return err
		}
		p.mu.Unlock()
		select {
		case <-l.done:
			// Answered: the next round reads the answer, or asks ref's
			// endpoint if the question was another endpoint's and failed.
		case <-ctx.Done():
			return errors.Join(ctx.Err(), djinn.Errorf(djinn.Unavailable,
				"service %s at %s: no member list yet: %v", ref.Service, ref.Endpoint, ctx.Err()))
		}
	}
}

// answerLocked returns what the last question about ref's service found
// for ref: nil when the pool follows the service's cluster, was told it is
// no cluster's, or asked nothing; the failure of ref's endpoint to answer
// otherwise.
func (p *Pool) answerLocked(ref djinn.Ref) error {
	if _, ok := p.clusters[ref.Service]; ok {
		return nil
	}
	if l := p.learning[ref.Service]; l != nil && !l.pending && !l.never && l.endpoint == ref.Endpoint {
		return l.err
	}
	return nil
}

// Follows reports whether the pool follows the djinn cluster whose service
// id is service: whether references to its services reach any member.
func (p *Pool) Follows(service djinn.ID) bool {
	return p.clusterFor(djinn.Ref{Service: service}) != nil
}

// followsMost reports whether the pool follows as many clusters as it may
// (maxClusters service ids): it adopts no other.
func (p *Pool) followsMost() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clusters) >= maxClusters
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
// unless the pool follows ref's service, was told it is no cluster's, is
// asking already, or asked that endpoint lately in vain.
func (p *Pool) learnLater(ref djinn.Ref) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.askLocked(ref)
	}
}

// askLocked starts asking ref's endpoint for its member list, on a
// goroutine the pool owns, unless the pool follows ref's service, was told
// it is no cluster's, or that endpoint failed to answer less than
// learnRetry ago. It returns the question under way about ref's service
// (the new one, or one asked before of any endpoint), nil when there is
// none. The pool must be open; p.mu is held.
func (p *Pool) askLocked(ref djinn.Ref) *learnState {
	if _, ok := p.clusters[ref.Service]; ok {
		return nil
	}
	if l, ok := p.learning[ref.Service]; ok {
		switch {
		case l.pending:
			return l
		case l.never, l.endpoint == ref.Endpoint && time.Since(l.at) < learnRetry:
			return nil
		}
	}
	if len(p.learning) >= maxLearning {
		for id, l := range p.learning { // forget one answer to make room
			if !l.pending {
				delete(p.learning, id)
				break
			}
		}
	}
	l := &learnState{pending: true, endpoint: ref.Endpoint, at: time.Now(), done: make(chan struct{})}
	p.learning[ref.Service] = l
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		never, err := p.learn(ref)
		p.mu.Lock()
		l.pending, l.never, l.err, l.at = false, never, err, time.Now()
		p.mu.Unlock()
		close(l.done)
	}()
	return l
}

// learn asks ref's endpoint for its member list and, if it is a member of
// the cluster ref's service names, follows that cluster, from that answer.
// never reports the answer no: ref's service is no cluster's; err, that
// the endpoint gave no answer.
func (p *Pool) learn(ref djinn.Ref) (never bool, err error) {
	ctx, cancel := context.WithTimeout(p.ctx, refreshTimeout)
	defer cancel()
	cc, err := p.Conn(ref.Endpoint)
	if err != nil {
		return false, err // the pool closed: Unavailable
	}
	resp, err := djinnpb.NewAdminClient(cc).Members(ctx, &djinnpb.MembersRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return true, nil
	case err != nil:
		return false, djinn.Errorf(djinn.Unavailable, "service %s: no member list from %s, so its calls go there alone: %v", ref.Service, ref.Endpoint, err)
	}
	if !namesService(resp, ref.Service) {
		return true, nil // another service lives at that endpoint
	}
	var seeds []string
	for _, m := range resp.GetMembers() {
		if ep := m.GetGrpcAddress(); djinn.CheckStoredEndpoint(ep) == nil {
			seeds = append(seeds, ep)
		}
	}
	if len(seeds) == 0 {
		seeds = []string{ref.Endpoint}
	}
	if told := p.toldClusterOf(ref.Endpoint); told != nil {
		// A member of a cluster the pool was told to reach, whose member
		// list has not come yet (or named another service): the join
		// secret goes to that endpoint already, so its answer is taken as
		// that cluster's refresh takes one, and the reference reaches the
		// told cluster, not a second connection to it without the secret.
		// An answer from outside it is never taken so: an endpoint could
		// name the told cluster's members to be given the secret.
		told.take(ctx, resp)
	}
	if p.clusterFor(ref) != nil {
		return false, nil // found meanwhile
	}
	if p.followsMost() {
		// Its calls go to ref's endpoint, and it is not asked again: the
		// pool follows no more clusters than it does now, so a cluster made
		// for it would never be adopted, only kept running until Close.
		return true, nil
	}
	cl, err := p.follow(seeds, false)
	if err != nil {
		return false, djinn.Errorf(djinn.Unavailable, "service %s: cannot follow its cluster at %v: %v", ref.Service, seeds, err)
	}
	// The answer is the cluster's member list: taken as a refresh's, with
	// no second question, which the member asked (and the others not yet
	// connected) might not live to answer.
	cl.take(ctx, resp)
	p.start(cl)
	return false, nil
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
