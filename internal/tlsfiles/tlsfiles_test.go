package tlsfiles

import (
	"crypto/x509"
	"os"
	"path/filepath"
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

// TestParseCRLs: one row per rule of a revocation list file.
func TestParseCRLs(t *testing.T) {
	pki, pki2 := testpki.NewPKI(t), testpki.NewPKI(t)
	dir := t.TempDir()
	crl := func(p *testpki.PKI, name string, revoked ...*x509.Certificate) []byte {
		path := filepath.Join(dir, name)
		p.WriteCRL(t, path, revoked...)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	_, cas, _, err := parseCAs(readFile(t, pki.CA))
	if err != nil {
		t.Fatal(err)
	}
	empty, listing, foreign := crl(pki, "empty.pem"), crl(pki, "client.pem", pki.Client.Leaf), crl(pki2, "other.pem")
	tests := []struct {
		name    string
		data    []byte
		cas     []*x509.Certificate
		want    string // "" accepted
		revoked bool   // pki's client certificate
	}{
		{"an empty list", empty, cas, "", false},
		{"a list naming the client", listing, cas, "", true},
		{"two lists", append(append([]byte{}, empty...), listing...), cas, "", true},
		{"a list another CA signed", foreign, cas, "no CA of the bundle signed it", false},
		{"a list without the bundle", empty, nil, "needs the CA bundle", false},
		{"no list", readFile(t, pki.CA), cas, "no PEM revocation list", false},
		{"a list cut short", append(append([]byte{}, empty...), listing[:len(listing)/2]...), cas, "cut short", false},
		{"a list that does not parse", []byte("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n"), cas, "does not parse", false},
	}
	for _, tt := range tests {
		revoked, next, err := ParseCRLs(tt.data, tt.cas)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		case err == nil:
			s := &Set{revoked: revoked}
			if got := s.Revoked(pki.Client.Leaf); got != tt.revoked {
				t.Errorf("%s: the client certificate revoked %v, want %v", tt.name, got, tt.revoked)
			}
			if s.Revoked(pki.Server.Leaf) {
				t.Errorf("%s: the server certificate, listed nowhere, revoked", tt.name)
			}
			if next.IsZero() {
				t.Errorf("%s: no next update", tt.name)
			}
		}
	}
}

// FuzzParseCRLs: any bytes read as revocation lists are refused or give
// the certificates they revoke; never a panic.
func FuzzParseCRLs(f *testing.F) {
	pki := testpki.NewPKI(f)
	dir := f.TempDir()
	path := filepath.Join(dir, "crl.pem")
	pki.WriteCRL(f, path, pki.Client.Leaf)
	crl := readFile(f, path)
	_, cas, _, err := parseCAs(readFile(f, pki.CA))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(crl)
	f.Add(crl[:len(crl)/2])
	f.Add([]byte("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		revoked, _, err := ParseCRLs(data, cas)
		if err != nil && revoked != nil {
			t.Fatalf("refused (%v) with a list", err)
		}
	})
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
