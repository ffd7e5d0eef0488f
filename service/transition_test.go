package service_test

import (
	"errors"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/service"
)

func TestTransitionString(t *testing.T) {
	for tr, want := range map[service.Transition]string{
		0: "none", service.MatchNoMatch: "match-nomatch", service.AllTransitions: "match-nomatch|nomatch-match|match-match",
		service.MatchMatch | 0x10: "Transition(0x14)",
	} {
		if tr.String() != want {
			t.Errorf("%d: %s, want %s", tr, tr, want)
		}
	}
}

// TestTransitionCheck: a notify registration asks for a non-empty set of
// known transitions (DESIGN.md 6).
func TestTransitionCheck(t *testing.T) {
	for tr, ok := range map[service.Transition]bool{0: false, 8: false, service.MatchMatch: true, service.AllTransitions: true, service.AllTransitions | 8: false} {
		if err := tr.Check(); (err == nil) != ok || (err != nil && !errors.Is(err, djinn.InvalidArgument)) {
			t.Errorf("%#x: %v, want ok %v", uint32(tr), err, ok)
		}
	}
}
