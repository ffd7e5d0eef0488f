package renewal_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// pageSet fills a set with n client leases of one landlord and returns
// them by cookie.
func pageSet(t *testing.T, f *fixture, n int) (renewal.Set, *landlord, map[djinn.ID]*djinnpb.Lease) {
	t.Helper()
	ll := f.landlord(time.Hour)
	st := f.create(time.Hour)
	in := map[djinn.ID]*djinnpb.Lease{}
	for range n {
		l, c := ll.grant(time.Hour)
		f.mustRenewFor(st, l, djinn.Forever, djinn.Any)
		in[c] = l
	}
	return st, ll, in
}

// readPages reads every page of st's leases, max at a time within
// maxBytes, calling between after each page but the last; it returns the
// cookies in the order read and the pages' sizes.
func readPages(t *testing.T, f *fixture, st renewal.Set, max, maxBytes int, between func()) (cookies []djinn.ID, sizes []int) {
	t.Helper()
	var after []byte
	for range 1000 {
		p, err := f.svc.LeasesPage(context.Background(), st.Info.ID, max, after, maxBytes)
		if err != nil {
			t.Fatalf("page after %x: %v", after, err)
		}
		if len(p.Leases) == 0 || len(p.Leases) > max {
			t.Fatalf("page after %x of %d leases, want 1 to %d", after, len(p.Leases), max)
		}
		sizes = append(sizes, proto.Size(&djinnpb.GetLeasesResponse{Leases: p.Leases}))
		for _, cl := range p.Leases {
			cookies = append(cookies, cookieOf(cl.GetLease()))
		}
		if p.Next == nil {
			return cookies, sizes
		}
		after = p.Next
		if between != nil {
			between()
		}
	}
	t.Fatal("pages do not end")
	return nil, nil
}

// TestGetLeasesPages (LR.2 getLeases): a set's leases come a page at a
// time, in key order (a landlord's leases by cookie), each page at most
// max leases and ending before its bytes pass the bound (a lease larger
// alone on a page of its own), every lease on exactly one page. Before,
// getLeases answered every lease in one message, past what a client
// receives.
func TestGetLeasesPages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		const n = 40
		st, _, in := pageSet(t, f, n)
		// Every lease takes as many bytes: the same landlord, durations
		// and desired expiration.
		one := proto.Size(&djinnpb.GetLeasesResponse{Leases: f.leases(st)[:1]})
		for _, c := range []struct {
			name                   string
			max, maxBytes, perPage int
		}{
			{"pages of 7", 7, 1 << 20, 7},
			{"pages of 3 leases' bytes", 1000, 3*one + one/2, 3},
			{"a page of less than a lease's bytes holds one", 1000, 1, 1},
			{"one page", 1000, 1 << 20, n},
		} {
			got, sizes := readPages(t, f, st, c.max, c.maxBytes, nil)
			if len(got) != n || len(sizes) != (n+c.perPage-1)/c.perPage {
				t.Errorf("%s: %d leases in %d pages, want %d in pages of %d", c.name, len(got), len(sizes), n, c.perPage)
			}
			for i, id := range got {
				if in[id] == nil || i > 0 && bytes.Compare(got[i-1][:], id[:]) >= 0 {
					t.Fatalf("%s: lease %d %s: not in the set, or not after the one before", c.name, i, id)
				}
			}
			for i, size := range sizes {
				if size > max(c.maxBytes, one) {
					t.Errorf("%s: page %d of %d bytes, past the bound %d", c.name, i, size, c.maxBytes)
				}
			}
		}
	})
}

// TestGetLeasesPagesWhileTheSetChanges (LR.2 getLeases): leases added
// and removed between pages do not make one in the set throughout missed
// or read twice, nor any read twice.
func TestGetLeasesPagesWhileTheSetChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		st, ll, in := pageSet(t, f, 30)
		got, _ := readPages(t, f, st, 4, 1<<20, func() {
			for c, l := range in { // any one
				if _, err := f.svc.Remove(context.Background(), st.Info.ID, l); err != nil {
					t.Fatal(err)
				}
				delete(in, c)
				break
			}
			l, _ := ll.grant(time.Hour)
			f.mustRenewFor(st, l, djinn.Forever, djinn.Any)
		})
		seen := map[djinn.ID]int{}
		for _, c := range got {
			seen[c]++
		}
		for c := range in {
			if seen[c] != 1 {
				t.Errorf("lease %s, in the set throughout, read %d times, want once", c, seen[c])
			}
		}
		for c, n := range seen {
			if n > 1 {
				t.Errorf("lease %s read %d times", c, n)
			}
		}
	})
}

// TestGetLeasesWhole (LR.2 getLeases): a request without a max, a
// client's from before pages, gets every lease when they fit, and is
// refused ResourceExhausted naming how many the set holds and to ask in
// pages when they do not — never a part of them, which such a client
// would take for the whole.
func TestGetLeasesWhole(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		st, _, _ := pageSet(t, f, 12)
		p, err := f.svc.LeasesPage(context.Background(), st.Info.ID, 0, nil, 1<<20)
		if err != nil || len(p.Leases) != 12 || p.Next != nil || p.Total != 12 {
			t.Fatalf("every lease of 12 in 1 MiB: %d leases, next %x, total %d, %v; want 12, no next", len(p.Leases), p.Next, p.Total, err)
		}
		size := proto.Size(&djinnpb.GetLeasesResponse{Leases: p.Leases})
		if p, err := f.svc.LeasesPage(context.Background(), st.Info.ID, 0, nil, size); err != nil || len(p.Leases) != 12 {
			t.Fatalf("every lease in exactly their bytes: %d leases, %v", len(p.Leases), err)
		}
		_, err = f.svc.LeasesPage(context.Background(), st.Info.ID, 0, nil, size-1)
		wantKind(t, err, djinn.ResourceExhausted)
		if msg := err.Error(); !strings.Contains(msg, "holds 12 leases") || !strings.Contains(msg, "in pages") {
			t.Errorf("refusal %q: want the lease count and to ask in pages", msg)
		}
	})
}

// TestGetLeasesPageArguments (LR.2 getLeases): a max out of range or an
// after that is no page's next is refused InvalidArgument naming it.
func TestGetLeasesPageArguments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, renewal.Config{})
		defer f.stop()
		st, _, _ := pageSet(t, f, 1)
		for _, c := range []struct {
			name  string
			max   int
			after []byte
			want  string
		}{
			{"negative max", -1, nil, "max -1"},
			{"max past the most", renewal.MostPage + 1, nil, "max 100001"},
			{"after of 5 bytes", 10, make([]byte, 5), "after of 5 bytes"},
			{"after of 49 bytes", 10, make([]byte, 49), "after of 49 bytes"},
		} {
			_, err := f.svc.LeasesPage(context.Background(), st.Info.ID, c.max, c.after, 1<<20)
			if djinn.KindOf(err) != djinn.InvalidArgument || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want InvalidArgument naming %q", c.name, err, c.want)
			}
			if err := renewal.CheckPage(c.max, c.after); djinn.KindOf(err) != djinn.InvalidArgument {
				t.Errorf("%s: CheckPage %v, want InvalidArgument", c.name, err)
			}
		}
		if p, err := f.svc.LeasesPage(context.Background(), st.Info.ID, 10, make([]byte, 48), 1<<20); err != nil || p.Total != 1 || len(p.Leases) > 1 {
			t.Errorf("a page after a key of 48 bytes: %v, %v; want a page", p, err)
		}
	})
}
