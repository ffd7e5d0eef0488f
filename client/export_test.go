package client

import "github.com/djinn-go/djinn"

// OnLookupQueued makes s call fn with the number of queued lookups each
// time a lookup joins the queue, so that tests know when lookups wait.
func OnLookupQueued(s *LookupStream, fn func(n int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued = fn
}

// MaxClusters is how many clusters a pool follows at most.
const MaxClusters = maxClusters

// FollowMade makes p follow n made-up clusters (service ids no server
// has), as if it had learnt them.
func FollowMade(p *Pool, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range n {
		p.clusters[djinn.NewID()] = &cluster{}
	}
}

// Owned is how many cluster connections p has made.
func Owned(p *Pool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.owned)
}
