package client

import (
	"context"
	"net"
	"slices"
	"strings"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn/internal/secret"
)

// WithJoinSecret makes calls present a cluster's join secret (the
// join-secret file in the data directory of its first node), which gives
// the operator role to a client of a cluster without mutual TLS: adding
// and removing members, and the other administrative calls. Whoever
// receives it holds the role, so it goes to the cluster the client was
// told to reach alone: with the calls to the cluster Dial reached (or
// Pool.Follow), to its endpoints and to the members its member list names
// (those it learns later included, and the leader a member names), and
// with no other call of the pool's — not to a listener, a landlord, a
// participant or another cluster's member that a reference or an event
// names, nor to a cluster the pool learnt from one. A Pool told of no
// cluster sends it to no one.
func WithJoinSecret(s string) Option {
	return func(o *options) { o.joinSecret = &joinSecret{secret: s} }
}

// WithJoinSecretTo is WithJoinSecret for a program that knows its
// cluster's members itself (a djinn server calling its peers): the secret
// goes, besides, with the calls of the pool's connection to each endpoint
// that peer accepts at the time of the call. peer must be safe for
// concurrent use.
func WithJoinSecretTo(s string, peer func(endpoint string) bool) Option {
	return func(o *options) { o.joinSecret = &joinSecret{secret: s, peer: peer} }
}

// WithLocalJoinSecret is WithJoinSecret for calls to this machine alone:
// the secret goes with the calls to the cluster the client was told to
// reach, as WithJoinSecret's, that are to loopback endpoints (127.0.0.0/8,
// ::1, localhost), and with no other. It suits a secret read from a
// server's data directory on this machine. It replaces WithJoinSecret, as
// WithJoinSecret replaces it.
func WithLocalJoinSecret(s string) Option {
	return func(o *options) { o.joinSecret = &joinSecret{secret: s, local: true} }
}

// joinSecret is a join secret and where it may go.
type joinSecret struct {
	secret string
	local  bool                       // to loopback audiences only
	peer   func(endpoint string) bool // WithJoinSecretTo: endpoints it goes to besides
}

// secretCreds carries a join secret in the metadata of the calls of one
// connection while inScope says the connection reaches the cluster the
// client was told to reach; with local, of calls to loopback endpoints
// only. A session's stream is one call: it presents the secret, or not,
// when it opens.
type secretCreds struct {
	joinSecret
	inScope func() bool
}

// secretOption returns the dial option that presents the pool's join
// secret on a connection's calls while inScope, none without a secret.
func (p *Pool) secretOption(inScope func() bool) []grpc.DialOption {
	if p.opts.joinSecret == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithPerRPCCredentials(secretCreds{*p.opts.joinSecret, inScope})}
}

func (c secretCreds) GetRequestMetadata(_ context.Context, uri ...string) (map[string]string, error) {
	if !c.inScope() || c.local && !loopbackAudience(uri) {
		return nil, nil
	}
	return map[string]string{secret.Header: c.secret}, nil
}

// RequireTransportSecurity is false: a cluster without TLS has a join
// secret too (on loopback, or a network it trusts).
func (secretCreds) RequireTransportSecurity() bool { return false }

// inScope reports whether endpoint is one of the join secret's audience:
// an endpoint of a cluster the pool was told to reach (Dial, Follow), a
// member its last member list named, or the leader a member named; or one
// WithJoinSecretTo's peer accepts.
func (p *Pool) inScope(endpoint string) bool {
	if peer := p.opts.joinSecret.peer; peer != nil && peer(endpoint) {
		return true
	}
	return p.toldClusterOf(endpoint) != nil
}

// toldClusterOf returns the cluster the pool was told to reach that
// endpoint belongs to, nil if none.
func (p *Pool) toldClusterOf(endpoint string) *cluster {
	p.mu.Lock()
	told := p.told
	p.mu.Unlock()
	for _, cl := range told {
		if cl.reaches(endpoint) {
			return cl
		}
	}
	return nil
}

// reaches reports whether endpoint is one of cl's: a seed, a member as
// last listed, or the leader as last heard.
func (cl *cluster) reaches(endpoint string) bool {
	if slices.Contains(cl.seeds, endpoint) || cl.leaderEndpoint() == endpoint {
		return true
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	_, found := slices.BinarySearch(cl.members, endpoint) // sorted (setMembers)
	return found
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
