package discovery

import (
	"errors"
	"fmt"

	"github.com/djinn-go/djinn"
)

// The package's sentinel errors. Every error a decoder or reader returns
// matches one of them with errors.Is, and also the djinn error kind named
// beside it, so the network layer can decide what to log and the edge can map
// it without knowing this package. Encoders and NewLocator/ParseLocator reject
// bad arguments with plain errors of kind djinn.InvalidArgument.
var (
	// ErrMalformed: bytes that break the layout: truncated, trailing bytes,
	// a count larger than the bytes left can hold, a bad string, a field out
	// of range. Kind InvalidArgument.
	ErrMalformed = errors.New("malformed discovery message")
	// ErrVersion: a discovery protocol version other than 2 (version 1
	// answers carry Java-serialized proxies, which djinn never reads or
	// writes). Kind Unsupported.
	ErrVersion = errors.New("unsupported discovery protocol version")
	// ErrFormat: a discovery format this package does not speak, such as a
	// signed net.jini.discovery.x500.* multicast packet, or a unicast answer
	// in a format that was not proposed. Kind Unsupported.
	ErrFormat = errors.New("unsupported discovery format")
	// ErrNoFormat: unicast negotiation ended with the null format id: the
	// two sides share no discovery format. Kind Unsupported.
	ErrNoFormat = errors.New("no acceptable discovery format")
	// ErrTooLarge: a unicast message longer than the reader's limit. Kind
	// ResourceExhausted.
	ErrTooLarge = errors.New("discovery message too large")
)

// protoError is an error about bytes from the network: a message naming the
// bad value, a sentinel of this package and a djinn kind.
type protoError struct {
	msg      string
	sentinel error
	kind     djinn.Kind
}

func (e *protoError) Error() string   { return e.msg }
func (e *protoError) Unwrap() []error { return []error{e.sentinel, e.kind} }

func newProtoError(sentinel error, kind djinn.Kind, format string, args ...any) error {
	return &protoError{msg: fmt.Sprintf(format, args...), sentinel: sentinel, kind: kind}
}

func malformed(format string, args ...any) error {
	return newProtoError(ErrMalformed, djinn.InvalidArgument, format, args...)
}

func badVersion(what string, v uint32) error {
	return newProtoError(ErrVersion, djinn.Unsupported, "%s: protocol version %d: only version %d is supported", what, int32(v), ProtocolVersion)
}

func invalid(format string, args ...any) error {
	return djinn.Errorf(djinn.InvalidArgument, format, args...)
}

// abbrev shortens untrusted text quoted in an error.
func abbrev(s string) string {
	const max = 48
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
