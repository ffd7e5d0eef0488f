// Package testpki makes throwaway certificate authorities and certificates
// for tests on loopback. It imports nothing of djinn, so any package's
// tests may use it.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority with one server and one client
// certificate, written as PEM files in a test's temporary directory. The
// server certificate is for 127.0.0.1 and is node ServerNode's peer
// certificate too (it carries the URI SAN djinn-peer://ServerNode): it
// serves both ends of a TLS connection, as a djinn server's does (the
// client port, the Raft port, and the event sender's client certificate).
type PKI struct {
	// Paths of the PEM files.
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	// Roots trusts the CA.
	Roots *x509.CertPool
	// Server and Client are the certificates with their keys.
	Server, Client tls.Certificate

	ca    *x509.Certificate
	caKey *ecdsa.PrivateKey
	dir   string
	n     atomic.Int64 // client certificates issued by NewClient
}

// ServerNode is the node id the PKI's server certificate names.
const ServerNode = "n1"

// NewPKI creates a CA and its certificates in t.TempDir().
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client-key.pem"),
		Roots:      x509.NewCertPool(),
	}
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "djinn test ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p.Roots.AddCert(ca)
	writePEM(t, p.CA, "CERTIFICATE", caDER)

	p.ca, p.caKey, p.dir = ca, caKey, dir
	p.Server = p.issue(t, serverTemplate(ServerNode), p.ServerCert, p.ServerKey)
	p.Client = p.issue(t, clientTemplate("djinn test client"), p.ClientCert, p.ClientKey)
	return p
}

// serverTemplate is the server certificate's: for 127.0.0.1, and node's
// peer certificate too.
func serverTemplate(node string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: "djinn test server"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, URIs: []*url.URL{peerURI(node)}}
}

// IssueServer issues a server certificate as NewPKI's, for node, with a
// new key, and writes it and its key to certPath and keyPath (replacing
// what they hold: a renewal when they are ServerCert and ServerKey).
func (p *PKI) IssueServer(t testing.TB, node, certPath, keyPath string) tls.Certificate {
	t.Helper()
	return p.issue(t, serverTemplate(node), certPath, keyPath)
}

func peerURI(node string) *url.URL { return &url.URL{Scheme: "djinn-peer", Host: node} }

func clientTemplate(cn string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// NewPeer issues node's peer certificate, for 127.0.0.1, and returns the
// paths of it and its key.
func (p *PKI) NewPeer(t testing.TB, node string) (cert, key string) {
	t.Helper()
	base := filepath.Join(p.dir, "peer-"+node)
	p.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: node},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, URIs: []*url.URL{peerURI(node)}}, base+".pem", base+"-key.pem")
	return base + ".pem", base + "-key.pem"
}

// NewClient issues another client certificate, for the common name cn:
// another principal.
func (p *PKI) NewClient(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	base := filepath.Join(p.dir, fmt.Sprintf("client-%d", p.n.Add(1)))
	return p.issue(t, clientTemplate(cn), base+".pem", base+"-key.pem")
}

// issue signs a certificate from tmpl and writes it and its key.
func (p *PKI) issue(t testing.TB, tmpl *x509.Certificate, certPath, keyPath string) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certPath, "CERTIFICATE", der)
	writePEM(t, keyPath, "PRIVATE KEY", keyDER)
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// WriteCRL writes to path a revocation list the CA signed, listing the
// certificates revoked (none: an empty list), its next update a day away.
func (p *PKI) WriteCRL(t testing.TB, path string, revoked ...*x509.Certificate) {
	t.Helper()
	tmpl := &x509.RevocationList{Number: serial(t), ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: time.Now().Add(24 * time.Hour)}
	for _, c := range revoked {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: c.SerialNumber, RevocationTime: time.Now().Add(-time.Minute)})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, p.ca, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, path, "X509 CRL", der)
}

// ClientTLS returns a client configuration that trusts the CA and presents
// the client certificate.
func (p *PKI) ClientTLS() *tls.Config { return p.TLSFor(p.Client) }

// TLSFor returns a client configuration that trusts the CA and presents
// cert.
func (p *PKI) TLSFor(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: p.Roots, MinVersion: tls.VersionTLS12}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// SelfSignedPeer returns a peer certificate for node that signs itself: it
// carries node's djinn-peer:// URI SAN, but no CA vouches for it.
func SelfSignedPeer(t testing.TB, node string) tls.Certificate {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: node},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, URIs: []*url.URL{peerURI(node)},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
