package lookup_test

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/service"
	"pgregory.net/rapid"
)

// Arbitrary, mostly bad, input: names empty, long or not UTF-8, the zero
// Value, zero and reserved ids, negative numbers, unknown bits.

var anyName = rapid.OneOf(
	rapid.SampledFrom([]string{"", "A", "Name", "E", "\xff\xfe", "a"}),
	rapid.StringN(0, 12, -1),
	rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 12), func(b []byte) string { return string(b) }),
	rapid.Map(rapid.IntRange(250, 270), func(n int) string { return string(make([]byte, n)) }),
)

var anyValue = rapid.OneOf(
	rapid.Just(service.Value{}),
	rapid.Map(anyName, service.NewString),
	rapid.Map(rapid.Int64(), service.NewInt),
	rapid.Map(rapid.Float64(), service.NewFloat),
	rapid.Map(rapid.Bool(), service.NewBool),
	rapid.Map(rapid.SliceOfN(rapid.Byte(), 0, 8), service.NewBytes),
)

var anyID = rapid.OneOf(
	rapid.Just(djinn.ID{}),
	rapid.Just(self),
	rapid.Map(rapid.IntRange(1, 3), func(n int) djinn.ID { return sid(byte(n)) }),
)

var anyFields = rapid.SliceOfN(rapid.Custom(func(t *rapid.T) service.Field {
	return service.Field{Name: anyName.Draw(t, "name"), Value: anyValue.Draw(t, "value")}
}), 0, 4)

var anyEntry = rapid.Custom(func(t *rapid.T) service.Entry {
	return service.Entry{Type: anyName.Draw(t, "type"), Supertypes: rapid.SliceOfN(anyName, 0, 3).Draw(t, "supertypes"), Fields: anyFields.Draw(t, "fields")}
})

var anyEntryTemplate = rapid.Custom(func(t *rapid.T) service.EntryTemplate {
	return service.EntryTemplate{Type: anyName.Draw(t, "type"), Fields: anyFields.Draw(t, "fields")}
})

var anyTemplate = rapid.Custom(func(t *rapid.T) service.Template {
	var tmpl service.Template
	if rapid.Bool().Draw(t, "has-id") {
		id := anyID.Draw(t, "id")
		tmpl.ID = &id
	}
	tmpl.Types = rapid.SliceOfN(anyName, 0, 3).Draw(t, "types")
	tmpl.Entries = rapid.SliceOfN(anyEntryTemplate, 0, 3).Draw(t, "entries")
	return tmpl
})

var anyItem = rapid.Custom(func(t *rapid.T) service.Item {
	return service.Item{
		ID:      anyID.Draw(t, "id"),
		Service: rapid.SliceOfN(rapid.Byte(), 0, 3).Draw(t, "ref"),
		Types:   rapid.SliceOfN(anyName, 0, 3).Draw(t, "types"),
		// Hierarchies with cycles, self links, unknown and bad names.
		Supertypes: rapid.MapOfN(anyName, rapid.SliceOfN(anyName, 0, 3), 0, 3).Draw(t, "supertypes"),
		Entries:    rapid.SliceOfN(anyEntry, 0, 4).Draw(t, "entries"),
	}
})

// checkError: an error is a djinn error of a known kind with a message.
func checkError(t *rapid.T, what string, err error) {
	if err == nil {
		return
	}
	var e *djinn.Error
	if !errors.As(err, &e) || !slices.Contains(djinn.Kinds(), e.Kind) || e.Message == "" {
		t.Fatalf("%s: error %#v is not a djinn error with a message", what, err)
	}
}

// TestBadInputNeverPanics: every exported function, given arbitrary input,
// returns a clear djinn error or succeeds — never panics — and a call
// that fails changes nothing (DESIGN.md 8).
func TestBadInputNeverPanics(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := service.Limits{MaxEntries: rapid.IntRange(-1, 4).Draw(t, "max-entries"), MaxNameLen: rapid.IntRange(-1, 300).Draw(t, "max-name")}
		r, err := lookup.New(anyID.Draw(t, "self"), lim)
		checkError(t, "new", err)
		if err != nil {
			r, err = lookup.New(self, service.Limits{})
			if err != nil {
				t.Fatal(err)
			}
		}
		for range rapid.IntRange(1, 30).Draw(t, "steps") {
			before := r.Export()
			var err error
			mutating := true
			switch rapid.IntRange(0, 11).Draw(t, "op") {
			case 0:
				_, err = r.Register(anyItem.Draw(t, "item"), anyID.Draw(t, "lease"))
			case 1:
				_, err = r.Remove(anyID.Draw(t, "id"))
			case 2:
				_, err = r.AddAttributes(anyID.Draw(t, "id"), rapid.SliceOfN(anyEntry, 0, 3).Draw(t, "entries"))
			case 3:
				_, err = r.SetAttributes(anyID.Draw(t, "id"), rapid.SliceOfN(anyEntry, 0, 3).Draw(t, "entries"))
			case 4:
				_, err = r.ModifyAttributes(anyID.Draw(t, "id"), rapid.SliceOfN(anyEntryTemplate, 0, 3).Draw(t, "templates"), rapid.SliceOfN(anyEntry, 0, 3).Draw(t, "changes"))
			case 5:
				err = r.AddWatch(anyID.Draw(t, "watch"), anyTemplate.Draw(t, "tmpl"), service.Transition(rapid.Uint8().Draw(t, "mask")))
			case 6:
				err = r.RemoveWatch(anyID.Draw(t, "watch"))
			case 7:
				mutating = false
				_, _, err = r.Lookup(anyTemplate.Draw(t, "tmpl"), rapid.IntRange(-2, 3).Draw(t, "max"))
			case 8:
				mutating = false
				_, err = r.EntryTypes(anyTemplate.Draw(t, "tmpl"))
				checkError(t, "entry types", err)
				_, err = r.ServiceTypes(anyTemplate.Draw(t, "tmpl"), anyName.Draw(t, "prefix"))
			case 9:
				mutating = false
				_, err = r.FieldValues(anyTemplate.Draw(t, "tmpl"), rapid.IntRange(-1, 3).Draw(t, "set"), anyName.Draw(t, "field"))
			case 10:
				_, err = r.Get(anyID.Draw(t, "id"))
				mutating = false
			case 11:
				snap := before
				if len(snap.Registrations) > 0 && rapid.Bool().Draw(t, "spoil") {
					snap.Registrations = append(slices.Clone(snap.Registrations), lookup.Registration{Item: anyItem.Draw(t, "item"), Lease: anyID.Draw(t, "lease")})
				}
				err = r.Import(snap)
			}
			checkError(t, "call", err)
			if (err != nil || !mutating) && !reflect.DeepEqual(r.Export(), before) {
				t.Fatalf("a failed or read-only call changed the registry: %v", err)
			}
		}
		p := lookup.LeasePolicy{
			Default:            time.Duration(rapid.Int64Range(-2, 1e12).Draw(t, "default")),
			Maximum:            time.Duration(rapid.Int64().Draw(t, "maximum")),
			MinRenewalInterval: time.Duration(rapid.Int64().Draw(t, "interval")),
		}
		d, err := p.Grant(time.Duration(rapid.Int64().Draw(t, "requested")), rapid.Int().Draw(t, "registrations"))
		checkError(t, "grant", err)
		if err == nil && d <= 0 {
			t.Fatalf("granted %s", d)
		}
	})
}
