package replica

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Anything may connect to the raft port: a port scan, a load balancer's
// health check, an HTTP request sent to the wrong port. Raft would log
// each as an error ("failed to decode incoming command: unknown rpc type
// 71"), an alarm for what is no fault of the node. A memberConn looks at
// what a connection sends first: a byte that opens no Raft RPC, or over
// TLS a first record that is no TLS handshake, or without it no proof of
// the join secret (secretstream.go), ends the connection as if
// the other side had hung up (Raft then logs nothing), and strangers says
// so, once a minute at most at Info, counting those it did not say, and
// each at Debug. A connection that opens and closes sending nothing (a TCP
// health check) is no stranger to Raft: it logs nothing either; nor does
// one the node closes as it stops.

// lastRPCType is the last RPC type Raft's network transport sends first
// on a connection (rpcRequestPreVote in hashicorp/raft 1.7).
const lastRPCType = 4

// strangerQuiet is how long strangers keeps quiet at Info after saying one.
const strangerQuiet = time.Minute

// strangers logs the connections that are no member's.
type strangers struct {
	log *slog.Logger
	now func() time.Time

	mu     sync.Mutex
	next   time.Time // guarded by mu: when one is said at Info again
	unsaid int       // guarded by mu: those since the last said at Info
}

const strangerMsg = "a connection to the raft port that is not a djinn member (a port scan, a health check, a client at the wrong port?): closed"

// seen logs a stranger from remote that sent what.
func (s *strangers) seen(remote net.Addr, what string) {
	s.mu.Lock()
	now := s.now()
	say := !now.Before(s.next)
	unsaid := s.unsaid
	if say {
		s.next, s.unsaid = now.Add(strangerQuiet), 0
	} else {
		s.unsaid++
	}
	s.mu.Unlock()
	if !say {
		s.log.Debug(strangerMsg, "remote", remote.String(), "sent", what)
		return
	}
	s.log.Info(strangerMsg, "remote", remote.String(), "sent", what, "unsaid_since_last", unsaid,
		"next", "at most one such line a minute at info; every one at debug")
}

// memberConn is an accepted connection whose first bytes are checked.
// Only Raft's handler reads it, from one goroutine.
type memberConn struct {
	net.Conn
	strangers *strangers
	checked   bool // the first read is done
}

func (c *memberConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, net.ErrClosed) {
		// Closed by the node itself, its transport stopping (only it and
		// the handler close the connection): an end, as the other side
		// hanging up is, not an error to log.
		err = io.EOF
	}
	if c.checked {
		return n, err
	}
	var rh tls.RecordHeaderError
	switch {
	case errors.Is(err, errNotMember):
		c.strangers.seen(c.RemoteAddr(), err.Error())
		return 0, io.EOF
	case n > 0 && p[0] > lastRPCType:
		c.strangers.seen(c.RemoteAddr(), fmt.Sprintf("%q", p[:min(n, 8)]))
		return 0, io.EOF
	case n == 0 && errors.As(err, &rh):
		c.strangers.seen(c.RemoteAddr(), "no TLS handshake")
		return 0, io.EOF
	}
	c.checked = n > 0 || err != nil
	return n, err
}
