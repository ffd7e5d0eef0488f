package djinn

import (
	"net"
	"strconv"
	"strings"
)

// Ref is a remote reference: the gRPC endpoint that serves an object, the id
// of the service the object belongs to and the object's own id. A Ref is what
// a client holds for a service, a registration, a listener or a landlord, as
// Jini clients held proxies.
//
// Two references are equal (Equal) when their service and object ids are
// equal: the endpoint is where to reach the object, not part of who it is.
type Ref struct {
	Endpoint string // host:port
	Service  ID
	Object   ID
}

// Equal reports whether r and o name the same object.
func (r Ref) Equal(o Ref) bool { return r.Service == o.Service && r.Object == o.Object }

// IsZero reports whether r is the zero Ref (no reference).
func (r Ref) IsZero() bool { return r == Ref{} }

// Key returns the identity of the referenced object, usable as a map key.
func (r Ref) Key() [32]byte {
	var k [32]byte
	copy(k[:16], r.Service[:])
	copy(k[16:], r.Object[:])
	return k
}

const refScheme = "djinn://"

// String returns the printable form djinn://host:port/SERVICE/OBJECT.
func (r Ref) String() string {
	return refScheme + r.Endpoint + "/" + r.Service.String() + "/" + r.Object.String()
}

// maxRefLen bounds parsing work on untrusted input.
const maxRefLen = 1024

// ParseRef parses the printable form of a reference.
func ParseRef(s string) (Ref, error) {
	var r Ref
	if len(s) > maxRefLen {
		return r, Errorf(InvalidArgument, "reference of %d bytes: longer than %d", len(s), maxRefLen)
	}
	rest, ok := strings.CutPrefix(s, refScheme)
	if !ok {
		return r, Errorf(InvalidArgument, "reference %q: want djinn://host:port/SERVICE/OBJECT", s)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return r, Errorf(InvalidArgument, "reference %q: want djinn://host:port/SERVICE/OBJECT", s)
	}
	if err := CheckEndpoint(parts[0]); err != nil {
		return r, Errorf(InvalidArgument, "reference %q: %v", s, err)
	}
	svc, err := ParseID(parts[1])
	if err != nil {
		return r, Errorf(InvalidArgument, "reference %q: service: %v", s, err)
	}
	obj, err := ParseID(parts[2])
	if err != nil {
		return r, Errorf(InvalidArgument, "reference %q: object: %v", s, err)
	}
	return Ref{Endpoint: parts[0], Service: svc, Object: obj}, nil
}

// CheckEndpoint checks that s is a host:port a client could dial.
func CheckEndpoint(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || port == "" {
		return Errorf(InvalidArgument, "endpoint %q: want host:port", s)
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return Errorf(InvalidArgument, "endpoint %q: port is not a number", s)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n > 65535 {
		return Errorf(InvalidArgument, "endpoint %q: port out of range (0 to 65535)", s)
	}
	return nil
}
