package lookup

import (
	"math"

	"github.com/djinn-go/djinn"
)

// Limits bound what one registration, template or call may hold, so that
// memory per registration is bounded (DESIGN.md 7). A request over a limit
// gets a ResourceExhausted error naming the limit, the value and the bound,
// and changes nothing. A zero field means the default; a negative one is
// refused by New.
//
// Limits apply to requests, not to state already held: Import accepts a
// snapshot taken under larger limits.
type Limits struct {
	// MaxEntries bounds the entries a call carries and an item holds
	// (after duplicates are dropped), and the entry templates of a
	// template or a ModifyAttributes call.
	MaxEntries int
	// MaxFields bounds the fields of an entry or an entry template.
	MaxFields int
	// MaxAttributeBytes bounds the attribute data of an item, or of a
	// template or a call's entries: the sum over entries of the bytes of
	// the type name and supertype names, and of each field's name and value
	// (a string's or bytes' length, 8 for a number, 1 for a bool, 0 for
	// null).
	MaxAttributeBytes int
	// MaxRefBytes bounds an item's service reference.
	MaxRefBytes int
	// MaxTypes bounds the names in a list of type names: an item's service
	// types, an entry's supertypes, a template's service types.
	MaxTypes int
	// MaxNameLen bounds the bytes of any name: a service type, an entry
	// type or supertype, a field name, a browsing prefix.
	MaxNameLen int
}

// DefaultLimits returns the limits a zero Limits field stands for.
func DefaultLimits() Limits {
	return Limits{
		MaxEntries:        64,
		MaxFields:         32,
		MaxAttributeBytes: 64 << 10,
		MaxRefBytes:       16 << 10,
		MaxTypes:          64,
		MaxNameLen:        256,
	}
}

// withDefaults fills zero fields from DefaultLimits and refuses negative
// ones.
func (l Limits) withDefaults() (Limits, error) {
	d := DefaultLimits()
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxEntries", &l.MaxEntries, d.MaxEntries},
		{"MaxFields", &l.MaxFields, d.MaxFields},
		{"MaxAttributeBytes", &l.MaxAttributeBytes, d.MaxAttributeBytes},
		{"MaxRefBytes", &l.MaxRefBytes, d.MaxRefBytes},
		{"MaxTypes", &l.MaxTypes, d.MaxTypes},
		{"MaxNameLen", &l.MaxNameLen, d.MaxNameLen},
	} {
		switch {
		case *f.v < 0:
			return l, djinn.Errorf(djinn.InvalidArgument, "limit %s %d: must not be negative (0 for the default %d)", f.name, *f.v, f.def)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	return l, nil
}

// unlimited is what Import checks snapshots against: structure, not size.
var unlimited = Limits{
	MaxEntries: math.MaxInt, MaxFields: math.MaxInt, MaxAttributeBytes: math.MaxInt,
	MaxRefBytes: math.MaxInt, MaxTypes: math.MaxInt, MaxNameLen: math.MaxInt,
}

func overLimit(what string, n int, limit string, max int) error {
	return djinn.Errorf(djinn.ResourceExhausted, "%s %d: over the limit %s of %d", what, n, limit, max)
}
