package lookup

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind is the type of a field value.
type Kind uint8

// The kinds of value, in the order Compare sorts them. A kind's number is
// the first byte of a Value's encoding: never renumber them.
const (
	// KindInvalid is the kind of the zero Value, which is no value at all
	// (a null field is a nil *Value, not a zero Value).
	KindInvalid Kind = iota
	KindBool
	KindInt64
	KindFloat64
	KindString
	KindBytes
)

var kindNames = [...]string{"invalid", "bool", "int64", "float64", "string", "bytes"}

// String returns the kind's name: "bool", "int64", "float64", "string",
// "bytes", or "invalid".
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is a field value of a simple type: a string, an int64, a float64, a
// bool or a byte string. It is immutable and comparable: == is the equality
// entry matching uses, and a Value can be a map key.
//
// A Value is one string: a byte giving its kind, then the payload (the
// string's or bytes' contents, a bool's byte, or a number's 8 bytes encoded
// so that byte order is numeric order). So a Value costs 16 bytes plus its
// payload, and Compare is a string comparison.
//
// Floats compare as Java's Double.equals does, which Jini's entry matching
// uses: by bits, so every NaN equals every other NaN (they are stored as
// one canonical NaN) and 0.0 differs from -0.0.
//
// The zero Value is invalid: the registry refuses it. Build values with
// NewString, NewInt64, NewFloat64, NewBool and NewBytes.
type Value struct {
	s string
}

// The encodings' first bytes, and a bool's whole encodings.
const (
	prefixString = string(rune(KindString))
	prefixBytes  = string(rune(KindBytes))
	encFalse     = string(rune(KindBool)) + "\x00"
	encTrue      = string(rune(KindBool)) + "\x01"
)

// canonicalNaN is the NaN every NaN is stored as (Java's
// Double.doubleToLongBits).
const canonicalNaN = 0x7ff8000000000000

// NewString returns a string value. The registry refuses strings that are
// not valid UTF-8 (use NewBytes for binary data).
func NewString(s string) *Value { return &Value{s: prefixString + s} }

// NewBytes returns a byte-string value holding a copy of b.
func NewBytes(b []byte) *Value { return &Value{s: prefixBytes + string(b)} }

// NewBool returns a bool value.
func NewBool(b bool) *Value {
	if b {
		return &Value{s: encTrue}
	}
	return &Value{s: encFalse}
}

// NewInt64 returns an int64 value.
func NewInt64(n int64) *Value { return number(KindInt64, uint64(n)^1<<63) }

// NewFloat64 returns a float64 value.
func NewFloat64(f float64) *Value {
	bits := math.Float64bits(f)
	if f != f {
		bits = canonicalNaN
	}
	// Order-preserving: flip every bit of a negative number, only the sign
	// bit of a positive one.
	if bits&(1<<63) != 0 {
		bits = ^bits
	} else {
		bits |= 1 << 63
	}
	return number(KindFloat64, bits)
}

func number(k Kind, key uint64) *Value {
	var b [9]byte
	b[0] = byte(k)
	binary.BigEndian.PutUint64(b[1:], key)
	return &Value{s: string(b[:])}
}

// Kind returns the value's kind; KindInvalid for the zero Value.
func (v Value) Kind() Kind {
	if v.s == "" {
		return KindInvalid
	}
	return Kind(v.s[0])
}

func (v Value) payload() string {
	if v.s == "" {
		return ""
	}
	return v.s[1:]
}

// key returns a number's 8 bytes.
func (v Value) key() uint64 {
	var k uint64
	for i := 1; i < 9; i++ {
		k = k<<8 | uint64(v.s[i])
	}
	return k
}

// AsString returns a string value's string.
func (v Value) AsString() (string, bool) {
	if v.Kind() != KindString {
		return "", false
	}
	return v.payload(), true
}

// AsBytes returns a copy of a byte-string value's bytes.
func (v Value) AsBytes() ([]byte, bool) {
	if v.Kind() != KindBytes {
		return nil, false
	}
	return []byte(v.payload()), true
}

// AsBool returns a bool value's bool.
func (v Value) AsBool() (bool, bool) {
	if v.Kind() != KindBool {
		return false, false
	}
	return v.s[1] == 1, true
}

// AsInt64 returns an int64 value's number.
func (v Value) AsInt64() (int64, bool) {
	if v.Kind() != KindInt64 {
		return 0, false
	}
	return int64(v.key() ^ 1<<63), true
}

// AsFloat64 returns a float64 value's number.
func (v Value) AsFloat64() (float64, bool) {
	if v.Kind() != KindFloat64 {
		return 0, false
	}
	bits := v.key()
	if bits&(1<<63) != 0 {
		bits &^= 1 << 63
	} else {
		bits = ^bits
	}
	return math.Float64frombits(bits), true
}

// size is the value's payload size, which counts toward
// Limits.MaxAttributeBytes: a string's or bytes' length, 8 for a number, 1
// for a bool.
func (v Value) size() int { return len(v.payload()) }

// Compare orders values: by kind (bool, int64, float64, string, bytes),
// then numbers numerically (NaN after +Inf, -0.0 before 0.0), bools false
// first, strings and bytes bytewise. It returns -1, 0 or +1.
func (v Value) Compare(w Value) int { return strings.Compare(v.s, w.s) }

// String returns the value as Go would write it: "abc" quoted, 42, 1.5 or
// 2.0 (a float always shows a point or an exponent), true, and bytes as
// 0x and hex digits (0x for no bytes).
func (v Value) String() string {
	switch v.Kind() {
	case KindString:
		return strconv.Quote(v.payload())
	case KindBytes:
		return "0x" + hex.EncodeToString([]byte(v.payload()))
	case KindBool:
		b, _ := v.AsBool()
		return strconv.FormatBool(b)
	case KindInt64:
		n, _ := v.AsInt64()
		return strconv.FormatInt(n, 10)
	case KindFloat64:
		f, _ := v.AsFloat64()
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eIN") {
			s += ".0"
		}
		return s
	case KindInvalid:
		return "invalid"
	}
	return fmt.Sprintf("invalid(%q)", v.s)
}

// valid reports whether v is a value the constructors can make.
func (v Value) valid() bool {
	switch v.Kind() {
	case KindString, KindBytes:
		return true
	case KindBool:
		return len(v.s) == 2 && v.s[1] <= 1
	case KindInt64, KindFloat64:
		return len(v.s) == 9
	}
	return false
}
