package djinn_test

import (
	"testing"

	"github.com/djinn-go/djinn"
)

// TestCheckEndpoint: an endpoint is host:port with a port a client could
// dial, 0 to 65535.
func TestCheckEndpoint(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		ok       bool
	}{
		{"127.0.0.1:4161", true},
		{"example.com:0", true},
		{"[::1]:65535", true},
		{"127.0.0.1", false},
		{":4161", false},
		{"127.0.0.1:", false},
		{"127.0.0.1:http", false},
		{"127.0.0.1:65536", false},
		{"127.0.0.1:99999", false},
		{"127.0.0.1:000004161", true},
		{"127.0.0.1:123456789012345678901", false},
	} {
		err := djinn.CheckEndpoint(tc.endpoint)
		if (err == nil) != tc.ok {
			t.Errorf("CheckEndpoint(%q) = %v, want ok %v", tc.endpoint, err, tc.ok)
		}
		if err != nil && djinn.KindOf(err) != djinn.InvalidArgument {
			t.Errorf("CheckEndpoint(%q): kind %v, want InvalidArgument", tc.endpoint, djinn.KindOf(err))
		}
	}
}
