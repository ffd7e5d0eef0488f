package service

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/djinn-go/djinn"
)

// DecodeItem reads an item's wire form (the protobuf encoding of a
// djinn.v1.ServiceItem): the same result, errors included, as
// proto.Unmarshal into the generated message and its conversion to an
// Item, without building the messages in between. Clients read their
// lookups' answers this way, which on a busy client is most of the cost of
// a lookup. The item's strings and values share one allocation; it shares
// nothing with b. An item without an id has the zero ID; one whose id is
// not 16 bytes, or whose encoding is malformed, is refused with
// djinn.InvalidArgument.
func DecodeItem(b []byte) (Item, error) {
	d := itemDecoder{b: b}
	d.count()
	d.arena.Grow(len(b) + 8*d.n.fields)
	var it Item
	if d.n.types > 0 {
		it.Types = make([]string, 0, d.n.types)
	}
	if d.n.entries > 0 {
		it.Entries = make([]Entry, 0, d.n.entries)
	}
	if d.n.supertypes > 0 {
		d.supertypes = make([]string, 0, d.n.supertypes)
	}
	if d.n.fields > 0 {
		d.fields = make([]Field, 0, d.n.fields)
	}
	var id []byte
	for pos := 0; pos < len(b); {
		f, err := d.field(&pos, len(b), "service item")
		if err != nil {
			return Item{}, err
		}
		if f.typ != protowire.BytesType {
			continue // known fields of another wire type are unknown ones
		}
		switch f.num {
		case itemServiceID:
			id = b[f.start:f.end]
		case itemService:
			it.Service = append([]byte{}, b[f.start:f.end]...)
		case itemTypes:
			s, err := d.str(f, "service item type")
			if err != nil {
				return Item{}, err
			}
			it.Types = append(it.Types, s)
		case itemEntries:
			e, err := d.entry(f)
			if err != nil {
				return Item{}, err
			}
			it.Entries = append(it.Entries, e)
		case itemSupertypes:
			if err := d.hierarchy(f, &it); err != nil {
				return Item{}, err
			}
		}
	}
	if len(id) > 0 {
		var err error
		if it.ID, err = djinn.IDFromBytes("service item id", id); err != nil {
			return Item{}, err
		}
	}
	return it, nil
}

// itemDecoder reads an encoded item, b. Its strings and values are
// written to arena and cut from it, so that they share one allocation
// (a string cut from a strings.Builder stays valid as it grows). The
// entries' supertypes and fields are cut from supertypes and fields,
// allocated once for the item at the sizes count finds.
type itemDecoder struct {
	b     []byte
	arena strings.Builder
	n     struct{ types, entries, supertypes, fields int }

	supertypes []string
	fields     []Field
}

// count counts the item's types, entries, and its entries' supertypes and
// fields, as far as the encoding is well formed: decoding reports where it
// is not.
func (d *itemDecoder) count() {
	for pos := 0; pos < len(d.b); {
		f, err := d.field(&pos, len(d.b), "service item")
		if err != nil {
			return
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case itemTypes:
			d.n.types++
		case itemEntries:
			d.n.entries++
			for epos := f.start; epos < f.end; {
				ef, err := d.field(&epos, f.end, "entry")
				if err != nil {
					return
				}
				switch {
				case ef.typ != protowire.BytesType:
				case ef.num == entrySupertypes:
					d.n.supertypes++
				case ef.num == entryFields:
					d.n.fields++
				}
			}
		}
	}
}

// cut returns all[start:] as a slice of its own (appending to it leaves
// all alone), or nil when it is empty.
func cut[T any](all []T, start int) []T {
	if start == len(all) {
		return nil
	}
	return all[start:len(all):len(all)]
}

// wireField is one field of an encoded message: its number, its wire
// type, and where its value is, b[start:end] (a length-delimited field's
// contents; the encoded number otherwise).
type wireField struct {
	num        protowire.Number
	typ        protowire.Type
	start, end int
}

// field reads the field at b[*pos:end] and moves *pos past it.
func (d *itemDecoder) field(pos *int, end int, what string) (wireField, error) {
	b := d.b[*pos:end]
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return wireField{}, malformed(what, protowire.ParseError(n))
	}
	if num > protowire.MaxValidNumber {
		return wireField{}, malformed(what, fmt.Errorf("field number %d over the greatest, %d", num, protowire.MaxValidNumber))
	}
	start := *pos + n
	b = b[n:]
	f := wireField{num: num, typ: typ, start: start}
	if typ == protowire.BytesType {
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return wireField{}, malformed(what, protowire.ParseError(m))
		}
		f.start += m - len(v)
		f.end, *pos = f.start+len(v), start+m
		return f, nil
	}
	m := protowire.ConsumeFieldValue(num, typ, b)
	if m < 0 {
		return wireField{}, malformed(what, protowire.ParseError(m))
	}
	f.end, *pos = start+m, start+m
	return f, nil
}

// keep writes prefix and b[start:end] to the arena and returns them as a
// string.
func (d *itemDecoder) keep(prefix string, start, end int) string {
	at := d.arena.Len()
	d.arena.WriteString(prefix)
	d.arena.Write(d.b[start:end])
	return d.arena.String()[at:]
}

// str returns a string field's value, which protobuf requires to be valid
// UTF-8.
func (d *itemDecoder) str(f wireField, what string) (string, error) {
	if v := d.b[f.start:f.end]; !utf8.Valid(v) {
		return "", djinn.Errorf(djinn.InvalidArgument, "%s %q: not valid UTF-8", what, v[:min(len(v), 48)])
	}
	return d.keep("", f.start, f.end), nil
}

func (d *itemDecoder) entry(m wireField) (Entry, error) {
	var e Entry
	sup, fields := len(d.supertypes), len(d.fields)
	for pos := m.start; pos < m.end; {
		f, err := d.field(&pos, m.end, "entry")
		if err != nil {
			return Entry{}, err
		}
		if f.typ != protowire.BytesType {
			continue
		}
		var s string
		switch f.num {
		case entryType:
			e.Type, err = d.str(f, "entry type")
		case entrySupertypes:
			if s, err = d.str(f, "entry supertype"); err == nil {
				d.supertypes = append(d.supertypes, s)
			}
		case entryFields:
			var fl Field
			if fl, err = d.fieldMsg(f); err == nil {
				d.fields = append(d.fields, fl)
			}
		}
		if err != nil {
			return Entry{}, err
		}
	}
	e.Supertypes, e.Fields = cut(d.supertypes, sup), cut(d.fields, fields)
	return e, nil
}

// hierarchy reads a TypeSupertypes message into it.Supertypes: repeated
// ones for a type add to its list.
func (d *itemDecoder) hierarchy(m wireField, it *Item) error {
	var t string
	var sups []string
	for pos := m.start; pos < m.end; {
		f, err := d.field(&pos, m.end, "type supertypes")
		if err != nil {
			return err
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case supType:
			t, err = d.str(f, "supertypes type")
		case supSupertypes:
			var s string
			if s, err = d.str(f, "supertype"); err == nil {
				sups = append(sups, s)
			}
		}
		if err != nil {
			return err
		}
	}
	if it.Supertypes == nil {
		it.Supertypes = map[string][]string{}
	}
	it.Supertypes[t] = append(it.Supertypes[t], sups...)
	return nil
}

// fieldMsg reads a Field message.
func (d *itemDecoder) fieldMsg(m wireField) (Field, error) {
	var fl Field
	for pos := m.start; pos < m.end; {
		f, err := d.field(&pos, m.end, "field")
		if err != nil {
			return Field{}, err
		}
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case fieldName:
			fl.Name, err = d.str(f, "field name")
		case fieldValue:
			// A message field given twice is the two merged: a value
			// without a kind leaves the one before it.
			err = d.value(f, &fl.Value)
		}
		if err != nil {
			return Field{}, err
		}
	}
	return fl, nil
}

// value reads a Value message into *val; the last kind given wins, and
// none leaves *val as it was.
func (d *itemDecoder) value(m wireField, val *Value) error {
	for pos := m.start; pos < m.end; {
		f, err := d.field(&pos, m.end, "value")
		if err != nil {
			return err
		}
		v := d.b[f.start:f.end]
		var num [9]byte
		switch {
		case f.num == valueString && f.typ == protowire.BytesType:
			if !utf8.Valid(v) {
				return djinn.Errorf(djinn.InvalidArgument, "string value %q: not valid UTF-8", v[:min(len(v), 48)])
			}
			*val = Value{s: d.keep(prefixString, f.start, f.end)}
		case f.num == valueInt && f.typ == protowire.VarintType:
			n, _ := protowire.ConsumeVarint(v)
			*val = Value{s: d.keepBytes(appendInt(num[:0], int64(n)))}
		case f.num == valueDouble && f.typ == protowire.Fixed64Type:
			n, _ := protowire.ConsumeFixed64(v)
			*val = Value{s: d.keepBytes(appendFloat(num[:0], math.Float64frombits(n)))}
		case f.num == valueBool && f.typ == protowire.VarintType:
			n, _ := protowire.ConsumeVarint(v)
			*val = NewBool(protowire.DecodeBool(n))
		case f.num == valueBytes && f.typ == protowire.BytesType:
			*val = Value{s: d.keep(prefixBytes, f.start, f.end)}
		}
	}
	return nil
}

// keepBytes writes b to the arena and returns it as a string.
func (d *itemDecoder) keepBytes(b []byte) string {
	at := d.arena.Len()
	d.arena.Write(b)
	return d.arena.String()[at:]
}

func malformed(what string, err error) error {
	return djinn.Errorf(djinn.InvalidArgument, "%s: malformed encoding: %v", what, err)
}
