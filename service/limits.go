package service

import (
	"github.com/djinn-go/djinn"
)

// Limits bound what one item, template or attribute call may hold, so that
// a registrar's memory per registration is bounded. A value over a limit
// gets a djinn.ResourceExhausted error naming the limit, the value and the
// bound. A zero field means the default (DefaultLimits); a negative one is
// refused.
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
	// types (with those its hierarchy adds) and the supertype links its
	// hierarchy declares, an entry's supertypes, a template's service
	// types.
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

// WithDefaults returns l with its zero fields set to DefaultLimits', or an
// error naming a negative field.
func (l Limits) WithDefaults() (Limits, error) {
	d := DefaultLimits()
	for _, f := range [...]struct {
		name   string
		v, def *int
	}{
		{"MaxEntries", &l.MaxEntries, &d.MaxEntries},
		{"MaxFields", &l.MaxFields, &d.MaxFields},
		{"MaxAttributeBytes", &l.MaxAttributeBytes, &d.MaxAttributeBytes},
		{"MaxRefBytes", &l.MaxRefBytes, &d.MaxRefBytes},
		{"MaxTypes", &l.MaxTypes, &d.MaxTypes},
		{"MaxNameLen", &l.MaxNameLen, &d.MaxNameLen},
	} {
		switch {
		case *f.v < 0:
			return l, djinn.Errorf(djinn.InvalidArgument, "limit %s %d: must not be negative (0 for the default %d)", f.name, *f.v, *f.def)
		case *f.v == 0:
			*f.v = *f.def
		}
	}
	return l, nil
}

// resolved is WithDefaults for the calls that check values: those with
// every field set (a registry's) skip the work.
func (l Limits) resolved() (Limits, error) {
	if l.MaxEntries > 0 && l.MaxFields > 0 && l.MaxAttributeBytes > 0 && l.MaxRefBytes > 0 && l.MaxTypes > 0 && l.MaxNameLen > 0 {
		return l, nil
	}
	return l.WithDefaults()
}

func overLimit(what string, n int, limit string, max int) error {
	return djinn.Errorf(djinn.ResourceExhausted, "%s %d: over the limit %s of %d", what, n, limit, max)
}
