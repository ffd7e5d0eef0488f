package server

import (
	"crypto/tls"
	"crypto/x509"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/tlsfiles"
)

// Certificates are renewed without a restart. A TLS server reads its PEM
// files (certificate and key, peer certificate and key, CA bundle) at
// start, and again whenever one of them has changed (internal/tlsfiles):
// it looks before every TLS handshake it takes part in (a client
// connecting to the client or admin port, a peer to the Raft port, the
// server calling another server, a peer or a listener) and once a minute.
// A change takes effect for the connections made after it; those already
// open keep the certificates they were made with. Files that changed but
// cannot be used together (a certificate without its new key yet, a file
// half written, a peer certificate of another node, a CA file without
// certificates) are refused: the server logs why, counts it, and goes on
// with the certificates it loaded before, until the files change again.

// certCheckInterval is how often the files are looked at without a
// handshake asking.
const certCheckInterval = time.Minute

// The pairs of a server's files, in tlsfiles.Set.Certs: the client port's
// certificate, and the peer certificate (the same files unless TLSConfig
// names its own).
const (
	serverPair = 0
	peerPair   = 1
)

// loadCertFiles reads the files c names for the first time, and returns
// them and the node the peer certificate names; a renewal must name it too.
func loadCertFiles(c TLSConfig) (*tlsfiles.Files, string, error) {
	peer := tlsfiles.Pair{Name: "cert", Cert: c.Cert, KeyName: "key", Key: c.Key}
	if c.PeerCert != "" {
		peer = tlsfiles.Pair{Name: "peer-cert", Cert: c.PeerCert, KeyName: "peer-key", Key: c.PeerKey}
	}
	var node string
	accept := func(set *tlsfiles.Set) error {
		got, ok := principal.PeerNodeOf(set.Certs[peerPair].Leaf)
		switch {
		case !ok:
			return djinn.Errorf(djinn.InvalidArgument, "tls: certificate %s carries no %s://NODE-ID URI SAN, so the Raft port cannot tell this node from a client; give the node a peer certificate (tls peer-cert and peer-key, or a cert that carries the SAN) — see the README's Security section", peer.Cert, principal.PeerScheme)
		case node == "":
			node = got // the first loading
		case got != node:
			return djinn.Errorf(djinn.InvalidArgument, "tls: the renewed peer certificate is node %q's (%s://%s), not this node's (%q); a node keeps its id: issue its certificate for %s://%s", got, principal.PeerScheme, got, node, principal.PeerScheme, node)
		}
		return nil
	}
	f, err := tlsfiles.Load(tlsfiles.Config{
		Pairs: []tlsfiles.Pair{{Name: "cert", Cert: c.Cert, KeyName: "key", Key: c.Key}, peer},
		CA:    c.CA, CRL: c.CRL, Accept: accept, What: "serving",
	})
	if err != nil {
		return nil, "", err
	}
	return f, node, nil
}

// peerDial is the configuration of a connection to a peer's Raft port:
// the current peer certificate presented, the other end verified against
// the current CA and required to be a peer (unrevoked).
func peerDial(f *tlsfiles.Files) func() *tls.Config {
	return func() *tls.Config {
		c := f.DialConfig(peerPair)
		c.VerifyConnection = unrevokedPeer(f)
		return c
	}
}

// unrevokedPeer admits, on both ends of a Raft connection, only a
// verified peer certificate no revocation list loaded lists.
func unrevokedPeer(f *tlsfiles.Files) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if err := onlyPeers(cs); err != nil {
			return err
		}
		return revoked(f, cs.PeerCertificates[0])
	}
}

// revoked refuses c when a revocation list loaded lists it.
func revoked(f *tlsfiles.Files, c *x509.Certificate) error {
	if !f.InUse().Revoked(c) {
		return nil
	}
	return djinn.Errorf(djinn.PermissionDenied, "certificate %q (serial %s, issuer %q) is revoked by the server's revocation list (tls crl %s): the caller needs a new certificate", c.Subject, c.SerialNumber.Text(16), c.Issuer, f.CRL())
}

// certCollectors are the files' figures for /metrics: when each
// certificate in use ends, and the loadings taken and refused since the
// start.
func certCollectors(f *tlsfiles.Files) []prometheus.Collector {
	const expiryHelp = "When the certificate in use ends (Unix time): the client port's (server), the peer certificate (peer), the CA bundle's earliest (ca)."
	expiry := func(which string, at func(*tlsfiles.Set) time.Time) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "djinn_tls_certificate_expiry_timestamp_seconds", Help: expiryHelp,
			ConstLabels: prometheus.Labels{"certificate": which}}, func() float64 { return float64(at(f.InUse()).Unix()) })
	}
	const reloadHelp = "Changes of the TLS files since the start: loaded (in use for new connections) or refused (the files could not be used; the certificates loaded before stay)."
	reloads := func(result string, n func() int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "djinn_tls_reloads_total", Help: reloadHelp,
			ConstLabels: prometheus.Labels{"result": result}}, func() float64 { return float64(n()) })
	}
	cs := []prometheus.Collector{
		expiry("server", func(s *tlsfiles.Set) time.Time { return s.Certs[serverPair].Leaf.NotAfter }),
		expiry("peer", func(s *tlsfiles.Set) time.Time { return s.Certs[peerPair].Leaf.NotAfter }),
		expiry("ca", func(s *tlsfiles.Set) time.Time { return s.CAExpiry }),
		reloads("loaded", f.Loaded), reloads("refused", f.Refused),
	}
	if f.CRL() != "" {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "djinn_tls_crl_next_update_timestamp_seconds",
			Help: "The earliest next update the revocation lists in use promise (Unix time): past it, write newer lists over the file."},
			func() float64 { return float64(f.InUse().CRLUpdate.Unix()) }))
	}
	return cs
}
