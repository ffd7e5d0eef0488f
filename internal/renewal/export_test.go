package renewal

import (
	"time"

	"github.com/djinn-go/djinn"
)

// PageAfter is the page LeasesPage answers with a max (the state's part,
// all of it under the state's lock), for tests and benchmarks.
func (s *State) PageAfter(id djinn.ID, after []byte, max int, now time.Time, maxBytes int) (Page, error) {
	var k *Key
	if len(after) > 0 {
		k = new(Key)
		copy(k[:], after)
	}
	return s.leasesAfter(id, k, max, now, maxBytes)
}

// Whole is the answer LeasesPage gives without a max (the state's part):
// every lease, or more when they pass maxBytes.
func (s *State) Whole(id djinn.ID, now time.Time, maxBytes int) (Page, bool, error) {
	return s.leasesWithin(id, now, maxBytes)
}

// Visited returns how many client leases pages have looked at.
func (s *State) Visited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.visited
}
