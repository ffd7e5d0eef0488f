package service

import (
	"strconv"
	"strings"

	"github.com/djinn-go/djinn"
)

// Transition is a set of the transitions of an item's matching of a
// template that a registrar tells watchers of (Jini's ServiceRegistrar
// TRANSITION_* constants, with their values): a notify registration asks
// for a non-empty set, a service event carries one.
type Transition uint32

// The transitions. An item matches a watch's template before a change and
// not after it (MatchNoMatch: it changed or was removed), not before and
// after (NoMatchMatch: it was registered or changed), or before and after
// (MatchMatch: it changed, or was registered again).
const (
	MatchNoMatch Transition = 1 << iota
	NoMatchMatch
	MatchMatch

	// AllTransitions is every transition.
	AllTransitions = MatchNoMatch | NoMatchMatch | MatchMatch
)

var transitionNames = []struct {
	t    Transition
	name string
}{{MatchNoMatch, "match-nomatch"}, {NoMatchMatch, "nomatch-match"}, {MatchMatch, "match-match"}}

// String names the transitions in t, joined by "|": "match-nomatch",
// "nomatch-match", "match-match"; "none" for the empty set and
// "Transition(0x…)" for a value with unknown bits.
func (t Transition) String() string {
	if t == 0 {
		return "none"
	}
	if t&^AllTransitions != 0 {
		return "Transition(0x" + strconv.FormatUint(uint64(t), 16) + ")"
	}
	var names []string
	for _, n := range transitionNames {
		if t&n.t != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, "|")
}

// Check refuses the empty set and unknown bits, as a registrar does a
// notify registration's transitions.
func (t Transition) Check() error {
	if t == 0 || t&^AllTransitions != 0 {
		return djinn.Errorf(djinn.InvalidArgument, "transitions %#x: want a non-empty union of MatchNoMatch (1), NoMatchMatch (2) and MatchMatch (4)", uint32(t))
	}
	return nil
}

// ParseTransitions parses a comma-separated list of transition names:
// match-nomatch, nomatch-match, match-match (in any case, with
// underscores or hyphens; "all" is the three). An empty list or an unknown
// name is djinn.ErrInvalidArgument naming it.
func ParseTransitions(s string) (Transition, error) {
	var t Transition
	for part := range strings.SplitSeq(s, ",") {
		name := strings.ReplaceAll(strings.ToLower(strings.TrimSpace(part)), "_", "-")
		found := name == "all"
		if found {
			t |= AllTransitions
		}
		for _, n := range transitionNames {
			if name == n.name {
				t |= n.t
				found = true
			}
		}
		if !found {
			return 0, djinn.Errorf(djinn.InvalidArgument, "transition %q: want match-nomatch, nomatch-match, match-match or all", clip(part))
		}
	}
	return t, nil
}
