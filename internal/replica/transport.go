package replica

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// tlsStream is a raft StreamLayer over TLS: peers authenticate each other
// with the same (mutual) TLS configuration as the client port.
type tlsStream struct {
	net.Listener
	advertise net.Addr
	config    *tls.Config
}

var _ raft.StreamLayer = (*tlsStream)(nil)

func (t *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(addr), t.config)
}

func (t *tlsStream) Addr() net.Addr {
	if t.advertise != nil {
		return t.advertise
	}
	return t.Listener.Addr()
}
