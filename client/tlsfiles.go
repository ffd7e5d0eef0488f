package client

import (
	"context"
	"crypto/tls"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/tlsfiles"
)

// fileCreds are WithTLSFiles' credentials: the files are read at the first
// handshake (and at the next while they cannot be), then looked at before
// every handshake (internal/tlsfiles).
type fileCreds struct {
	cfg  tlsfiles.Config
	pair int   // the client certificate's pair, -1: none
	bad  error // the option's own mistake, said at every handshake

	mu    sync.Mutex
	files *tlsfiles.Files // guarded by mu: nil until loaded
}

func newFileCreds(ca, cert, key string) *fileCreds {
	c := &fileCreds{cfg: tlsfiles.Config{CA: ca, What: "connecting"}, pair: -1}
	switch {
	case cert != "" && key != "":
		c.cfg.Pairs = []tlsfiles.Pair{{Name: "cert", Cert: cert, KeyName: "key", Key: key}}
		c.pair = 0
	case cert != "" || key != "":
		c.bad = djinn.Errorf(djinn.InvalidArgument, "WithTLSFiles: certificate %q and key %q: give both, or neither for no client certificate", cert, key)
	}
	return c
}

// now returns the credentials of the files as they are now.
func (c *fileCreds) now() (credentials.TransportCredentials, error) {
	if c.bad != nil {
		return nil, c.bad
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil {
		f, err := tlsfiles.Load(c.cfg)
		if err != nil {
			return nil, err
		}
		c.files = f
	}
	return c.files.Creds(c.pair), nil
}

func (c *fileCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cr, err := c.now()
	if err != nil {
		return nil, nil, err
	}
	return cr.ClientHandshake(ctx, authority, conn)
}

func (c *fileCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, djinn.Errorf(djinn.Internal, "WithTLSFiles credentials dial; they accept no connection")
}

func (c *fileCreds) Info() credentials.ProtocolInfo {
	return credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12}).Info()
}

func (c *fileCreds) Clone() credentials.TransportCredentials { return c }
func (c *fileCreds) OverrideServerName(string) error         { return nil } //nolint:staticcheck // part of the interface
