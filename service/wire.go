package service

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The wire form of an item: the protobuf encoding of the message
// djinn.v1.ServiceItem (proto/djinn/v1/lookup.proto has the field numbers),
// written straight from a Record and read straight into an Item, without
// the generated messages in between. A registrar answers lookups and
// writes snapshots with these bytes, and a client reads its answers with
// them, with no allocation per entry and field, which on a large registry
// is mostly the collector's work of marking it. The conversions to and
// from the generated messages are elsewhere (internal/wire), since the
// generated package brings gRPC with it.

// Field numbers of ServiceItem, TypeSupertypes, Entry, Field and Value.
const (
	itemServiceID  = 1
	itemService    = 2
	itemTypes      = 3
	itemEntries    = 4
	itemSupertypes = 5

	supType       = 1
	supSupertypes = 2

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

// AppendWire appends the item's wire form to b: byte for byte what
// proto.Marshal, deterministic, gives for the message of r.Item().
func (r *Record) AppendWire(b []byte) []byte {
	b = protowire.AppendTag(b, itemServiceID, protowire.BytesType)
	b = protowire.AppendBytes(b, r.id[:])
	if r.ref != "" {
		b = appendString(b, itemService, r.ref)
	}
	for _, t := range r.types {
		b = appendString(b, itemTypes, t.String())
	}
	for i := range r.entries {
		e := &r.entries[i]
		b = protowire.AppendTag(b, itemEntries, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(entrySize(e)))
		b = appendEntry(b, e)
	}
	links := r.links()
	for i := 0; i < len(links); {
		j := i + 2
		for j < len(links) && links[j] == links[i] {
			j += 2
		}
		b = protowire.AppendTag(b, itemSupertypes, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(supertypesSize(links[i:j])))
		b = appendString(b, supType, links[i].String())
		for k := i + 1; k < j; k += 2 {
			b = appendString(b, supSupertypes, links[k].String())
		}
		i = j
	}
	return b
}

func appendEntry(b []byte, e *entry) []byte {
	b = appendString(b, entryType, e.types[0].String())
	for _, t := range e.types[1:] {
		b = appendString(b, entrySupertypes, t.String())
	}
	for _, f := range e.fields {
		b = protowire.AppendTag(b, entryFields, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(fieldSize(f)))
		b = appendString(b, fieldName, f.name.String())
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
	case ValueString:
		return appendString(b, valueString, v.s[1:])
	case ValueBytes:
		return appendString(b, valueBytes, v.s[1:])
	case ValueInt:
		n, _ := v.AsInt()
		b = protowire.AppendTag(b, valueInt, protowire.VarintType)
		return protowire.AppendVarint(b, uint64(n))
	case ValueFloat:
		f, _ := v.AsFloat()
		b = protowire.AppendTag(b, valueDouble, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(f))
	case ValueBool:
		t, _ := v.AsBool()
		b = protowire.AppendTag(b, valueBool, protowire.VarintType)
		return protowire.AppendVarint(b, protowire.EncodeBool(t))
	}
	return b // null is written as no value
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

// WireSize is the size of the item's wire form.
func (r *Record) WireSize() int {
	n := protowire.SizeTag(itemServiceID) + protowire.SizeBytes(len(r.id))
	if r.ref != "" {
		n += stringSize(itemService, r.ref)
	}
	for _, t := range r.types {
		n += stringSize(itemTypes, t.String())
	}
	for i := range r.entries {
		n += protowire.SizeTag(itemEntries) + protowire.SizeBytes(entrySize(&r.entries[i]))
	}
	links := r.links()
	for i := 0; i < len(links); {
		j := i + 2
		for j < len(links) && links[j] == links[i] {
			j += 2
		}
		n += protowire.SizeTag(itemSupertypes) + protowire.SizeBytes(supertypesSize(links[i:j]))
		i = j
	}
	return n
}

// supertypesSize is the size of a TypeSupertypes message for links, the
// (type, supertype) pairs of one type.
func supertypesSize(links []Name) int {
	n := stringSize(supType, links[0].String())
	for k := 1; k < len(links); k += 2 {
		n += stringSize(supSupertypes, links[k].String())
	}
	return n
}

func entrySize(e *entry) int {
	n := stringSize(entryType, e.types[0].String())
	for _, t := range e.types[1:] {
		n += stringSize(entrySupertypes, t.String())
	}
	for _, f := range e.fields {
		n += protowire.SizeTag(entryFields) + protowire.SizeBytes(fieldSize(f))
	}
	return n
}

func fieldSize(f FieldKey) int {
	n := stringSize(fieldName, f.name.String())
	if f.val.s != "" {
		n += protowire.SizeTag(fieldValue) + protowire.SizeBytes(valueSize(f.val))
	}
	return n
}

func valueSize(v Value) int {
	switch v.Kind() {
	case ValueString, ValueBytes:
		return stringSize(valueString, v.s[1:]) // every Value field number is one byte
	case ValueInt:
		n, _ := v.AsInt()
		return protowire.SizeTag(valueInt) + protowire.SizeVarint(uint64(n))
	case ValueFloat:
		return protowire.SizeTag(valueDouble) + protowire.SizeFixed64()
	case ValueBool:
		return protowire.SizeTag(valueBool) + 1
	}
	return 0
}
