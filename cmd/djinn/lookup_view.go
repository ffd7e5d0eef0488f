package main

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

// The lookup commands' flags (--type, --attr, --id) and what they print.

// attrSyntax documents --attr for every lookup command's help.
const attrSyntax = `attribute Type.field=value (repeatable; the fields of one Type make one entry; the field ` +
	`is what follows the last dot, so Type may be qualified: net.jini.lookup.entry.Name.name=lp). ` +
	`A value that parses as a decimal integer is an integer, true and false are booleans, ` +
	`a value in double quotes is the string inside them (Go syntax: "42" is a string), anything else a string. ` +
	`A bare Type is an entry of that type without fields`

// attrFlagHelp is --attr's flag help; attrSyntax, in each command's
// long help, says the rest.
const attrFlagHelp = "attribute Type.field=value, or a bare Type (repeatable; values: see --help)"

// lookupFlags describe an item or a template: --type T, --attr
// Type.field=value, --id ID.
type lookupFlags struct {
	types []string
	attrs []string
	id    string
}

func (f *lookupFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().StringArrayVar(&f.types, "type", nil, what+" service type name (repeatable)")
	cmd.Flags().StringArrayVar(&f.attrs, "attr", nil, what+" "+attrFlagHelp)
	cmd.Flags().StringVar(&f.id, "id", "", what+" service id (32 hex digits)")
}

// parseLookupAttrValue reads the value of an --attr: see attrSyntax.
func parseLookupAttrValue(s string) (client.Value, error) {
	if strings.HasPrefix(s, `"`) {
		u, err := strconv.Unquote(s)
		if err != nil {
			return client.Value{}, errors.New("a quoted value must be a Go string literal")
		}
		return client.NewString(u), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return client.NewInt(n), nil
	}
	switch s {
	case "true":
		return client.NewBool(true), nil
	case "false":
		return client.NewBool(false), nil
	}
	return client.NewString(s), nil
}

// parseLookupEntries groups --attr flags into entries, one per type, in the
// order the types first appear.
func parseLookupEntries(attrs []string) ([]client.Entry, error) {
	var out []client.Entry
	index := map[string]int{}
	for _, a := range attrs {
		typ, val, hasField := strings.Cut(a, "=")
		var field string
		if hasField {
			dot := strings.LastIndexByte(typ, '.')
			if dot < 0 {
				return nil, usageError{fmt.Errorf("--attr %q: want Type.field=value, or a bare Type", a)}
			}
			typ, field = typ[:dot], typ[dot+1:]
		}
		if typ == "" || (hasField && field == "") {
			return nil, usageError{fmt.Errorf("--attr %q: want Type.field=value, or a bare Type", a)}
		}
		i, ok := index[typ]
		if !ok {
			i = len(out)
			index[typ] = i
			out = append(out, client.Entry{Type: typ})
		}
		if !hasField {
			continue
		}
		if _, dup := out[i].Get(field); dup {
			return nil, usageError{fmt.Errorf("--attr %q: field %s of %s given twice", a, field, typ)}
		}
		v, err := parseLookupAttrValue(val)
		if err != nil {
			return nil, usageError{fmt.Errorf("--attr %q: %w", a, err)}
		}
		out[i].Fields = append(out[i].Fields, client.Field{Name: field, Value: v})
	}
	return out, nil
}

func (f *lookupFlags) serviceID() (*djinn.ID, error) {
	if f.id == "" {
		return nil, nil
	}
	id, err := djinn.ParseID(f.id)
	if err != nil {
		return nil, usageError{fmt.Errorf("--id: %w", err)}
	}
	return &id, nil
}

// template returns the template the flags describe (no flags: every item).
func (f *lookupFlags) template() (client.ServiceTemplate, error) {
	es, err := parseLookupEntries(f.attrs)
	if err != nil {
		return client.ServiceTemplate{}, err
	}
	id, err := f.serviceID()
	if err != nil {
		return client.ServiceTemplate{}, err
	}
	t := client.ServiceTemplate{ID: id, Types: f.types}
	for _, e := range es {
		t.Entries = append(t.Entries, client.EntryTemplate{Type: e.Type, Fields: e.Fields})
	}
	return t, nil
}

// lookupValueJSON is a field value in JSON, as protobuf's JSON mapping
// writes a oneof: an object with the value under its kind — {"string":
// "laser"}, {"int": "3"} (a 64-bit integer: a string), {"float": 1.5},
// {"bool": true}, {"bytes": "0x0a0b"} — or null.
func lookupValueJSON(v client.Value) any {
	switch v.Kind() {
	case client.ValueNull:
		return nil
	case client.ValueBytes:
		return map[string]string{"bytes": v.String()}
	case client.ValueInt:
		n, _ := v.AsInt()
		return map[string]string{"int": jsonInt(n)}
	case client.ValueString:
		s, _ := v.AsString()
		return map[string]string{"string": s}
	case client.ValueFloat:
		f, _ := v.AsFloat()
		return map[string]float64{"float": f}
	}
	return map[string]any{"bool": v.Interface()}
}

type lookupEntryView struct {
	Type       string         `json:"type"`
	Supertypes []string       `json:"supertypes"`
	Fields     map[string]any `json:"fields"`
	text       string
}

type lookupItemView struct {
	ID      string   `json:"id"`
	Service string   `json:"service"`
	Types   []string `json:"types"`
	// Supertypes is the item's type hierarchy: for a type, the types it
	// directly extends; {} when the item declares none.
	Supertypes map[string][]string `json:"supertypes"`
	Attrs      []lookupEntryView   `json:"attrs"`
}

// lookupServiceText shows an item's reference: the text a djinn CLI
// registration stores, or 0x and hex digits for other bytes.
func lookupServiceText(b []byte) string {
	if utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return string(b)
	}
	return fmt.Sprintf("0x%x", b)
}

func viewLookupItem(it client.ServiceItem) lookupItemView {
	v := lookupItemView{ID: it.ID.String(), Service: lookupServiceText(it.Service), Types: it.Types, Supertypes: it.Supertypes, Attrs: []lookupEntryView{}}
	if v.Supertypes == nil {
		v.Supertypes = map[string][]string{}
	}
	if v.Types == nil {
		v.Types = []string{}
	}
	for _, e := range it.Entries {
		ev := lookupEntryView{Type: e.Type, Supertypes: orEmpty(e.Supertypes), Fields: map[string]any{}}
		fs := make([]string, len(e.Fields))
		for i, f := range e.Fields {
			ev.Fields[f.Name] = lookupValueJSON(f.Value)
			fs[i] = f.Name + "=" + f.Value.String()
		}
		ev.text = e.Type + "{" + strings.Join(fs, " ") + "}"
		v.Attrs = append(v.Attrs, ev)
	}
	return v
}

// lookupItemText is an item on one line: id, reference, types, then each entry
// as Type{field=value …} with values in Go syntax ("text", 3, true).
func lookupItemText(v lookupItemView) string {
	service := v.Service
	if service == "" {
		service = "-"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s  types=%s", v.ID, service, strings.Join(v.Types, ","))
	if len(v.Supertypes) > 0 {
		ts := make([]string, 0, len(v.Supertypes))
		for t, supers := range v.Supertypes {
			ts = append(ts, t+"<"+strings.Join(supers, ","))
		}
		sort.Strings(ts)
		b.WriteString("  extends=" + strings.Join(ts, ";"))
	}
	for _, e := range v.Attrs {
		b.WriteString("  " + e.text)
	}
	return b.String()
}
