package wire_test

import (
	"testing"

	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// TestTransitionsAreTheWires: package service's transitions are the
// wire's numbers (Jini's), so they convert as they are.
func TestTransitionsAreTheWires(t *testing.T) {
	for tr, pb := range map[service.Transition]djinnpb.Transition{
		service.MatchNoMatch: djinnpb.Transition_TRANSITION_MATCH_NOMATCH,
		service.NoMatchMatch: djinnpb.Transition_TRANSITION_NOMATCH_MATCH,
		service.MatchMatch:   djinnpb.Transition_TRANSITION_MATCH_MATCH,
	} {
		if uint32(tr) != uint32(pb) {
			t.Errorf("%s is %d, the wire's %s %d", tr, uint32(tr), pb, pb)
		}
	}
}
