package mailbox

import (
	"bytes"
	"slices"
)

// List returns every registration, by id.
func (s *State) List() []Info {
	s.mu.Lock()
	out := make([]Info, 0, s.regs.Len())
	s.regs.Each(func(slot uint32, _ *registration) {
		if in, ok := s.infoLocked(slot); ok {
			out = append(out, in)
		}
	})
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Info) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}
