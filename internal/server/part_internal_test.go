package server

import "testing"

// A leader is ready (/readyz, Status.ready, djinn status --wait) only once
// every enabled part's leader work serves in its term; a disabled part
// does not hold it back.
func TestPartsServing(t *testing.T) {
	yes := func() bool { return true }
	no := func() bool { return false }
	for _, c := range []struct {
		name  string
		parts []*part
		want  bool
	}{
		{"every part serving", []*part{{enabled: true, serving: yes}, {enabled: true, serving: yes}}, true},
		{"a part without leader readiness", []*part{{enabled: true}, {enabled: true, serving: yes}}, true},
		{"an enabled part still starting", []*part{{enabled: true, serving: yes}, {enabled: true, serving: no}}, false},
		{"a disabled part not serving", []*part{{enabled: true, serving: yes}, {enabled: false, serving: no}}, true},
	} {
		s := &Server{parts: c.parts}
		if got := s.partsServing(); got != c.want {
			t.Errorf("%s: partsServing = %v, want %v", c.name, got, c.want)
		}
	}
}
