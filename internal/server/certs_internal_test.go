package server

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/djinn-go/djinn/internal/testpki"
)

// TestOwnCallsFollowRenewedCertificates: the server's own calls (gRPC,
// outCreds) and the connections it dials to its peers (peerDial) present
// the peer certificate loaded now and trust the CA loaded now. The other
// end here trusts only a second CA and presents a certificate of it: the
// dial fails until the files hold a certificate of that CA and a bundle
// with it.
func TestOwnCallsFollowRenewedCertificates(t *testing.T) {
	t.Parallel()
	pki, pki2 := testpki.NewPKI(t), testpki.NewPKI(t)
	c, dir := ownCopies(t, pki)
	setup, err := loadTLS(c)
	if err != nil {
		t.Fatal(err)
	}

	// The other end: a TLS server of the second CA that asks for a
	// client certificate of it.
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pki2.Server}, ClientCAs: pki2.Roots,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	clients := make(chan string, 8) // the serial of each client certificate the other end took
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				tc := conn.(*tls.Conn)
				if err := tc.Handshake(); err != nil {
					clients <- "refused"
					return
				}
				clients <- tc.ConnectionState().PeerCertificates[0].SerialNumber.String()
				_, _ = tc.Write([]byte("ok")) // the client reads it: its own certificate was taken
			}()
		}
	}()
	dials := map[string]func() (net.Conn, error){
		"outgoing call": func() (net.Conn, error) {
			raw, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				return nil, err
			}
			conn, _, err := setup.out.ClientHandshake(t.Context(), ln.Addr().String(), raw)
			if err != nil {
				raw.Close()
			}
			return conn, err
		},
		"peer dial": func() (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(), setup.peerDial())
		},
	}
	// try dials, reads what the other end sends and returns the serial
	// it took (every connection it accepts sends one value).
	try := func(dial func() (net.Conn, error)) (string, error) {
		conn, err := dial()
		if err == nil {
			defer conn.Close()
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = conn.Read(make([]byte, 2))
		}
		select {
		case serial := <-clients:
			return serial, err
		case <-time.After(10 * time.Second):
			t.Fatal("the other end did not take the connection")
			return "", nil
		}
	}
	for name, dial := range dials {
		if _, err := try(dial); err == nil {
			t.Errorf("%s: a server of a CA the bundle does not hold was trusted", name)
		}
	}

	// Renewed by the second CA (for this node), the bundle holding both.
	renewed := pki2.IssueServer(t, testpki.ServerNode, filepath.Join(dir, "new.pem"), filepath.Join(dir, "new-key.pem"))
	copyFile(t, filepath.Join(dir, "new-key.pem"), c.Key)
	copyFile(t, filepath.Join(dir, "new.pem"), c.Cert)
	both := append(readFile(t, pki.CA), readFile(t, pki2.CA)...)
	if err := os.WriteFile(c.CA, both, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, dial := range dials {
		serial, err := try(dial)
		if err != nil {
			t.Errorf("%s after the renewal: %v", name, err)
			continue
		}
		if serial != renewed.Leaf.SerialNumber.String() {
			t.Errorf("%s presented serial %s, want the renewed %s", name, serial, renewed.Leaf.SerialNumber)
		}
	}
}

// TestRenewalRefusedSaysWhy: files that changed but cannot be used are
// logged with the file, the cause and what to do, and the certificates
// loaded before stay in use.
func TestRenewalRefusedSaysWhy(t *testing.T) {
	t.Parallel()
	pki := testpki.NewPKI(t)
	c, dir := ownCopies(t, pki)
	f, _, err := loadCertFiles(c)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	f.SetLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	first := f.InUse()
	other := filepath.Join(dir, "n9.pem")
	pki.IssueServer(t, "n9", other, other+".key")
	ca := readFile(t, pki.CA)
	tests := []struct {
		name  string
		write func()
		want  []string
	}{
		{"another node's peer certificate", func() { copyFile(t, other+".key", c.Key); copyFile(t, other, c.Cert) },
			[]string{`node \"n9\"'s`, `not this node's (\"n1\")`, "issue its certificate for djinn-peer://n1", "serving with the certificates loaded before"}},
		{"a CA bundle cut short", func() {
			copyFile(t, pki.ServerKey, c.Key)
			copyFile(t, pki.ServerCert, c.Cert)
			writeFile(t, c.CA, append(append([]byte{}, ca...), ca[:len(ca)/2]...))
		}, []string{c.CA, "cut short"}},
		{"a CA bundle without certificates", func() { writeFile(t, c.CA, []byte("nothing here\n")) }, []string{c.CA, "no PEM certificates"}},
		{"a key gone", func() { writeFile(t, c.CA, ca); _ = os.Remove(c.Key) }, []string{c.Key, "no such file"}},
	}
	for _, tt := range tests {
		logs.Reset()
		tt.write()
		if got := f.Current(); got != first {
			t.Errorf("%s: the certificates in use changed", tt.name)
		}
		for _, w := range tt.want {
			if !strings.Contains(logs.String(), w) {
				t.Errorf("%s: the log %q does not say %q", tt.name, logs.String(), w)
			}
		}
	}
	if got := f.Refused(); got != int64(len(tests)) {
		t.Errorf("refused %d, want %d", got, len(tests))
	}
}

// ownCopies copies pki's server certificate, key and CA into a directory
// of their own, to be replaced there, and returns their configuration and
// the directory.
func ownCopies(t *testing.T, pki *testpki.PKI) (TLSConfig, string) {
	t.Helper()
	dir := t.TempDir()
	c := TLSConfig{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem"), CA: filepath.Join(dir, "ca.pem")}
	copyFile(t, pki.ServerCert, c.Cert)
	copyFile(t, pki.ServerKey, c.Key)
	copyFile(t, pki.CA, c.CA)
	return c, dir
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	writeFile(t, to, readFile(t, from))
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes data to path with a modification time of its own (a
// second after the one before), so each write is seen as a change.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	stamp := time.Unix(1_700_000_000+writeStamps.Add(1), 0)
	if err := os.Chtimes(path, stamp, stamp); err != nil {
		t.Fatal(err)
	}
}

// writeStamps numbers the writes of writeFile.
var writeStamps atomic.Int64

// TestRevokedPeerRefused: the Raft port, accepting and dialling, refuses
// a peer certificate the revocation lists name.
func TestRevokedPeerRefused(t *testing.T) {
	t.Parallel()
	pki := testpki.NewPKI(t)
	c, dir := ownCopies(t, pki)
	c.CRL = filepath.Join(dir, "crl.pem")
	pki.WriteCRL(t, c.CRL)
	f, _, err := loadCertFiles(c)
	if err != nil {
		t.Fatal(err)
	}
	other := pki.IssueServer(t, "n2", filepath.Join(dir, "n2.pem"), filepath.Join(dir, "n2-key.pem"))
	check := unrevokedPeer(f)
	cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{other.Leaf}}
	if err := check(cs); err != nil {
		t.Fatalf("peer n2 before its revocation: %v", err)
	}
	pki.WriteCRL(t, filepath.Join(dir, "new-crl.pem"), other.Leaf)
	copyFile(t, filepath.Join(dir, "new-crl.pem"), c.CRL)
	f.Check()
	if err := check(cs); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("peer n2 after its revocation: %v, want it refused as revoked", err)
	}
}
