package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
)

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// dial connects to --server (one endpoint or several, comma-separated, or a
// DNS name with several addresses) with the TLS flags.
func (g *globals) dial(ctx context.Context) (*client.Client, error) {
	if eps, err := client.SplitEndpoints(g.server); err != nil || len(eps) == 0 {
		if err == nil {
			err = djinn.Errorf(djinn.InvalidArgument, "no endpoint given")
		}
		return nil, fmt.Errorf("--server: %w", err)
	}
	return g.dialAt(ctx, g.server)
}

// dialAt connects to addr with the TLS flags.
func (g *globals) dialAt(ctx context.Context, addr string) (*client.Client, error) {
	if g.output != "text" && g.output != "json" {
		return nil, fmt.Errorf("--output %q: want text or json", g.output)
	}
	var opts []client.Option
	if g.tlsCA != "" || g.cert != "" {
		cfg, err := g.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, client.WithTLS(cfg))
	}
	sec, err := g.joinSecret()
	if err != nil {
		return nil, err
	}
	if sec != nil {
		opts = append(opts, sec)
	}
	return client.Dial(ctx, addr, opts...)
}

// tlsConfig is the client's TLS: --ca verifies the server, --cert and
// --key are its own certificate.
func (g *globals) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if g.tlsCA != "" {
		pem, err := os.ReadFile(g.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca %s: no PEM certificates", g.tlsCA)
		}
		cfg.RootCAs = pool
	}
	if g.cert != "" || g.key != "" {
		cert, err := tls.LoadX509KeyPair(g.cert, g.key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// print writes v as JSON with -o json, or calls text otherwise.
func (g *globals) print(w io.Writer, v any, text func(io.Writer)) error {
	if g.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	text(w)
	return nil
}
