package discovery

import (
	"errors"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
)

func TestParseLocator(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Locator
		str  string
	}{
		// DJ.6.1: the four forms, port 4160 by default.
		{"jini://lus.example", Locator{"lus.example", 4160}, "jini://lus.example:4160/"},
		{"jini://lus.example/", Locator{"lus.example", 4160}, "jini://lus.example:4160/"},
		{"jini://lus.example:4161", Locator{"lus.example", 4161}, "jini://lus.example:4161/"},
		{"jini://lus.example:4161/", Locator{"lus.example", 4161}, "jini://lus.example:4161/"},
		// Scheme and host names are case-insensitive; host names come out lower case.
		{"JINI://LUS.Example", Locator{"lus.example", 4160}, "jini://lus.example:4160/"},
		{"jini://localhost", Locator{"localhost", 4160}, "jini://localhost:4160/"},
		{"jini://a-b.c9.example.", Locator{"a-b.c9.example.", 4160}, "jini://a-b.c9.example.:4160/"},
		{"jini://10.0.0.1:1", Locator{"10.0.0.1", 1}, "jini://10.0.0.1:1/"},
		{"jini://host:65535", Locator{"host", 65535}, "jini://host:65535/"},
		// An empty port is no port, as in Java; leading zeros are allowed.
		{"jini://host:", Locator{"host", 4160}, "jini://host:4160/"},
		{"jini://host:004161", Locator{"host", 4161}, "jini://host:4161/"},
		// IPv6 in brackets, canonicalized.
		{"jini://[::1]", Locator{"::1", 4160}, "jini://[::1]:4160/"},
		{"jini://[2001:DB8:0:0::1]:99/", Locator{"2001:db8::1", 99}, "jini://[2001:db8::1]:99/"},
		{"jini://[::ffff:10.0.0.1]", Locator{"::ffff:10.0.0.1", 4160}, "jini://[::ffff:10.0.0.1]:4160/"},
	} {
		got, err := ParseLocator(tc.in)
		if err != nil {
			t.Errorf("ParseLocator(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseLocator(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		if s := got.String(); s != tc.str {
			t.Errorf("ParseLocator(%q).String() = %q, want %q", tc.in, s, tc.str)
		}
		if again, err := ParseLocator(got.String()); err != nil || again != got {
			t.Errorf("ParseLocator(%q) = %+v, %v; want %+v", got.String(), again, err, got)
		}
	}
}

func TestParseLocatorRejects(t *testing.T) {
	for _, tc := range []struct {
		name, in, msg string
	}{
		{"DJ.6.1 scheme must be jini", "http://host", `scheme "http"`},
		{"DJ.6.1 scheme must be present", "//host", `not a jini:// url`},
		{"DJ.6.1 authority must be present", "jini:host", `no //host`},
		{"DJ.6.1 empty", "", `not a jini:// url`},
		{"DJ.6.1 no user info", "jini://user@host", `user info`},
		{"DJ.6.1 no user info with port", "jini://user:pw@host:4160", `user info`},
		{"DJ.6.1 path must be / or none", "jini://host/lookup", `path "/lookup"`},
		{"DJ.6.1 no path segments", "jini://host//", `path "//"`},
		{"DJ.6.1 no query", "jini://host/?x=1", `query`},
		{"DJ.6.1 no query without path", "jini://host?x", `query`},
		{"DJ.6.1 no fragment", "jini://host#top", `fragment`},
		{"DJ.6.1 host must be present", "jini://", `empty host`},
		{"DJ.6.1 host must be present with port", "jini://:4160", `empty host`},
		{"DJ.6.1 empty brackets", "jini://[]:4160", `empty host`},
		{"DJ.6.1 port 0", "jini://host:0", `port "0": must be 1 to 65535`},
		{"DJ.6.1 port above 65535", "jini://host:65536", `port "65536": must be 1 to 65535`},
		{"DJ.6.1 huge port", "jini://host:99999999999999999999", `must be 1 to 65535`},
		{"port not a number", "jini://host:http", `port "http": not a decimal number`},
		{"negative port", "jini://host:-1", `not a decimal number`},
		{"RFC 2732 ipv6 needs brackets", "jini://::1", `must be in brackets`},
		{"RFC 2732 unclosed bracket", "jini://[::1", `no ]`},
		{"RFC 2732 junk after bracket", "jini://[::1]x", `"x" after the ipv6 address`},
		{"RFC 2732 brackets hold ipv6 only", "jini://[10.0.0.1]", `not an ipv6 address`},
		{"RFC 2732 not an address", "jini://[fe80::zz]", `not an ipv6 address`},
		{"ipv6 zones not allowed", "jini://[fe80::1%25eth0]", `zones are not allowed`},
		{"RFC 2396 bad ipv4", "jini://10.0.0.256", `not an ipv4 address`},
		{"RFC 2396 ipv4 with three parts", "jini://1.2.3", `not an ipv4 address`},
		{"RFC 2396 underscore", "jini://my_host", `character '_'`},
		{"RFC 2396 percent escape", "jini://h%41st", `character '%'`},
		{"RFC 2396 space", "jini://ho st", `character ' '`},
		{"RFC 2396 empty label", "jini://a..b", `empty label`},
		{"RFC 2396 leading hyphen", "jini://-a.example", `hyphen`},
		{"RFC 2396 trailing hyphen", "jini://a-.example", `hyphen`},
		{"RFC 2396 top label starts with a letter", "jini://a.9b", `must start with a letter`},
		{"DNS label length", "jini://" + strings.Repeat("a", 64) + ".example", `longer than 63`},
		{"DNS name length", "jini://" + strings.Repeat("a.", 127) + "ab", `longer than 253`},
		{"input length", "jini://" + strings.Repeat("a", 1100), `longer than 1024`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := ParseLocator(tc.in)
			if err == nil {
				t.Fatalf("ParseLocator(%q) = %+v, want an error", tc.in, l)
			}
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Errorf("error %v is of kind %v, want invalid argument", err, djinn.KindOf(err))
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			if len(tc.in) <= maxLocatorLen && !strings.Contains(err.Error(), tc.in) {
				t.Errorf("error %q does not name the input %q", err, tc.in)
			}
		})
	}
}

func TestNewLocator(t *testing.T) {
	for _, tc := range []struct {
		host string
		port int
		want Locator
		msg  string
	}{
		{host: "LUS.example", port: 4160, want: Locator{"lus.example", 4160}},
		{host: "::1", port: 1, want: Locator{"::1", 1}},
		{host: "[::1]", port: 1, want: Locator{"::1", 1}},
		{host: "2001:db8:0::1", port: 2, want: Locator{"2001:db8::1", 2}},
		{host: "", port: 4160, msg: "empty"},
		{host: "[::1", port: 4160, msg: "no ]"},
		{host: "a_b", port: 4160, msg: "character '_'"},
		{host: "host", port: 0, msg: "port 0: must be 1 to 65535"},
		{host: "host", port: 65536, msg: "port 65536"},
		{host: "host", port: -1, msg: "port -1"},
	} {
		got, err := NewLocator(tc.host, tc.port)
		if tc.msg != "" {
			if err == nil || !strings.Contains(err.Error(), tc.msg) || !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Errorf("NewLocator(%q, %d) = %+v, %v; want an invalid argument error saying %q", tc.host, tc.port, got, err, tc.msg)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("NewLocator(%q, %d) = %+v, %v; want %+v", tc.host, tc.port, got, err, tc.want)
		}
		if got.check() != nil {
			t.Errorf("NewLocator(%q, %d) is not canonical: %v", tc.host, tc.port, got.check())
		}
	}
	if err := (Locator{"LUS", 4160}).check(); err == nil || !strings.Contains(err.Error(), "not canonical") {
		t.Errorf("check of a locator with an upper-case host: %v", err)
	}
}

func TestLocatorAddr(t *testing.T) {
	for l, want := range map[Locator]string{
		{"lus.example", 4160}: "lus.example:4160",
		{"::1", 99}:           "[::1]:99",
	} {
		if got := l.Addr(); got != want {
			t.Errorf("%+v.Addr() = %q, want %q", l, got, want)
		}
	}
}
