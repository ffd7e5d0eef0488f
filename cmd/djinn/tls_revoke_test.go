package main

import (
	"crypto/x509"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/djinn-go/djinn/internal/tlsfiles"
)

// TestCLITLSRevoke: djinn tls revoke keeps the lab CA's revocation list:
// signed by the CA, as serve --tls-crl takes it, adding to what it lists;
// a certificate of another CA, a key file or a list of another CA is
// refused naming the file.
func TestCLITLSRevoke(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, d := range []string{dir, other} {
		for _, args := range [][]string{{"ca"}, {"client", "alice"}, {"client", "bob"}} {
			if _, errs, ok := runNoServer(t, append(append([]string{"tls"}, args...), "--dir", d)...); !ok {
				t.Fatalf("djinn tls %v: %s", args, errs)
			}
		}
	}
	crl := filepath.Join(dir, "crl.pem")
	cas := []*x509.Certificate{readCert(t, filepath.Join(dir, "ca.pem"))}
	// revoked reads the list as serve --tls-crl does and says whom it lists.
	revoked := func() map[string]bool {
		t.Helper()
		b, err := os.ReadFile(crl)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := tlsfiles.ParseCRLs(b, cas); err != nil {
			t.Fatalf("the list as a server reads it: %v", err)
		}
		blk := pemBlock(b, "X509 CRL")
		l, err := x509.ParseRevocationList(blk)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, e := range l.RevokedCertificateEntries {
			out[e.SerialNumber.Text(16)] = true
		}
		return out
	}
	serial := func(d, name string) string { return readCert(t, filepath.Join(d, name+".pem")).SerialNumber.Text(16) }
	alice, bob := serial(dir, "client-alice"), serial(dir, "client-bob")

	if _, errs, ok := runNoServer(t, "tls", "revoke", "--dir", dir); !ok {
		t.Fatalf("an empty list: %s", errs)
	}
	if got := revoked(); len(got) != 0 {
		t.Errorf("an empty list lists %v", got)
	}
	out, errs, ok := runNoServer(t, "tls", "revoke", filepath.Join(dir, "client-bob.pem"), "--dir", dir, "-o", "json")
	if !ok {
		t.Fatalf("revoke bob: %s", errs)
	}
	var v tlsRevokedView
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Added) != 1 || v.Added[0] != bob {
		t.Errorf("revoke bob -o json: %s (%v): want bob's serial %s added", out, err, bob)
	}
	if got := revoked(); !got[bob] || got[alice] {
		t.Errorf("after revoking bob the list holds %v: want bob (%s) alone", got, bob)
	}
	if _, errs, ok := runNoServer(t, "tls", "revoke", filepath.Join(dir, "client-alice.pem"), filepath.Join(dir, "client-bob.pem"), "--dir", dir); !ok {
		t.Fatalf("revoke alice (and bob again): %s", errs)
	}
	if got := revoked(); len(got) != 2 || !got[alice] || !got[bob] {
		t.Errorf("after revoking alice the list holds %v: want alice and bob, once each", got)
	}

	for _, tt := range []struct{ name, file, want string }{
		{"a certificate of another CA", filepath.Join(other, "client-alice.pem"), "did not sign it"},
		{"a key file", filepath.Join(dir, "client-alice-key.pem"), "no PEM certificate"},
	} {
		if _, errs, ok := runNoServer(t, "tls", "revoke", tt.file, "--dir", dir); ok || !strings.Contains(errs, tt.file) || !strings.Contains(errs, tt.want) {
			t.Errorf("%s: ok=%v %s: want a refusal naming %s, %q", tt.name, ok, errs, tt.file, tt.want)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "crl.pem"), readFileT(t, crl), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs, ok := runNoServer(t, "tls", "revoke", "--dir", other); ok || !strings.Contains(errs, "not signed by this directory's CA") {
		t.Errorf("a list of another CA in the directory: ok=%v %s", ok, errs)
	}
	if got := revoked(); len(got) != 2 {
		t.Errorf("the refusals changed the list: %v", got)
	}
}

func readFileT(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
