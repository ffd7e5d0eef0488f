package client

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/keepalive"
)

// How a connection notices that its peer is gone, and how it comes back.
//
// A peer whose host powers off, or a network that starts dropping packets,
// sends no reset: without pings a connection stays up until TCP gives up
// (a quarter of an hour on Linux), and every call on it waits that long.
// So every connection this package makes (a pool's per-endpoint ones and a
// cluster's) pings its peer once it has read nothing for the keepalive
// interval, idle or not, and closes itself when no answer comes within the
// keepalive timeout: a dead path is found within their sum, the calls on
// it fail as Unavailable (indefinite, so retried), and the next call
// connects again. The servers of this module (a djinn server, Listen)
// accept a ping every DefaultKeepaliveMinTime, with or without calls in
// flight; a service of your own that djinn calls (a listener, a
// participant) should serve with ServerKeepalive, or gRPC's default policy
// closes an idle connection after a few pings.
//
// A connection attempt (TCP, TLS and HTTP/2 handshakes) that has not
// finished within the connect timeout is abandoned and tried again after
// a backoff: a peer that swallowed a handshake during a network fault is
// reached again within seconds of the fault's end. Each further failure
// lengthens the backoff, and an attempt is given at least its backoff, so
// a peer on a link too slow for the first attempts is reached all the same.

// Defaults of the keepalive and connect parameters.
const (
	// DefaultKeepaliveTime is the idle time after which a connection
	// pings its peer: above DefaultKeepaliveMinTime, which servers
	// enforce, with room for a late timer; one small frame each way per
	// interval on an idle connection.
	DefaultKeepaliveTime = 15 * time.Second
	// DefaultKeepaliveTimeout is how long a ping may go unanswered: far
	// beyond any round trip, so a busy peer is not mistaken for a dead
	// one. A dead path is found within 25s.
	DefaultKeepaliveTimeout = 10 * time.Second
	// DefaultKeepaliveMinTime is the least interval between a peer's pings
	// that servers accept: gRPC's clients never ping more often.
	DefaultKeepaliveMinTime = 10 * time.Second
	// MinKeepaliveTime is the least keepalive interval gRPC's clients
	// use; a shorter one is raised to it.
	MinKeepaliveTime = 10 * time.Second
	// DefaultConnectTimeout bounds a connection attempt: a few round
	// trips and two lost SYNs fit many times over, and it is half the
	// time a djinn server gives a connection to finish its handshakes.
	DefaultConnectTimeout = 5 * time.Second
)

// reconnectBackoff spaces the attempts to connect to a peer: gRPC's
// backoff, with its cap lowered from two minutes, so that a member or
// listener back from a restart is reached again within half a minute.
var reconnectBackoff = backoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 30 * time.Second}

// WithKeepalive sets the keepalive parameters of the connections: a
// connection that has read nothing for interval pings its peer, and is
// closed when no answer comes within timeout (defaults
// DefaultKeepaliveTime, DefaultKeepaliveTimeout). An interval below
// MinKeepaliveTime is raised to it; values of zero keep the defaults.
func WithKeepalive(interval, timeout time.Duration) Option {
	return func(o *options) {
		if interval > 0 {
			o.keepTime = interval
		}
		if timeout > 0 {
			o.keepTimeout = timeout
		}
	}
}

// WithConnectTimeout bounds a connection attempt: TCP connect, TLS and
// HTTP/2 handshakes (default DefaultConnectTimeout; zero keeps it). Later
// attempts after failures are given at least their backoff.
func WithConnectTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.connectTimeout = d
		}
	}
}

// setLinkDefaults gives o the default keepalive and connect parameters.
func (o *options) setLinkDefaults() {
	o.keepTime, o.keepTimeout, o.connectTimeout = DefaultKeepaliveTime, DefaultKeepaliveTimeout, DefaultConnectTimeout
}

// linkOptions are the dial options of every connection: keepalive and
// connect parameters. WithDialOptions comes after them, and may change them.
func (o *options) linkOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: o.keepTime, Timeout: o.keepTimeout, PermitWithoutStream: true}),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnectBackoff, MinConnectTimeout: o.connectTimeout}),
	}
}

// ServerKeepalive is the gRPC server option that accepts the keepalive
// pings of this package's connections: one every minTime at most (zero:
// DefaultKeepaliveMinTime), with or without calls in flight. A client
// that pings more often is sent GOAWAY ("too_many_pings") and closed.
// Listen and djinn servers use it; serve a service that djinn calls with
// it too.
func ServerKeepalive(minTime time.Duration) grpc.ServerOption {
	if minTime <= 0 {
		minTime = DefaultKeepaliveMinTime
	}
	return grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: minTime, PermitWithoutStream: true})
}
