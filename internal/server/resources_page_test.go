package server

import (
	"testing"

	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestPageEnd: a page ends after at most its limit of rows, never between
// two of the same name (redacted names may repeat) — before them, or after
// the last of them when they begin the page.
func TestPageEnd(t *testing.T) {
	rows := func(names ...string) []*djinnpb.Resource {
		out := make([]*djinnpb.Resource, len(names))
		for i, n := range names {
			out[i] = &djinnpb.Resource{Name: n}
		}
		return out
	}
	for _, c := range []struct {
		name         string
		rows         []string
		start, limit int
		want         int
	}{
		{"all fit", []string{"a", "b"}, 0, 5, 2},
		{"a full page", []string{"a", "b", "c"}, 0, 2, 2},
		{"a pair across the end: before it", []string{"a", "b", "b", "c"}, 0, 2, 1},
		{"a pair that begins the page: after it", []string{"b", "b", "b", "c"}, 0, 2, 3},
		{"from a later start", []string{"a", "b", "b", "c", "c"}, 1, 1, 3},
		{"the last rows", []string{"a", "b", "b"}, 1, 5, 3},
	} {
		if got := pageEnd(rows(c.rows...), c.start, c.limit); got != c.want {
			t.Errorf("%s: pageEnd(%v, %d, %d) = %d, want %d", c.name, c.rows, c.start, c.limit, got, c.want)
		}
	}
}
