package service_test

import (
	"bytes"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// FuzzDecodeItem checks the decoder lookups read items with against
// the protobuf library: for any bytes, it fails exactly when proto.Unmarshal
// and wire.ItemFrom together fail, and otherwise gives the same
// item (unknown fields, wrong wire types, repeated and merged fields
// included).
func FuzzDecodeItem(f *testing.F) {
	item := &djinnpb.ServiceItem{
		ServiceId: bytes.Repeat([]byte{7}, 16), Service: []byte("127.0.0.1:9"), Types: []string{"Device", "Printer"},
		Entries: []*djinnpb.Entry{
			{Type: "Name", Supertypes: []string{"Entry"}, Fields: []*djinnpb.Field{
				{Name: "name", Value: &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: "laser"}}},
				{Name: "null"},
				{Name: "n", Value: &djinnpb.Value{Kind: &djinnpb.Value_IntValue{IntValue: -3}}},
				{Name: "x", Value: &djinnpb.Value{Kind: &djinnpb.Value_DoubleValue{DoubleValue: math.NaN()}}},
				{Name: "b", Value: &djinnpb.Value{Kind: &djinnpb.Value_BoolValue{BoolValue: true}}},
				{Name: "raw", Value: &djinnpb.Value{Kind: &djinnpb.Value_BytesValue{BytesValue: []byte{0, 0xff}}}},
			}},
			{Type: "Location"},
		},
		// A hierarchy, one type's given in two messages, one without
		// supertypes.
		Supertypes: []*djinnpb.TypeSupertypes{
			{Type: "Printer", Supertypes: []string{"Device"}}, {Type: "Device"}, {Type: "Printer", Supertypes: []string{"Thing"}},
		},
	}
	enc, err := proto.Marshal(item)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(enc)
	f.Add([]byte{})
	f.Add(enc[:len(enc)-1])
	// A value given twice (merged), a field of a wrong wire type, an
	// unknown field, invalid UTF-8, a short id.
	twice := protowire.AppendTag(nil, 1, protowire.BytesType)
	twice = protowire.AppendString(twice, "f")
	for _, v := range [][]byte{{0x08 | 0x10, 5}, {}} { // int_value 5, then an empty value
		twice = protowire.AppendTag(twice, 2, protowire.BytesType)
		twice = protowire.AppendBytes(twice, v)
	}
	entry := protowire.AppendTag(nil, 3, protowire.BytesType)
	entry = protowire.AppendBytes(entry, twice)
	entry = protowire.AppendTag(entry, 1, protowire.VarintType)
	entry = protowire.AppendVarint(entry, 1)
	seed := protowire.AppendTag(nil, 4, protowire.BytesType)
	seed = protowire.AppendBytes(seed, entry)
	seed = protowire.AppendTag(seed, 99, protowire.Fixed32Type)
	seed = protowire.AppendFixed32(seed, 1)
	f.Add(seed)
	f.Add(protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "\xff"))
	f.Add(protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{1, 2}))

	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := service.DecodeItem(b)
		var pb djinnpb.ServiceItem
		want, werr := service.Item{}, proto.Unmarshal(b, &pb)
		if werr == nil {
			want, werr = wire.ItemFrom(&pb)
		}
		if (err != nil) != (werr != nil) {
			t.Fatalf("decode %x: error %v; the protobuf library's %v", b, err, werr)
		}
		if err == nil && !sameItem(got, want) {
			t.Fatalf("decode %x:\n%+v\nthe protobuf library:\n%+v", b, got, want)
		}
	})
}

// sameItem compares items, an empty byte string or list equal to none.
func sameItem(a, b service.Item) bool {
	return a.Equal(b) && (a.Supertypes == nil) == (b.Supertypes == nil)
}

// BenchmarkDecodeItem decodes the item the bench's lookups answer
// with: 2 types, 5 entries of a supertype and 2 string fields each.
func BenchmarkDecodeItem(b *testing.B) {
	item := &djinnpb.ServiceItem{ServiceId: bytes.Repeat([]byte{7}, 16), Service: []byte("127.0.0.1:9"), Types: []string{"Device", "Printer"}}
	for i := range 5 {
		item.Entries = append(item.Entries, &djinnpb.Entry{Type: "Entry" + string(rune('A'+i)), Supertypes: []string{"Entry"}, Fields: []*djinnpb.Field{
			{Name: "name", Value: &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: "laser"}}},
			{Name: "kind", Value: &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: "kind-7"}}},
		}})
	}
	enc, err := proto.Marshal(item)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if it, err := service.DecodeItem(enc); err != nil || len(it.Entries) != 5 {
			b.Fatal(it, err)
		}
	}
}
