package lookup_test

import (
	"math"
	"slices"
	"testing"

	"github.com/djinn-go/djinn/internal/lookup"
)

func TestValueKindsAndString(t *testing.T) {
	for _, c := range []struct {
		v    *lookup.Value
		kind lookup.Kind
		s    string
	}{
		{lookup.NewString("a\"b"), lookup.KindString, `"a\"b"`},
		{lookup.NewString(""), lookup.KindString, `""`},
		{lookup.NewInt64(-42), lookup.KindInt64, "-42"},
		{lookup.NewInt64(math.MaxInt64), lookup.KindInt64, "9223372036854775807"},
		{lookup.NewFloat64(2), lookup.KindFloat64, "2.0"},
		{lookup.NewFloat64(-1.5), lookup.KindFloat64, "-1.5"},
		{lookup.NewFloat64(1e21), lookup.KindFloat64, "1e+21"},
		{lookup.NewFloat64(math.Inf(-1)), lookup.KindFloat64, "-Inf"},
		{lookup.NewFloat64(math.NaN()), lookup.KindFloat64, "NaN"},
		{lookup.NewBool(true), lookup.KindBool, "true"},
		{lookup.NewBool(false), lookup.KindBool, "false"},
		{lookup.NewBytes([]byte{0xa, 0xff}), lookup.KindBytes, "0x0aff"},
		{lookup.NewBytes(nil), lookup.KindBytes, "0x"},
		{&lookup.Value{}, lookup.KindInvalid, "invalid"},
	} {
		if c.v.Kind() != c.kind || c.v.String() != c.s {
			t.Errorf("%s: kind %s, string %s; want %s, %s", c.s, c.v.Kind(), c.v.String(), c.kind, c.s)
		}
	}
	if lookup.Kind(9).String() != "kind(9)" {
		t.Errorf("Kind(9) = %s", lookup.Kind(9))
	}
}

func TestValueAccessors(t *testing.T) {
	if s, ok := lookup.NewString("x").AsString(); !ok || s != "x" {
		t.Error("AsString")
	}
	if n, ok := lookup.NewInt64(math.MinInt64).AsInt64(); !ok || n != math.MinInt64 {
		t.Error("AsInt64")
	}
	for _, x := range []float64{0, math.Copysign(0, -1), 1.5, -1e300, math.Inf(1), math.SmallestNonzeroFloat64} {
		if g, ok := lookup.NewFloat64(x).AsFloat64(); !ok || math.Float64bits(g) != math.Float64bits(x) {
			t.Errorf("AsFloat64(%v) = %v", x, g)
		}
	}
	if b, ok := lookup.NewBool(true).AsBool(); !ok || !b {
		t.Error("AsBool")
	}
	if b, ok := lookup.NewBytes([]byte("hi")).AsBytes(); !ok || string(b) != "hi" {
		t.Error("AsBytes")
	}
	// The wrong accessor says so rather than converting.
	if _, ok := lookup.NewString("1").AsInt64(); ok {
		t.Error("a string read as an int64")
	}
	if _, ok := (lookup.Value{}).AsString(); ok {
		t.Error("the zero Value read as a string")
	}
}

// TestValueEquality: == is Java's equals, which Jini's matching uses (DESIGN.md 6).
func TestValueEquality(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b *lookup.Value
		eq   bool
	}{
		{"same string", lookup.NewString("a"), lookup.NewString("a"), true},
		{"string vs bytes", lookup.NewString("a"), lookup.NewBytes([]byte("a")), false},
		{"int vs float", lookup.NewInt64(1), lookup.NewFloat64(1), false},
		{"string vs int text", lookup.NewString("1"), lookup.NewInt64(1), false},
		{"NaN equals NaN whatever its bits", lookup.NewFloat64(math.NaN()), lookup.NewFloat64(math.Float64frombits(0x7ff0000000000001)), true},
		{"0.0 differs from -0.0", lookup.NewFloat64(0), lookup.NewFloat64(math.Copysign(0, -1)), false},
		{"bools", lookup.NewBool(true), lookup.NewBool(true), true},
	} {
		if (*c.a == *c.b) != c.eq {
			t.Errorf("%s: %s == %s is %v", c.name, c.a, c.b, !c.eq)
		}
	}
}

func TestValueCompareOrders(t *testing.T) {
	want := []*lookup.Value{
		lookup.NewBool(false), lookup.NewBool(true),
		lookup.NewInt64(math.MinInt64), lookup.NewInt64(-1), lookup.NewInt64(0), lookup.NewInt64(7), lookup.NewInt64(math.MaxInt64),
		lookup.NewFloat64(math.Inf(-1)), lookup.NewFloat64(-2.5), lookup.NewFloat64(math.Copysign(0, -1)), lookup.NewFloat64(0),
		lookup.NewFloat64(1e-300), lookup.NewFloat64(3), lookup.NewFloat64(math.Inf(1)), lookup.NewFloat64(math.NaN()),
		lookup.NewString(""), lookup.NewString("a"), lookup.NewString("ab"), lookup.NewString("b"),
		lookup.NewBytes(nil), lookup.NewBytes([]byte{0}),
	}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortFunc(got, func(a, b *lookup.Value) int { return a.Compare(*b) })
	for i := range want {
		if *got[i] != *want[i] {
			t.Fatalf("sorted %v, want %v", got, want)
		}
	}
}
