package mailbox

import (
	"bytes"
	"slices"
)

// List returns every registration, by id.
func (s *State) List() []Info {
	s.mu.Lock()
	out := make([]Info, 0, len(s.regs))
	for _, r := range s.regs {
		out = append(out, r.info())
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b Info) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}
