package wire

import (
	"maps"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// The conversions of package service's items, entries, templates and
// values to and from their messages (proto/djinn/v1/lookup.proto). Each
// shares the slices of its argument where the two forms hold the same
// ones (types, supertypes, references). The wire form a registrar answers
// lookups with is written and read by package service itself
// (Record.AppendWire, DecodeItem), byte for byte as these messages.

// Value returns v's wire form: nil for null.
func Value(v service.Value) *djinnpb.Value {
	switch v.Kind() {
	case service.ValueString:
		s, _ := v.AsString()
		return &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: s}}
	case service.ValueInt:
		n, _ := v.AsInt()
		return &djinnpb.Value{Kind: &djinnpb.Value_IntValue{IntValue: n}}
	case service.ValueFloat:
		f, _ := v.AsFloat()
		return &djinnpb.Value{Kind: &djinnpb.Value_DoubleValue{DoubleValue: f}}
	case service.ValueBool:
		b, _ := v.AsBool()
		return &djinnpb.Value{Kind: &djinnpb.Value_BoolValue{BoolValue: b}}
	case service.ValueBytes:
		b, _ := v.AsBytes()
		return &djinnpb.Value{Kind: &djinnpb.Value_BytesValue{BytesValue: b}}
	}
	return nil
}

// ValueFrom reads a wire value: nil, or one without a kind, is null.
func ValueFrom(v *djinnpb.Value) service.Value {
	switch k := v.GetKind().(type) {
	case *djinnpb.Value_StringValue:
		return service.NewString(k.StringValue)
	case *djinnpb.Value_IntValue:
		return service.NewInt(k.IntValue)
	case *djinnpb.Value_DoubleValue:
		return service.NewFloat(k.DoubleValue)
	case *djinnpb.Value_BoolValue:
		return service.NewBool(k.BoolValue)
	case *djinnpb.Value_BytesValue:
		return service.NewBytes(k.BytesValue)
	}
	return service.Value{}
}

func fields(fs []service.Field) []*djinnpb.Field {
	if len(fs) == 0 {
		return nil
	}
	out := make([]*djinnpb.Field, len(fs))
	for i, f := range fs {
		out[i] = &djinnpb.Field{Name: f.Name, Value: Value(f.Value)}
	}
	return out
}

func fieldsFrom(fs []*djinnpb.Field) []service.Field {
	if len(fs) == 0 {
		return nil
	}
	out := make([]service.Field, len(fs))
	for i, f := range fs {
		out[i] = service.Field{Name: f.GetName(), Value: ValueFrom(f.GetValue())}
	}
	return out
}

// Entry returns e's wire form.
func Entry(e service.Entry) *djinnpb.Entry {
	return &djinnpb.Entry{Type: e.Type, Supertypes: e.Supertypes, Fields: fields(e.Fields)}
}

// EntryFrom reads a wire entry.
func EntryFrom(e *djinnpb.Entry) service.Entry {
	return service.Entry{Type: e.GetType(), Supertypes: e.GetSupertypes(), Fields: fieldsFrom(e.GetFields())}
}

// Entries returns the wire forms of es.
func Entries(es []service.Entry) []*djinnpb.Entry {
	if len(es) == 0 {
		return nil
	}
	out := make([]*djinnpb.Entry, len(es))
	for i, e := range es {
		out[i] = Entry(e)
	}
	return out
}

// EntriesFrom reads wire entries.
func EntriesFrom(es []*djinnpb.Entry) []service.Entry {
	if len(es) == 0 {
		return nil
	}
	out := make([]service.Entry, len(es))
	for i, e := range es {
		out[i] = EntryFrom(e)
	}
	return out
}

// EntryTemplate returns t's wire form.
func EntryTemplate(t service.EntryTemplate) *djinnpb.EntryTemplate {
	return &djinnpb.EntryTemplate{Type: t.Type, Fields: fields(t.Fields)}
}

// EntryTemplateFrom reads a wire entry template.
func EntryTemplateFrom(t *djinnpb.EntryTemplate) service.EntryTemplate {
	return service.EntryTemplate{Type: t.GetType(), Fields: fieldsFrom(t.GetFields())}
}

// EntryTemplates returns the wire forms of ts.
func EntryTemplates(ts []service.EntryTemplate) []*djinnpb.EntryTemplate {
	if len(ts) == 0 {
		return nil
	}
	out := make([]*djinnpb.EntryTemplate, len(ts))
	for i, t := range ts {
		out[i] = EntryTemplate(t)
	}
	return out
}

// EntryTemplatesFrom reads wire entry templates.
func EntryTemplatesFrom(ts []*djinnpb.EntryTemplate) []service.EntryTemplate {
	if len(ts) == 0 {
		return nil
	}
	out := make([]service.EntryTemplate, len(ts))
	for i, t := range ts {
		out[i] = EntryTemplateFrom(t)
	}
	return out
}

// Item returns it's wire form; the zero ID is sent as none, and the
// hierarchy's types in sorted order.
func Item(it service.Item) *djinnpb.ServiceItem {
	pb := &djinnpb.ServiceItem{Service: it.Service, Types: it.Types, Entries: Entries(it.Entries)}
	if !it.ID.IsZero() {
		pb.ServiceId = it.ID[:]
	}
	for _, t := range slices.Sorted(maps.Keys(it.Supertypes)) {
		pb.Supertypes = append(pb.Supertypes, &djinnpb.TypeSupertypes{Type: t, Supertypes: it.Supertypes[t]})
	}
	return pb
}

// ItemFrom reads a wire item: an empty service id is the zero ID, any
// other length than 16 bytes is djinn.ErrInvalidArgument; the hierarchy's
// messages for one type add to its list.
func ItemFrom(pb *djinnpb.ServiceItem) (service.Item, error) {
	it := service.Item{Service: pb.GetService(), Types: pb.GetTypes(), Entries: EntriesFrom(pb.GetEntries())}
	if len(pb.GetServiceId()) > 0 {
		id, err := djinn.IDFromBytes("service item id", pb.GetServiceId())
		if err != nil {
			return service.Item{}, err
		}
		it.ID = id
	}
	for _, s := range pb.GetSupertypes() {
		if it.Supertypes == nil {
			it.Supertypes = map[string][]string{}
		}
		it.Supertypes[s.GetType()] = append(it.Supertypes[s.GetType()], s.GetSupertypes()...)
	}
	return it, nil
}

// Template returns t's wire form.
func Template(t service.Template) *djinnpb.ServiceTemplate {
	pb := &djinnpb.ServiceTemplate{Types: t.Types, Entries: EntryTemplates(t.Entries)}
	if t.ID != nil {
		pb.ServiceId = t.ID[:]
	}
	return pb
}

// TemplateFrom reads a wire template: an empty service id matches any, any
// other length than 16 bytes is djinn.ErrInvalidArgument.
func TemplateFrom(pb *djinnpb.ServiceTemplate) (service.Template, error) {
	t := service.Template{Types: pb.GetTypes(), Entries: EntryTemplatesFrom(pb.GetEntries())}
	if len(pb.GetServiceId()) > 0 {
		id, err := djinn.IDFromBytes("template service id", pb.GetServiceId())
		if err != nil {
			return service.Template{}, err
		}
		t.ID = &id
	}
	return t, nil
}
