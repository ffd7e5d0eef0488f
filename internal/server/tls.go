package server

import (
	"crypto/tls"
	"errors"

	"google.golang.org/grpc/credentials"

	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/tlsfiles"
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
	// server is the client port's, admin the admin port's, peer the Raft
	// port's (accepting; peerDial makes each dial's), out the server's
	// own calls'. All nil without TLS.
	server, admin, peer *tls.Config
	peerDial            func() *tls.Config
	out                 credentials.TransportCredentials
	// node is the node id the peer certificate names.
	node string
	// files are the PEM files the configurations read, again when they
	// change (certs.go).
	files *tlsfiles.Files
}

// loadTLS reads the certificates c names and builds the client port's,
// the admin port's, the Raft port's and the outgoing calls'
// configurations.
func loadTLS(c TLSConfig) (tlsSetup, error) {
	if c.Cert == "" {
		return tlsSetup{}, nil
	}
	f, node, err := loadCertFiles(c)
	if err != nil {
		return tlsSetup{}, err
	}
	auth := tls.VerifyClientCertIfGiven // clients may be anonymous; a peer still proves itself
	if c.ClientAuth {
		auth = tls.RequireAndVerifyClientCert
	}
	return tlsSetup{
		server: f.ServerConfig(serverPair, auth, []string{"h2"}, nil),
		// The admin port verifies a client certificate when given (the
		// console's identities, the operator's) but does not ask it of
		// probes and scrapers.
		admin:    f.ServerConfig(serverPair, tls.VerifyClientCertIfGiven, []string{"http/1.1"}, nil),
		peer:     f.ServerConfig(peerPair, tls.RequireAndVerifyClientCert, nil, unrevokedPeer(f)),
		peerDial: peerDial(f), out: f.Creds(peerPair), node: node, files: f,
	}, nil
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
