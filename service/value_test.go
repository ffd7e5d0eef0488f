package service_test

import (
	"math"
	"slices"
	"testing"

	"github.com/djinn-go/djinn/service"
)

func TestValueKindsAndString(t *testing.T) {
	for _, c := range []struct {
		v    service.Value
		kind service.ValueKind
		s    string
	}{
		{service.NewString("a\"b"), service.ValueString, `"a\"b"`},
		{service.NewString(""), service.ValueString, `""`},
		{service.NewInt(-42), service.ValueInt, "-42"},
		{service.NewInt(math.MaxInt64), service.ValueInt, "9223372036854775807"},
		{service.NewFloat(2), service.ValueFloat, "2.0"},
		{service.NewFloat(-1.5), service.ValueFloat, "-1.5"},
		{service.NewFloat(1e21), service.ValueFloat, "1e+21"},
		{service.NewFloat(math.Inf(-1)), service.ValueFloat, "-Inf"},
		{service.NewFloat(math.NaN()), service.ValueFloat, "NaN"},
		{service.NewBool(true), service.ValueBool, "true"},
		{service.NewBool(false), service.ValueBool, "false"},
		{service.NewBytes([]byte{0xa, 0xff}), service.ValueBytes, "0x0aff"},
		{service.NewBytes(nil), service.ValueBytes, "0x"},
		{service.Value{}, service.ValueNull, "null"},
	} {
		if c.v.Kind() != c.kind || c.v.String() != c.s {
			t.Errorf("%s: kind %s, string %s; want %s, %s", c.s, c.v.Kind(), c.v.String(), c.kind, c.s)
		}
	}
	if service.ValueKind(9).String() != "ValueKind(9)" {
		t.Errorf("Kind(9) = %s", service.ValueKind(9))
	}
}

func TestValueAccessors(t *testing.T) {
	if s, ok := service.NewString("x").AsString(); !ok || s != "x" {
		t.Error("AsString")
	}
	if n, ok := service.NewInt(math.MinInt64).AsInt(); !ok || n != math.MinInt64 {
		t.Error("AsInt")
	}
	for _, x := range []float64{0, math.Copysign(0, -1), 1.5, -1e300, math.Inf(1), math.SmallestNonzeroFloat64} {
		if g, ok := service.NewFloat(x).AsFloat(); !ok || math.Float64bits(g) != math.Float64bits(x) {
			t.Errorf("AsFloat(%v) = %v", x, g)
		}
	}
	if b, ok := service.NewBool(true).AsBool(); !ok || !b {
		t.Error("AsBool")
	}
	if b, ok := service.NewBytes([]byte("hi")).AsBytes(); !ok || string(b) != "hi" {
		t.Error("AsBytes")
	}
	// The wrong accessor says so rather than converting.
	if _, ok := service.NewString("1").AsInt(); ok {
		t.Error("a string read as an int64")
	}
	if _, ok := (service.Value{}).AsString(); ok {
		t.Error("the zero Value read as a string")
	}
}

// TestValueEquality: == is Java's equals, which Jini's matching uses (DESIGN.md 6).
func TestValueEquality(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b service.Value
		eq   bool
	}{
		{"same string", service.NewString("a"), service.NewString("a"), true},
		{"string vs bytes", service.NewString("a"), service.NewBytes([]byte("a")), false},
		{"int vs float", service.NewInt(1), service.NewFloat(1), false},
		{"string vs int text", service.NewString("1"), service.NewInt(1), false},
		{"NaN equals NaN whatever its bits", service.NewFloat(math.NaN()), service.NewFloat(math.Float64frombits(0x7ff0000000000001)), true},
		{"0.0 differs from -0.0", service.NewFloat(0), service.NewFloat(math.Copysign(0, -1)), false},
		{"bools", service.NewBool(true), service.NewBool(true), true},
	} {
		if (c.a == c.b) != c.eq {
			t.Errorf("%s: %s == %s is %v", c.name, c.a, c.b, !c.eq)
		}
	}
}

func TestValueCompareOrders(t *testing.T) {
	want := []service.Value{
		service.NewBool(false), service.NewBool(true),
		service.NewInt(math.MinInt64), service.NewInt(-1), service.NewInt(0), service.NewInt(7), service.NewInt(math.MaxInt64),
		service.NewFloat(math.Inf(-1)), service.NewFloat(-2.5), service.NewFloat(math.Copysign(0, -1)), service.NewFloat(0),
		service.NewFloat(1e-300), service.NewFloat(3), service.NewFloat(math.Inf(1)), service.NewFloat(math.NaN()),
		service.NewString(""), service.NewString("a"), service.NewString("ab"), service.NewString("b"),
		service.NewBytes(nil), service.NewBytes([]byte{0}),
	}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortFunc(got, func(a, b service.Value) int { return a.Compare(b) })
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sorted %v, want %v", got, want)
		}
	}
}
