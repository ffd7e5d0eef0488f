package service_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/service"
)

func TestParseAttributes(t *testing.T) {
	str, num := service.NewString, service.NewInt
	tests := []struct {
		name  string
		attrs []string
		want  []service.Entry
		err   string // a part of the error; "" for none
	}{
		{"one field", []string{"Name.name=lp"}, []service.Entry{{Type: "Name", Fields: []service.Field{{Name: "name", Value: str("lp")}}}}, ""},
		{"a qualified type: the field follows the last dot", []string{"net.jini.lookup.entry.Name.name=lp"},
			[]service.Entry{{Type: "net.jini.lookup.entry.Name", Fields: []service.Field{{Name: "name", Value: str("lp")}}}}, ""},
		{"fields of one type make one entry, in the order types appear", []string{"Loc.floor=3", "Name.name=a", "Loc.room=301"},
			[]service.Entry{{Type: "Loc", Fields: []service.Field{{Name: "floor", Value: num(3)}, {Name: "room", Value: num(301)}}},
				{Type: "Name", Fields: []service.Field{{Name: "name", Value: str("a")}}}}, ""},
		{"a bare type is an entry without fields", []string{"Marker"}, []service.Entry{{Type: "Marker"}}, ""},
		{"booleans, a quoted string, an empty value", []string{"T.a=true", "T.b=false", `T.c="42"`, "T.d="},
			[]service.Entry{{Type: "T", Fields: []service.Field{{Name: "a", Value: service.NewBool(true)}, {Name: "b", Value: service.NewBool(false)},
				{Name: "c", Value: str("42")}, {Name: "d", Value: str("")}}}}, ""},
		{"a value may hold = and dots", []string{"T.url=http://x/?a=b"}, []service.Entry{{Type: "T", Fields: []service.Field{{Name: "url", Value: str("http://x/?a=b")}}}}, ""},
		{"no attributes", nil, nil, ""},
		{"a field without a type", []string{"name=lp"}, nil, `attribute "name=lp": want Type.field=value`},
		{"an empty field", []string{"Name.=lp"}, nil, `attribute "Name.=lp": want Type.field=value`},
		{"an empty type", []string{".name=lp"}, nil, `attribute ".name=lp": want Type.field=value`},
		{"nothing", []string{""}, nil, `attribute "": want Type.field=value`},
		{"a field twice", []string{"T.a=1", "T.a=2"}, nil, `attribute "T.a=2": field a of T given twice`},
		{"a broken quote", []string{`T.a="x`}, nil, `attribute "T.a=\"x": value "x: a quoted value must be a Go string literal`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := service.ParseAttributes(tt.attrs)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, djinn.ErrInvalidArgument) {
					t.Fatalf("ParseAttributes(%q) = %v, %v; want an invalid argument saying %q", tt.attrs, got, err, tt.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("ParseAttributes(%q) = %v, %v; want %v", tt.attrs, got, err, tt.want)
			}
			if back, err := service.ParseAttributes(service.FormatAttributes(got)); err != nil || !reflect.DeepEqual(back, got) {
				t.Errorf("read back as %q: %v, %v", service.FormatAttributes(got), back, err)
			}
		})
	}
}

func TestFormatAttributesQuotes(t *testing.T) {
	es := []service.Entry{{Type: "T", Fields: []service.Field{
		{Name: "a", Value: service.NewString("42")}, {Name: "b", Value: service.NewString("true")},
		{Name: "c", Value: service.NewString(`"q"`)}, {Name: "d", Value: service.NewString("plain")},
	}}, {Type: "Bare"}}
	got := service.FormatAttributes(es)
	want := []string{`T.a="42"`, `T.b="true"`, `T.c="\"q\""`, "T.d=plain", "Bare"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FormatAttributes = %q, want %q", got, want)
	}
}

// FuzzParseAttributes: any text parses or is refused as an invalid
// argument, never a panic, and what parses is written back to text that
// parses to the same entries.
func FuzzParseAttributes(f *testing.F) {
	for _, s := range []string{"Name.name=lp", "T.a=1\nT.b=true\nBare", `T.c="x\ty"`, "a.b.c.d=e=f", "T.a=-9223372036854775808", "=", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		attrs := strings.Split(text, "\n")
		es, err := service.ParseAttributes(attrs)
		if err != nil {
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("ParseAttributes(%q): %v, not an invalid argument", attrs, err)
			}
			return
		}
		back, err := service.ParseAttributes(service.FormatAttributes(es))
		if err != nil || !reflect.DeepEqual(back, es) {
			t.Fatalf("ParseAttributes(%q) = %v, written %q, read back %v, %v", attrs, es, service.FormatAttributes(es), back, err)
		}
	})
}

// TestHierarchy: every djinn service type makes a valid item whose
// hierarchy holds its Jini and gRPC types.
func TestHierarchy(t *testing.T) {
	for typ, want := range map[string][]string{
		service.LandlordType:               {"djinn.v1.Landlord"},
		service.EventMailboxType:           {"net.jini.event.EventMailbox", "net.jini.event.PullEventMailbox", "djinn.v1.EventMailbox"},
		service.LeaseRenewalServiceType:    {"net.jini.lease.LeaseRenewalService", "djinn.v1.LeaseRenewalService"},
		service.TransactionManagerType:     {"net.jini.core.transaction.server.TransactionManager", "djinn.v1.TransactionManager"},
		service.LockServiceType:            {"org.omg.CosConcurrencyControl.LockSetFactory", "djinn.v1.LockService"},
		service.LookupDiscoveryServiceType: {"net.jini.discovery.LookupDiscoveryService", "djinn.v1.LookupDiscoveryService"},
		service.KeyValueType:               {"net.jini.core.transaction.server.TransactionParticipant", "djinn.v1.KeyValue"},
	} {
		it := service.Item{Service: []byte("djinn://127.0.0.1:4161"), Types: []string{typ}, Supertypes: service.Hierarchy(typ)}
		canon, err := service.Limits{}.Canonical(it)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		for _, w := range append(want, typ) {
			if !(service.Template{Types: []string{w}}).Matches(canon) {
				t.Errorf("%s: not found as a %s (types %v)", typ, w, canon.Types)
			}
		}
	}
	if h := service.Hierarchy("example.Printer"); h != nil {
		t.Errorf("Hierarchy of a type not djinn's = %v, want nil", h)
	}
}
