package txn_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// wideParts returns n participants whose references are as long as a
// reference gets (an endpoint of 253 bytes), about 300 bytes each in a
// description.
func wideParts(n int) []*djinnpb.Ref {
	label := strings.Repeat("a", 62)
	host := strings.Join([]string{label, label, label, label}, ".") // 251 bytes
	out := make([]*djinnpb.Ref, n)
	for i := range out {
		obj := make([]byte, 16)
		copy(obj, fmt.Sprint(i))
		out[i] = &djinnpb.Ref{Endpoint: host + ":9", ServiceId: make([]byte, 16), ObjectId: obj}
	}
	return out
}

// joinAll joins every one of parts to transaction id.
func (f *fixture) joinAll(id uint64, parts []*djinnpb.Ref) {
	f.t.Helper()
	for _, p := range parts {
		if err := f.svc.Join(context.Background(), id, txn.SecretOf(f.svc, id), p, 1); err != nil {
			f.t.Fatalf("join %s: %v", p.GetObjectId(), err)
		}
	}
}

// listPage is a ListTransactionsResponse as List's results make it.
func listPage(ds []*djinnpb.TransactionDescription, next uint64) *djinnpb.ListTransactionsResponse {
	return &djinnpb.ListTransactionsResponse{Transactions: ds, NextAfterId: next}
}

// TestListLargePages (DESIGN.md 7: a reply is bounded): a page of large
// descriptions ends before its response passes what a client receives by
// default (wire.MaxReply), its next_after_id naming where the following
// page starts, so a caller paging as always gets every transaction. Before,
// a page was bounded by count alone: 50 transactions of 300 participants
// each made a page of 4.5 MB the client could not receive.
func TestListLargePages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		parts := wideParts(300)
		var ids []uint64
		for range 50 {
			c := f.create(time.Hour)
			f.joinAll(c.ID, parts)
			ids = append(ids, c.ID)
		}
		slices.Sort(ids)
		var got []uint64
		pages := 0
		for after := uint64(0); ; {
			ds, next, err := f.svc.List(context.Background(), after, 0, 0)
			if err != nil {
				t.Fatalf("page after %d: %v", after, err)
			}
			pages++
			if n := proto.Size(listPage(ds, next)); n > wire.MaxReply {
				t.Fatalf("page after %d: %d descriptions in %d bytes, past %d", after, len(ds), n, wire.MaxReply)
			}
			for _, d := range ds {
				got = append(got, d.GetId())
				if len(d.GetParticipants()) != len(parts) {
					t.Fatalf("transaction %d listed with %d participants, want %d", d.GetId(), len(d.GetParticipants()), len(parts))
				}
			}
			if next == 0 {
				break
			}
			if len(ds) == 0 || next != ds[len(ds)-1].GetId() {
				t.Fatalf("page after %d: %d descriptions, next %d; want next its last id", after, len(ds), next)
			}
			after = next
		}
		if !slices.Equal(got, ids) || pages < 2 {
			t.Fatalf("paged %d transactions in %d pages, want the 50 by id in 2 or more", len(got), pages)
		}
	})
}

// TestListDescriptionPastTheBound: a description that alone is past what a
// page holds is refused ResourceExhausted naming the transaction and the
// after to list past it — not sent in a page a default client cannot
// receive — and listing past it goes on. (The bound is made small here:
// past the real one takes some 14,000 participants.)
func TestListDescriptionPastTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		defer f.stop()
		small, wide := f.create(time.Hour), f.create(time.Hour)
		f.joinAll(wide.ID, wideParts(20))
		txn.SetListBytes(t, 2000) // the wide description alone takes some 6000
		start := uint64(0)        // where a page starts with the wide one
		if small.ID < wide.ID {
			start = small.ID
		}
		_, _, err := f.svc.List(context.Background(), start, 0, 0)
		wantKind(t, "a page starting with a description past the bound", err, djinn.ResourceExhausted)
		for _, want := range []string{fmt.Sprintf("transaction %d", wide.ID), "past the 2000", fmt.Sprintf("after_id %d", wide.ID)} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("refusal %v: want it to name %q", err, want)
			}
		}
		want := 0 // descriptions past the wide one
		if small.ID > wide.ID {
			want = 1
		}
		ds, next, err := f.svc.List(context.Background(), wide.ID, 0, 0)
		if err != nil || next != 0 || len(ds) != want {
			t.Fatalf("past the wide one: %d descriptions, next %d, %v; want %d, no next", len(ds), next, err, want)
		}
	})
}
