package client

import (
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// The lookup service's vocabulary — service items, templates, entries,
// fields and values — is package service's. This package has long named
// them as below; the names stay, as aliases, so that code written against
// them keeps compiling. New code should say service.Item, service.Entry
// and so on.
type (
	ServiceItem     = service.Item          // an alias of service.Item
	ServiceTemplate = service.Template      // an alias of service.Template
	Entry           = service.Entry         // an alias of service.Entry
	EntryTemplate   = service.EntryTemplate // an alias of service.EntryTemplate
	EntryType       = service.EntryType     // an alias of service.EntryType
	Field           = service.Field         // an alias of service.Field
	Value           = service.Value         // an alias of service.Value
	ValueKind       = service.ValueKind     // an alias of service.ValueKind
)

// The kinds of value, as package service names them.
const (
	ValueNull   = service.ValueNull
	ValueString = service.ValueString
	ValueInt    = service.ValueInt
	ValueFloat  = service.ValueFloat
	ValueBool   = service.ValueBool
	ValueBytes  = service.ValueBytes
)

// NewString is service.NewString.
func NewString(s string) Value { return service.NewString(s) }

// NewInt is service.NewInt.
func NewInt(n int64) Value { return service.NewInt(n) }

// NewFloat is service.NewFloat.
func NewFloat(f float64) Value { return service.NewFloat(f) }

// NewBool is service.NewBool.
func NewBool(b bool) Value { return service.NewBool(b) }

// NewBytes is service.NewBytes.
func NewBytes(b []byte) Value { return service.NewBytes(b) }

// Transition is service.Transition, a set of the service event
// transitions (DESIGN.md 6): how an item's matching of a Notify template
// changed.
type Transition = service.Transition

// The transitions, as package service names them; Notify takes any
// non-empty union of them, a ServiceEvent carries one.
const (
	MatchNoMatch   = service.MatchNoMatch // it matched and no longer does, or was removed
	NoMatchMatch   = service.NoMatchMatch // it did not match (or was not there) and now does
	MatchMatch     = service.MatchMatch   // it matched, changed, and still matches
	AllTransitions = service.AllTransitions
)

// ParseTransitions is service.ParseTransitions.
func ParseTransitions(s string) (Transition, error) { return service.ParseTransitions(s) }

// ValueToProto returns the wire form of v: nil for null.
func ValueToProto(v Value) *djinnpb.Value { return wire.Value(v) }

// ValueFromProto converts a wire value; nil, or one without a kind, is
// null.
func ValueFromProto(pb *djinnpb.Value) Value { return wire.ValueFrom(pb) }

// EntryToProto returns the wire form of e. It shares e's supertypes.
func EntryToProto(e Entry) *djinnpb.Entry { return wire.Entry(e) }

// EntryFromProto converts a wire entry. It shares pb's supertypes.
func EntryFromProto(pb *djinnpb.Entry) Entry { return wire.EntryFrom(pb) }

// EntryTemplateToProto returns the wire form of t.
func EntryTemplateToProto(t EntryTemplate) *djinnpb.EntryTemplate { return wire.EntryTemplate(t) }

// EntryTemplateFromProto converts a wire entry template.
func EntryTemplateFromProto(pb *djinnpb.EntryTemplate) EntryTemplate {
	return wire.EntryTemplateFrom(pb)
}

// ServiceItemToProto returns the wire form of it; the zero ID is sent as
// none. It shares the item's reference and types.
func ServiceItemToProto(it ServiceItem) *djinnpb.ServiceItem { return wire.Item(it) }

// ServiceItemFromProto converts a wire item; an empty service id is the
// zero ID, any other length than 16 bytes is djinn.ErrInvalidArgument. It
// shares pb's reference and types.
func ServiceItemFromProto(pb *djinnpb.ServiceItem) (ServiceItem, error) { return wire.ItemFrom(pb) }

// ServiceTemplateToProto returns the wire form of t. It shares t's types.
func ServiceTemplateToProto(t ServiceTemplate) *djinnpb.ServiceTemplate { return wire.Template(t) }

// ServiceTemplateFromProto converts a wire template; an empty service id
// matches any, any other length than 16 bytes is
// djinn.ErrInvalidArgument. It shares pb's types.
func ServiceTemplateFromProto(pb *djinnpb.ServiceTemplate) (ServiceTemplate, error) {
	return wire.TemplateFrom(pb)
}
