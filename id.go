package djinn

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
)

// ID is a 128-bit identifier: a service id, an object id, a lease cookie.
// IDs that grant access (cookies, registration ids) come from crypto/rand and
// are capabilities: knowing one is the right to use it.
type ID [16]byte

// NewID returns a random ID from crypto/rand.
func NewID() ID {
	// rand.Read's buffer escapes (it may be any io.Reader's): a pooled one
	// keeps an ID from costing an allocation.
	b := idBuffers.Get().(*ID)
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand.Read never fails on supported platforms (Go 1.24+).
		panic("djinn: crypto/rand failed: " + err.Error())
	}
	id := *b
	*b = ID{}
	idBuffers.Put(b)
	return id
}

// idBuffers are NewID's buffers.
var idBuffers = sync.Pool{New: func() any { return new(ID) }}

// String returns the ID as 32 lower-case hex digits.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// LogValue makes a logged ID its 32 hex digits, in every slog handler (a
// JSON handler would otherwise write its 16 bytes as a list of numbers).
func (id ID) LogValue() slog.Value { return slog.StringValue(id.String()) }

// IsZero reports whether the ID is all zeros (absent).
func (id ID) IsZero() bool { return id == ID{} }

// ParseID parses 32 hex digits (dashes, as in UUIDs, are allowed).
func ParseID(s string) (ID, error) {
	var id ID
	clean := make([]byte, 0, 32)
	for i := 0; i < len(s); i++ {
		if s[i] != '-' {
			clean = append(clean, s[i])
		}
	}
	if len(clean) != 32 {
		return id, Errorf(InvalidArgument, "id %q: want 32 hex digits", s)
	}
	if _, err := hex.Decode(id[:], clean); err != nil {
		return id, Errorf(InvalidArgument, "id %q: not hex", s)
	}
	return id, nil
}

// IDFromBytes converts a wire id. what names the field in the error.
func IDFromBytes(what string, b []byte) (ID, error) {
	var id ID
	if len(b) != len(id) {
		if len(b) == 0 {
			return id, Errorf(InvalidArgument, "%s: missing", what)
		}
		return id, Errorf(InvalidArgument, "%s: %d bytes, want 16", what, len(b))
	}
	copy(id[:], b)
	return id, nil
}
