package lookup

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The wire form of a stored item, written straight from the stored form:
// the protobuf encoding of the djinnpb.ServiceItem that ItemToProto gives
// for the item, without building that message (proto/djinn/v1/lookup.proto
// has the field numbers). A lookup answers with these bytes, so finding an
// item costs no allocation per entry and field, which on a large registry
// is mostly the collector's work of marking it.

// Field numbers of ServiceItem, Entry, Field and Value.
const (
	itemServiceID = 1
	itemService   = 2
	itemTypes     = 3
	itemEntries   = 4

	entryType       = 1
	entrySupertypes = 2
	entryFields     = 3

	fieldName  = 1
	fieldValue = 2

	valueString = 1
	valueInt    = 2
	valueDouble = 3
	valueBool   = 4
	valueBytes  = 5
)

// encodeItems returns the wire form of each of its, all in one buffer.
func encodeItems(its []*item) [][]byte {
	size := 0
	for _, it := range its {
		size += itemSize(it)
	}
	buf := make([]byte, 0, size)
	out := make([][]byte, len(its))
	for i, it := range its {
		start := len(buf)
		buf = appendItem(buf, it)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out
}

// appendItem appends it's wire form to b.
func appendItem(b []byte, it *item) []byte {
	b = protowire.AppendTag(b, itemServiceID, protowire.BytesType)
	b = protowire.AppendBytes(b, it.id[:])
	if it.ref != "" {
		b = appendString(b, itemService, it.ref)
	}
	for _, t := range it.types {
		b = appendString(b, itemTypes, t.Value())
	}
	for i := range it.entries {
		e := &it.entries[i]
		b = protowire.AppendTag(b, itemEntries, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(entrySize(e)))
		b = appendEntry(b, e)
	}
	return b
}

func appendEntry(b []byte, e *entry) []byte {
	b = appendString(b, entryType, e.types[0].Value())
	for _, t := range e.types[1:] {
		b = appendString(b, entrySupertypes, t.Value())
	}
	for _, f := range e.fields {
		b = protowire.AppendTag(b, entryFields, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(fieldSize(f)))
		b = appendString(b, fieldName, f.name.Value())
		if f.val.s != "" {
			b = protowire.AppendTag(b, fieldValue, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(valueSize(f.val)))
			b = appendValue(b, f.val)
		}
	}
	return b
}

func appendValue(b []byte, v Value) []byte {
	switch v.Kind() {
	case KindString:
		return appendString(b, valueString, v.payload())
	case KindBytes:
		return appendString(b, valueBytes, v.payload())
	case KindInt64:
		n, _ := v.AsInt64()
		b = protowire.AppendTag(b, valueInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(n))
	case KindFloat64:
		f, _ := v.AsFloat64()
		b = protowire.AppendTag(b, valueDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(f))
	case KindBool:
		t, _ := v.AsBool()
		b = protowire.AppendTag(b, valueBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(t))
	}
	return b // the registry stores no invalid value
}

// appendString appends a string (or bytes) field.
func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// stringSize is the size of a string (or bytes) field.
func stringSize(num protowire.Number, s string) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

// itemSize is the size of it's wire form.
func itemSize(it *item) int {
	n := protowire.SizeTag(itemServiceID) + protowire.SizeBytes(len(it.id))
	if it.ref != "" {
		n += stringSize(itemService, it.ref)
	}
	for _, t := range it.types {
		n += stringSize(itemTypes, t.Value())
	}
	for i := range it.entries {
		n += protowire.SizeTag(itemEntries) + protowire.SizeBytes(entrySize(&it.entries[i]))
	}
	return n
}

func entrySize(e *entry) int {
	n := stringSize(entryType, e.types[0].Value())
	for _, t := range e.types[1:] {
		n += stringSize(entrySupertypes, t.Value())
	}
	for _, f := range e.fields {
		n += protowire.SizeTag(entryFields) + protowire.SizeBytes(fieldSize(f))
	}
	return n
}

func fieldSize(f field) int {
	n := stringSize(fieldName, f.name.Value())
	if f.val.s != "" {
		n += protowire.SizeTag(fieldValue) + protowire.SizeBytes(valueSize(f.val))
	}
	return n
}

func valueSize(v Value) int {
	switch v.Kind() {
	case KindString, KindBytes:
		return stringSize(valueString, v.payload()) // every Value field number is one byte
	case KindInt64:
		n, _ := v.AsInt64()
		return protowire.SizeTag(valueInt) + protowire.SizeVarint(uint64(n))
	case KindFloat64:
		return protowire.SizeTag(valueDouble) + protowire.SizeFixed64()
	case KindBool:
		return protowire.SizeTag(valueBool) + 1
	}
	return 0
}
