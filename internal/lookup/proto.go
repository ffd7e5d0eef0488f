package lookup

import (
	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// The wire forms of items, entries and templates (proto/djinn/v1/lookup.proto).

// ValueFromProto converts a wire value; nil (or one with no kind) is nil:
// null in an entry, a wildcard in a template.
func ValueFromProto(v *djinnpb.Value) *Value {
	switch k := v.GetKind().(type) {
	case *djinnpb.Value_StringValue:
		return NewString(k.StringValue)
	case *djinnpb.Value_IntValue:
		return NewInt64(k.IntValue)
	case *djinnpb.Value_DoubleValue:
		return NewFloat64(k.DoubleValue)
	case *djinnpb.Value_BoolValue:
		return NewBool(k.BoolValue)
	case *djinnpb.Value_BytesValue:
		return NewBytes(k.BytesValue)
	}
	return nil
}

// ValueToProto converts a value; nil stays nil.
func ValueToProto(v *Value) *djinnpb.Value {
	if v == nil {
		return nil
	}
	switch v.Kind() {
	case KindString:
		s, _ := v.AsString()
		return &djinnpb.Value{Kind: &djinnpb.Value_StringValue{StringValue: s}}
	case KindInt64:
		n, _ := v.AsInt64()
		return &djinnpb.Value{Kind: &djinnpb.Value_IntValue{IntValue: n}}
	case KindFloat64:
		f, _ := v.AsFloat64()
		return &djinnpb.Value{Kind: &djinnpb.Value_DoubleValue{DoubleValue: f}}
	case KindBool:
		b, _ := v.AsBool()
		return &djinnpb.Value{Kind: &djinnpb.Value_BoolValue{BoolValue: b}}
	case KindBytes:
		b, _ := v.AsBytes()
		return &djinnpb.Value{Kind: &djinnpb.Value_BytesValue{BytesValue: b}}
	}
	return nil
}

func fieldsFromProto(fs []*djinnpb.Field) []Field {
	out := make([]Field, len(fs))
	for i, f := range fs {
		out[i] = Field{Name: f.GetName(), Value: ValueFromProto(f.GetValue())}
	}
	return out
}

func fieldsToProto(fs []Field) []*djinnpb.Field {
	out := make([]*djinnpb.Field, len(fs))
	for i, f := range fs {
		out[i] = &djinnpb.Field{Name: f.Name, Value: ValueToProto(f.Value)}
	}
	return out
}

// EntriesFromProto converts wire entries.
func EntriesFromProto(es []*djinnpb.Entry) []Entry {
	out := make([]Entry, len(es))
	for i, e := range es {
		out[i] = Entry{Type: e.GetType(), Supertypes: e.GetSupertypes(), Fields: fieldsFromProto(e.GetFields())}
	}
	return out
}

// EntriesToProto converts entries to their wire form.
func EntriesToProto(es []Entry) []*djinnpb.Entry {
	out := make([]*djinnpb.Entry, len(es))
	for i, e := range es {
		out[i] = &djinnpb.Entry{Type: e.Type, Supertypes: e.Supertypes, Fields: fieldsToProto(e.Fields)}
	}
	return out
}

// EntryTemplatesFromProto converts wire entry templates.
func EntryTemplatesFromProto(ts []*djinnpb.EntryTemplate) []EntryTemplate {
	out := make([]EntryTemplate, len(ts))
	for i, t := range ts {
		out[i] = EntryTemplate{Type: t.GetType(), Fields: fieldsFromProto(t.GetFields())}
	}
	return out
}

func entryTemplatesToProto(ts []EntryTemplate) []*djinnpb.EntryTemplate {
	out := make([]*djinnpb.EntryTemplate, len(ts))
	for i, t := range ts {
		out[i] = &djinnpb.EntryTemplate{Type: t.Type, Fields: fieldsToProto(t.Fields)}
	}
	return out
}

// ItemFromProto converts a wire item; an empty service id is the zero id.
func ItemFromProto(it *djinnpb.ServiceItem) (Item, error) {
	out := Item{Ref: it.GetService(), Types: it.GetTypes(), Entries: EntriesFromProto(it.GetEntries())}
	if len(it.GetServiceId()) > 0 {
		id, err := djinn.IDFromBytes("service id", it.GetServiceId())
		if err != nil {
			return Item{}, err
		}
		out.ID = id
	}
	return out, nil
}

// ItemToProto converts an item to its wire form.
func ItemToProto(it Item) *djinnpb.ServiceItem {
	return &djinnpb.ServiceItem{ServiceId: it.ID[:], Service: it.Ref, Types: it.Types, Entries: EntriesToProto(it.Entries)}
}

// TemplateFromProto converts a wire template; an empty service id matches
// any.
func TemplateFromProto(t *djinnpb.ServiceTemplate) (Template, error) {
	out := Template{Types: t.GetTypes(), Entries: EntryTemplatesFromProto(t.GetEntries())}
	if len(t.GetServiceId()) > 0 {
		id, err := djinn.IDFromBytes("template service id", t.GetServiceId())
		if err != nil {
			return Template{}, err
		}
		out.ID = &id
	}
	return out, nil
}

// TemplateToProto converts a template to its wire form.
func TemplateToProto(t Template) *djinnpb.ServiceTemplate {
	out := &djinnpb.ServiceTemplate{Types: t.Types, Entries: entryTemplatesToProto(t.Entries)}
	if t.ID != nil {
		out.ServiceId = t.ID[:]
	}
	return out
}
