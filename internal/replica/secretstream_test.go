package replica

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// secretNode opens a node whose peer port wants secret, logging to recs.
func secretNode(t *testing.T, secret string, bootstrap bool, recs slog.Handler, onLeader func(context.Context)) (*Node, *counter) {
	t.Helper()
	c := newCounter()
	n, err := Open(Config{
		DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: bootstrap, OnLeader: onLeader,
		Secret: []byte(secret), Logger: slog.New(recs),
		HeartbeatTimeout: 500 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond,
	}, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n, c
}

// TestRaftPortWantsTheJoinSecret (DESIGN.md 7: Raft peers authenticate as
// peers): without TLS a node's peer port takes a connection for a member's
// only when its dialer proves it holds the cluster's join secret. A
// connection that answers the challenge wrongly is closed before Raft
// reads it and said as a stranger, with what to check; a node with another
// secret receives nothing of the cluster's log (its port refuses the
// leader, and it proves nothing to the leader); nodes with the secret form
// a cluster and replicate its log over the mutual handshake. Before,
// anyone who reached the port could speak Raft to the node: append to its
// log, win its vote.
func TestRaftPortWantsTheJoinSecret(t *testing.T) {
	const secret = "the cluster's join secret"
	leading := make(chan struct{}, 1)
	leader, _ := secretNode(t, secret, true, newStrangerLog(), func(ctx context.Context) {
		select {
		case leading <- struct{}{}:
		default:
		}
		<-ctx.Done()
	})
	recs := newStrangerLog()
	select {
	case <-leading:
	case <-time.After(20 * time.Second):
		t.Fatal("no leader elected")
	}

	// A stranger: it reads the challenge, answers it without the secret.
	c, err := net.Dial("tcp", leader.RaftAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	challenge := make([]byte, challengeSize)
	if _, err := io.ReadFull(c, challenge); err != nil {
		t.Fatalf("no challenge from the raft port: %v", err)
	}
	if _, err := c.Write(dialerMsg([]byte("a guess"), challenge, randomChallenge())); err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, c); n != 0 || err != nil {
		t.Errorf("the port answered a stranger %d bytes (%v); want it closed", n, err)
	}

	// A node with another secret: the leader's appends are refused at its
	// port, which says so.
	wrong, wrongCount := secretNode(t, "another cluster's", false, recs, nil)
	untilLeading(t, "add the node with another secret", func(ctx context.Context) error {
		return leader.AddNonvoter(ctx, wrong.ID(), wrong.RaftAddr())
	})
	select {
	case <-recs.said:
	case <-time.After(20 * time.Second):
		t.Fatal("the node with another secret said no stranger at its raft port")
	}
	for _, rec := range recs.all() {
		if rec.Message == strangerMsg && !strings.Contains(attr(rec, "sent"), "check that both nodes have the same join secret") {
			t.Errorf("stranger sent %q, want no proof of the join secret and what to check", attr(rec, "sent"))
		}
	}

	// A node with the secret replicates the log.
	right, rightCount := secretNode(t, secret, false, newStrangerLog(), nil)
	untilLeading(t, "add the node with the secret", func(ctx context.Context) error {
		return leader.AddNonvoter(ctx, right.ID(), right.RaftAddr())
	})
	untilLeading(t, "write through the leader", func(ctx context.Context) error { _, err := propose(ctx, leader); return err })
	rightCount.wait(t, 1)
	if n := wrongCount.get(); n != 0 {
		t.Errorf("the node with another secret applied %d commands of the cluster's", n)
	}
	if !leader.IsLeader() {
		t.Error("the leader stopped leading")
	}
}

func randomChallenge() []byte {
	c := make([]byte, challengeSize)
	_, _ = rand.Read(c)
	return c
}

// dialerMsg is the message of a dialer holding secret, of challenge
// ours, in answer to the acceptor's challenge theirs.
func dialerMsg(secret, theirs, ours []byte) []byte {
	return append(bytes.Clone(ours), peerProof(secret, dialerLabel, theirs, ours)...)
}

// idleListener is a net.Listener that accepts nothing until it is closed.
type idleListener struct {
	done chan struct{}
	once sync.Once
}

func newIdleListener() *idleListener { return &idleListener{done: make(chan struct{})} }

func (l *idleListener) Accept() (net.Conn, error) { <-l.done; return nil, net.ErrClosed }
func (l *idleListener) Close() error              { l.once.Do(func() { close(l.done) }); return nil }
func (l *idleListener) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4711} }

// handshakeOf is a handshake between a dialer and an acceptor that hold
// secret, as seen on the wire.
type handshakeOf struct {
	challenge []byte // the acceptor's
	dialer    []byte // the dialer's message
	proof     []byte // the acceptor's proof
}

// recordHandshake runs a handshake between two holders of secret over a
// pipe, and returns what crossed it.
func recordHandshake(t *testing.T, secret []byte) handshakeOf {
	t.Helper()
	d, a := net.Pipe()
	defer d.Close()
	acc := &challengedConn{Conn: a, secret: secret, timeout: time.Minute}
	defer acc.Close()
	accepted := make(chan error, 1)
	go func() { accepted <- acc.challenge() }()
	var h handshakeOf
	rec := &recordingConn{Conn: d}
	if err := dialHandshake(rec, secret, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("a handshake between holders of the secret: %v", err)
	}
	if err := <-accepted; err != nil {
		t.Fatalf("a handshake between holders of the secret, the acceptor: %v", err)
	}
	h.challenge, h.proof = rec.read[:challengeSize], rec.read[challengeSize:]
	h.dialer = rec.written
	if len(h.proof) != sha256.Size || len(h.dialer) != dialerMsgSize {
		t.Fatalf("a handshake of %d bytes read, %d written", len(rec.read), len(rec.written))
	}
	return h
}

// recordingConn keeps what is read from and written to it.
type recordingConn struct {
	net.Conn
	read, written []byte
}

func (c *recordingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.read = append(c.read, b[:n]...)
	return n, err
}

func (c *recordingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.written = append(c.written, b[:n]...)
	return n, err
}

// TestDialerWantsTheAcceptorsProof (DESIGN.md 7: Raft peers authenticate
// as peers): a node dialing a member sends no Raft byte to a node that
// does not prove it holds the join secret — whatever took the member's
// address receives the dialer's handshake and nothing of the log. Before,
// the dialer answered any challenge and went on with the leader's
// AppendEntries. Each row is a fake acceptor on a pipe, driven by Raft's
// own transport; what the fake received is asserted.
func TestDialerWantsTheAcceptorsProof(t *testing.T) {
	secret := []byte("the cluster's join secret")
	// A handshake of two holders of the secret, seen on the wire.
	var captured handshakeOf
	synctest.Test(t, func(t *testing.T) { captured = recordHandshake(t, secret) })

	rows := []struct {
		name string
		// challenge is the fake's; random when nil.
		challenge []byte
		// answer answers the dialer's message msg on c, or not.
		answer func(c net.Conn, challenge, msg []byte)
		// member: the fake proves it holds the secret (the control).
		member bool
	}{
		{name: "holds the secret", member: true, answer: func(c net.Conn, challenge, msg []byte) {
			_, _ = c.Write(peerProof(secret, acceptorLabel, challenge, msg[:challengeSize]))
		}},
		{name: "garbage", answer: func(c net.Conn, _, _ []byte) {
			_, _ = c.Write(bytes.Repeat([]byte{0xa5}, sha256.Size))
		}},
		{name: "another secret", answer: func(c net.Conn, challenge, msg []byte) {
			_, _ = c.Write(peerProof([]byte("another cluster's"), acceptorLabel, challenge, msg[:challengeSize]))
		}},
		{name: "answers nothing", answer: func(net.Conn, []byte, []byte) {}},
		{name: "hangs up", answer: func(c net.Conn, _, _ []byte) { c.Close() }},
		{name: "echoes the dialer's challenge", answer: func(c net.Conn, _, msg []byte) {
			_, _ = c.Write(msg[:challengeSize])
		}},
		{name: "echoes the dialer's challenge twice", answer: func(c net.Conn, _, msg []byte) {
			_, _ = c.Write(append(bytes.Clone(msg[:challengeSize]), msg[:challengeSize]...))
		}},
		{name: "reflects the dialer's proof", answer: func(c net.Conn, _, msg []byte) {
			_, _ = c.Write(msg[challengeSize:])
		}},
		{name: "replays a proof of another handshake", challenge: captured.challenge, answer: func(c net.Conn, _, _ []byte) {
			_, _ = c.Write(captured.proof)
		}},
		{name: "a proof under the previous version's label", answer: func(c net.Conn, challenge, _ []byte) {
			m := hmac.New(sha256.New, secret)
			m.Write([]byte("djinn raft peer v1\x00"))
			m.Write(challenge)
			_, _ = c.Write(m.Sum(nil))
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				received := make(chan []byte, 1)
				stream := &secretStream{
					Listener: newIdleListener(), advertise: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4711},
					secret: secret, handshake: 5 * time.Second,
					dial: func(string, time.Duration) (net.Conn, error) {
						d, a := net.Pipe()
						go func() {
							defer a.Close()
							challenge := row.challenge
							if challenge == nil {
								challenge = randomChallenge()
							}
							var got []byte
							if _, err := a.Write(challenge); err == nil {
								msg := make([]byte, dialerMsgSize)
								n, _ := io.ReadFull(a, msg)
								got = msg[:n]
								if n == dialerMsgSize {
									row.answer(a, challenge, msg)
								}
							}
							rest, _ := io.ReadAll(a) // until the dialer hangs up
							received <- append(got, rest...)
						}()
						return d, nil
					},
				}
				trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
					Stream: stream, MaxPool: 1, Timeout: 10 * time.Second, Logger: hclog.NewNullLogger(),
				})
				defer trans.Close()
				req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("leader")}, Term: 7,
					Entries: []*raft.Log{{Index: 1, Term: 7, Type: raft.LogCommand, Data: []byte("a lock set's secret")}}}
				err := trans.AppendEntries("member", "10.0.0.9:4161", req, new(raft.AppendEntriesResponse))
				got := <-received
				if row.member {
					// The fake is sent the RPC after the handshake, then
					// gives no answer: the transport times out.
					if len(got) <= dialerMsgSize || !bytes.Contains(got[dialerMsgSize:], []byte("a lock set's secret")) {
						t.Fatalf("a member received %d bytes (%v), want the handshake and the append", len(got), err)
					}
					return
				}
				if err == nil || !errors.Is(err, errNotPeer) || !strings.Contains(err.Error(), "check that both nodes have the same join secret") {
					t.Errorf("append to a fake: %v, want no proof of the join secret and what to check", err)
				}
				if len(got) != dialerMsgSize {
					t.Errorf("the fake received %d bytes, want the %d of the dialer's handshake and no Raft byte", len(got), dialerMsgSize)
				}
			})
		})
	}
}

// TestAcceptorWantsTheDialersProof (DESIGN.md 7: Raft peers authenticate
// as peers): an accepted connection reaches Raft only once its dialer has
// proved it holds the join secret, and the acceptor proves it holds it too
// only then. A dialer without the secret, an older node's answer, a
// message of another handshake replayed, a proof under the acceptor's
// label: each is refused, and the dialer receives nothing but the
// challenge.
func TestAcceptorWantsTheDialersProof(t *testing.T) {
	secret := []byte("the cluster's join secret")
	var captured handshakeOf
	synctest.Test(t, func(t *testing.T) { captured = recordHandshake(t, secret) })

	rows := []struct {
		name string
		// send is what the fake dialer sends for challenge; then, if
		// hangUp, it closes its side for writing.
		send   func(challenge []byte) []byte
		hangUp bool
		want   error // nil: accepted
	}{
		{name: "holds the secret", send: func(challenge []byte) []byte { return dialerMsg(secret, challenge, randomChallenge()) }},
		{name: "another secret", want: errNotMember, send: func(challenge []byte) []byte {
			return dialerMsg([]byte("another cluster's"), challenge, randomChallenge())
		}},
		{name: "an older node's proof", want: errNotMember, send: func(challenge []byte) []byte {
			m := hmac.New(sha256.New, secret)
			m.Write([]byte("djinn raft peer v1\x00"))
			m.Write(challenge)
			return m.Sum(nil)
		}},
		{name: "replays a message of another handshake", want: errNotMember, send: func([]byte) []byte { return captured.dialer }},
		{name: "a proof under the acceptor's label", want: errNotMember, send: func(challenge []byte) []byte {
			ours := randomChallenge()
			return append(ours, peerProof(secret, acceptorLabel, challenge, ours)...)
		}},
		{name: "echoes the challenge", want: errNotMember, send: func(challenge []byte) []byte {
			return append(bytes.Clone(challenge), bytes.Repeat(challenge, 2)...)
		}},
		{name: "answers nothing", want: errNotMember, send: func([]byte) []byte { return nil }},
		{name: "hangs up without a word", want: io.EOF, hangUp: true, send: func([]byte) []byte { return nil }},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				d, a := net.Pipe()
				defer d.Close()
				acc := &challengedConn{Conn: a, secret: secret, timeout: 5 * time.Second}
				defer acc.Close()
				read := make(chan error, 1)
				go func() {
					// Raft's handler reads the first RPC type.
					b := make([]byte, 1)
					_, err := acc.Read(b)
					if err == nil && b[0] != 0 {
						t.Errorf("raft read %d, want the RPC type 0", b[0])
					}
					read <- err
				}()
				challenge := make([]byte, challengeSize)
				if _, err := io.ReadFull(d, challenge); err != nil {
					t.Fatalf("no challenge: %v", err)
				}
				msg := row.send(challenge)
				if len(msg) > 0 {
					if _, err := d.Write(msg); err != nil {
						t.Fatal(err)
					}
				}
				if row.hangUp {
					d.Close()
				}
				if row.want == nil {
					proof := make([]byte, sha256.Size)
					if _, err := io.ReadFull(d, proof); err != nil {
						t.Fatalf("no proof from the acceptor: %v", err)
					}
					if !hmac.Equal(proof, peerProof(secret, acceptorLabel, challenge, msg[:challengeSize])) {
						t.Fatalf("the acceptor's proof % x is wrong", proof)
					}
					if _, err := d.Write([]byte{0}); err != nil {
						t.Fatal(err)
					}
					if err := <-read; err != nil {
						t.Fatalf("raft read %v, want the dialer's first byte", err)
					}
					return
				}
				err := <-read
				if !errors.Is(err, row.want) {
					t.Fatalf("raft read %v, want %v", err, row.want)
				}
				if errors.Is(err, errNotMember) && !strings.Contains(err.Error(), "check that both nodes have the same join secret") {
					t.Errorf("refusal %q does not say what to check", err)
				}
				if !row.hangUp {
					if rest, err := io.ReadAll(d); len(rest) != 0 {
						t.Errorf("the acceptor sent a dialer without a proof % x (%v), want nothing after the challenge", rest, err)
					}
				}
			})
		})
	}
}

// refusalLog is a slog handler that passes on every record whose
// attributes say to check the join secrets.
type refusalLog struct {
	refused chan slog.Record
}

func (r *refusalLog) Enabled(context.Context, slog.Level) bool { return true }
func (r *refusalLog) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *refusalLog) WithGroup(string) slog.Handler            { return r }
func (r *refusalLog) Handle(_ context.Context, rec slog.Record) error {
	said := false
	rec.Attrs(func(a slog.Attr) bool {
		said = strings.Contains(a.Value.String(), "check that both nodes have the same join secret")
		return !said
	})
	if said {
		select {
		case r.refused <- rec.Clone():
		default:
		}
	}
	return nil
}

// TestLeaderSendsNoLogToAnImpostor (DESIGN.md 7: Raft peers authenticate
// as peers): a process without the join secret at a member's address (it
// took the port, say, after the member stopped) answers the leader's
// handshake with no proof; the leader sends it nothing past its own
// handshake — none of the log — and says, in Raft's failed append or
// heartbeat, to check the two nodes' join secrets. Before, the leader
// answered the impostor's challenge and sent it the log.
func TestLeaderSendsNoLogToAnImpostor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	received := make(chan int, 64) // bytes each connection got, at its end
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() {
				defer c.Close()
				// The leader closes the connection; this bounds it should
				// it not.
				_ = c.SetDeadline(time.Now().Add(time.Minute))
				if _, err := c.Write(randomChallenge()); err != nil {
					return
				}
				msg := make([]byte, dialerMsgSize)
				n, _ := io.ReadFull(c, msg)
				if n == dialerMsgSize {
					_, _ = c.Write(bytes.Repeat([]byte{0xa5}, sha256.Size))
				}
				rest, _ := io.Copy(io.Discard, c)
				select {
				case received <- n + int(rest):
				default:
				}
			})
		}
	})

	leading := make(chan struct{}, 1)
	logs := &refusalLog{refused: make(chan slog.Record, 1)}
	leader, _ := secretNode(t, "the cluster's join secret", true, logs, func(ctx context.Context) {
		select {
		case leading <- struct{}{}:
		default:
		}
		<-ctx.Done()
	})
	select {
	case <-leading:
	case <-time.After(20 * time.Second):
		t.Fatal("no leader elected")
	}
	untilLeading(t, "add the member whose address the impostor took", func(ctx context.Context) error {
		return leader.AddNonvoter(ctx, "impostor", ln.Addr().String())
	})
	select {
	case rec := <-logs.refused:
		if rec.Level < slog.LevelWarn {
			t.Errorf("the refusal was said at %v: %q", rec.Level, rec.Message)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the leader said nothing of a member that proved no join secret")
	}
	select {
	case n := <-received:
		if n != dialerMsgSize {
			t.Errorf("the impostor received %d bytes on a connection, want the %d of the handshake and nothing of the log", n, dialerMsgSize)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the leader kept a connection to the impostor open")
	}
	for {
		select {
		case n := <-received:
			if n != dialerMsgSize {
				t.Errorf("the impostor received %d bytes on a connection, want the %d of the handshake and nothing of the log", n, dialerMsgSize)
			}
			continue
		default:
		}
		break
	}
}
