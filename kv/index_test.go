package kv_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/participant/participanttest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestListPageVisitsItsKeys: a page walks the ordered index of the keys
// from where it starts and stops once full, so it visits the keys it
// carries, the one past it that says more follow, and the transaction's
// changes in its range — not every key of the store. Before, every page
// ranged over the whole store: a page of 10 from a store of 4,000 keys
// visited 4,000, and listing the store in pages cost pages × keys.
func TestListPageVisitsItsKeys(t *testing.T) {
	f := start(t)
	for i := range 2000 {
		f.put(nil, fmt.Sprintf("a%04d", i), "v")
		f.put(nil, fmt.Sprintf("c%04d", i), "v")
	}
	for _, k := range []string{"b1", "b2", "b3"} {
		f.put(nil, k, k)
	}
	ns := f.db.Space("cn:x")
	for _, k := range []string{"a0001", "a0002"} {
		if err := ns.Put(bg, nil, k, []byte("x's")); err != nil {
			t.Fatal(err)
		}
	}
	tx := f.tx()
	for i := 1000; i < 1010; i++ {
		if _, err := f.db.Delete(bg, tx, fmt.Sprintf("a%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	f.put(tx, "a1004x", "new")
	f.put(tx, "b0", "new")
	srv := kv.NewServer(f.db)
	rows := []struct {
		name           string
		tx             *participant.Tx
		prefix, after  string
		max            int32
		want, wantNext string
		visitsAtMost   int
	}{
		{"a page of 10 from the middle", nil, "a", "a0999", 10, "a1000 a1001 a1002 a1003 a1004 a1005 a1006 a1007 a1008 a1009", "a1009", 12},
		{"the last page of a prefix", nil, "a", "a1995", 10, "a1996 a1997 a1998 a1999", "", 6},
		{"a small prefix in a large store, whole", nil, "b", "", 0, "b1 b2 b3", "", 4},
		{"a prefix nothing has", nil, "bz", "", 0, "", "", 1},
		{"under a transaction that deleted 10 keys of the page and added one", tx, "a", "a0999", 5, "a1004x a1010 a1011 a1012 a1013", "a1013", 5 + 1 + 10 + 1},
		{"under a transaction that added a key to a small prefix", tx, "b", "", 2, "b0 b1", "b1", 3},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			before := f.db.Visited()
			resp, err := page(srv, r.tx, r.prefix, r.after, r.max)
			visits := f.db.Visited() - before
			if err != nil || keysOf(resp) != r.want || resp.GetNext() != r.wantNext {
				t.Fatalf("page: %q next %q, %v; want %q next %q", keysOf(resp), resp.GetNext(), err, r.want, r.wantNext)
			}
			if visits > r.visitsAtMost {
				t.Fatalf("the page visited %d keys of the index, want at most %d (the store holds %d)", visits, r.visitsAtMost, f.db.Len())
			}
		})
	}
	t.Run("a namespace's listing", func(t *testing.T) {
		before := f.db.Visited()
		es, err := ns.List(bg, nil, "")
		if visits := f.db.Visited() - before; err != nil || len(es) != 2 || visits > 3 {
			t.Fatalf("listing namespace cn:x: %v, %v, visiting %d keys of the index; want its 2 entries visiting at most 3", es, err, visits)
		}
	})
}

// TestListPagesMatchTheView: the pages of a listing — committed, under a
// transaction, under one nested in it — are the brute-force listing of
// what it sees, in key order, every page but the last full and naming
// its last key as next, the last naming none. The transactions' changes
// add keys the store lacks and delete keys it holds around the pages'
// edges, which the pages merge into the walk of the index (TX.1.2, TX.3:
// a transaction sees its own changes and its ancestors'). Committed data
// is written at once and by a committed transaction, both of which keep
// the index.
func TestListPagesMatchTheView(t *testing.T) {
	keys := []string{"a", "aa", "ab", "aba", "abb", "b", "ba", "bb", "c"}
	prefixes := []string{"", "a", "ab", "b", "z"}
	rapid.Check(t, func(rt *rapid.T) {
		mgr := participanttest.NewManager()
		db, err := kv.Open(kv.Config{Participant: participant.Config{Endpoint: "127.0.0.1:7", Store: participant.NewMemStore(), Managers: mgr}})
		if err != nil {
			rt.Fatal(err)
		}
		defer db.Close()
		srv := kv.NewServer(db)
		// write makes puts and deletes under tx, making them in view too.
		write := func(label string, tx *participant.Tx, view map[string]string) {
			for i := range rapid.IntRange(0, 8).Draw(rt, label+" writes") {
				k := rapid.SampledFrom(keys).Draw(rt, label+" key")
				if rapid.Bool().Draw(rt, label+" delete") {
					if _, err := db.Delete(bg, tx, k); err != nil {
						rt.Fatalf("%s: delete %s: %v", label, k, err)
					}
					delete(view, k)
					continue
				}
				v := fmt.Sprint(label, i)
				if err := db.Put(bg, tx, k, []byte(v)); err != nil {
					rt.Fatalf("%s: put %s: %v", label, k, err)
				}
				view[k] = v
			}
		}
		// check pages through a listing under tx, comparing each page
		// with view's listing.
		check := func(label string, tx *participant.Tx, view map[string]string) {
			prefix := rapid.SampledFrom(prefixes).Draw(rt, label+" prefix")
			most := rapid.IntRange(1, 4).Draw(rt, label+" max")
			var want []string
			for _, k := range slices.Sorted(maps.Keys(view)) {
				if strings.HasPrefix(k, prefix) {
					want = append(want, k+"="+view[k])
				}
			}
			entries := func(resp *djinnpb.KVListResponse) []string {
				var es []string
				for _, e := range resp.GetEntries() {
					es = append(es, e.GetKey()+"="+string(e.GetValue()))
				}
				return es
			}
			whole, err := srv.List(bg, &djinnpb.KVListRequest{Prefix: prefix, Txn: kv.TxToProto(tx)})
			if err != nil || !slices.Equal(entries(whole), want) || whole.GetNext() != "" {
				rt.Fatalf("%s: whole listing of %q: %v next %q, %v; want %v", label, prefix, entries(whole), whole.GetNext(), err, want)
			}
			for pos, after := 0, ""; ; {
				resp, err := srv.List(bg, &djinnpb.KVListRequest{Prefix: prefix, After: after, Max: int32(most), Txn: kv.TxToProto(tx)})
				if err != nil {
					rt.Fatalf("%s: page of %q after %q: %v", label, prefix, after, err)
				}
				got, end := entries(resp), min(pos+most, len(want))
				if !slices.Equal(got, want[pos:end]) {
					rt.Fatalf("%s: page of %q after %q (max %d): %v, want %v of %v", label, prefix, after, most, got, want[pos:end], want)
				}
				pos = end
				if pos == len(want) {
					if resp.GetNext() != "" {
						rt.Fatalf("%s: last page of %q after %q: next %q, want none", label, prefix, after, resp.GetNext())
					}
					return
				}
				if last, _, _ := strings.Cut(got[len(got)-1], "="); resp.GetNext() != last {
					rt.Fatalf("%s: page of %q after %q: next %q, want its last key %q", label, prefix, after, resp.GetNext(), last)
				}
				after = resp.GetNext()
			}
		}
		committed := map[string]string{}
		write("at once", nil, committed)
		t0 := mgr.Create()
		t0view := maps.Clone(committed)
		write("committed", &t0, t0view)
		if _, joined := db.Participant().State(t0); joined {
			if v, err := db.Participant().Prepare(bg, t0); err != nil {
				rt.Fatal(err)
			} else if v == participant.Prepared {
				if err := db.Participant().Commit(bg, t0); err != nil {
					rt.Fatal(err)
				}
			}
		}
		committed = t0view
		check("committed", nil, committed)
		parent := mgr.Create()
		pview := maps.Clone(committed)
		write("parent", &parent, pview)
		check("parent", &parent, pview)
		child := mgr.CreateNested(parent)
		cview := maps.Clone(pview)
		write("child", &child, cview)
		check("child", &child, cview)
		check("committed, with transactions active", nil, committed)
	})
}

// TestListAfterReopen: Open rebuilds the index from the Store — the
// default namespace's keys and the others' — so pages after a restart
// list what was committed, and writes after it keep the index.
func TestListAfterReopen(t *testing.T) {
	r := newRestartable(t)
	f := open(t, r.st, r.mgr)
	var want []string
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		f.put(nil, k, "v")
		if i != 5 && i != 6 {
			want = append(want, k)
		}
	}
	if err := f.db.Space("cn:x").Put(bg, nil, "k05", []byte("x's")); err != nil {
		t.Fatal(err)
	}
	tx := f.tx()
	for _, k := range []string{"k05", "k06"} {
		if _, err := f.db.Delete(bg, tx, k); err != nil {
			t.Fatal(err)
		}
	}
	f.put(tx, "k05x", "v")
	f.commit(tx)
	want = slices.Insert(want, 5, "k05x")
	r.restart(f.db)
	f = open(t, r.st, r.mgr)
	srv := kv.NewServer(f.db)
	if got, _ := walk(t, srv, nil, "k", 7); !slices.Equal(got, want) {
		t.Fatalf("pages after reopening: %v, want %v", got, want)
	}
	if es, err := f.db.Space("cn:x").List(bg, nil, ""); err != nil || len(es) != 1 || es[0].Key != "k05" {
		t.Fatalf("namespace cn:x after reopening: %v, %v; want k05", es, err)
	}
	f.put(nil, "k05y", "v")
	if _, err := f.db.Delete(bg, nil, "k07"); err != nil {
		t.Fatal(err)
	}
	want = slices.Insert(slices.DeleteFunc(want, func(k string) bool { return k == "k07" }), 6, "k05y")
	if got, _ := walk(t, srv, nil, "k", 7); !slices.Equal(got, want) {
		t.Fatalf("pages after writes past the reopening: %v, want %v", got, want)
	}
}
