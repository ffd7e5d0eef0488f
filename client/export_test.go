package client

// OnLookupQueued makes s call fn with the number of queued lookups each
// time a lookup joins the queue, so that tests know when lookups wait.
func OnLookupQueued(s *LookupStream, fn func(n int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queued = fn
}
