package lookup_test

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// drawValue draws a value of any kind, null included, with the edges of
// each: empty strings and bytes, long ones (lengths past one varint byte),
// negative and extreme integers, NaN, infinities and negative zero.
func drawValue(t *rapid.T, label string) service.Value {
	switch rapid.IntRange(0, 5).Draw(t, label+"-kind") {
	case 0:
		return service.Value{}
	case 1:
		return service.NewString(rapid.StringN(0, 300, -1).Draw(t, label))
	case 2:
		return service.NewBytes(rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, label))
	case 3:
		return service.NewInt(rapid.OneOf(rapid.Int64(), rapid.SampledFrom([]int64{0, -1, math.MinInt64, math.MaxInt64})).Draw(t, label))
	case 4:
		return service.NewFloat(rapid.OneOf(rapid.Float64(), rapid.SampledFrom([]float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1), 0})).Draw(t, label))
	default:
		return service.NewBool(rapid.Bool().Draw(t, label))
	}
}

// drawAnyItem draws an item with arbitrary names and values (drawItem
// keeps to a few, so that templates match).
func drawAnyItem(t *rapid.T, id djinn.ID) service.Item {
	name := rapid.StringMatching(`[A-Za-z][A-Za-z0-9.$_]{0,20}`)
	it := service.Item{
		ID:      id,
		Service: rapid.SliceOfN(rapid.Byte(), 1, 200).Draw(t, "ref"),
		Types:   rapid.SliceOfN(name, 0, 4).Draw(t, "types"),
	}
	if sup, all := drawHierarchy(t, it.Types, name); sup != nil {
		// Types lists the most specific types (no other has them as a
		// supertype); the hierarchy gives the rest.
		it.Types, it.Supertypes = nil, sup
		for _, ty := range all {
			if !slices.ContainsFunc(all, func(s string) bool { return slices.Contains(sup[s], ty) }) {
				it.Types = append(it.Types, ty)
			}
		}
	}
	for i := range rapid.IntRange(0, 5).Draw(t, "entries") {
		chain := rapid.SliceOfNDistinct(name, 1, 4, rapid.ID[string]).Draw(t, fmt.Sprint("chain", i))
		e := service.Entry{Type: chain[0], Supertypes: chain[1:]}
		for j, n := range rapid.SliceOfNDistinct(name, 0, 5, rapid.ID[string]).Draw(t, fmt.Sprint("fields", i)) {
			e.Fields = append(e.Fields, service.Field{Name: n, Value: drawValue(t, fmt.Sprint("value", i, j))})
		}
		it.Entries = append(it.Entries, e)
	}
	return it
}

// drawHierarchy draws a type hierarchy, without cycles, over types and
// more names (all, sorted): each type's supertypes come after it.
func drawHierarchy(t *rapid.T, types []string, name *rapid.Generator[string]) (sup map[string][]string, all []string) {
	all = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(types), rapid.SliceOfN(name, 0, 3).Draw(t, "more types")...))))
	if len(all) < 2 || !rapid.Bool().Draw(t, "hierarchy") {
		return nil, nil
	}
	sup = map[string][]string{}
	for i, ty := range all[:len(all)-1] {
		if s := rapid.SliceOfNDistinct(rapid.SampledFrom(all[i+1:]), 0, 3, rapid.ID[string]).Draw(t, "supertypes of "+ty); len(s) > 0 {
			sup[ty] = s
		}
	}
	return sup, all
}

// drawRegistry registers n drawn items, the i'th with service id id(i)
// and lease id i+1.
func drawRegistry(t *rapid.T, n int, id func(i int) djinn.ID) *lookup.Registry {
	r, err := lookup.New(self, service.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := r.Register(drawAnyItem(t, id(i)), lid(byte(i+1))); err != nil {
			t.Fatalf("Register: %v", err)
		}
	}
	return r
}

// TestLookupEncoded checks that the wire form a lookup answers with is,
// byte for byte, the encoding of the item Lookup returns, whatever the
// item holds, for both the counted and the one-item lookup.
func TestLookupEncoded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(t, "items")
		r := drawRegistry(t, n, func(i int) djinn.ID { return sid(byte(i + 1)) })
		all := service.Template{Types: nil}
		max := rapid.IntRange(0, n+1).Draw(t, "max")
		total, items, err := r.Lookup(all, max)
		if err != nil {
			t.Fatal(err)
		}
		etotal, encoded, err := r.LookupEncoded(all, max, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if etotal != total || len(encoded) != len(items) {
			t.Fatalf("LookupEncoded: %d total, %d items; Lookup: %d total, %d items", etotal, len(encoded), total, len(items))
		}
		for i := range items {
			checkEncoded(t, encoded[i], items[i])
		}

		id := sid(byte(rapid.IntRange(1, n).Draw(t, "one")))
		byID := service.Template{ID: &id}
		_, one, err := r.LookupOne(byID, func(int) int { return 0 })
		if err != nil || one == nil {
			t.Fatalf("LookupOne(%s) = %v, %v", id, one, err)
		}
		etotal, encoded, err = r.LookupEncoded(byID, 0, true, func(int) int { return 0 })
		if err != nil || etotal != 1 || len(encoded) != 1 {
			t.Fatalf("LookupEncoded(%s, one) = %d, %d items, %v; want 1, 1 item", id, etotal, len(encoded), err)
		}
		checkEncoded(t, encoded[0], *one)
	})
}

// checkEncoded checks that b is the encoding of it's wire form and decodes
// to it.
func checkEncoded(t *rapid.T, b []byte, it service.Item) {
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(wire.Item(it))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("item %s encoded as\n%x\nwant (proto.Marshal)\n%x", it.ID, b, want)
	}
	var got djinnpb.ServiceItem
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatalf("item %s: encoding does not decode: %v", it.ID, err)
	}
	back, err := wire.ItemFrom(&got)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID != it.ID || !bytes.Equal(back.Service, it.Service) || !slices.Equal(back.Types, it.Types) || len(back.Entries) != len(it.Entries) {
		t.Errorf("item decoded as %+v, want %+v", back, it)
	}
}

// TestLookupEncodedErrors checks that LookupEncoded refuses what Lookup
// refuses (LU: a negative max, a bad template) and answers nothing when
// nothing matches.
func TestLookupEncodedErrors(t *testing.T) {
	r := newRegistry(t, service.Limits{})
	ok(t)(r.Register(printer(), lid(1)))
	_, _, err := r.LookupEncoded(service.Template{}, -1, false, nil)
	wantErr(t, err, djinn.InvalidArgument, "-1")
	_, _, err = r.LookupEncoded(service.Template{Types: []string{""}}, 1, true, func(int) int { return 0 })
	wantErr(t, err, djinn.InvalidArgument, "types[0]")
	for _, one := range []bool{false, true} {
		total, items, err := r.LookupEncoded(service.Template{Types: []string{"Scanner"}}, 5, one, func(int) int { return 0 })
		if err != nil || total != 0 || items != nil {
			t.Errorf("LookupEncoded(no match, one=%v) = %d, %v, %v; want 0, nil, nil", one, total, items, err)
		}
	}
}

// TestExportEncoded checks that the registrations a snapshot writes in
// wire form are, in order and byte for byte, Export's, whatever the items
// hold.
func TestExportEncoded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// Ids in any order, some registered again (replaced).
		r := drawRegistry(t, rapid.IntRange(0, 5).Draw(t, "items"), func(int) djinn.ID {
			return sid(byte(rapid.IntRange(1, 200).Draw(t, "id")))
		})
		want := r.Export().Registrations
		got := r.ExportEncoded()
		if len(got) != len(want) {
			t.Fatalf("ExportEncoded: %d registrations, Export %d", len(got), len(want))
		}
		for i := range want {
			if got[i].Lease != want[i].Lease {
				t.Errorf("registration %d: lease %s, Export's %s", i, got[i].Lease, want[i].Lease)
			}
			checkEncoded(t, got[i].Item, want[i].Item)
		}
	})
}

// TestLookupEncodedAnswerBound (DESIGN.md 7: quotas on everything that
// holds memory): an answer over MaxAnswer, what a client receives by
// default less room around it, is refused ResourceExhausted before its
// items are encoded, naming its size, its items, the bound and how many
// of the first items fit; a lookup for that many is answered, in no more
// than MaxAnswer. Before, every item asked for was encoded, however many
// bytes, and the client failed to receive the answer.
func TestLookupEncodedAnswerBound(t *testing.T) {
	r := newRegistry(t, service.Limits{MaxAttributeBytes: 1 << 20})
	// 20 items of 256 KiB and a little: 15 fit in 4 MiB less 64 KiB.
	const items, fit = 20, 15
	for i := range items {
		it := service.Item{ID: sid(byte(i + 1)), Service: []byte("ref"), Types: []string{"Big"},
			Entries: []service.Entry{{Type: "Blob", Fields: []service.Field{f("b", service.NewBytes(make([]byte, 256<<10)))}}}}
		ok(t)(r.Register(it, lid(byte(i+1))))
	}
	big := service.Template{Types: []string{"Big"}}
	for _, max := range []int{items, fit + 1} {
		total, got, err := r.LookupEncoded(big, max, false, nil)
		wantErr(t, err, djinn.ResourceExhausted, fmt.Sprintf("bytes (%d items)", max), fmt.Sprintf("at most %d,", lookup.MaxAnswer),
			fmt.Sprintf("ask for fewer matches: at most %d", fit))
		if total != 0 || got != nil {
			t.Errorf("LookupEncoded(max %d) refused with %d total, %d items; want none", max, total, len(got))
		}
	}
	total, got, err := r.LookupEncoded(big, fit, false, nil)
	if err != nil || total != items || len(got) != fit {
		t.Fatalf("LookupEncoded(max %d) = %d total, %d items, %v; want %d total, %d items", fit, total, len(got), err, items, fit)
	}
	if n := proto.Size(&djinnpb.EncodedLookupResponse{Total: int64(total), Items: got}); n > lookup.MaxAnswer {
		t.Errorf("an answer of %d items takes %d bytes, over MaxAnswer (%d)", fit, n, lookup.MaxAnswer)
	}
	if _, got, err := r.LookupEncoded(big, 0, true, func(int) int { return 0 }); err != nil || len(got) != 1 {
		t.Errorf("LookupEncoded(one) = %d items, %v; want one", len(got), err)
	}
}

// TestLookupEncodedFirstMatchTooLarge: an answer whose first match alone
// passes MaxAnswer is refused ResourceExhausted saying so — the item, its
// size, that no lookup can return it whatever the client's receive limit,
// and what can: its registrant shrinking it, a template it does not match
// — never to ask for fewer matches, which cannot help (one is the least).
// For a lookup of many matches and of one alike.
func TestLookupEncodedFirstMatchTooLarge(t *testing.T) {
	r := newRegistry(t, service.Limits{MaxAttributeBytes: 8 << 20})
	huge := service.Item{ID: sid(1), Service: []byte("ref"), Types: []string{"Huge"},
		Entries: []service.Entry{{Type: "Blob", Fields: []service.Field{f("b", service.NewBytes(make([]byte, 5<<20)))}}}}
	ok(t)(r.Register(huge, lid(1)))
	ok(t)(r.Register(service.Item{ID: sid(2), Service: []byte("ref"), Types: []string{"Huge"}}, lid(2)))
	rec, err := (service.Limits{MaxAttributeBytes: 8 << 20}).Record(huge)
	if err != nil {
		t.Fatal(err)
	}
	id := sid(1)
	many, alone := service.Template{Types: []string{"Huge"}}, service.Template{ID: &id}
	for _, c := range []struct {
		name string
		tmpl service.Template
		max  int
		one  bool
	}{{"many", many, 2, false}, {"one match asked for", many, 1, false}, {"lookup one", alone, 0, true}} {
		total, got, err := r.LookupEncoded(c.tmpl, c.max, c.one, func(int) int { return 0 })
		wantErr(t, err, djinn.ResourceExhausted, fmt.Sprintf("at most %d,", lookup.MaxAnswer),
			fmt.Sprintf("the first match alone, service %s, takes %d bytes", sid(1), rec.WireSize()),
			"no lookup can return it, whatever the client's receive limit", "its registrant can make it smaller", "a template it does not match")
		if strings.Contains(err.Error(), "fewer matches") {
			t.Errorf("%s: %q, want no advice to ask for fewer matches", c.name, err)
		}
		if total != 0 || got != nil {
			t.Errorf("%s: refused with %d total, %d items; want none", c.name, total, len(got))
		}
	}
}
