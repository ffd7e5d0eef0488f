package client

import (
	"context"
	"net"
	"strings"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn/internal/secret"
)

// WithJoinSecret makes every call present a cluster's join secret (the
// join-secret file in the data directory of its first node), which gives
// the operator role to a client of a cluster without mutual TLS: adding
// and removing members, and the other administrative calls. Present it to
// that cluster's servers only: whoever receives it holds the role.
func WithJoinSecret(s string) Option {
	return WithDialOptions(grpc.WithPerRPCCredentials(joinSecret{secret: s}))
}

// WithLocalJoinSecret is WithJoinSecret for calls to this machine alone:
// the secret goes with calls to loopback endpoints (127.0.0.0/8, ::1,
// localhost) and with no other call of the pool's — not to a listener, a
// landlord or a service elsewhere that a reference names. It suits a
// secret read from a server's data directory on this machine.
func WithLocalJoinSecret(s string) Option {
	return WithDialOptions(grpc.WithPerRPCCredentials(joinSecret{secret: s, local: true}))
}

// joinSecret carries a join secret in each call's metadata; with local,
// in calls to loopback endpoints only.
type joinSecret struct {
	secret string
	local  bool
}

func (j joinSecret) GetRequestMetadata(_ context.Context, uri ...string) (map[string]string, error) {
	if j.local && !loopbackAudience(uri) {
		return nil, nil
	}
	return map[string]string{secret.Header: j.secret}, nil
}

// loopbackAudience reports whether a call's audience (gRPC's
// "https://AUTHORITY/SERVICE") names loopback endpoints only: the
// authority of a connection to one endpoint is that endpoint; a cluster
// connection's is its seeds, comma-separated.
func loopbackAudience(uri []string) bool {
	if len(uri) == 0 {
		return false
	}
	for _, a := range uri {
		authority, ok := strings.CutPrefix(a, "https://")
		if i := strings.IndexByte(authority, '/'); i >= 0 {
			authority = authority[:i]
		}
		if !ok || authority == "" {
			return false
		}
		for _, ep := range strings.Split(authority, ",") {
			host, _, err := net.SplitHostPort(ep)
			if err != nil {
				host = ep // gRPC leaves out a default port
			}
			host = strings.Trim(host, "[]")
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				return false
			}
		}
	}
	return true
}

// RequireTransportSecurity is false: a cluster without TLS has a join
// secret too (on loopback, or a network it trusts).
func (joinSecret) RequireTransportSecurity() bool { return false }
