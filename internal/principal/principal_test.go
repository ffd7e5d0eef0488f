package principal

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"
)

func uris(t *testing.T, ss ...string) []*url.URL {
	var out []*url.URL
	for _, s := range ss {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

func TestOfCertificate(t *testing.T) {
	tests := []struct {
		cert *x509.Certificate
		want string
		node string
	}{
		{&x509.Certificate{URIs: uris(t, "spiffe://djinn/alice"), DNSNames: []string{"a.example"}, Subject: pkix.Name{CommonName: "a"}}, "uri:spiffe://djinn/alice", ""},
		{&x509.Certificate{DNSNames: []string{"a.example"}, Subject: pkix.Name{CommonName: "a"}}, "dns:a.example", ""},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "a"}}, "cn:a", ""},
		{&x509.Certificate{URIs: uris(t, "spiffe://djinn/x", "djinn-peer://n2"), Subject: pkix.Name{CommonName: "n2"}}, Peer, "n2"},
		{&x509.Certificate{URIs: uris(t, "djinn-peer://n2/")}, Peer, "n2"},
		// Not peer SANs: no node, or more than a node.
		{&x509.Certificate{URIs: uris(t, "djinn-peer:n2")}, "uri:djinn-peer:n2", ""},
		{&x509.Certificate{URIs: uris(t, "peer")}, "uri:peer", ""},
		{&x509.Certificate{URIs: uris(t, "cn:a")}, "uri:cn:a", ""},
		{&x509.Certificate{URIs: uris(t, "djinn-peer://n2/x")}, "uri:djinn-peer://n2/x", ""},
		{&x509.Certificate{URIs: uris(t, "djinn-peer://u@n2")}, "uri:djinn-peer://u@n2", ""},
	}
	for _, tt := range tests {
		if got := OfCertificate(tt.cert); got != tt.want {
			t.Errorf("OfCertificate(%v) = %q, want %q", tt.cert.URIs, got, tt.want)
		}
		node, ok := PeerNodeOf(tt.cert)
		if node != tt.node || ok != (tt.node != "") {
			t.Errorf("PeerNodeOf(%v) = %q, %v; want %q", tt.cert.URIs, node, ok, tt.node)
		}
	}
	if From(context.Background()) != "" || From(With(context.Background(), "cn:b")) != "cn:b" {
		t.Error("the context does not carry the principal")
	}
	ctx := WithPeer(context.Background(), "n3")
	if n, ok := PeerNode(ctx); From(ctx) != Peer || n != "n3" || !ok {
		t.Error("the context does not carry the peer")
	}
	if _, ok := PeerNode(With(context.Background(), Peer)); ok {
		t.Error("a principal named like a peer is no peer")
	}
}

func TestCheck(t *testing.T) {
	for _, ok := range []string{"cn:alice", "dns:a.example", "uri:spiffe://djinn/alice"} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "alice", "cn:", "peer", "uri:alice", "uri:djinn-peer://n1", "email:a@b"} {
		if err := Check(bad); err == nil {
			t.Errorf("Check(%q) accepted", bad)
		}
	}
}

type otherKey struct{}

// TestNamed: a context names its caller once With or WithPeer named one,
// the empty local principal included, and not before.
func TestNamed(t *testing.T) {
	ctx := context.Background()
	if Named(ctx) {
		t.Error("a bare context names a caller")
	}
	for name, named := range map[string]context.Context{
		"With":          With(ctx, "cn:alice"),
		"With (empty)":  With(ctx, ""),
		"WithPeer":      WithPeer(ctx, "n1"),
		"under a value": context.WithValue(With(ctx, "cn:alice"), otherKey{}, 1),
	} {
		if !Named(named) {
			t.Errorf("%s: Named = false, want true", name)
		}
	}
}
