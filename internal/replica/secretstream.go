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
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// Without TLS the peer port is plain TCP, and two nodes speak Raft over a
// connection only when each has proved to the other that it holds the
// cluster's join secret (DESIGN.md 7: Raft peers authenticate as peers):
//
//	acceptor → dialer:   cA                                  (challengeSize random bytes)
//	dialer   → acceptor: cD ‖ HMAC-SHA256(secret, dialerLabel ‖ cA ‖ cD)
//	acceptor → dialer:   HMAC-SHA256(secret, acceptorLabel ‖ cA ‖ cD)
//
// The acceptor hands the connection to Raft only once the dialer's proof
// checks out, and sends its own only then; the dialer sends no Raft byte
// before the acceptor's proof checks out. Each proof covers both
// challenges, so none is good for another handshake (a replay), and the
// two sides' labels differ, so the dialer's proof sent back is no
// acceptor's (a reflection). Proofs are compared in constant time, every
// step ends within the handshake timeout, and a connection whose proof is
// wrong or missing is closed. The secret itself never crosses the wire.
// Without the handshake anyone who reached the port could speak Raft to
// the node — append to its log, win its vote — and anyone who took a
// member's address (its port, after the member stopped) would be sent the
// leader's log, capabilities and all, and believed.
//
// The labels carry the handshake's version: a node of another version
// answers no proof this one takes, and is refused as a stranger.
//
// What the handshake does not do: encrypt the connection or bind it to a
// member's identity. Someone on the path, or one at a member's address who
// relays a handshake to another member, reads what follows; TLS with peer
// certificates keeps that out.

const (
	challengeSize = 16
	dialerLabel   = "djinn raft peer v2 dialer\x00"
	acceptorLabel = "djinn raft peer v2 acceptor\x00"
	// dialerMsgSize is the dialer's message: its challenge and its proof.
	dialerMsgSize = challengeSize + sha256.Size
)

// Errors of the handshake.
var (
	// errNotMember is an accepted connection whose dialer did not prove
	// it holds the join secret.
	errNotMember = errors.New("no proof of the cluster's join secret")
	// errNotPeer is a dialed connection whose acceptor did not prove it
	// holds the join secret.
	errNotPeer = errors.New("no proof of the cluster's join secret from the node there")
)

// checkSecrets ends the error of a proof refused: what to check.
const checkSecrets = "check that both nodes have the same join secret (is the other a node of another cluster, of another version, or not a member at all?)"

// secretStream is the raft StreamLayer of a node without TLS whose
// cluster has a join secret.
type secretStream struct {
	net.Listener
	advertise net.Addr
	secret    []byte
	handshake time.Duration // bounds the handshake, on either side
	// dial connects to addr; net.DialTimeout over TCP when nil.
	dial func(addr string, timeout time.Duration) (net.Conn, error)
}

var _ raft.StreamLayer = (*secretStream)(nil)

func (s *secretStream) Addr() net.Addr { return s.advertise }

// Dial connects to a member, and returns the connection once both sides
// have proved they hold the join secret.
func (s *secretStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	dial := s.dial
	if dial == nil {
		dial = func(addr string, timeout time.Duration) (net.Conn, error) {
			return net.DialTimeout("tcp", addr, timeout)
		}
	}
	c, err := dial(string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if err := dialHandshake(c, s.secret, time.Now().Add(min(timeout, s.handshake))); err != nil {
		c.Close()
		return nil, fmt.Errorf("raft peer %s: %w", addr, err)
	}
	return c, nil
}

// dialHandshake is the dialer's side of the handshake on c, by deadline:
// it answers the acceptor's challenge with its own and its proof, and
// checks the acceptor's.
func dialHandshake(c net.Conn, secret []byte, deadline time.Time) error {
	if err := c.SetDeadline(deadline); err != nil {
		return err
	}
	theirs := make([]byte, challengeSize)
	if _, err := io.ReadFull(c, theirs); err != nil {
		return fmt.Errorf("no challenge from the node there (a node of another version, or not a djinn raft port?): %w", err)
	}
	ours := make([]byte, challengeSize)
	_, _ = rand.Read(ours) // never fails (Go 1.24+)
	msg := make([]byte, 0, dialerMsgSize)
	msg = append(append(msg, ours...), peerProof(secret, dialerLabel, theirs, ours)...)
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, sha256.Size)
	switch n, err := io.ReadFull(c, got); {
	case n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return fmt.Errorf("%w: it closed the connection at this node's proof; %s", errNotPeer, checkSecrets)
	case err != nil:
		return fmt.Errorf("%w: %d bytes of its proof: %v; %s", errNotPeer, n, err, checkSecrets)
	case !hmac.Equal(got, peerProof(secret, acceptorLabel, theirs, ours)):
		return fmt.Errorf("%w: a wrong proof; %s", errNotPeer, checkSecrets)
	}
	return c.SetDeadline(time.Time{})
}

// peerProof is a holder of secret's proof under label (dialerLabel or
// acceptorLabel) in the handshake of the acceptor's challenge and the
// dialer's. Both challenges are challengeSize bytes, so their joining is
// unambiguous.
func peerProof(secret []byte, label string, acceptor, dialer []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	m.Write(acceptor)
	m.Write(dialer)
	return m.Sum(nil)
}

// readDialer reads the dialer's message from r and checks its proof in
// the handshake of challenge, the acceptor's; it returns the dialer's
// challenge. A dialer that hangs up without a word is an end (io.EOF), as
// a TCP health check is; any other failure is errNotMember.
func readDialer(r io.Reader, secret, challenge []byte) ([]byte, error) {
	msg := make([]byte, dialerMsgSize)
	n, err := io.ReadFull(r, msg)
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		return nil, io.EOF
	case err != nil:
		return nil, fmt.Errorf("%w: %d bytes of its answer: %v; %s", errNotMember, n, err, checkSecrets)
	}
	theirs, got := msg[:challengeSize], msg[challengeSize:]
	if !hmac.Equal(got, peerProof(secret, dialerLabel, challenge, theirs)) {
		return nil, fmt.Errorf("%w: a wrong answer to the challenge; %s", errNotMember, checkSecrets)
	}
	return theirs, nil
}

// Accept implements net.Listener: the handshake is done on the
// connection's first read or write, so that one slow dialer holds up no
// other.
func (s *secretStream) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &challengedConn{Conn: c, secret: s.secret, timeout: s.handshake}, nil
}

// challengedConn is an accepted connection whose dialer must prove it
// holds the join secret before anything else is read from it or written
// to it.
type challengedConn struct {
	net.Conn
	secret  []byte
	timeout time.Duration
	once    sync.Once
	err     error // the handshake's outcome; set once
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

// check is the acceptor's side of the handshake: it sends a challenge,
// checks the dialer's proof, and sends its own.
func (c *challengedConn) check() error {
	if err := c.Conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return err
	}
	challenge := make([]byte, challengeSize)
	_, _ = rand.Read(challenge) // never fails (Go 1.24+)
	if _, err := c.Conn.Write(challenge); err != nil {
		return io.EOF
	}
	theirs, err := readDialer(c.Conn, c.secret, challenge)
	if err != nil {
		return err
	}
	if _, err := c.Conn.Write(peerProof(c.secret, acceptorLabel, challenge, theirs)); err != nil {
		return io.EOF
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
