// Package principal names who is calling. The gRPC edge puts the caller's
// principal in the request context (from its verified TLS client
// certificate); services record it with every resource they create and
// answer "not found" to any other principal (DESIGN.md section 7).
//
// Without client certificates every caller is the anonymous principal "".
// Leases are not tied to principals: a lease cookie is a capability that
// holders pass on (to a renewal service, for example), as Jini passed
// leases.
package principal

import (
	"context"
	"crypto/x509"
)

type key struct{}

// With returns ctx carrying principal p.
func With(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, key{}, p)
}

// From returns the principal in ctx ("" when anonymous).
func From(ctx context.Context) string {
	p, _ := ctx.Value(key{}).(string)
	return p
}

// OfCertificate names the principal a verified certificate proves: its
// first URI SAN, else its first DNS SAN, else its subject common name.
func OfCertificate(c *x509.Certificate) string {
	switch {
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	case len(c.DNSNames) > 0:
		return "dns:" + c.DNSNames[0]
	default:
		return "cn:" + c.Subject.CommonName
	}
}
