package replica

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// strangerLog is a slog handler that keeps what it is given.
type strangerLog struct {
	mu   sync.Mutex
	recs []slog.Record
	// said gets a value for every stranger logged.
	said chan slog.Level
}

func newStrangerLog() *strangerLog { return &strangerLog{said: make(chan slog.Level, 16)} }

func (r *strangerLog) Enabled(context.Context, slog.Level) bool { return true }
func (r *strangerLog) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *strangerLog) WithGroup(string) slog.Handler            { return r }
func (r *strangerLog) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec.Clone())
	r.mu.Unlock()
	if rec.Message == strangerMsg {
		r.said <- rec.Level
	}
	return nil
}

func (r *strangerLog) all() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]slog.Record(nil), r.recs...)
}

func attr(rec slog.Record, key string) string {
	var v string
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
}

// TestStrangersSaidOnceAMinute: the first stranger of a minute is said at
// Info, naming where it came from and what it sent; the others of that
// minute at Debug; the first of the next minute at Info again, counting
// those not said.
func TestStrangersSaidOnceAMinute(t *testing.T) {
	recs := newStrangerLog()
	now := time.Unix(1e9, 0)
	s := &strangers{log: slog.New(recs), now: func() time.Time { return now }}
	from := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 4711}
	for range 3 {
		s.seen(from, `"GET / HT"`)
	}
	now = now.Add(strangerQuiet)
	s.seen(from, "no TLS handshake")
	var levels []slog.Level
	for _, rec := range recs.all() {
		levels = append(levels, rec.Level)
	}
	want := []slog.Level{slog.LevelInfo, slog.LevelDebug, slog.LevelDebug, slog.LevelInfo}
	if len(levels) != len(want) {
		t.Fatalf("levels %v, want %v", levels, want)
	}
	for i := range want {
		if levels[i] != want[i] {
			t.Fatalf("levels %v, want %v", levels, want)
		}
	}
	first, again := recs.all()[0], recs.all()[3]
	if attr(first, "remote") != "10.0.0.9:4711" || attr(first, "sent") != `"GET / HT"` || attr(first, "unsaid_since_last") != "0" {
		t.Errorf("first stranger: remote %q sent %q unsaid %q", attr(first, "remote"), attr(first, "sent"), attr(first, "unsaid_since_last"))
	}
	if attr(again, "unsaid_since_last") != "2" || attr(again, "sent") != "no TLS handshake" {
		t.Errorf("a minute on: unsaid %q sent %q, want 2 and no TLS handshake", attr(again, "unsaid_since_last"), attr(again, "sent"))
	}
}

// TestStrangersAtTheRaftPort: an HTTP request and a connection that sends
// nothing, at a node's raft port, log no warning or error: the request is
// said once at Info as a connection that is not a djinn member, the empty
// connection not at all; the node goes on leading. A connection still open
// when the node stops, closed by it, logs nothing either.
func TestStrangersAtTheRaftPort(t *testing.T) {
	recs := newStrangerLog()
	leading := make(chan struct{}, 1)
	n, err := Open(Config{
		DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", Bootstrap: true, Logger: slog.New(recs),
		OnLeader: func(ctx context.Context) {
			select {
			case leading <- struct{}{}:
			default:
			}
			<-ctx.Done()
		},
	}, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	<-leading
	probe := func(send string) {
		t.Helper()
		c, err := net.Dial("tcp", n.RaftAddr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if send != "" {
			if _, err := io.WriteString(c, send); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, c) // until the node closes it
	}
	said := func() slog.Level {
		t.Helper()
		select {
		case level := <-recs.said:
			return level
		case <-time.After(20 * time.Second):
			t.Fatal("no connection logged as a stranger")
			return 0
		}
	}
	probe("")
	probe("GET / HTTP/1.1\r\nHost: djinn\r\n\r\n")
	if level := said(); level != slog.LevelInfo {
		t.Errorf("the first stranger said at %v, want info", level)
	}
	probe("GET /healthz HTTP/1.1\r\n\r\n")
	if level := said(); level != slog.LevelDebug {
		t.Errorf("the second stranger within a minute said at %v, want debug", level)
	}
	if !n.IsLeader() {
		t.Error("the node stopped leading")
	}
	idle, err := net.Dial("tcp", n.RaftAddr()) // open, silent, as the node stops
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := idle.Write([]byte{0}); err != nil { // an append's first byte: Raft's handler waits for the rest
		t.Fatal(err)
	}
	if err := n.Close(); err != nil { // waits for the connections' handlers
		t.Fatal(err)
	}
	for _, rec := range recs.all() {
		if rec.Level >= slog.LevelWarn {
			t.Errorf("logged at %v: %s", rec.Level, rec.Message)
		}
		if rec.Message == strangerMsg && !strings.HasPrefix(attr(rec, "sent"), `"GET /`) {
			t.Errorf("stranger sent %q, want the request's first bytes", attr(rec, "sent"))
		}
	}
	if len(recs.said) != 0 {
		t.Errorf("%d more strangers said: the empty connection is none", len(recs.said))
	}
}

// TestStrangerWithoutTLS: at a raft port that speaks TLS, a connection
// whose first record is no TLS handshake (an HTTP request in plaintext) is
// said as a stranger that sent no TLS handshake, and ends as EOF.
func TestStrangerWithoutTLS(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	server, client := net.Pipe()
	defer client.Close()
	tc := tls.Server(server, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	recs := newStrangerLog()
	c := &memberConn{Conn: &handshakeConn{Conn: tc, timeout: time.Minute},
		strangers: &strangers{log: slog.New(recs), now: func() time.Time { return time.Unix(1e9, 0) }}}
	defer c.Close()
	go func() {
		_, _ = io.WriteString(client, "GET / HTTP/1.1\r\nHost: djinn\r\n\r\n")
		_, _ = io.Copy(io.Discard, client)
	}()
	if n, err := c.Read(make([]byte, 64)); n != 0 || err != io.EOF {
		t.Fatalf("read %d bytes, %v; want none and EOF", n, err)
	}
	if level := <-recs.said; level != slog.LevelInfo {
		t.Errorf("said at %v, want info", level)
	}
	if got := attr(recs.all()[0], "sent"); got != "no TLS handshake" {
		t.Errorf("sent %q, want no TLS handshake", got)
	}
}
