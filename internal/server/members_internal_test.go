package server

import "testing"

// TestCaughtUp: a joining member is promoted once it has applied something
// and is within the bound of the leader's applied index.
func TestCaughtUp(t *testing.T) {
	for _, c := range []struct {
		name                 string
		leader, applied, lag uint64
		want                 bool
	}{
		{"nothing applied yet, in a short log", 5, 0, 1024, false},
		{"within the bound", 5000, 4000, 1024, true},
		{"at the bound", 5000, 3976, 1024, true},
		{"beyond the bound", 5000, 3975, 1024, false},
		{"ahead of what the leader said", 10, 12, 0, true},
		{"a bound of zero: level with the leader", 10, 10, 0, true},
	} {
		if got := caughtUp(c.leader, c.applied, c.lag); got != c.want {
			t.Errorf("%s: caughtUp(%d, %d, %d) = %v", c.name, c.leader, c.applied, c.lag, got)
		}
	}
}
