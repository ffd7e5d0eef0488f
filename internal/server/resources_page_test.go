package server

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

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

// TestPagesSummariseARowPastAPage (DESIGN.md 7): a resource whose row
// alone passes what a page holds (4 MiB less 65 KiB) is listed
// summarised — its name, principal and short details as they are, a long
// detail by its size and where to read it — on a page a client receives
// by default, the rows around it untouched. Before, it made a page of its
// own that the client failed to receive.
func TestPagesSummariseARowPastAPage(t *testing.T) {
	huge := strings.Repeat("x", 5<<20)
	rows := []*djinnpb.Resource{
		{Name: "a", Details: map[string]string{"n": "1"}},
		{Name: "b", Principal: "cn:bob", Details: map[string]string{"service": huge, "types": "T"}},
		{Name: "c", Details: map[string]string{"n": "3"}},
	}
	var listed []*djinnpb.Resource
	for start := 0; start < len(rows); {
		end := pageEnd(rows, start, fitting(rows[start:], 100))
		page := &djinnpb.ListResourcesResponse{Resources: rows[start:end], Next: rows[end-1].GetName(), Total: int64(len(rows))}
		if size := proto.Size(page); size > pageBytes+1<<10 {
			t.Errorf("page from row %d of %d bytes, past the %d a page holds", start, size, pageBytes)
		}
		listed = append(listed, rows[start:end]...)
		start = end
	}
	if len(listed) != 3 {
		t.Fatalf("%d rows listed, want 3", len(listed))
	}
	b := listed[1]
	if b.GetName() != "b" || b.GetPrincipal() != "cn:bob" || b.GetDetails()["types"] != "T" || !strings.Contains(b.GetDetails()["service"], "5242880 bytes") {
		t.Errorf("the large row listed as %v %q %q, service %.80q; want it summarised: its name, principal, short details, the long one's size", b.GetName(), b.GetPrincipal(), b.GetDetails()["types"], b.GetDetails()["service"])
	}
	if listed[0].GetDetails()["n"] != "1" || listed[2].GetDetails()["n"] != "3" {
		t.Errorf("rows around it changed: %v, %v", listed[0], listed[2])
	}
}
