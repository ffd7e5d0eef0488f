package service

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
)

// ValueKind is the type of a field value.
type ValueKind uint8

// The kinds of value. The zero Value is ValueNull.
const (
	ValueNull   ValueKind = iota // no value: null in an entry, a wildcard in a template
	ValueString                  // a UTF-8 string
	ValueInt                     // an int64
	ValueFloat                   // a float64
	ValueBool                    // a bool
	ValueBytes                   // a byte string
)

var valueKindNames = [...]string{"null", "string", "int", "float", "bool", "bytes"}

// String returns the kind's name: "null", "string", "int", "float",
// "bool" or "bytes".
func (k ValueKind) String() string {
	if int(k) < len(valueKindNames) {
		return valueKindNames[k]
	}
	return "ValueKind(" + strconv.Itoa(int(k)) + ")"
}

// Value is an entry field's value: a string, an int64, a float64, a bool, a
// byte string, or null. The zero Value is null: in an entry a field without
// a value, in an entry template a wildcard. Build values with NewString,
// NewInt, NewFloat, NewBool and NewBytes.
//
// Values are immutable and comparable, and == is the equality entry
// matching uses: floats compare by their bits, as Java's Double.equals
// does, which Jini's matching uses (0.0 and -0.0 differ; NewFloat stores
// every NaN as one, so NaN equals NaN). A Value can be a map key.
//
// A Value is one string: a byte giving its kind (numbered in Compare's
// order), then its payload — a string's or bytes' contents, or a number's
// 8 bytes encoded so that byte order is numeric order; a bool is the byte
// alone, and null is the empty string. So a Value costs 16 bytes plus its
// payload, and Compare is a string comparison.
type Value struct {
	s string
}

// The first byte of an encoded Value, in Compare's order.
const (
	tagBool = iota + 1
	tagInt
	tagFloat
	tagString
	tagBytes
)

var tagKinds = [...]ValueKind{tagBool: ValueBool, tagInt: ValueInt, tagFloat: ValueFloat, tagString: ValueString, tagBytes: ValueBytes}

const (
	encFalse     = "\x01\x00"
	encTrue      = "\x01\x01"
	prefixString = "\x04"
	prefixBytes  = "\x05"
)

// canonicalNaN is the NaN every NaN is stored as (Java's
// Double.doubleToLongBits).
const canonicalNaN = 0x7ff8000000000000

// NewString returns a string value. Registrars refuse strings that are not
// valid UTF-8: use NewBytes for binary data.
func NewString(s string) Value { return Value{s: prefixString + s} }

// NewBytes returns a byte-string value holding a copy of b.
func NewBytes(b []byte) Value { return Value{s: prefixBytes + string(b)} }

// NewBool returns a boolean value.
func NewBool(b bool) Value {
	if b {
		return Value{s: encTrue}
	}
	return Value{s: encFalse}
}

// NewInt returns an integer value.
func NewInt(n int64) Value { return Value{s: string(appendInt(nil, n))} }

// NewFloat returns a floating-point value.
func NewFloat(f float64) Value { return Value{s: string(appendFloat(nil, f))} }

// appendInt appends the encoding of an int value.
func appendInt(b []byte, n int64) []byte {
	return binary.BigEndian.AppendUint64(append(b, tagInt), uint64(n)^1<<63)
}

// appendFloat appends the encoding of a float value: order-preserving,
// every bit of a negative number flipped, only the sign bit of a positive
// one.
func appendFloat(b []byte, f float64) []byte {
	bits := math.Float64bits(f)
	if f != f {
		bits = canonicalNaN
	}
	if bits&(1<<63) != 0 {
		bits = ^bits
	} else {
		bits |= 1 << 63
	}
	return binary.BigEndian.AppendUint64(append(b, tagFloat), bits)
}

// Kind returns the value's kind; ValueNull for the zero Value.
func (v Value) Kind() ValueKind {
	if v.s == "" {
		return ValueNull
	}
	return tagKinds[v.s[0]]
}

// IsNull reports whether v is the null value (the zero Value).
func (v Value) IsNull() bool { return v.s == "" }

func (v Value) payload() string {
	if v.s == "" {
		return ""
	}
	return v.s[1:]
}

// number returns a number's 8 bytes.
func (v Value) number() uint64 {
	var n uint64
	for i := 1; i < 9; i++ {
		n = n<<8 | uint64(v.s[i])
	}
	return n
}

// AsString returns a string value's string.
func (v Value) AsString() (string, bool) {
	if v.Kind() != ValueString {
		return "", false
	}
	return v.s[1:], true
}

// AsBytes returns a copy of a byte-string value's bytes.
func (v Value) AsBytes() ([]byte, bool) {
	if v.Kind() != ValueBytes {
		return nil, false
	}
	return []byte(v.s[1:]), true
}

// AsBool returns a bool value's bool.
func (v Value) AsBool() (bool, bool) {
	if v.Kind() != ValueBool {
		return false, false
	}
	return v.s[1] == 1, true
}

// AsInt returns an int value's number.
func (v Value) AsInt() (int64, bool) {
	if v.Kind() != ValueInt {
		return 0, false
	}
	return int64(v.number() ^ 1<<63), true
}

// AsFloat returns a float value's number.
func (v Value) AsFloat() (float64, bool) {
	if v.Kind() != ValueFloat {
		return 0, false
	}
	bits := v.number()
	if bits&(1<<63) != 0 {
		bits &^= 1 << 63
	} else {
		bits = ^bits
	}
	return math.Float64frombits(bits), true
}

// Interface returns the value as a Go value: a string, an int64, a
// float64, a bool, a new []byte, or nil for null.
func (v Value) Interface() any {
	switch v.Kind() {
	case ValueString:
		s, _ := v.AsString()
		return s
	case ValueInt:
		n, _ := v.AsInt()
		return n
	case ValueFloat:
		f, _ := v.AsFloat()
		return f
	case ValueBool:
		b, _ := v.AsBool()
		return b
	case ValueBytes:
		b, _ := v.AsBytes()
		return b
	}
	return nil
}

// size is the value's payload size, which counts toward
// Limits.MaxAttributeBytes: a string's or bytes' length, 8 for a number, 1
// for a bool, 0 for null.
func (v Value) size() int {
	if v.Kind() == ValueBool {
		return 1
	}
	return len(v.payload())
}

// Compare orders values: null first, then by kind (bool, int, float,
// string, bytes), numbers numerically (NaN after +Inf, -0.0 before 0.0),
// bools false first, strings and bytes bytewise. It returns -1, 0 or +1.
func (v Value) Compare(w Value) int { return strings.Compare(v.s, w.s) }

// String returns the value as Go would write it: "abc" quoted, 42, 1.5 or
// 2.0 (a float always shows a point or an exponent), true, bytes as 0x and
// hex digits (0x for no bytes), and null.
func (v Value) String() string {
	switch v.Kind() {
	case ValueString:
		return strconv.Quote(v.s[1:])
	case ValueBytes:
		return "0x" + hex.EncodeToString([]byte(v.s[1:]))
	case ValueBool:
		b, _ := v.AsBool()
		return strconv.FormatBool(b)
	case ValueInt:
		n, _ := v.AsInt()
		return strconv.FormatInt(n, 10)
	case ValueFloat:
		f, _ := v.AsFloat()
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eIN") {
			s += ".0"
		}
		return s
	}
	return "null"
}
