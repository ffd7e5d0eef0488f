package renewal

import (
	"bytes"
	"slices"
)

// List returns every set, by id.
func (s *State) List() []SetInfo {
	s.mu.Lock()
	out := make([]SetInfo, 0, len(s.sets))
	for _, st := range s.sets {
		out = append(out, st.info())
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b SetInfo) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}
