package kv_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/participant/participanttest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// mib is a value of 1 MiB, the largest a store holds by default: five of
// them are past what one response carries to a default client.
var mib = strings.Repeat("v", 1<<20)

// putLarge puts n entries of 1 MiB under prefix: prefix0, prefix1, ….
func (f *fixture) putLarge(prefix string, n int) {
	f.t.Helper()
	for i := range n {
		f.put(nil, fmt.Sprint(prefix, i), mib)
	}
}

// page asks srv for a page: no txn unless tx is set.
func page(srv *kv.Server, tx *participant.Tx, prefix, after string, most int32) (*djinnpb.KVListResponse, error) {
	return srv.List(bg, &djinnpb.KVListRequest{Prefix: prefix, After: after, Max: most, Txn: kv.TxToProto(tx)})
}

// keysOf returns a response's keys, space separated.
func keysOf(resp *djinnpb.KVListResponse) string {
	var ks []string
	for _, e := range resp.GetEntries() {
		ks = append(ks, e.GetKey())
	}
	return strings.Join(ks, " ")
}

// wantRefused checks that err has code c and names every one of want.
func wantRefused(t *testing.T, what string, err error, c codes.Code, want ...string) {
	t.Helper()
	if status.Code(err) != c {
		t.Fatalf("%s: %v, want %s", what, err, c)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%s: %v, want it to name %q", what, err, w)
		}
	}
}

// walk pages through prefix from the start, most entries a page at most,
// checking each page fits wire.MaxReply; it returns the keys and the
// number of pages.
func walk(t *testing.T, srv *kv.Server, tx *participant.Tx, prefix string, most int32) (keys []string, pages int) {
	t.Helper()
	for after := ""; ; pages++ {
		resp, err := page(srv, tx, prefix, after, most)
		if err != nil {
			t.Fatalf("page after %q: %v", after, err)
		}
		if n := proto.Size(resp); n > wire.MaxReply {
			t.Fatalf("page after %q: %d bytes, past %d", after, n, wire.MaxReply)
		}
		for _, e := range resp.GetEntries() {
			keys = append(keys, e.GetKey())
		}
		if resp.GetNext() == "" {
			return keys, pages + 1
		}
		if len(resp.GetEntries()) == 0 {
			t.Fatalf("page after %q: no entries, next %q", after, resp.GetNext())
		}
		if resp.GetNext() != keys[len(keys)-1] {
			t.Fatalf("page after %q: next %q, want its last key %q", after, resp.GetNext(), keys[len(keys)-1])
		}
		after = resp.GetNext()
	}
}

// TestListPages has a row per rule of a listing served (KVListRequest):
// a response never passes what a client receives by default (DESIGN.md 7:
// a reply is bounded), a request that pages gets pages and a next, one
// that does not is answered whole or refused — never cut short, which it
// would not notice — and bad paging arguments are refused naming them.
// Before, a listing was one response of any size: a default client failed
// to receive it with an opaque "larger than max".
func TestListPages(t *testing.T) {
	rows := []struct {
		name string
		run  func(t *testing.T, f *fixture, srv *kv.Server)
	}{
		{"a listing past the bound comes in pages, each within it, next carrying on", func(t *testing.T, f *fixture, srv *kv.Server) {
			f.putLarge("big", 6)
			f.put(nil, "other", "x")
			keys, pages := walk(t, srv, nil, "big", kv.MaxPageEntries)
			if got := strings.Join(keys, " "); got != "big0 big1 big2 big3 big4 big5" || pages < 2 {
				t.Fatalf("paged %q in %d pages, want the 6 keys of prefix big in 2 or more", got, pages)
			}
		}},
		{"a request that does not page, past the bound, is refused naming its entries, its size and to page", func(t *testing.T, f *fixture, srv *kv.Server) {
			f.putLarge("big", 5)
			_, err := page(srv, nil, "big", "", 0)
			wantRefused(t, "whole listing of 5 MiB", err, codes.ResourceExhausted, `prefix "big"`, "5 entries", fmt.Sprint(wire.MaxReply), "max and after")
		}},
		{"a request that does not page, within the bound, gets the whole listing and no next", func(t *testing.T, f *fixture, srv *kv.Server) {
			f.putLarge("big", 3)
			resp, err := page(srv, nil, "", "", 0)
			if err != nil || keysOf(resp) != "big0 big1 big2" || resp.GetNext() != "" {
				t.Fatalf("whole listing: %q next %q, %v; want 3 keys, no next", keysOf(resp), resp.GetNext(), err)
			}
		}},
		{"max bounds a page's entries; a page that ends the listing has no next", func(t *testing.T, f *fixture, srv *kv.Server) {
			for _, k := range []string{"a", "b", "c", "d"} {
				f.put(nil, k, k)
			}
			resp, err := page(srv, nil, "", "", 2)
			if err != nil || keysOf(resp) != "a b" || resp.GetNext() != "b" {
				t.Fatalf("first page of 2: %q next %q, %v", keysOf(resp), resp.GetNext(), err)
			}
			resp, err = page(srv, nil, "", "b", 2)
			if err != nil || keysOf(resp) != "c d" || resp.GetNext() != "" {
				t.Fatalf("last page of 2: %q next %q, %v; want c d, no next", keysOf(resp), resp.GetNext(), err)
			}
			resp, err = page(srv, nil, "", "d", 0) // after alone pages, DefaultPageEntries
			if err != nil || len(resp.GetEntries()) != 0 || resp.GetNext() != "" {
				t.Fatalf("past the last key: %q next %q, %v; want nothing", keysOf(resp), resp.GetNext(), err)
			}
		}},
		{"after need not be a key; the page starts past it", func(t *testing.T, f *fixture, srv *kv.Server) {
			for _, k := range []string{"pa", "pb", "pc"} {
				f.put(nil, k, k)
			}
			resp, err := page(srv, nil, "p", "pab", 0)
			if err != nil || keysOf(resp) != "pb pc" {
				t.Fatalf("after pab: %q, %v; want pb pc", keysOf(resp), err)
			}
		}},
		{"bad max is refused naming it", func(t *testing.T, f *fixture, srv *kv.Server) {
			for _, m := range []int32{-1, kv.MaxPageEntries + 1} {
				_, err := page(srv, nil, "", "", m)
				wantRefused(t, fmt.Sprint("max ", m), err, codes.InvalidArgument, fmt.Sprintf("max %d", m), fmt.Sprint(kv.MaxPageEntries))
			}
		}},
		{"bad after is refused naming it", func(t *testing.T, f *fixture, srv *kv.Server) {
			_, err := page(srv, nil, "p", "q", 10)
			wantRefused(t, "after outside the prefix", err, codes.InvalidArgument, `after "q"`, `prefix "p"`)
			_, err = page(srv, nil, "", strings.Repeat("k", kv.DefaultMaxKeyBytes+1), 10)
			wantRefused(t, "after too long", err, codes.InvalidArgument, fmt.Sprintf("after of %d bytes", kv.DefaultMaxKeyBytes+1))
		}},
		{"TX.1.2 under a transaction the pages are one view: the prefix stays locked between them", func(t *testing.T, f *fixture, srv *kv.Server) {
			for _, k := range []string{"a", "b", "c"} {
				f.put(nil, k, k)
			}
			tx, other := f.tx(), f.tx()
			resp, err := page(srv, tx, "", "", 1)
			if err != nil || keysOf(resp) != "a" || resp.GetNext() != "a" {
				t.Fatalf("first page under tx: %q next %q, %v", keysOf(resp), resp.GetNext(), err)
			}
			wantLocked(t, f.db.Put(bg, other, "bb", []byte("x")), "bb")
			wantLocked(t, f.db.Put(bg, nil, "bb", []byte("x")), "bb")
			f.put(tx, "ab", "mine") // its own write, seen on its next pages
			keys, _ := walk(t, srv, tx, "", 1)
			if got := strings.Join(keys, " "); got != "a ab b c" {
				t.Fatalf("pages under tx: %q, want a ab b c", got)
			}
		}},
		{"TX.1.2 a whole listing refused under a transaction leaves no lock", func(t *testing.T, f *fixture, srv *kv.Server) {
			f.putLarge("big", 5)
			tx := f.tx()
			_, err := page(srv, tx, "big", "", 0)
			wantRefused(t, "whole listing under tx", err, codes.ResourceExhausted, "5 entries")
			f.put(f.tx(), "big9", "x") // another transaction writes under the prefix
		}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := start(t)
			r.run(t, f, kv.NewServer(f.db))
		})
	}
}

// TestListEntryPastTheBound: an entry that alone is past what a response
// carries is refused naming its key and size, and a listing goes on past
// it with after — never a response a default client cannot receive.
func TestListEntryPastTheBound(t *testing.T) {
	f := &fixture{t: t, mgr: participanttest.NewManager(), st: participant.NewMemStore()}
	var err error
	f.db, err = kv.Open(kv.Config{Participant: participant.Config{Endpoint: "127.0.0.1:7", Store: f.st, Managers: f.mgr}, MaxValueBytes: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.db.Close() })
	f.put(nil, "a", "small")
	f.put(nil, "huge", strings.Repeat("h", 4<<20))
	f.put(nil, "z", "small")
	srv := kv.NewServer(f.db)
	resp, err := page(srv, nil, "", "", 10)
	if err != nil || keysOf(resp) != "a" || resp.GetNext() != "a" {
		t.Fatalf("first page: %q next %q, %v; want a, next a", keysOf(resp), resp.GetNext(), err)
	}
	_, err = page(srv, nil, "", "a", 10)
	wantRefused(t, "a page starting with a 4 MiB entry", err, codes.ResourceExhausted, `key "huge"`, fmt.Sprint(4<<20), `after "huge"`)
	resp, err = page(srv, nil, "", "huge", 10)
	if err != nil || keysOf(resp) != "z" || resp.GetNext() != "" {
		t.Fatalf("past huge: %q next %q, %v; want z", keysOf(resp), resp.GetNext(), err)
	}
}
