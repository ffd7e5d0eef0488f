package djinn_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
)

// TestCheckEndpoint: an endpoint a client or service hands in is
// host:port a client could dial — a DNS name, an IPv4 address or a
// bracketed IPv6 address, and a port from 1 to 65535; an address to
// listen on may have port 0 (any free port); an endpoint read back from
// a log or snapshot is checked as before the check was strict (any host
// bytes, port 0 to 65535), so what was accepted once still loads.
func TestCheckEndpoint(t *testing.T) {
	long := strings.Repeat("a", 63)
	for _, tc := range []struct {
		endpoint              string
		strict, listen, store bool
	}{
		{"127.0.0.1:4161", true, true, true},
		{"example.com:4161", true, true, true},
		{"LUS.Example:1", true, true, true},
		{"lookup.example.com.:7000", true, true, true},  // a final dot: fully qualified
		{"my_service:80", true, true, true},             // container and SRV-style names
		{"m:1", true, true, true},                       // a one-letter name
		{"xn--bcher-kva.example:443", true, true, true}, // an internationalized name, as DNS carries it
		{"[::1]:65535", true, true, true},               // IPv6 in brackets
		{"[fe80::1%eth0]:4160", true, true, true},       // with a zone
		{"[::ffff:10.0.0.1]:4160", true, true, true},    // IPv4-mapped IPv6
		{"127.0.0.1:000004161", true, true, true},       // a port's leading zeros
		{long + "." + long + "." + long + ".example:1", true, true, true},
		{"example.com:0", false, true, true}, // port 0: to listen on, not to dial
		{"127.0.0.1:0", false, true, true},
		{"127.0.0.1", false, false, false}, // no port
		{":4161", false, false, false},     // no host
		{"127.0.0.1:", false, false, false},
		{"127.0.0.1:http", false, false, false},
		{"127.0.0.1:65536", false, false, false},
		{"127.0.0.1:99999", false, false, false},
		{"127.0.0.1:123456789012345678901", false, false, false},
		{"::1:4161", false, false, false},        // IPv6 without brackets
		{"exa mple.com:80", false, false, true},  // a space
		{"example.com\n:80", false, false, true}, // a control character
		{"example.com\x00:80", false, false, true},
		{"user@example.com:80", false, false, true},    // user info
		{"example.com/path:80", false, false, true},    // a path
		{"http://example.com:80", false, false, false}, // a scheme
		{"example.com?x=1:80", false, false, true},
		{"exa%6dple.com:80", false, false, true},
		{"[example.com]:80", false, false, true}, // only IPv6 goes in brackets
		{"[127.0.0.1]:80", false, false, true},
		{"[::1%eth 0]:80", false, false, true}, // a zone with a space
		{"[::1%a/b]:80", false, false, true},
		{"bücher.example:80", false, false, true}, // not ASCII: give the xn-- form
		{"-lead.example:80", false, false, true},  // a label's hyphen first or last
		{"trail-.example:80", false, false, true},
		{"a..b:80", false, false, true}, // an empty label
		{"..:80", false, false, true},
		{long + "a.example:80", false, false, true},              // a label past 63 bytes
		{strings.Repeat("a.", 127) + "a:80", false, false, true}, // a name past 253 bytes
		{"1.2.3.999:80", false, false, true},                     // all digits: a mistyped address
		{"256.1.1.1:80", false, false, true},
		{"1234:80", false, false, true},
	} {
		for _, c := range []struct {
			name  string
			check func(string) error
			ok    bool
		}{{"CheckEndpoint", djinn.CheckEndpoint, tc.strict}, {"CheckListenAddress", djinn.CheckListenAddress, tc.listen}, {"CheckStoredEndpoint", djinn.CheckStoredEndpoint, tc.store}} {
			err := c.check(tc.endpoint)
			if (err == nil) != c.ok {
				t.Errorf("%s(%q) = %v, want ok %v", c.name, tc.endpoint, err, c.ok)
			}
			if err != nil && !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Errorf("%s(%q): kind %v, want InvalidArgument", c.name, tc.endpoint, djinn.KindOf(err))
			}
		}
		if err := djinn.CheckEndpoint(tc.endpoint); err != nil && len(tc.endpoint) < 100 {
			// The refusal names the bad value, quoted, and says what a
			// valid one looks like.
			if !strings.Contains(err.Error(), strconv.Quote(tc.endpoint)) || !strings.Contains(err.Error(), "want") {
				t.Errorf("CheckEndpoint(%q) = %q: does not name the endpoint or say what a valid one is", tc.endpoint, err)
			}
		}
	}
	if err := djinn.CheckEndpoint(strings.Repeat("a", 400) + ":80"); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("CheckEndpoint of 403 bytes = %v, want refused as too long", err)
	}
}

// FuzzCheckEndpoint: the checks never panic, refuse only with
// InvalidArgument, and nest: an endpoint CheckEndpoint takes is one to
// listen on too, and one to listen on still loads when read back; what
// the strict check takes has no space, control character, user info,
// path or query in it.
func FuzzCheckEndpoint(f *testing.F) {
	for _, s := range []string{"127.0.0.1:4161", "[::1]:1", "[fe80::1%eth0]:80", "example.com.:0", "a b:1", "user@h:1", "[h]:1", "1.2.3.4.5:1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		strict, listen, stored := djinn.CheckEndpoint(s), djinn.CheckListenAddress(s), djinn.CheckStoredEndpoint(s)
		for _, err := range []error{strict, listen, stored} {
			if err != nil && !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("%q: %v is not InvalidArgument", s, err)
			}
		}
		if strict == nil && listen != nil || listen == nil && stored != nil {
			t.Fatalf("%q: strict %v, listen %v, stored %v: the checks do not nest", s, strict, listen, stored)
		}
		if listen == nil && strings.ContainsAny(s, " \t\r\n\x00@/?#\\") {
			t.Fatalf("%q: taken with a space, control character, user info, path or query in it", s)
		}
	})
}
