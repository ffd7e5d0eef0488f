package discovery

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/djinn-go/djinn"
)

// maxString is the longest string a 2-byte length prefix can carry.
const maxString = 0xFFFF

// maxCount is the largest count a 2-byte count field can carry.
const maxCount = 0xFFFF

// checkString reports why s cannot travel as a discovery string, or nil.
//
// The spec encodes strings with Java's writeUTF (modified UTF-8), while
// River's plaintext multicast code uses standard UTF-8; the two agree on
// every character of the Basic Multilingual Plane except U+0000. So strings
// are held to that common ground in both directions: valid UTF-8 (no
// overlong forms such as modified UTF-8's C0 80, no surrogates), no NUL and
// no character above U+FFFF. Whatever we send is then read the same by every
// Jini peer, and whatever we accept means one thing.
func checkString(s string) error {
	if len(s) > maxString {
		return fmt.Errorf("%d bytes: longer than %d", len(s), maxString)
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return fmt.Errorf("invalid utf-8 at byte %d", i)
		case r == 0:
			return fmt.Errorf("nul character at byte %d", i)
		case r > 0xFFFF:
			return fmt.Errorf("character %U at byte %d is outside the basic multilingual plane, which Jini peers encode differently", r, i)
		}
		i += size
	}
	return nil
}

// appendString appends a checked string: its length in two bytes, then its
// bytes.
func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

// reader decodes one message held whole in memory. The first error sticks:
// later reads return zero values, so decoders read straight through and look
// at err once.
type reader struct {
	buf  []byte
	off  int
	what string // the message, for errors: "multicast request"
	err  error
}

func (r *reader) left() int { return len(r.buf) - r.off }

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) failf(format string, args ...any) {
	r.fail(malformed(r.what+": "+format, args...))
}

// take returns the next n bytes.
func (r *reader) take(n int, field string) ([]byte, bool) {
	if r.err != nil {
		return nil, false
	}
	if n > r.left() {
		r.failf("truncated: %s needs %d bytes at offset %d, %d left", field, n, r.off, r.left())
		return nil, false
	}
	b := r.buf[r.off : r.off+n]
	r.off += n
	return b, true
}

func (r *reader) u8(field string) byte {
	b, ok := r.take(1, field)
	if !ok {
		return 0
	}
	return b[0]
}

func (r *reader) u16(field string) int {
	b, ok := r.take(2, field)
	if !ok {
		return 0
	}
	return int(binary.BigEndian.Uint16(b))
}

func (r *reader) u32(field string) uint32 {
	b, ok := r.take(4, field)
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func (r *reader) u64(field string) uint64 {
	b, ok := r.take(8, field)
	if !ok {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func (r *reader) id(field string) djinn.ID {
	var id djinn.ID
	if b, ok := r.take(len(id), field); ok {
		copy(id[:], b)
	}
	return id
}

// str reads a string: a 2-byte length, then that many bytes, which must pass
// checkString.
func (r *reader) str(field string) string {
	n := r.u16(field + " length")
	b, ok := r.take(n, field)
	if !ok {
		return ""
	}
	s := string(b)
	if err := checkString(s); err != nil {
		r.failf("%s %q: %v", field, abbrev(s), err)
		return ""
	}
	return s
}

// count reads a 2-byte count of items at least each bytes long, and fails
// unless the bytes left could hold that many: no decoder allocates for
// items the message cannot contain.
func (r *reader) count(field string, each int) int {
	n := r.u16(field)
	if r.err == nil && n*each > r.left() {
		r.failf("%s %d: the %d bytes left hold at most %d", field, n, r.left(), r.left()/each)
		return 0
	}
	return n
}

// check records a validation failure of a decoded field.
func (r *reader) check(field string, err error) {
	if err != nil && r.err == nil {
		r.failf("%s: %v", field, err)
	}
}

// end fails if bytes are left over.
func (r *reader) end() {
	if r.err == nil && r.left() != 0 {
		r.failf("%d trailing bytes after offset %d", r.left(), r.off)
	}
}
