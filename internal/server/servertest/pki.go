package servertest

import "github.com/djinn-go/djinn/internal/testpki"

// PKI is testpki's throwaway certificate authority, named here for the
// tests that start servers with it.
type PKI = testpki.PKI

// ServerNode is the node id the PKI's server certificate names.
const ServerNode = testpki.ServerNode

// NewPKI creates a CA and its certificates in t.TempDir().
var NewPKI = testpki.NewPKI

// SelfSignedPeer returns a peer certificate for node that signs itself.
var SelfSignedPeer = testpki.SelfSignedPeer
