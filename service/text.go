package service

import (
	"strconv"
	"strings"

	"github.com/djinn-go/djinn"
)

// Attributes as text, for configuration files and command lines: each
// attribute is "Type.field=value", or a bare "Type" (an entry of that type
// without fields). The field is what follows the last dot, so Type may be
// qualified: net.jini.lookup.entry.Name.name=lp. The fields of one Type
// make one entry. A value that parses as a decimal integer is an integer,
// true and false are booleans, a value in double quotes is the string
// inside them (Go syntax: "42" is a string), anything else is a string.

// ParseAttributes reads attributes written as text into entries, one per
// type, in the order the types first appear. An attribute that does not
// parse, or names a field of a type twice, is djinn.InvalidArgument naming
// it. The entries are not checked against Limits: Limits.Record does that.
func ParseAttributes(attrs []string) ([]Entry, error) {
	var out []Entry
	index := map[string]int{}
	for _, a := range attrs {
		typ, field, val, hasField, err := splitAttribute(a)
		if err != nil {
			return nil, err
		}
		i, ok := index[typ]
		if !ok {
			i = len(out)
			index[typ] = i
			out = append(out, Entry{Type: typ})
		}
		if !hasField {
			continue
		}
		if _, dup := out[i].Get(field); dup {
			return nil, djinn.Errorf(djinn.InvalidArgument, "attribute %q: field %s of %s given twice", clip(a), clip(field), clip(typ))
		}
		v, err := ParseValue(val)
		if err != nil {
			return nil, djinn.Errorf(djinn.InvalidArgument, "attribute %q: %v", clip(a), err)
		}
		out[i].Fields = append(out[i].Fields, Field{Name: field, Value: v})
	}
	return out, nil
}

// splitAttribute splits "Type.field=value" (or a bare "Type").
func splitAttribute(a string) (typ, field, val string, hasField bool, err error) {
	typ, val, hasField = strings.Cut(a, "=")
	if hasField {
		dot := strings.LastIndexByte(typ, '.')
		if dot < 0 {
			return "", "", "", false, djinn.Errorf(djinn.InvalidArgument, "attribute %q: want Type.field=value, or a bare Type", clip(a))
		}
		typ, field = typ[:dot], typ[dot+1:]
	}
	if typ == "" || (hasField && field == "") {
		return "", "", "", false, djinn.Errorf(djinn.InvalidArgument, "attribute %q: want Type.field=value, or a bare Type", clip(a))
	}
	return typ, field, val, hasField, nil
}

// ParseValue reads a value written as text: an integer, true or false, a
// Go-quoted string, or else the text itself as a string.
func ParseValue(s string) (Value, error) {
	if strings.HasPrefix(s, `"`) {
		u, err := strconv.Unquote(s)
		if err != nil {
			return Value{}, djinn.Errorf(djinn.InvalidArgument, "value %s: a quoted value must be a Go string literal", clip(s))
		}
		return NewString(u), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return NewInt(n), nil
	}
	switch s {
	case "true":
		return NewBool(true), nil
	case "false":
		return NewBool(false), nil
	}
	return NewString(s), nil
}

// FormatAttributes writes entries as text, one attribute per field (and a
// bare Type for an entry without fields), so that ParseAttributes reads
// them back: strings that would read as another kind are quoted. Null
// fields, floats and bytes, which the text form cannot carry, are written
// in Value's own form and do not read back.
func FormatAttributes(entries []Entry) []string {
	var out []string
	for _, e := range entries {
		if len(e.Fields) == 0 {
			out = append(out, e.Type)
			continue
		}
		for _, f := range e.Fields {
			out = append(out, e.Type+"."+f.Name+"="+formatValue(f.Value))
		}
	}
	return out
}

func formatValue(v Value) string {
	if v.Kind() != ValueString {
		return v.String()
	}
	s, _ := v.AsString()
	if parsed, err := ParseValue(s); err != nil || parsed != v {
		return strconv.Quote(s)
	}
	return s
}
