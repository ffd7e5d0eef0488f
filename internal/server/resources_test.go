package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/service"
)

// listAll pages through a kind and returns every resource, checking the
// pages are in name order without repeats and add up to the total.
func listAll(t *testing.T, c *client.Client, q client.ResourceQuery) []client.Resource {
	t.Helper()
	var out []client.Resource
	for {
		page, err := c.Resources(testContext(t), q)
		if err != nil {
			t.Fatalf("list %s after %q: %v", q.Kind, q.After, err)
		}
		out = append(out, page.Resources...)
		if page.Next == "" {
			if len(out) != page.Total {
				t.Errorf("list %s: %d resources over the pages, total %d", q.Kind, len(out), page.Total)
			}
			break
		}
		q.After = page.Next
	}
	for i := 1; i < len(out); i++ {
		a, b := out[i-1].Name, out[i].Name
		if len(a) > len(b) || len(a) == len(b) && a >= b {
			t.Errorf("list %s: %q before %q: not in name order", q.Kind, a, b)
		}
	}
	return out
}

func names(rs []client.Resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

// TestResourcesList (DESIGN.md 7): every kind lists its resources — the
// caller's own; an operator lists every principal's or one's, others may
// not; pages follow each other; filters narrow a kind.
func TestResourcesList(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
	cfg.Security.Operators = []string{"cn:ops"}
	srv := servertest.Start(t, cfg)
	alice := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "alice"))))
	bob := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "bob"))))
	ops := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "ops"))))
	pop := servertest.Populate(t, alice, srv.Addr(), time.Hour)

	want := map[string]string{
		client.KindMailboxes:        pop.Mailbox.ID.String(),
		client.KindRenewalSets:      pop.Renewal.ID().String(),
		client.KindLockSets:         pop.LockSet.ID().String(),
		client.KindLDSRegistrations: pop.LDS.Lease().Cookie().String(),
		client.KindTransactions:     strconv.FormatUint(pop.Txn.ID(), 10),
		client.KindLookupItems:      pop.Item.ID.String(),
		client.KindLeases:           pop.Mailbox.Lease.Cookie().String(),
	}
	for kind, name := range want {
		own := listAll(t, alice, client.ResourceQuery{Kind: kind, Max: 2})
		if !slices.Contains(names(own), name) {
			t.Errorf("alice lists her %s %v, without %s", kind, names(own), name)
		}
		for _, r := range own {
			if r.Principal != "cn:alice" {
				t.Errorf("alice's %s list has %s of %q", kind, r.Name, r.Principal)
			}
		}
		if theirs := listAll(t, bob, client.ResourceQuery{Kind: kind}); len(theirs) != 0 {
			t.Errorf("bob lists alice's %s: %v", kind, names(theirs))
		}
		all := listAll(t, ops, client.ResourceQuery{Kind: kind, All: true})
		shown := name
		if kind != client.KindTransactions && kind != client.KindLookupItems {
			shown = fingerprintOf(t, name) // a capability: not for an operator's eyes
		}
		if !slices.Contains(names(all), shown) {
			t.Errorf("an operator's list of every %s %v lacks alice's %s, shown as %s", kind, names(all), name, shown)
		}
		redacted(t, kind, own, all)
		p := "cn:alice"
		if hers := listAll(t, ops, client.ResourceQuery{Kind: kind, Principal: &p}); len(hers) != len(own) {
			t.Errorf("an operator lists %d of alice's %s, she %d", len(hers), kind, len(own))
		}
	}
	for _, q := range []client.ResourceQuery{{Kind: client.KindLeases, All: true}, {Kind: client.KindLeases, Principal: new(string)}} {
		if _, err := bob.Resources(testContext(t), q); !errors.Is(err, djinn.ErrPermissionDenied) {
			t.Errorf("bob lists other principals' leases (%+v): %v, want refused for want of the operator role", q, err)
		}
	}
	resourceFilters(t, alice, pop)
	for _, q := range []client.ResourceQuery{{Kind: "widgets"}, {Kind: client.KindLeases, Max: 1001}, {Kind: client.KindLeases, Max: -1},
		{Kind: client.KindTransactions, Filter: map[string]string{"state": "DANCING"}},
		// A filter the kind does not take, not ignored (answering all).
		{Kind: client.KindLeases, Filter: map[string]string{"state": "ACTIVE"}},
		{Kind: client.KindLookupItems, Filter: map[string]string{"typ": pop.ItemType}},
		{Kind: client.KindMailboxes, Filter: map[string]string{"kind": "mailbox registration"}}} {
		if _, err := alice.Resources(testContext(t), q); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("list %+v: %v, want an invalid argument", q, err)
		}
	}
}

// fingerprintOf is a capability's fingerprint, as the console shows it:
// the first 16 hex digits of its SHA-256.
func fingerprintOf(t *testing.T, name string) string {
	t.Helper()
	id, err := djinn.ParseID(name)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(id[:])
	return hex.EncodeToString(sum[:8])
}

// redacted: an operator's list of every principal's resources shows
// alice's — each of hers, by its name or, when the name is a capability,
// its fingerprint — with her principal and expiration, and none of
// her capabilities: no lease cookie, no delivery target.
func redacted(t *testing.T, kind string, own, all []client.Resource) {
	t.Helper()
	for _, o := range own {
		i := slices.IndexFunc(all, func(r client.Resource) bool {
			return r.Name == o.Name || len(o.Name) == 32 && kind != client.KindLookupItems && r.Name == fingerprintOf(t, o.Name)
		})
		if i < 0 {
			t.Errorf("an operator's list of every %s lacks alice's %s", kind, o.Name)
			continue
		}
		r := all[i]
		if !r.Redacted || !r.Lease.IsZero() || r.Principal != "cn:alice" || !r.Expires.Equal(o.Expires) {
			t.Errorf("alice's %s %s as an operator sees it: %+v; want redacted, no lease cookie, her principal and expiration %v", kind, o.Name, r, o.Expires)
		}
		if o.Details["target"] != "" && r.Details["target"] != "(redacted)" {
			t.Errorf("alice's %s %s: an operator sees its delivery target %q", kind, o.Name, r.Details["target"])
		}
		if o.Redacted {
			t.Errorf("alice's own %s %s listed redacted to her", kind, o.Name)
		}
	}
}

// resourceFilters: leases by what they cover, transactions by state,
// lookup items by type.
func resourceFilters(t *testing.T, c *client.Client, pop *servertest.Population) {
	t.Helper()
	leases := listAll(t, c, client.ResourceQuery{Kind: client.KindLeases, Filter: map[string]string{"kind": "mailbox registration"}})
	if len(leases) != 1 || leases[0].Name != pop.Mailbox.Lease.Cookie().String() || leases[0].Details["covers"] != "mailbox registration" {
		t.Errorf("alice's mailbox registration leases: %+v", leases)
	}
	active := listAll(t, c, client.ResourceQuery{Kind: client.KindTransactions, Filter: map[string]string{"state": "active"}})
	if len(active) != 1 || active[0].Details["state"] != "ACTIVE" {
		t.Errorf("alice's active transactions: %+v", active)
	}
	if none := listAll(t, c, client.ResourceQuery{Kind: client.KindTransactions, Filter: map[string]string{"state": "COMMITTED"}}); len(none) != 0 {
		t.Errorf("alice's committed transactions: %+v, want none", none)
	}
	items := listAll(t, c, client.ResourceQuery{Kind: client.KindLookupItems, Filter: map[string]string{"type": pop.ItemType}})
	if len(items) != 1 || items[0].Name != pop.Item.ID.String() || !items[0].Expires.Before(djinn.EndOfTime) {
		t.Errorf("alice's %s items: %+v", pop.ItemType, items)
	}
	if none := listAll(t, c, client.ResourceQuery{Kind: client.KindLookupItems, Filter: map[string]string{"type": "Toaster"}}); len(none) != 0 {
		t.Errorf("alice's Toaster items: %+v, want none", none)
	}
}

// TestResourcesListLargePages (DESIGN.md 7): a page of large resources
// ends before it passes what a client receives by default (4 MiB), its
// next naming where the following page starts, so a caller paging as
// always gets them all. Before, a page was bounded by count alone: 300
// lookup items with 16 KiB references made a page of 5 MB the client
// could not receive.
func TestResourcesListLargePages(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	ctx := testContext(t)
	reg, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const items = 300
	for range items {
		if _, err := reg.Register(ctx, service.Item{Service: make([]byte, 16<<10), Types: []string{"Wide"}}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	q := client.ResourceQuery{Kind: "lookup-items", Max: 1000, Filter: map[string]string{"type": "Wide"}}
	page, err := c.Resources(ctx, q)
	if err != nil {
		t.Fatalf("first page of %d lookup items of 16 KiB: %v", items, err)
	}
	if len(page.Resources) == 0 || len(page.Resources) == items || page.Next == "" || page.Total != items {
		t.Errorf("first page: %d resources, next %q, total %d; want some of the %d, and a next", len(page.Resources), page.Next, page.Total, items)
	}
	if got := listAll(t, c, q); len(got) != items {
		t.Errorf("paged through %d lookup items, want %d", len(got), items)
	}
}

// TestResourcesListBinaryServiceReference (DESIGN.md 7): a lookup item
// whose service reference is not text (a registrar stores any bytes) is
// listed, its reference's bytes that are no UTF-8 shown as U+FFFD, as the
// console shows them. Before, the page failed to marshal (a detail is a
// proto string) and listing lookup items failed for every page holding
// such an item.
func TestResourcesListBinaryServiceReference(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	ctx := testContext(t)
	reg, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Register(ctx, service.Item{Service: []byte{0xff, 'r', 0xfe}, Types: []string{"Binary"}}, time.Hour); err != nil {
		t.Fatal(err)
	}
	page, err := c.Resources(ctx, client.ResourceQuery{Kind: "lookup-items", Filter: map[string]string{"type": "Binary"}})
	if err != nil || len(page.Resources) != 1 {
		t.Fatalf("lookup items of a binary reference: %+v, %v; want the item", page, err)
	}
	if got := page.Resources[0].Details["service"]; got != "\uFFFDr\uFFFD" {
		t.Errorf("service detail %q, want %q", got, "\uFFFDr\uFFFD")
	}
}
