// Package tlsfiles reads TLS certificates, their keys and a CA bundle from
// PEM files, and again whenever the files change, so that a process that
// runs for months follows its certificates' renewals without a restart.
//
// Files.Current looks at the files (a stat of each) and loads them again
// when one changed: call it before each TLS handshake, as the
// configurations and credentials of this package do, and new connections
// get what the files hold when they begin; connections already open keep
// theirs. Files that changed but cannot be used together (a certificate
// before its new key is written, a file half written, a bundle without
// certificates, or what the Accept check refuses) are refused: the
// certificates loaded before stay in use, the refusal is logged and
// counted, and the files are loaded again when they change again.
package tlsfiles

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/djinn-go/djinn"
)

// Pair names a certificate file and its key's, and what errors call them
// (Name "cert", KeyName "key": "tls cert FILE key FILE: ...").
type Pair struct {
	Name, Cert, KeyName, Key string
}

// Config is what Load reads.
type Config struct {
	Pairs []Pair
	// CA is the bundle that verifies the other ends; empty: the system's
	// roots.
	CA string
	// CRL names PEM certificate revocation lists, each signed by a CA of
	// the bundle: the certificates they list are refused (Set.Revoked).
	// Empty: none.
	CRL string
	// Accept checks a loading before it is used (nil: every one is); the
	// first loading too, whose refusal Load returns.
	Accept func(*Set) error
	// What is what the log calls the process's use of the files, when
	// they change and cannot be used: "serving" (a server), "connecting".
	What string
}

// Set is one loading of the files.
type Set struct {
	Certs    []*tls.Certificate // the Pairs', in their order
	Roots    *x509.CertPool     // nil without a CA file
	CAExpiry time.Time          // the earliest end of the bundle's certificates
	// CRLUpdate is the earliest next update the revocation lists promise
	// (zero without them).
	CRLUpdate time.Time
	revoked   map[revokedKey]bool
	cas       []*x509.Certificate // the bundle's
	sum       [sha256.Size]byte   // of the files' contents: a change of time alone is none
}

// revokedKey names a certificate as a revocation list does: its issuer
// and its serial number.
type revokedKey struct{ issuer, serial string }

// Revoked reports whether a revocation list of the set lists c.
func (s *Set) Revoked(c *x509.Certificate) bool {
	return len(s.revoked) > 0 && s.revoked[revokedKey{string(c.RawIssuer), c.SerialNumber.String()}]
}

// Files are the PEM files of a Config and what was last loaded from them.
type Files struct {
	cfg Config

	cur     atomic.Pointer[Set]
	log     atomic.Pointer[slog.Logger]
	loaded  atomic.Int64 // loadings taken after the first
	refused atomic.Int64 // changes refused

	mu   sync.Mutex    // one look at a time
	seen []os.FileInfo // guarded by mu: the files as last looked at (nil: missing)
}

// Load reads the files c names for the first time.
func Load(c Config) (*Files, error) {
	f := &Files{cfg: c}
	f.seen = f.stat()
	set, err := f.load()
	if err != nil {
		return nil, err
	}
	f.cur.Store(set)
	return f, nil
}

// SetLogger sets where changes of the files are logged (the default:
// nowhere).
func (f *Files) SetLogger(l *slog.Logger) { f.log.Store(l) }

// Loaded is the count of changes loaded since Load; Refused of those
// refused.
func (f *Files) Loaded() int64  { return f.loaded.Load() }
func (f *Files) Refused() int64 { return f.refused.Load() }

// CRL is the revocation lists' file ("" without).
func (f *Files) CRL() string { return f.cfg.CRL }

// InUse returns what is in use, without looking at the files.
func (f *Files) InUse() *Set { return f.cur.Load() }

// Current returns the certificates to use now, loading the files again
// first if they changed.
func (f *Files) Current() *Set {
	f.Check()
	return f.cur.Load()
}

// paths are the files, in a fixed order.
func (f *Files) paths() []string {
	var p []string
	for _, pr := range f.cfg.Pairs {
		p = append(p, pr.Cert, pr.Key)
	}
	if f.cfg.CA != "" {
		p = append(p, f.cfg.CA)
	}
	if f.cfg.CRL != "" {
		p = append(p, f.cfg.CRL)
	}
	return p
}

func (f *Files) stat() []os.FileInfo {
	paths := f.paths()
	seen := make([]os.FileInfo, len(paths))
	for i, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			seen[i] = fi
		}
	}
	return seen
}

// changed says whether the files differ from seen: another file (a
// symbolic link switched, a file replaced), another size or time.
func changed(seen, now []os.FileInfo) bool {
	for i := range now {
		a, b := seen[i], now[i]
		switch {
		case a == nil || b == nil:
			if a != b {
				return true
			}
		case !os.SameFile(a, b) || a.Size() != b.Size() || !a.ModTime().Equal(b.ModTime()):
			return true
		}
	}
	return false
}

// load reads and checks every file.
func (f *Files) load() (*Set, error) {
	sum := sha256.New()
	readFile := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		fmt.Fprintf(sum, "%d:", len(b))
		sum.Write(b)
		return b, err
	}
	set := &Set{}
	for _, p := range f.cfg.Pairs {
		certPEM, err := readFile(p.Cert)
		if err == nil {
			var keyPEM []byte
			if keyPEM, err = readFile(p.Key); err == nil {
				var cert tls.Certificate
				if cert, err = tls.X509KeyPair(certPEM, keyPEM); err == nil {
					set.Certs = append(set.Certs, &cert)
					continue
				}
			}
		}
		return nil, djinn.Errorf(djinn.InvalidArgument, "tls %s %s %s %s: %v", p.Name, p.Cert, p.KeyName, p.Key, err)
	}
	if f.cfg.CA != "" {
		pem, err := readFile(f.cfg.CA)
		if err == nil {
			set.Roots, set.cas, set.CAExpiry, err = parseCAs(pem)
		}
		if err != nil {
			return nil, djinn.Errorf(djinn.InvalidArgument, "tls ca %s: %v", f.cfg.CA, err)
		}
	}
	if f.cfg.CRL != "" {
		pem, err := readFile(f.cfg.CRL)
		if err == nil {
			set.revoked, set.CRLUpdate, err = ParseCRLs(pem, set.cas)
		}
		if err != nil {
			return nil, djinn.Errorf(djinn.InvalidArgument, "tls crl %s: %v", f.cfg.CRL, err)
		}
	}
	sum.Sum(set.sum[:0])
	if f.cfg.Accept != nil {
		if err := f.cfg.Accept(set); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// ParseCAs reads a PEM bundle of CA certificates: the pool and the
// earliest end among them. A bundle without certificates, or with a
// certificate that does not parse or a block cut short (a file still
// being written), is refused.
func ParseCAs(data []byte) (*x509.CertPool, time.Time, error) {
	roots, _, earliest, err := parseCAs(data)
	return roots, earliest, err
}

func parseCAs(data []byte) (*x509.CertPool, []*x509.Certificate, time.Time, error) {
	roots := x509.NewCertPool()
	var cas []*x509.Certificate
	var earliest time.Time
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			if bytes.Contains(data, []byte("-----BEGIN")) {
				return nil, nil, time.Time{}, errors.New("a PEM block is cut short (a file still being written?)")
			}
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		ca, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, nil, time.Time{}, fmt.Errorf("a certificate does not parse: %v", err)
		}
		roots.AddCert(ca)
		cas = append(cas, ca)
		if earliest.IsZero() || ca.NotAfter.Before(earliest) {
			earliest = ca.NotAfter
		}
	}
	if earliest.IsZero() {
		return nil, nil, time.Time{}, errors.New("no PEM certificates")
	}
	return roots, cas, earliest, nil
}

// ParseCRLs reads PEM certificate revocation lists ("X509 CRL" blocks),
// each of which one of cas must have signed: the certificates they list,
// and the earliest next update they promise. A file without a list, a list
// that does not parse, one none of cas signed, or a block cut short is
// refused.
func ParseCRLs(data []byte, cas []*x509.Certificate) (map[revokedKey]bool, time.Time, error) {
	revoked := map[revokedKey]bool{}
	var next time.Time
	n := 0
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			if bytes.Contains(data, []byte("-----BEGIN")) {
				return nil, time.Time{}, errors.New("a PEM block is cut short (a file still being written?)")
			}
			break
		}
		if b.Type != "X509 CRL" {
			continue
		}
		n++
		crl, err := x509.ParseRevocationList(b.Bytes)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("revocation list %d does not parse: %v", n, err)
		}
		if err := signedByCA(crl, cas); err != nil {
			return nil, time.Time{}, fmt.Errorf("revocation list %d: %v", n, err)
		}
		for _, e := range crl.RevokedCertificateEntries {
			revoked[revokedKey{string(crl.RawIssuer), e.SerialNumber.String()}] = true
		}
		if !crl.NextUpdate.IsZero() && (next.IsZero() || crl.NextUpdate.Before(next)) {
			next = crl.NextUpdate
		}
	}
	if n == 0 {
		return nil, time.Time{}, errors.New("no PEM revocation list (X509 CRL)")
	}
	return revoked, next, nil
}

// signedByCA checks that one of cas signed crl.
func signedByCA(crl *x509.RevocationList, cas []*x509.Certificate) error {
	if len(cas) == 0 {
		return errors.New("a revocation list needs the CA bundle that signed it (tls ca)")
	}
	for _, ca := range cas {
		if bytes.Equal(ca.RawSubject, crl.RawIssuer) && crl.CheckSignatureFrom(ca) == nil {
			return nil
		}
	}
	return fmt.Errorf("no CA of the bundle signed it (its issuer: %s)", crl.Issuer)
}

// Check loads the files again if they changed since they were last looked
// at. Handshakes look one at a time (a look is a few stats; a loading,
// rare, reads a few small files), so each takes what the files held when
// it began.
func (f *Files) Check() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.stat()
	if !changed(f.seen, now) {
		return
	}
	f.seen = now
	set, err := f.load()
	log := f.logger()
	if err != nil {
		f.refused.Add(1)
		log.Error("the TLS files changed but cannot be used; "+f.cfg.What+" with the certificates loaded before until they change again", "err", err)
		return
	}
	if set.sum == f.cur.Load().sum {
		return // touched, or changed and changed back
	}
	f.cur.Store(set)
	f.loaded.Add(1)
	attrs := []any{}
	for i, p := range f.cfg.Pairs {
		attrs = append(attrs, p.Name, p.Cert, p.Name+"_expires", set.Certs[i].Leaf.NotAfter.UTC())
	}
	if set.Roots != nil {
		attrs = append(attrs, "ca_expires", set.CAExpiry.UTC())
	}
	if f.cfg.CRL != "" {
		attrs = append(attrs, "crl", f.cfg.CRL, "crl_next_update", set.CRLUpdate.UTC())
	}
	log.Info("TLS certificates loaded again", attrs...)
}

func (f *Files) logger() *slog.Logger {
	if l := f.log.Load(); l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// Watch looks at the files every interval until stop is closed.
func (f *Files) Watch(stop <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			f.Check()
		case <-stop:
			return
		}
	}
}

// DialConfig is a dial's configuration: the certificate of pair presented
// (none when pair < 0), the other end verified by crypto/tls against the
// current CA (the system's roots without a CA file).
func (f *Files) DialConfig(pair int) *tls.Config {
	set := f.Current()
	c := &tls.Config{RootCAs: set.Roots, MinVersion: tls.VersionTLS12}
	if pair >= 0 {
		c.Certificates = []tls.Certificate{*set.Certs[pair]}
	}
	return c
}

// Creds are gRPC transport credentials for dialling: gRPC's TLS, each
// handshake's configuration made by DialConfig(pair).
func (f *Files) Creds(pair int) credentials.TransportCredentials { return creds{f, pair} }

type creds struct {
	f    *Files
	pair int
}

func (c creds) now() credentials.TransportCredentials {
	return credentials.NewTLS(c.f.DialConfig(c.pair))
}

func (c creds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.now().ClientHandshake(ctx, authority, conn)
}

func (c creds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tls: these credentials dial; they accept no connection")
}

func (c creds) Info() credentials.ProtocolInfo          { return c.now().Info() }
func (c creds) Clone() credentials.TransportCredentials { return c }
func (c creds) OverrideServerName(string) error         { return nil } //nolint:staticcheck // part of the interface

// ServerConfig is the accepting side's configuration of a port: each
// handshake takes the certificate of pair and the current CA
// (GetConfigForClient), with the client authentication auth, the
// application protocols protos, and check as a last look at the
// connection (nil: none).
func (f *Files) ServerConfig(pair int, auth tls.ClientAuthType, protos []string, check func(tls.ConnectionState) error) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			set := f.Current()
			return &tls.Config{
				Certificates: []tls.Certificate{*set.Certs[pair]}, ClientCAs: set.Roots, ClientAuth: auth,
				MinVersion: tls.VersionTLS12, NextProtos: protos, VerifyConnection: check,
			}, nil
		},
	}
}
