package txn

import "slices"

// All returns up to limit transactions of every principal, newest first.
func (s *State) All(limit int) []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]uint64, 0, len(s.txns))
	for id := range s.txns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	out := make([]Info, 0, min(len(ids), limit))
	for _, id := range ids[:min(len(ids), limit)] {
		out = append(out, s.txns[id].info())
	}
	return out
}
