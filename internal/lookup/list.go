package lookup

import (
	"bytes"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// WatchView is a watch (a notify registration) as Watches shows it.
type WatchView struct {
	Watch
	EventID  int64
	Seq      int64 // the last event's sequence number
	Listener *djinnpb.Ref
}

// Watches returns every watch, by id (its lease's cookie, a capability).
func (s *State) Watches() []WatchView {
	var out []WatchView
	_ = s.Browse(func(r *Registry) error {
		for _, w := range r.ExportWatches() {
			out = append(out, WatchView{Watch: w})
		}
		return nil
	})
	s.mu.RLock()
	for i := range out {
		if m, ok := s.watches[out[i].ID]; ok {
			out[i].EventID, out[i].Seq, out[i].Listener = m.eventID, m.seq, m.listener
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b WatchView) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

// Cookie returns the lease cookie of service id's registration.
func (s *State) Cookie(id djinn.ID) (djinn.ID, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.cookies[id]
	return c, ok
}
