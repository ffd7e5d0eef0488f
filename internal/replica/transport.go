package replica

import (
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// tlsStream is a raft StreamLayer over TLS: peers authenticate each other
// with the same (mutual) TLS configuration as the client port.
type tlsStream struct {
	net.Listener // a tls.NewListener
	advertise    net.Addr
	config       func() *tls.Config // each dial's
	handshake    time.Duration      // bounds an accepted connection's handshake
}

var _ raft.StreamLayer = (*tlsStream)(nil)

func (t *tlsStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	return tls.DialWithDialer(d, "tcp", string(addr), t.config())
}

func (t *tlsStream) Addr() net.Addr {
	if t.advertise != nil {
		return t.advertise
	}
	return t.Listener.Addr()
}

// Accept implements net.Listener: the connection's TLS handshake, done on
// its first read or write, must end within the handshake timeout, or the
// connection is closed. (Accept itself does not wait for it: one slow peer
// would hold up the others.)
func (t *tlsStream) Accept() (net.Conn, error) {
	c, err := t.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*tls.Conn)
	if !ok {
		return c, nil
	}
	return &handshakeConn{Conn: tc, timeout: t.handshake}, nil
}

// handshakeConn is an accepted TLS connection whose handshake is bounded.
type handshakeConn struct {
	*tls.Conn
	timeout time.Duration
	once    sync.Once
	err     error // the handshake's; set once
}

func (c *handshakeConn) handshake() error {
	c.once.Do(func() {
		if c.err = c.Conn.SetDeadline(time.Now().Add(c.timeout)); c.err != nil {
			return
		}
		if c.err = c.Conn.Handshake(); c.err != nil {
			c.Conn.Close()
			return
		}
		c.err = c.Conn.SetDeadline(time.Time{})
	})
	return c.err
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *handshakeConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
