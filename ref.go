package djinn

import (
	"net"
	"net/netip"
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

// maxEndpointLen bounds an endpoint: a DNS name's 253 bytes, a port
// and room for an IPv6 literal's brackets and zone.
const maxEndpointLen = 300

// validEndpoint and validHost say what a valid endpoint looks like, for
// errors.
const (
	validEndpoint = "want host:port, the host a DNS name, an IPv4 address or an IPv6 address in brackets ([::1]), the port %d to 65535"
	validHost     = "want a DNS name (letters, digits, hyphens and dots; no spaces, user names, paths or schemes), an IPv4 address or an IPv6 address in brackets ([::1])"
)

// CheckEndpoint checks that s is an endpoint a client could dial, as a
// client or service hands one in: host:port, where host is a DNS name
// (dot-separated labels of letters, digits, hyphens and underscores, at
// most 63 bytes each and 253 in all, not all digits; an optional final
// dot), an IPv4 address, or an IPv6 address in brackets (with an
// optional zone), and port is a decimal number from 1 to 65535.
//
// Endpoints accepted before this check was strict are in logs and
// snapshots, and in the answers that carry them back: code that reads
// them back checks them with CheckStoredEndpoint, so that what was
// accepted once is never refused.
func CheckEndpoint(s string) error {
	return checkEndpoint(s, 1)
}

// CheckListenAddress checks an address to listen on, as a server's
// configuration gives it: an endpoint as CheckEndpoint takes it, whose
// port may also be 0 (any free port).
func CheckListenAddress(s string) error {
	return checkEndpoint(s, 0)
}

func checkEndpoint(s string, minPort int) error {
	if len(s) > maxEndpointLen {
		return Errorf(InvalidArgument, "endpoint of %d bytes: longer than %d; "+validEndpoint, len(s), maxEndpointLen, minPort)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" || port == "" {
		return Errorf(InvalidArgument, "endpoint %q: "+validEndpoint, s, minPort)
	}
	if err := checkPort(s, port, minPort); err != nil {
		return err
	}
	if strings.HasPrefix(s, "[") {
		// SplitHostPort takes any host in brackets: only an IPv6
		// address belongs there.
		if a, err := netip.ParseAddr(host); err != nil || !a.Is6() || !zoneName(a.Zone()) {
			return Errorf(InvalidArgument, "endpoint %q: %q in brackets: want an IPv6 address ([::1]); a name or an IPv4 address goes without brackets", s, host)
		}
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil && !strings.Contains(host, ":") {
		return nil // IPv4
	}
	if !dnsName(host) {
		return Errorf(InvalidArgument, "endpoint %q: host %q: %s", s, host, validHost)
	}
	return nil
}

func checkPort(s, port string, minPort int) error {
	for _, c := range port {
		if c < '0' || c > '9' {
			return Errorf(InvalidArgument, "endpoint %q: port is not a number: want one from %d to 65535", s, minPort)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < minPort || n > 65535 {
		return Errorf(InvalidArgument, "endpoint %q: port out of range: want %d to 65535", s, minPort)
	}
	return nil
}

// zoneName reports whether z is an IPv6 zone as CheckEndpoint takes it
// (none, or an interface's name or number): ASCII letters, digits, dots,
// hyphens and underscores.
func zoneName(z string) bool {
	for i := range len(z) {
		switch c := z[i]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '.', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// dnsName reports whether s is a DNS name as CheckEndpoint takes it:
// dot-separated labels of ASCII letters, digits, hyphens (not first or
// last) and underscores, each 1 to 63 bytes, 253 bytes in all without an
// optional final dot, with a letter, hyphen or underscore somewhere (an
// all-digit name such as 1.2.3.999 is a mistyped address).
func dnsName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	nonDigit := false
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := range len(label) {
			switch c := label[i]; {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-', c == '_':
				nonDigit = true
			default:
				return false
			}
		}
	}
	return nonDigit
}

// CheckStoredEndpoint checks an endpoint read back — from the replicated
// log, a snapshot, or an answer that carries one stored there — as
// CheckEndpoint checked endpoints before it was strict: host:port, the
// host any bytes, the port 0 to 65535. What was accepted once must load
// and replay as it did; new endpoints take CheckEndpoint.
func CheckStoredEndpoint(s string) error {
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
