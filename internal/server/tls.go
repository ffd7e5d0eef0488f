package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/principal"
)

// TLS on the client port and the Raft port (DESIGN.md 7). A node has a
// server certificate for its client port and a peer certificate: one
// that carries a URI SAN djinn-peer://NODE-ID, which only peers hold.
// The Raft port accepts and dials only peer certificates the CA signed;
// the client port takes client certificates (and a peer's, which makes
// the caller a peer); the server's own calls — joining, delivering
// events, renewing — present its peer certificate. One certificate may
// serve as both when it carries the peer SAN.

// tlsSetup is what a server's TLS configuration comes to.
type tlsSetup struct {
	// server is the client port's; peer the Raft port's (accepting and
	// dialling); out the server's own calls'. All nil without TLS.
	server, peer, out *tls.Config
	// node is the node id the peer certificate names.
	node string
}

// loadTLS reads the certificates c names and builds the client port's,
// the Raft port's and the outgoing calls' configurations.
func loadTLS(c TLSConfig) (tlsSetup, error) {
	if c.Cert == "" {
		return tlsSetup{}, nil
	}
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return tlsSetup{}, djinn.Errorf(djinn.InvalidArgument, "tls cert %s key %s: %v", c.Cert, c.Key, err)
	}
	peerCert, peerFile := cert, c.Cert
	if c.PeerCert != "" {
		peerFile = c.PeerCert
		if peerCert, err = tls.LoadX509KeyPair(c.PeerCert, c.PeerKey); err != nil {
			return tlsSetup{}, djinn.Errorf(djinn.InvalidArgument, "tls peer-cert %s peer-key %s: %v", c.PeerCert, c.PeerKey, err)
		}
	}
	node, ok := principal.PeerNodeOf(peerCert.Leaf)
	if !ok {
		return tlsSetup{}, djinn.Errorf(djinn.InvalidArgument, "tls: certificate %s carries no %s://NODE-ID URI SAN, so the Raft port cannot tell this node from a client; give the node a peer certificate (tls peer-cert and peer-key, or a cert that carries the SAN) — see the README's Security section", peerFile, principal.PeerScheme)
	}
	pem, err := os.ReadFile(c.CA)
	if err != nil {
		return tlsSetup{}, djinn.Errorf(djinn.InvalidArgument, "tls ca %s: %v", c.CA, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return tlsSetup{}, djinn.Errorf(djinn.InvalidArgument, "tls ca %s: no PEM certificates", c.CA)
	}
	server := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, ClientCAs: pool}
	if c.ClientAuth {
		server.ClientAuth = tls.RequireAndVerifyClientCert
	} else {
		// Clients may be anonymous; a peer still proves itself.
		server.ClientAuth = tls.VerifyClientCertIfGiven
	}
	peer := &tls.Config{
		Certificates: []tls.Certificate{peerCert}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, RootCAs: pool,
		VerifyConnection: onlyPeers,
	}
	out := &tls.Config{Certificates: []tls.Certificate{peerCert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tlsSetup{server: server, peer: peer, out: out, node: node}, nil
}

// errNotPeer refuses a Raft connection whose other end is no peer.
var errNotPeer = errors.New("raft: the other end's certificate is no peer certificate (it carries no " + principal.PeerScheme + "://NODE-ID URI SAN)")

// onlyPeers admits, on both ends of a Raft connection, only a verified
// peer certificate.
func onlyPeers(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errNotPeer
	}
	if _, ok := principal.PeerNodeOf(cs.PeerCertificates[0]); !ok {
		return errNotPeer
	}
	return nil
}

// adminTLS is the admin port's configuration under TLS: the client
// port's certificate and CA, a client certificate verified when given (the
// console's identities, the operator's) but not asked of probes and
// scrapers; nil without TLS.
func adminTLS(server *tls.Config) *tls.Config {
	if server == nil {
		return nil
	}
	c := server.Clone()
	c.ClientAuth = tls.VerifyClientCertIfGiven
	c.NextProtos = []string{"http/1.1"}
	return c
}
