package lock

// Sets returns every lock set as Describe shows it, by table order.
func (s *State) Sets() []SetView {
	s.mu.Lock()
	ids := make([][]byte, 0, s.sets.Len())
	for _, tid := range s.table.sortedSets() {
		id := s.setInfo[tid].id
		ids = append(ids, id[:])
	}
	s.mu.Unlock()
	out := make([]SetView, 0, len(ids))
	for _, id := range ids {
		if v, err := s.Describe(id); err == nil {
			out = append(out, v)
		}
	}
	return out
}
