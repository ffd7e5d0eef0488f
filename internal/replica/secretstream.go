package replica

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Without TLS the peer port is plain TCP, and a node takes a connection
// for a member's only when its dialer proves it holds the cluster's join
// secret (DESIGN.md 7: Raft peers authenticate as peers): the accepting
// node sends a random challenge of challengeSize bytes, the dialer answers
// HMAC-SHA256(secret, proofLabel ‖ challenge), and a connection whose
// answer is wrong, or does not come within the handshake timeout, is
// closed before Raft reads a byte of it. The secret itself never crosses
// the wire. Without it, anyone who reached the port could speak Raft to
// the node — append to its log, win its vote — whatever the join secret
// guards on the client port.

const (
	challengeSize = 16
	proofLabel    = "djinn raft peer v1\x00"
)

// errNotMember is a connection whose dialer did not prove it holds the
// join secret.
var errNotMember = errors.New("no proof of the cluster's join secret")

// secretStream is the raft StreamLayer of a node without TLS whose
// cluster has a join secret.
type secretStream struct {
	net.Listener
	advertise net.Addr
	secret    []byte
	handshake time.Duration // bounds the challenge and its answer
}

var _ raft.StreamLayer = (*secretStream)(nil)

func (s *secretStream) Addr() net.Addr { return s.advertise }

// Dial connects to a member and answers its challenge.
func (s *secretStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if err := answer(c, s.secret, time.Now().Add(min(timeout, s.handshake))); err != nil {
		c.Close()
		return nil, fmt.Errorf("raft peer %s: %w", addr, err)
	}
	return c, nil
}

// answer reads a member's challenge on c and sends the proof, by deadline.
func answer(c net.Conn, secret []byte, deadline time.Time) error {
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	challenge := make([]byte, challengeSize)
	if _, err := io.ReadFull(c, challenge); err != nil {
		return fmt.Errorf("no challenge from the member (a node of another version, or not a djinn raft port?): %w", err)
	}
	if _, err := c.Write(proof(secret, challenge)); err != nil {
		return err
	}
	return c.SetDeadline(time.Time{})
}

// proof is the answer to challenge of a holder of secret.
func proof(secret, challenge []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(proofLabel))
	m.Write(challenge)
	return m.Sum(nil)
}

// Accept implements net.Listener: the challenge is sent, and its answer
// checked, on the connection's first read or write, so that one slow
// dialer holds up no other.
func (s *secretStream) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &challengedConn{Conn: c, secret: s.secret, timeout: s.handshake}, nil
}

// challengedConn is an accepted connection whose dialer must answer a
// challenge before anything else is read from it or written to it.
type challengedConn struct {
	net.Conn
	secret  []byte
	timeout time.Duration
	once    sync.Once
	err     error // the challenge's outcome; set once
}

func (c *challengedConn) challenge() error {
	c.once.Do(func() {
		c.err = c.check()
		if c.err != nil {
			c.Conn.Close()
		}
	})
	return c.err
}

// check sends a challenge and checks its answer. A dialer that hangs up
// without a word is an end (io.EOF), as a TCP health check is; any other
// failure is errNotMember.
func (c *challengedConn) check() error {
	if err := c.Conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return err
	}
	challenge := make([]byte, challengeSize)
	_, _ = rand.Read(challenge) // never fails (Go 1.24+)
	if _, err := c.Conn.Write(challenge); err != nil {
		return io.EOF
	}
	got := make([]byte, sha256.Size)
	n, err := io.ReadFull(c.Conn, got)
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return io.EOF
	case err != nil:
		return fmt.Errorf("%w: %d bytes of its answer: %v", errNotMember, n, err)
	case !hmac.Equal(got, proof(c.secret, challenge)):
		return fmt.Errorf("%w: a wrong answer to the challenge", errNotMember)
	}
	return c.Conn.SetDeadline(time.Time{})
}

func (c *challengedConn) Read(b []byte) (int, error) {
	if err := c.challenge(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *challengedConn) Write(b []byte) (int, error) {
	if err := c.challenge(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
