package discovery

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultPort is the port of a jini:// URL that names none, and the port of
// both multicast groups: 4160, which is 0xCAFE - 0xBABE.
const DefaultPort = 4160

// maxLocatorLen bounds the input ParseLocator looks at.
const maxLocatorLen = 1024

// Locator is where a lookup service's unicast discovery server listens: the
// host and port of a jini:// URL (DJ.6.1).
//
// Locators from ParseLocator and NewLocator are canonical: a host name in
// lower case, an IPv4 address in dotted decimal, or an IPv6 address in its
// compressed form without brackets. So == on them is River's
// LookupLocator.equals (which ignores the case of host names), and more:
// two spellings of one IPv6 address are equal, where River tells them apart.
type Locator struct {
	Host string
	Port int
}

// ParseLocator parses a jini:// URL: "jini://host", "jini://host/",
// "jini://host:port" or "jini://host:port/", the four forms of DJ.6.1. The
// port defaults to 4160; an IPv6 address goes in brackets. The scheme is
// case-insensitive, as in any URL. User info, a path other than "/", a query
// or a fragment, an empty host and a port outside 1 to 65535 are errors of
// kind djinn.InvalidArgument that quote the input.
//
// Host names follow RFC 2396 section 3.2.2, as Java's URI parser (and so
// River's LookupLocator) does: letters, digits and inner hyphens in labels
// of up to 63 bytes, the last label starting with a letter, an optional
// final dot. Underscores, percent escapes and IPv6 zones are rejected.
func ParseLocator(s string) (Locator, error) {
	if len(s) > maxLocatorLen {
		return Locator{}, invalid("locator %q: %d bytes, longer than %d", abbrev(s), len(s), maxLocatorLen)
	}
	fail := func(format string, args ...any) (Locator, error) {
		return Locator{}, invalid("locator %q: "+format, append([]any{s}, args...)...)
	}
	scheme, rest, ok := strings.Cut(s, ":")
	if !ok {
		return fail("not a jini:// url")
	}
	if !strings.EqualFold(scheme, "jini") {
		return fail("scheme %q: want jini", scheme)
	}
	rest, ok = strings.CutPrefix(rest, "//")
	if !ok {
		return fail("no //host after jini:")
	}
	auth, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		auth, tail = rest[:i], rest[i:]
	}
	switch {
	case strings.Contains(tail, "#"):
		return fail("fragment not allowed")
	case strings.Contains(tail, "?"):
		return fail("query not allowed")
	case tail != "" && tail != "/":
		return fail("path %q: want \"/\" or none", tail)
	case strings.Contains(auth, "@"):
		return fail("user info not allowed")
	}

	var host, portText string
	var hasPort, bracketed bool
	if after, ok := strings.CutPrefix(auth, "["); ok {
		end := strings.IndexByte(after, ']')
		if end < 0 {
			return fail("no ] after the ipv6 address")
		}
		host, bracketed = after[:end], true
		switch rest := after[end+1:]; {
		case rest == "":
		case rest[0] == ':':
			portText, hasPort = rest[1:], true
		default:
			return fail("%q after the ipv6 address: want :port or nothing", rest)
		}
	} else {
		if strings.Count(auth, ":") > 1 {
			return fail("an ipv6 address must be in brackets")
		}
		host, portText, hasPort = strings.Cut(auth, ":")
	}
	if host == "" {
		return fail("empty host")
	}
	port := DefaultPort
	// "jini://host:" has an empty port, which URLs allow and Java reads as
	// no port at all.
	if hasPort && portText != "" {
		var err error
		if port, err = parsePort(portText); err != nil {
			return fail("%v", err)
		}
	}
	h, err := canonicalHost(host, bracketed)
	if err != nil {
		return fail("%v", err)
	}
	return Locator{Host: h, Port: port}, nil
}

// NewLocator returns the canonical locator of a host and port. The host is
// a host name, an IPv4 address or an IPv6 address with or without brackets;
// the port is 1 to 65535. Bad values get an error of kind
// djinn.InvalidArgument.
func NewLocator(host string, port int) (Locator, error) {
	if port < 1 || port > 65535 {
		return Locator{}, invalid("locator port %d: must be 1 to 65535", port)
	}
	bracketed := false
	if inner, ok := strings.CutPrefix(host, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		if !ok {
			return Locator{}, invalid("locator host %q: no ] after the ipv6 address", abbrev(host))
		}
		host, bracketed = inner, true
	}
	if host == "" {
		return Locator{}, invalid("locator host: empty")
	}
	h, err := canonicalHost(host, bracketed)
	if err != nil {
		return Locator{}, invalid("locator %v", err)
	}
	return Locator{Host: h, Port: port}, nil
}

// String returns the locator as River's LookupLocator.toString does:
// "jini://host:port/", always with the port and the final slash, the host
// of an IPv6 address in brackets. ParseLocator(l.String()) == l for every
// canonical l.
func (l Locator) String() string {
	host := l.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return "jini://" + host + ":" + strconv.Itoa(l.Port) + "/"
}

// Addr returns "host:port" for net.Dial, the host of an IPv6 address in
// brackets.
func (l Locator) Addr() string { return net.JoinHostPort(l.Host, strconv.Itoa(l.Port)) }

// check reports why l is not a canonical locator, or nil.
func (l Locator) check() error {
	c, err := NewLocator(l.Host, l.Port)
	if err != nil {
		return err
	}
	if c != l {
		return invalid("locator host %q: not canonical, want %q", abbrev(l.Host), c.Host)
	}
	return nil
}

// parsePort parses decimal digits into a port, 1 to 65535. Leading zeros are
// allowed, as Java allows them.
func parsePort(s string) (int, error) {
	if s == "" {
		return 0, invalid("empty port")
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, invalid("port %q: not a decimal number", abbrev(s))
		}
		if n = n*10 + int(c-'0'); n > 65535 {
			return 0, invalid("port %q: must be 1 to 65535", abbrev(s))
		}
	}
	if n == 0 {
		return 0, invalid("port %q: must be 1 to 65535", s)
	}
	return n, nil
}

// canonicalHost checks a host (without brackets) and returns its canonical
// form. bracketed says it came in brackets, so it must be an IPv6 address.
func canonicalHost(host string, bracketed bool) (string, error) {
	if bracketed || strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return "", invalid("host %q: not an ipv6 address", abbrev(host))
		}
		if a.Zone() != "" {
			return "", invalid("host %q: ipv6 zones are not allowed", abbrev(host))
		}
		return a.String(), nil
	}
	if strings.Trim(host, "0123456789.") == "" {
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is4() {
			return "", invalid("host %q: not an ipv4 address", abbrev(host))
		}
		return a.String(), nil
	}
	if err := checkHostName(host); err != nil {
		return "", err
	}
	return strings.ToLower(host), nil
}

// checkHostName checks an RFC 2396 host name (section 3.2.2) and the DNS
// length limits.
func checkHostName(host string) error {
	name := strings.TrimSuffix(host, ".")
	if len(name) > 253 {
		return invalid("host %q: %d bytes, longer than 253", abbrev(host), len(name))
	}
	labels := strings.Split(name, ".")
	for i, label := range labels {
		if label == "" {
			return invalid("host %q: empty label", abbrev(host))
		}
		if len(label) > 63 {
			return invalid("host %q: label of %d bytes, longer than 63", abbrev(host), len(label))
		}
		for j := 0; j < len(label); j++ {
			c := label[j]
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
			if !ok {
				return invalid("host %q: character %q not allowed in a host name", abbrev(host), c)
			}
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return invalid("host %q: label %q starts or ends with a hyphen", abbrev(host), label)
		}
		if i == len(labels)-1 && !(label[0] >= 'a' && label[0] <= 'z' || label[0] >= 'A' && label[0] <= 'Z') {
			return invalid("host %q: last label %q must start with a letter", abbrev(host), label)
		}
	}
	return nil
}
