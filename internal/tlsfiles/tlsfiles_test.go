package tlsfiles

import (
	"os"
	"strings"
	"testing"

	"github.com/djinn-go/djinn/internal/testpki"
)

// FuzzParseCAs: any bytes read as a CA bundle are refused or give a pool
// and the earliest end of its certificates; never a panic.
func FuzzParseCAs(f *testing.F) {
	pki := testpki.NewPKI(f)
	ca, err := os.ReadFile(pki.CA)
	if err != nil {
		f.Fatal(err)
	}
	key, err := os.ReadFile(pki.ServerKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ca)
	f.Add(append(append([]byte{}, ca...), ca[:len(ca)/2]...)) // cut short
	f.Add(append(append([]byte{}, key...), ca...))            // a key block first
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		roots, earliest, err := ParseCAs(data)
		if err != nil {
			if roots != nil {
				t.Fatalf("refused (%v) with a pool", err)
			}
			return
		}
		if roots == nil || earliest.IsZero() {
			t.Fatalf("accepted without a pool (%v) or an end (%v)", roots, earliest)
		}
	})
}

// TestParseCAs: one row per rule of a bundle.
func TestParseCAs(t *testing.T) {
	pki, pki2 := testpki.NewPKI(t), testpki.NewPKI(t)
	read := func(p string) []byte {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ca, ca2, key := read(pki.CA), read(pki2.CA), read(pki.ServerKey)
	tests := []struct {
		name string
		data []byte
		want string // "" accepted
	}{
		{"one CA", ca, ""},
		{"two CAs", append(append([]byte{}, ca...), ca2...), ""},
		{"a key block beside a CA is passed over", append(append([]byte{}, key...), ca...), ""},
		{"no certificate", key, "no PEM certificates"},
		{"a block cut short", append(append([]byte{}, ca...), ca2[:len(ca2)/2]...), "cut short"},
		{"a certificate that does not parse", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), "does not parse"},
	}
	for _, tt := range tests {
		_, _, err := ParseCAs(tt.data)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}
