package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/secret"
	"github.com/djinn-go/djinn/internal/server"
)

// joinSecret returns the option that presents the cluster's join secret —
// the operator role of a cluster without mutual TLS — or nil. The secret
// comes from --join-secret-file (DJINN_JOIN_SECRET_FILE); without it, when
// every --server endpoint is on this machine, from the default data
// directory of a server started here (djinn-data/join-secret), if there
// is one, presented to this machine alone (client.WithLocalJoinSecret).
// Either goes to the --server cluster's members alone: a command that
// follows a reference elsewhere (a listener, a landlord, another
// cluster's member) does not send it there. A secret is never sent to
// another machine unless asked.
func (g *globals) joinSecret() (client.Option, error) {
	path := g.secretFile
	if path == "" {
		path = filepath.Join(server.Default().DataDir, secret.FileName)
		if !loopback(g.server) {
			return nil, nil
		}
		s, err := secret.Load(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("join secret: %w", err)
		}
		return client.WithLocalJoinSecret(s.String()), nil
	}
	s, err := secret.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--join-secret-file: %w", err)
	}
	return client.WithJoinSecret(s.String()), nil
}

// loopback reports whether every endpoint of a --server value is a
// loopback address.
func loopback(servers string) bool {
	eps, err := client.SplitEndpoints(servers)
	if err != nil || len(eps) == 0 {
		return false
	}
	for _, ep := range eps {
		host, _, err := net.SplitHostPort(ep)
		if err != nil {
			return false
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return false
		}
	}
	return true
}
