package server_test

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// TestResourcesListOfTransactionsReadsTheCallersOwn (trust: one
// principal's load never starves another's; DESIGN.md 7): a principal's
// Resources.List of transactions looks at its own transactions alone,
// those of its pages and one past each — never at another principal's,
// which it is never shown, whatever page it asks for; an operator lists
// every principal's, or one's, page by page as the transactions are;
// Before, every page of anyone's
// listing read every transaction of every principal (up to some 2
// million remembered), sorted them, and built each one's row, with the
// state locked that every transaction call waits for.
func TestResourcesListOfTransactionsReadsTheCallersOwn(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
	cfg.Security.Operators = []string{"cn:ops"}
	srv := servertest.Start(t, cfg)
	alice := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "alice"))))
	bob := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "bob"))))
	ops := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "ops"))))
	ctx := testContext(t)
	create := func(c *client.Client, n int) ([]string, []*client.Transaction) {
		t.Helper()
		mgr, err := c.TransactionManager(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		var txs []*client.Transaction
		for range n {
			tx, err := mgr.Create(ctx, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			ids, txs = append(ids, strconv.FormatUint(tx.ID(), 10)), append(txs, tx)
		}
		return ids, txs
	}
	mine, txs := create(alice, 5)
	if err := txs[1].Abort(ctx); err != nil {
		t.Fatal(err)
	}
	abortedID := mine[1]
	theirs, _ := create(bob, 300)
	byID := func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) }
	slices.SortFunc(mine, byID)
	slices.SortFunc(theirs, byID)
	kind := client.KindTransactions

	before, _ := server.TxnVisits(srv)
	if got := names(listAll(t, alice, client.ResourceQuery{Kind: kind, Max: 2})); !slices.Equal(got, mine) {
		t.Fatalf("alice's transactions: %v, want %v", got, mine)
	}
	if v, _ := server.TxnVisits(srv); v-before > len(mine)+3 {
		t.Fatalf("alice's 3 pages of her %d transactions looked at %d, want at most %d (hers, one past each page)", len(mine), v-before, len(mine)+3)
	}
	aborted := listAll(t, alice, client.ResourceQuery{Kind: kind, Filter: map[string]string{"state": "aborted"}})
	if len(aborted) != 1 || aborted[0].Name != abortedID || aborted[0].Details["state"] != "ABORTED" {
		t.Fatalf("alice's aborted transactions: %+v, want %s", aborted, abortedID)
	}

	// Authorization rows: a page after one of bob's ids lists hers after
	// it, none of his; alice may not list his, nor every principal's.
	for _, after := range theirs[:10] {
		page, err := alice.Resources(ctx, client.ResourceQuery{Kind: kind, After: after, Max: 1000})
		want := slices.DeleteFunc(slices.Clone(mine), func(id string) bool { return byID(id, after) <= 0 })
		if err != nil || !slices.Equal(names(page.Resources), want) || page.Next != "" || page.Total != len(mine) {
			t.Fatalf("alice's page after bob's %s: %+v, %v; want her %v, a total of %d", after, page, err, want, len(mine))
		}
	}
	bobName := "cn:bob"
	for _, q := range []client.ResourceQuery{{Kind: kind, All: true}, {Kind: kind, Principal: &bobName}} {
		if _, err := alice.Resources(ctx, q); !errors.Is(err, djinn.PermissionDenied) {
			t.Errorf("alice lists %+v: %v, want PermissionDenied", q, err)
		}
	}
	for _, r := range listAll(t, bob, client.ResourceQuery{Kind: kind, Max: 1000}) {
		if slices.Contains(mine, r.Name) {
			t.Errorf("bob's listing holds alice's transaction %s", r.Name)
		}
	}
	if _, err := alice.Resources(ctx, client.ResourceQuery{Kind: kind, After: "x1"}); !errors.Is(err, djinn.InvalidArgument) || !strings.Contains(err.Error(), `"x1"`) {
		t.Errorf("after x1: %v, want InvalidArgument naming it", err)
	}

	// An operator's listings, page by page.
	every := append(slices.Clone(mine), theirs...)
	slices.SortFunc(every, byID)
	all := listAll(t, ops, client.ResourceQuery{Kind: kind, All: true, Max: 7})
	if got := names(all); !slices.Equal(got, every) {
		t.Fatalf("every principal's transactions: %d, want the %d", len(got), len(every))
	}
	for _, r := range all {
		if !r.Redacted || r.Principal != "cn:alice" && r.Principal != "cn:bob" {
			t.Fatalf("transaction %s as an operator sees it: %+v, want redacted, alice's or bob's", r.Name, r)
		}
	}
	if got := names(listAll(t, ops, client.ResourceQuery{Kind: kind, Principal: &bobName, Max: 33})); !slices.Equal(got, theirs) {
		t.Fatalf("bob's transactions as an operator lists them: %d, want his %d", len(got), len(theirs))
	}

}

// TestConsoleTransactionsHighestFirst: the console's transaction view
// shows the 500 of every principal's transactions of the highest ids,
// highest first, searched by state, and looks at those 500 alone (in
// steps, the state unlocked between them). Before, it copied and sorted
// every one's id.
func TestConsoleTransactionsHighestFirst(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	ctx := testContext(t)
	mgr, err := c.TransactionManager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n, shows = 520, 500
	var ids []string
	var txs []*client.Transaction
	for range n {
		tx, err := mgr.Create(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		ids, txs = append(ids, strconv.FormatUint(tx.ID(), 10)), append(txs, tx)
	}
	byID := func(a, b string) int { return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b)) }
	highest := slices.Clone(ids)
	slices.SortFunc(highest, func(a, b string) int { return byID(b, a) })
	aborted := highest[10] // one the view shows
	if err := txs[slices.Index(ids, aborted)].Abort(ctx); err != nil {
		t.Fatal(err)
	}
	shown := func(path string) []string {
		t.Helper()
		_, v := consoleGet(t, srv, path)
		rows, _ := v["transactions"].([]any)
		var out []string
		for _, r := range rows {
			out = append(out, r.(map[string]any)["id"].(string))
		}
		return out
	}
	before, _ := server.TxnVisits(srv)
	if got := shown("/api/view/txn"); !slices.Equal(got, highest[:shows]) {
		t.Fatalf("the console's transactions: %d from %v; want the %d of the highest ids, highest first", len(got), got[:min(3, len(got))], shows)
	}
	if v, _ := server.TxnVisits(srv); v-before != shows {
		t.Fatalf("the console's view looked at %d transactions, want the %d it shows", v-before, shows)
	}
	if got := shown("/api/view/txn?state=ABORTED"); !slices.Equal(got, []string{aborted}) {
		t.Fatalf("the console's ABORTED transactions: %v, want %s", got, aborted)
	}
}
