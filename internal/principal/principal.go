// Package principal names who is calling. The gRPC edge puts the caller's
// principal in the request context (from its verified TLS client
// certificate); services record it with every resource they create and
// answer "not found" to any other principal (DESIGN.md section 7).
//
// Without client certificates every caller is the anonymous principal "".
// Leases are not tied to principals: a lease cookie is a capability that
// holders pass on (to a renewal service, for example), as Jini passed
// leases.
//
// A peer — another server of the cluster — proves itself with a peer
// certificate: one that carries a URI SAN djinn-peer://NODE-ID. Every peer
// is the one principal Peer (a cluster's servers act for each other: what
// one leader created, the next one carries on), and its node id travels
// beside it (PeerNode). Client certificates must not carry such a SAN: the
// CA that issues one makes its holder a member of the cluster.
package principal

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
)

// Peer is the principal of every peer certificate. No other certificate
// names it: their principals all start with "uri:", "dns:" or "cn:".
const Peer = "peer"

// PeerScheme is the scheme of the URI SAN that makes a certificate a peer
// certificate: djinn-peer://NODE-ID.
const PeerScheme = "djinn-peer"

type key struct{}

type peerKey struct{}

type certKey struct{}

// WithCertificate returns ctx carrying the verified certificate that named
// its caller, for checks that look at the certificate itself (revocation).
func WithCertificate(ctx context.Context, c *x509.Certificate) context.Context {
	return context.WithValue(ctx, certKey{}, c)
}

// Certificate returns the certificate that named the caller, nil when none
// did.
func Certificate(ctx context.Context) *x509.Certificate {
	c, _ := ctx.Value(certKey{}).(*x509.Certificate)
	return c
}

// With returns ctx carrying principal p.
func With(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, key{}, p)
}

// From returns the principal in ctx ("" when anonymous).
func From(ctx context.Context) string {
	p, _ := ctx.Value(key{}).(string)
	return p
}

// Named reports whether ctx names its caller, by With or WithPeer; a
// context that names none is the local principal's ("" from From).
func Named(ctx context.Context) bool {
	_, ok := ctx.Value(key{}).(string)
	return ok
}

// WithPeer returns ctx carrying the Peer principal of node.
func WithPeer(ctx context.Context, node string) context.Context {
	return context.WithValue(With(ctx, Peer), peerKey{}, node)
}

// PeerNode returns the node id of the peer calling, if a peer is.
func PeerNode(ctx context.Context) (string, bool) {
	n, ok := ctx.Value(peerKey{}).(string)
	return n, ok
}

// OfCertificate names the principal a verified certificate proves: Peer
// for a peer certificate, else its first URI SAN ("uri:URI"), else its
// first DNS SAN ("dns:NAME"), else its subject common name ("cn:NAME"). The
// prefixes keep names apart: no URI SAN can pass for a common name.
func OfCertificate(c *x509.Certificate) string {
	switch _, peer := PeerNodeOf(c); {
	case peer:
		return Peer
	case len(c.URIs) > 0:
		return "uri:" + c.URIs[0].String()
	case len(c.DNSNames) > 0:
		return "dns:" + c.DNSNames[0]
	default:
		return "cn:" + c.Subject.CommonName
	}
}

// PeerNodeOf returns the node id of a peer certificate: the NODE-ID of its
// djinn-peer://NODE-ID URI SAN. A certificate with none, or with an empty
// or malformed one, is no peer's.
func PeerNodeOf(c *x509.Certificate) (string, bool) {
	for _, u := range c.URIs {
		if node, ok := peerNode(u); ok {
			return node, true
		}
	}
	return "", false
}

func peerNode(u *url.URL) (string, bool) {
	if u.Scheme != PeerScheme || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	return u.Host, true
}

// Check refuses a principal name that no certificate can prove, naming
// the forms it may take: what configuration names as operators.
func Check(name string) error {
	kind, rest, ok := strings.Cut(name, ":")
	switch {
	case name == Peer:
		return fmt.Errorf("principal %q: the peers' principal; name a client's", name)
	case !ok || rest == "" || (kind != "uri" && kind != "dns" && kind != "cn"):
		return fmt.Errorf("principal %q: want cn:COMMON-NAME, dns:DNS-NAME or uri:URI, as a client certificate names it", name)
	case kind == "uri":
		u, err := url.Parse(rest)
		if err != nil || u.Scheme == "" {
			return fmt.Errorf("principal %q: not a URI with a scheme", name)
		}
		if u.Scheme == PeerScheme {
			return fmt.Errorf("principal %q: a peer certificate's name; name a client's", name)
		}
	}
	return nil
}
