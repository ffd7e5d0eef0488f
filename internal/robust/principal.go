package robust

import (
	"crypto/tls"
	"fmt"
	"testing"

	"github.com/djinn-go/djinn/internal/server/servertest"
)

// Principal is one of the suite's client principals: the cluster runs
// under mutual TLS, and each worker calls as one of them.
type Principal int

const (
	Alice Principal = iota
	Bob
	principals
)

// principalNames are the common names of the principals' certificates.
var principalNames = [principals]string{"robust-alice", "robust-bob"}

// String is the principal as the server names it.
func (p Principal) String() string { return "cn:" + principalNames[p] }

// principalOf is the principal a worker id calls as: the workers of each
// workload alternate between them.
func principalOf(id int) Principal { return Principal(id % int(principals)) }

// Certs is a cluster's mutual TLS, as a deployment has it: a CA, the
// client port's server certificate, a peer certificate for each member
// and a client certificate for each principal, written in a test's
// temporary directory.
type Certs struct {
	CA, ServerCert, ServerKey string
	peers                     map[string][2]string    // member id → certificate and key paths
	clients                   [principals]*tls.Config // each principal's client configuration
}

// NewCerts makes a CA and the certificates of a cluster of n members.
func NewCerts(t testing.TB, n int) *Certs {
	t.Helper()
	pki := servertest.NewPKI(t)
	c := &Certs{CA: pki.CA, ServerCert: pki.ServerCert, ServerKey: pki.ServerKey, peers: map[string][2]string{}}
	for i := range n {
		cert, key := pki.NewPeer(t, memberID(i))
		c.peers[memberID(i)] = [2]string{cert, key}
	}
	for p := range principals {
		c.clients[p] = pki.TLSFor(pki.NewClient(t, principalNames[p]))
	}
	return c
}

// memberID is the i-th member's node id.
func memberID(i int) string { return fmt.Sprintf("robust-member-%c", 'a'+i) }

// serveFlags are the TLS flags of member id's djinn serve: TLS on the
// client port with client certificates required, its peer certificate
// for the Raft port and for joining.
func (c *Certs) serveFlags(id string) []string {
	peer := c.peers[id]
	return []string{"--tls-cert", c.ServerCert, "--tls-key", c.ServerKey, "--tls-ca", c.CA,
		"--tls-client-auth", "--tls-peer-cert", peer[0], "--tls-peer-key", peer[1]}
}
