package client

import (
	"fmt"
	"math"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/djinn-go/djinn"
)

// decodeServiceItem decodes the protobuf encoding of a djinnpb.ServiceItem
// straight into a ServiceItem: the same result, errors included, as
// proto.Unmarshal followed by ServiceItemFromProto, without building the
// messages in between. Lookups read their answers' items this way, which
// on a busy client is most of the cost of a lookup. The item's strings
// share one copy of b.
func decodeServiceItem(b []byte) (ServiceItem, error) {
	d := itemDecoder{b: b, s: string(b)}
	d.count()
	var it ServiceItem
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
			return ServiceItem{}, err
		}
		if f.typ != protowire.BytesType {
			continue // known fields of another wire type are unknown ones
		}
		switch f.num {
		case 1:
			id = b[f.start:f.end]
		case 2:
			it.Service = append([]byte{}, b[f.start:f.end]...)
		case 3:
			s, err := d.str(f, "service item type")
			if err != nil {
				return ServiceItem{}, err
			}
			it.Types = append(it.Types, s)
		case 4:
			e, err := d.entry(f)
			if err != nil {
				return ServiceItem{}, err
			}
			it.Entries = append(it.Entries, e)
		}
	}
	if len(id) > 0 {
		var err error
		if it.ID, err = djinn.IDFromBytes("service item id", id); err != nil {
			return ServiceItem{}, err
		}
	}
	return it, nil
}

// itemDecoder reads an encoded item: b, and s, a string of the same bytes
// that the item's strings are cut from. The entries' supertypes and fields
// are cut from supertypes and fields, allocated once for the item at the
// sizes count finds.
type itemDecoder struct {
	b []byte
	s string
	n struct{ types, entries, supertypes, fields int }

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
		case 3:
			d.n.types++
		case 4:
			d.n.entries++
			for epos := f.start; epos < f.end; {
				ef, err := d.field(&epos, f.end, "entry")
				if err != nil {
					return
				}
				switch {
				case ef.typ != protowire.BytesType:
				case ef.num == 2:
					d.n.supertypes++
				case ef.num == 3:
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

// str returns a string field's value, which protobuf requires to be valid
// UTF-8.
func (d *itemDecoder) str(f wireField, what string) (string, error) {
	s := d.s[f.start:f.end]
	if !utf8.ValidString(s) {
		return "", djinn.Errorf(djinn.InvalidArgument, "%s %q: not valid UTF-8", what, s[:min(len(s), 48)])
	}
	return s, nil
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
		case 1:
			e.Type, err = d.str(f, "entry type")
		case 2:
			if s, err = d.str(f, "entry supertype"); err == nil {
				d.supertypes = append(d.supertypes, s)
			}
		case 3:
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
		case 1:
			fl.Name, err = d.str(f, "field name")
		case 2:
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
		switch {
		case f.num == 1 && f.typ == protowire.BytesType:
			s, err := d.str(f, "string value")
			if err != nil {
				return err
			}
			*val = NewString(s)
		case f.num == 2 && f.typ == protowire.VarintType:
			n, _ := protowire.ConsumeVarint(v)
			*val = NewInt(int64(n))
		case f.num == 3 && f.typ == protowire.Fixed64Type:
			n, _ := protowire.ConsumeFixed64(v)
			*val = NewFloat(math.Float64frombits(n))
		case f.num == 4 && f.typ == protowire.VarintType:
			n, _ := protowire.ConsumeVarint(v)
			*val = NewBool(protowire.DecodeBool(n))
		case f.num == 5 && f.typ == protowire.BytesType:
			*val = Value{kind: ValueBytes, s: d.s[f.start:f.end]}
		}
	}
	return nil
}

func malformed(what string, err error) error {
	return djinn.Errorf(djinn.InvalidArgument, "%s: malformed encoding: %v", what, err)
}
