package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/internal/testpki"
)

// certDir holds a server's own copies of its PEM files, replaced as an
// operator (or a certificate manager) replaces them. Each write gets a
// modification time of its own, so that the server sees every change
// even on a file system whose clock is coarse.
type certDir struct {
	t                 *testing.T
	cert, key, ca     string
	stamp             time.Time
	pki               *testpki.PKI
	scratch, scratchK string
}

func newCertDir(t *testing.T, pki *testpki.PKI) *certDir {
	dir := t.TempDir()
	d := &certDir{t: t, cert: filepath.Join(dir, "server.pem"), key: filepath.Join(dir, "server-key.pem"), ca: filepath.Join(dir, "ca.pem"),
		stamp: time.Now().Add(-time.Hour), pki: pki, scratch: filepath.Join(dir, "new.pem"), scratchK: filepath.Join(dir, "new-key.pem")}
	d.write(d.cert, read(t, pki.ServerCert))
	d.write(d.key, read(t, pki.ServerKey))
	d.write(d.ca, read(t, pki.CA))
	return d
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (d *certDir) write(path string, data []byte) {
	d.t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		d.t.Fatal(err)
	}
	d.stamp = d.stamp.Add(time.Second)
	if err := os.Chtimes(path, d.stamp, d.stamp); err != nil {
		d.t.Fatal(err)
	}
}

// issue has pki issue a server certificate for node into the scratch
// files, and returns it.
func (d *certDir) issue(pki *testpki.PKI, node string) tls.Certificate {
	d.t.Helper()
	return pki.IssueServer(d.t, node, d.scratch, d.scratchK)
}

// presented is the certificate the server presents to a new connection.
func presented(t *testing.T, srv *server.Server, tc *tls.Config) *x509.Certificate {
	t.Helper()
	tc = tc.Clone()
	tc.NextProtos = []string{"h2"}
	c, err := tls.Dial("tcp", srv.Addr(), tc)
	if err != nil {
		t.Fatalf("TLS handshake with the client port: %v", err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0]
}

func sameSerial(a *x509.Certificate, b tls.Certificate) bool {
	return a.SerialNumber.Cmp(b.Leaf.SerialNumber) == 0
}

// TestCertificatesRenewedWhileServing: a TLS server reads its PEM files
// again when they change, and new connections get what they hold; files
// that cannot be used together are refused, the certificates loaded
// before kept, until the files change again (README Security,
// "Renewing certificates").
func TestCertificatesRenewedWhileServing(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	d := newCertDir(t, pki)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: d.cert, Key: d.key, CA: d.ca, ClientAuth: true}
	srv := servertest.Start(t, cfg)
	var loaded, refused float64 // the counts so far
	// check says that a new connection gets want, and that the files'
	// last change was loaded (or refused). The server's own connections
	// look at the files too, and may see a state between two writes
	// (a certificate without its key yet, refused): the counts only
	// grow as the steps say.
	check := func(step string, want tls.Certificate, load bool) {
		t.Helper()
		if got := presented(t, srv, pki.ClientTLS()); !sameSerial(got, want) {
			t.Errorf("%s: the client port presents serial %v, want %v", step, got.SerialNumber, want.Leaf.SerialNumber)
		}
		m := scrapeTLS(t, srv, pki.ClientTLS())
		l, r := m[`djinn_tls_reloads_total{result="loaded"}`], m[`djinn_tls_reloads_total{result="refused"}`]
		if load && l <= loaded || !load && (r <= refused || l != loaded) {
			t.Errorf("%s: djinn_tls_reloads_total loaded %v refused %v, was %v and %v: want the change %s", step, l, r, loaded, refused,
				map[bool]string{true: "loaded", false: "refused, nothing loaded"}[load])
		}
		loaded, refused = l, r
	}
	if got := presented(t, srv, pki.ClientTLS()); !sameSerial(got, pki.Server) {
		t.Fatalf("at start: the client port presents serial %v, want %v", got.SerialNumber, pki.Server.Leaf.SerialNumber)
	}

	// A renewal: new certificate and key, same names.
	renewed := d.issue(pki, testpki.ServerNode)
	d.write(d.key, read(t, d.scratchK))
	d.write(d.cert, read(t, d.scratch))
	check("renewed", renewed, true)
	m := scrapeTLS(t, srv, pki.ClientTLS())
	if got, want := m[`djinn_tls_certificate_expiry_timestamp_seconds{certificate="server"}`], float64(renewed.Leaf.NotAfter.Unix()); got != want {
		t.Errorf("server certificate expiry %v, want %v", got, want)
	}
	c := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.ClientTLS()))
	if _, err := c.Mailbox().Register(testContext(t), time.Minute); err != nil {
		t.Fatalf("a call over the renewed certificate: %v", err)
	}
	// Touched, not changed: nothing loaded.
	d.write(d.cert, read(t, d.cert))
	if got := presented(t, srv, pki.ClientTLS()); !sameSerial(got, renewed) {
		t.Errorf("touched: the client port presents serial %v, want %v", got.SerialNumber, renewed.Leaf.SerialNumber)
	}
	if l := scrapeTLS(t, srv, pki.ClientTLS())[`djinn_tls_reloads_total{result="loaded"}`]; l != loaded {
		t.Errorf("touched: loaded %v, want %v still", l, loaded)
	}

	// A certificate half written: refused, the renewed one kept.
	next := d.issue(pki, testpki.ServerNode)
	pemCert := read(t, d.scratch)
	d.write(d.cert, pemCert[:len(pemCert)/2])
	check("half written", renewed, false)
	// The whole certificate, but its key not yet: refused again.
	d.write(d.cert, pemCert)
	check("without its key", renewed, false)
	// Its key: loaded.
	d.write(d.key, read(t, d.scratchK))
	check("with its key", next, true)

	// Another node's peer certificate: a node keeps its id.
	d.issue(pki, "n9")
	d.write(d.key, read(t, d.scratchK))
	d.write(d.cert, read(t, d.scratch))
	check("another node's", next, false)

	// A CA added to the bundle: its clients are served from then on.
	pki2 := servertest.NewPKI(t)
	other := pki2.NewClient(t, "other-ca-client")
	otherTLS := &tls.Config{Certificates: []tls.Certificate{other}, RootCAs: pki.Roots, MinVersion: tls.VersionTLS12}
	if err := registerOnce(t, srv, otherTLS); err == nil {
		t.Fatal("a client of a CA the bundle does not hold was served")
	}
	d.issue(pki, testpki.ServerNode)
	d.write(d.key, read(t, d.scratchK))
	d.write(d.cert, read(t, d.scratch))
	d.write(d.ca, append(read(t, pki.CA), read(t, pki2.CA)...))
	if err := registerOnce(t, srv, otherTLS); err != nil {
		t.Fatalf("a client of the CA added to the bundle: %v", err)
	}
	m = scrapeTLS(t, srv, pki.ClientTLS())
	earliest := pki.Server.Leaf.NotAfter // both CAs end a day after they were made
	if got := m[`djinn_tls_certificate_expiry_timestamp_seconds{certificate="ca"}`]; got > float64(earliest.Add(time.Hour).Unix()) || got < float64(earliest.Add(-time.Hour).Unix()) {
		t.Errorf("CA bundle expiry %v, want about %v", got, earliest.Unix())
	}
}

// registerOnce dials srv with tc and registers with the mailbox.
func registerOnce(t *testing.T, srv *server.Server, tc *tls.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(testContext(t), servertest.Timeout)
	defer cancel()
	c, err := client.Dial(ctx, srv.Addr(), client.WithTLS(tc))
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Mailbox().Register(ctx, time.Minute)
	return err
}

// TestRevokedCertificateRefused: with revocation lists (tls crl), a
// certificate they list is refused on every call — on a connection made
// before the revocation too — and at the admin port; lists that no CA of
// the bundle signed are refused, the ones loaded before kept (README
// Security, "Revoking a certificate").
func TestRevokedCertificateRefused(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	d := newCertDir(t, pki)
	crl := filepath.Join(filepath.Dir(d.cert), "revoked.pem")
	pki.WriteCRL(t, d.scratch)
	d.write(crl, read(t, d.scratch))
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: d.cert, Key: d.key, CA: d.ca, CRL: crl, ClientAuth: true}
	cfg.Security.Operators = []string{"cn:ops"}
	srv := servertest.Start(t, cfg)
	alice, bob, ops := pki.NewClient(t, "alice"), pki.NewClient(t, "bob"), pki.NewClient(t, "ops")
	ca := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(alice)))
	cb := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(bob)))
	register := func(c *client.Client) error {
		_, err := c.Mailbox().Register(testContext(t), time.Minute)
		return err
	}
	pprof := func(cert tls.Certificate) int {
		t.Helper()
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.TLSFor(cert), DisableKeepAlives: true}, Timeout: servertest.Timeout}
		resp, err := hc.Get(srv.AdminURL() + "/debug/pprof/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []*client.Client{ca, cb} {
		if err := register(c); err != nil {
			t.Fatalf("before any revocation: %v", err)
		}
	}
	if got := pprof(ops); got != http.StatusOK {
		t.Fatalf("the operator's profile before any revocation: HTTP %d", got)
	}
	m := scrapeTLS(t, srv, pki.ClientTLS())
	if got := m["djinn_tls_crl_next_update_timestamp_seconds"]; got < float64(time.Now().Unix()) {
		t.Errorf("djinn_tls_crl_next_update_timestamp_seconds %v: want the list's next update, a day away", got)
	}

	// alice and ops revoked: a new handshake (here the look at the client
	// port) loads the list.
	pki.WriteCRL(t, d.scratch, alice.Leaf, ops.Leaf)
	d.write(crl, read(t, d.scratch))
	presented(t, srv, pki.ClientTLS())
	err := register(ca)
	wantErr(t, "alice's call on the connection she made before", err, djinn.ErrPermissionDenied, "revoked")
	if err != nil && !strings.Contains(err.Error(), alice.Leaf.SerialNumber.Text(16)) {
		t.Errorf("the refusal %q does not name the certificate's serial %s (hex, as certificate tools print it)", err, alice.Leaf.SerialNumber.Text(16))
	}
	if err := registerOnce(t, srv, pki.TLSFor(alice)); err == nil {
		t.Error("alice's new connection was served")
	}
	if err := register(cb); err != nil {
		t.Errorf("bob, not revoked: %v", err)
	}
	if got := pprof(ops); got != http.StatusForbidden {
		t.Errorf("the revoked operator's profile: HTTP %d, want 403", got)
	}

	// A list another CA signed: refused, the list loaded before kept.
	other := servertest.NewPKI(t)
	other.WriteCRL(t, d.scratch)
	d.write(crl, read(t, d.scratch))
	presented(t, srv, pki.ClientTLS())
	if got := scrapeTLS(t, srv, pki.ClientTLS())[`djinn_tls_reloads_total{result="refused"}`]; got < 1 {
		t.Errorf("a list of another CA: refused %v times, want at least 1", got)
	}
	if err := register(ca); err == nil {
		t.Error("alice was served again after a list the server refused")
	}
}
