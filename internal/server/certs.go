package server

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

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/credentials"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/principal"
)

// Certificates are renewed without a restart. A TLS server reads its PEM
// files (certificate and key, peer certificate and key, CA bundle) at
// start, and again whenever one of them has changed: it looks before every
// TLS handshake it takes part in (a client connecting to the client or
// admin port, a peer to the Raft port, the server calling another server,
// a peer or a listener) and once a minute. A change takes effect for the
// connections made after it; those already open keep the certificates
// they were made with. Files that changed but cannot be used together (a
// certificate without its new key yet, a file half written, a peer
// certificate of another node, a CA file without certificates) are
// refused: the server logs why, counts it, and goes on with the
// certificates it loaded before, until the files change again.

// certCheckInterval is how often the files are looked at without a
// handshake asking.
const certCheckInterval = time.Minute

// certSet is one loading of the files: what every handshake uses.
type certSet struct {
	cert, peer *tls.Certificate
	roots      *x509.CertPool
	caExpiry   time.Time         // the earliest end of the CA bundle's certificates
	sum        [sha256.Size]byte // of the files' contents: a change of time alone is none
}

// certFiles are a TLS server's PEM files and what was last loaded from
// them.
type certFiles struct {
	cfg  TLSConfig
	node string // the node the peer certificate names; a renewal must name it too

	cur      atomic.Pointer[certSet]
	log      atomic.Pointer[slog.Logger]
	reloaded atomic.Int64 // loadings taken after the first
	refused  atomic.Int64 // changes refused

	mu   sync.Mutex    // one look at a time
	seen []os.FileInfo // guarded by mu: the files as last looked at (nil: missing)
}

// loadCertFiles reads the files c names for the first time.
func loadCertFiles(c TLSConfig) (*certFiles, error) {
	cf := &certFiles{cfg: c}
	cf.seen = cf.stat()
	set, node, err := cf.load()
	if err != nil {
		return nil, err
	}
	cf.node = node
	cf.cur.Store(set)
	return cf, nil
}

// paths are the files, in a fixed order.
func (cf *certFiles) paths() []string {
	p := []string{cf.cfg.Cert, cf.cfg.Key, cf.cfg.CA}
	if cf.cfg.PeerCert != "" {
		p = append(p, cf.cfg.PeerCert, cf.cfg.PeerKey)
	}
	return p
}

func (cf *certFiles) stat() []os.FileInfo {
	paths := cf.paths()
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

// load reads and checks every file, returning the set and the node its
// peer certificate names.
func (cf *certFiles) load() (*certSet, string, error) {
	c := cf.cfg
	sum := sha256.New()
	readFile := func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		fmt.Fprintf(sum, "%d:", len(b))
		sum.Write(b)
		return b, err
	}
	pair := func(what, certFile, keyFile string) (*tls.Certificate, error) {
		certPEM, err := readFile(certFile)
		if err == nil {
			var keyPEM []byte
			if keyPEM, err = readFile(keyFile); err == nil {
				var cert tls.Certificate
				if cert, err = tls.X509KeyPair(certPEM, keyPEM); err == nil {
					return &cert, nil
				}
			}
		}
		return nil, djinn.Errorf(djinn.InvalidArgument, "tls %s %s key %s: %v", what, certFile, keyFile, err)
	}
	cert, err := pair("cert", c.Cert, c.Key)
	if err != nil {
		return nil, "", err
	}
	peer, peerFile := cert, c.Cert
	if c.PeerCert != "" {
		peerFile = c.PeerCert
		if peer, err = pair("peer-cert", c.PeerCert, c.PeerKey); err != nil {
			return nil, "", err
		}
	}
	node, ok := principal.PeerNodeOf(peer.Leaf)
	if !ok {
		return nil, "", djinn.Errorf(djinn.InvalidArgument, "tls: certificate %s carries no %s://NODE-ID URI SAN, so the Raft port cannot tell this node from a client; give the node a peer certificate (tls peer-cert and peer-key, or a cert that carries the SAN) — see the README's Security section", peerFile, principal.PeerScheme)
	}
	pem, err := readFile(c.CA)
	if err != nil {
		return nil, "", djinn.Errorf(djinn.InvalidArgument, "tls ca %s: %v", c.CA, err)
	}
	roots, expiry, err := parseCAs(pem)
	if err != nil {
		return nil, "", djinn.Errorf(djinn.InvalidArgument, "tls ca %s: %v", c.CA, err)
	}
	set := &certSet{cert: cert, peer: peer, roots: roots, caExpiry: expiry}
	sum.Sum(set.sum[:0])
	return set, node, nil
}

// parseCAs reads a PEM bundle of CA certificates.
func parseCAs(data []byte) (*x509.CertPool, time.Time, error) {
	roots := x509.NewCertPool()
	var earliest time.Time
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			if bytes.Contains(data, []byte("-----BEGIN")) {
				return nil, time.Time{}, errors.New("a PEM block is cut short (a file still being written?)")
			}
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		ca, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("a certificate does not parse: %v", err)
		}
		roots.AddCert(ca)
		if earliest.IsZero() || ca.NotAfter.Before(earliest) {
			earliest = ca.NotAfter
		}
	}
	if earliest.IsZero() {
		return nil, time.Time{}, errors.New("no PEM certificates")
	}
	return roots, earliest, nil
}

// current returns the certificates to use now, loading the files again
// first if they changed.
func (cf *certFiles) current() *certSet {
	cf.check()
	return cf.cur.Load()
}

// check loads the files again if they changed since they were last looked
// at. Handshakes look one at a time (a look is a few stats; a loading,
// rare, reads a few small files), so each takes what the files held when
// it began.
func (cf *certFiles) check() {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	now := cf.stat()
	if !changed(cf.seen, now) {
		return
	}
	cf.seen = now
	set, node, err := cf.load()
	if err == nil && node != cf.node {
		err = djinn.Errorf(djinn.InvalidArgument, "tls: the renewed peer certificate is node %q's (%s://%s), not this node's (%q); a node keeps its id: issue its certificate for %s://%s", node, principal.PeerScheme, node, cf.node, principal.PeerScheme, cf.node)
	}
	log := cf.logger()
	if err != nil {
		cf.refused.Add(1)
		log.Error("the TLS files changed but cannot be used; serving with the certificates loaded before until they change again", "err", err)
		return
	}
	if set.sum == cf.cur.Load().sum {
		return // touched, or changed and changed back
	}
	cf.cur.Store(set)
	cf.reloaded.Add(1)
	log.Info("TLS certificates loaded again", "cert", cf.cfg.Cert, "expires", set.cert.Leaf.NotAfter.UTC(),
		"peer_expires", set.peer.Leaf.NotAfter.UTC(), "ca_expires", set.caExpiry.UTC())
}

func (cf *certFiles) logger() *slog.Logger {
	if l := cf.log.Load(); l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

// watch looks at the files every interval until stop is closed.
func (cf *certFiles) watch(stop <-chan struct{}, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			cf.check()
		case <-stop:
			return
		}
	}
}

// The configurations. On the accepting side each handshake takes the
// current certificate and CA (GetConfigForClient); on the dialling side
// each dial is given a configuration made of them (dialConfig). Either
// way crypto/tls verifies the other end as it always does.

// serverConfig is the accepting side's configuration of a port: its
// client authentication, its application protocols, and check as a last
// look at the connection (nil: none).
func (cf *certFiles) serverConfig(auth tls.ClientAuthType, protos []string, peer bool, check func(tls.ConnectionState) error) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			set := cf.current()
			cert := set.cert
			if peer {
				cert = set.peer
			}
			return &tls.Config{
				Certificates: []tls.Certificate{*cert}, ClientCAs: set.roots, ClientAuth: auth,
				MinVersion: tls.VersionTLS12, NextProtos: protos, VerifyConnection: check,
			}, nil
		},
	}
}

// dialConfig is a dial's configuration: the current peer certificate
// presented, the other end verified against the current CA.
func (cf *certFiles) dialConfig() *tls.Config {
	set := cf.current()
	return &tls.Config{Certificates: []tls.Certificate{*set.peer}, RootCAs: set.roots, MinVersion: tls.VersionTLS12}
}

// outCreds are the transport credentials of the server's own calls
// (joining, delivering events, calling participants and lookup services):
// gRPC's TLS, with each handshake's configuration made by dialConfig.
type outCreds struct{ cf *certFiles }

func (c outCreds) now() credentials.TransportCredentials {
	return credentials.NewTLS(c.cf.dialConfig())
}

func (c outCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.now().ClientHandshake(ctx, authority, conn)
}

func (c outCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tls: the server's outgoing credentials accept no connection")
}

func (c outCreds) Info() credentials.ProtocolInfo          { return c.now().Info() }
func (c outCreds) Clone() credentials.TransportCredentials { return c }
func (c outCreds) OverrideServerName(string) error         { return nil } //nolint:staticcheck // part of the interface
var _ credentials.TransportCredentials = outCreds{}

// collectors are the files' figures for /metrics: when each certificate in
// use ends, and the loadings taken and refused since the start.
func (cf *certFiles) collectors() []prometheus.Collector {
	const expiryHelp = "When the certificate in use ends (Unix time): the client port's (server), the peer certificate (peer), the CA bundle's earliest (ca)."
	expiry := func(which string, f func(*certSet) time.Time) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "djinn_tls_certificate_expiry_timestamp_seconds", Help: expiryHelp,
			ConstLabels: prometheus.Labels{"certificate": which}}, func() float64 { return float64(f(cf.cur.Load()).Unix()) })
	}
	const reloadHelp = "Changes of the TLS files since the start: loaded (in use for new connections) or refused (the files could not be used; the certificates loaded before stay)."
	reloads := func(result string, n *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "djinn_tls_reloads_total", Help: reloadHelp,
			ConstLabels: prometheus.Labels{"result": result}}, func() float64 { return float64(n.Load()) })
	}
	return []prometheus.Collector{
		expiry("server", func(s *certSet) time.Time { return s.cert.Leaf.NotAfter }),
		expiry("peer", func(s *certSet) time.Time { return s.peer.Leaf.NotAfter }),
		expiry("ca", func(s *certSet) time.Time { return s.caExpiry }),
		reloads("loaded", &cf.reloaded), reloads("refused", &cf.refused),
	}
}
