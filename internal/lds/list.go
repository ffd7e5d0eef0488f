package lds

import (
	"bytes"
	"slices"

	"github.com/djinn-go/djinn"
)

// Listed is a registration as List shows it: its lease cookie (a
// capability), its managed sets and the registrars discovered for it.
type Listed struct {
	Cookie     djinn.ID
	Info       Info
	Registrars []Registrar
}

// List returns every registration, by cookie.
func (s *State) List() []Listed {
	s.mu.RLock()
	cookies := make([]djinn.ID, 0, len(s.regs))
	for c := range s.regs {
		cookies = append(cookies, c)
	}
	s.mu.RUnlock()
	slices.SortFunc(cookies, func(a, b djinn.ID) int { return bytes.Compare(a[:], b[:]) })
	out := make([]Listed, 0, len(cookies))
	for _, c := range cookies {
		in, err := s.Registration(c)
		if err != nil {
			continue // ended meanwhile
		}
		rs, _ := s.Registrars(c)
		out = append(out, Listed{Cookie: c, Info: in, Registrars: rs})
	}
	return out
}
