package server

import (
	"crypto/tls"
	"crypto/x509"
	"os"

	"github.com/djinn-go/djinn"
)

// loadTLS builds the server's, the Raft peers' and the outgoing clients'
// TLS configurations (all nil without a certificate).
func loadTLS(c TLSConfig) (server, peer, out *tls.Config, err error) {
	if c.Cert == "" {
		return nil, nil, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, nil, nil, djinn.Errorf(djinn.InvalidArgument, "tls cert %s key %s: %v", c.Cert, c.Key, err)
	}
	var pool *x509.CertPool
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return nil, nil, nil, djinn.Errorf(djinn.InvalidArgument, "tls ca %s: %v", c.CA, err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, nil, djinn.Errorf(djinn.InvalidArgument, "tls ca %s: no PEM certificates", c.CA)
		}
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientAuth {
		server.ClientAuth = tls.RequireAndVerifyClientCert
		server.ClientCAs = pool
	}
	peer = &tls.Config{
		Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, RootCAs: pool,
	}
	if pool == nil {
		peer.ClientAuth = tls.RequireAnyClientCert
	}
	out = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, peer, out, nil
}
