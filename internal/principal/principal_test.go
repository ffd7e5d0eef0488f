package principal

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"testing"
)

func TestOfCertificate(t *testing.T) {
	u, _ := url.Parse("spiffe://djinn/alice")
	tests := []struct {
		cert *x509.Certificate
		want string
	}{
		{&x509.Certificate{URIs: []*url.URL{u}, DNSNames: []string{"a.example"}, Subject: pkix.Name{CommonName: "a"}}, "spiffe://djinn/alice"},
		{&x509.Certificate{DNSNames: []string{"a.example"}, Subject: pkix.Name{CommonName: "a"}}, "dns:a.example"},
		{&x509.Certificate{Subject: pkix.Name{CommonName: "a"}}, "cn:a"},
	}
	for _, tt := range tests {
		if got := OfCertificate(tt.cert); got != tt.want {
			t.Errorf("OfCertificate = %q, want %q", got, tt.want)
		}
	}
	if From(context.Background()) != "" || From(With(context.Background(), "cn:b")) != "cn:b" {
		t.Error("the context does not carry the principal")
	}
}
