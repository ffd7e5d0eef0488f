// Package servertest runs djinn servers for tests: single nodes and small
// clusters on loopback ports the system picks, with data directories under
// t.TempDir() and Raft timeouts short enough that a leader is elected in a
// fraction of a second. Everything it starts stops when the test ends.
//
// Raft runs on the real clock here, so these helpers never sleep: they wait
// for a condition with a bounded poll (Eventually) and fail the test, naming
// what they waited for, when it does not come.
package servertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/secret"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// Timeout bounds every wait in this package.
const Timeout = 20 * time.Second

// Config returns a test server's configuration: the defaults, with every
// port on 127.0.0.1:0, a fresh data directory and 100ms Raft timeouts.
func Config(t testing.TB) server.Config {
	t.Helper()
	cfg := server.Default()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Admin = "127.0.0.1:0"
	cfg.Raft = "127.0.0.1:0"
	cfg.Lookup.Discovery = "127.0.0.1:0"
	cfg.Raftcfg.HeartbeatTimeout = server.Duration(100 * time.Millisecond)
	cfg.Raftcfg.ElectionTimeout = server.Duration(100 * time.Millisecond)
	return cfg
}

// Steady lengthens a test server's Raft timeouts to 500ms: long enough
// that a cluster's leadership stays put under the race detector and
// parallel tests, for a test that moves leadership itself or counts on one
// leader. Pass it (or call it from) StartCluster's configure.
func Steady(c *server.Config) {
	c.Raftcfg.HeartbeatTimeout = server.Duration(500 * time.Millisecond)
	c.Raftcfg.ElectionTimeout = server.Duration(500 * time.Millisecond)
}

// Open opens a server with cfg and closes it when the test ends. It does
// not wait for the server to be ready. The server's warnings and errors go
// to the test's log, so that a failing test shows what its servers saw.
func Open(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	w := &testLog{w: t.Output()}
	t.Cleanup(w.close) // after the server's Close, registered below
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if cfg.NodeID != "" {
		log = log.With("node", cfg.NodeID)
	}
	s, err := server.Open(ctx, cfg, log)
	if err != nil {
		t.Fatalf("open server: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close server %s: %v", s.NodeID(), err)
		}
	})
	return s
}

// Start opens a server with cfg, waits until it is ready, and closes it
// when the test ends.
func Start(t testing.TB, cfg server.Config) *server.Server {
	t.Helper()
	s := Open(t, cfg)
	WaitReady(t, s)
	return s
}

// WaitReady waits until s can serve writes through some leader.
func WaitReady(t testing.TB, s *server.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("server %s: %v", s.NodeID(), err)
	}
}

// StartCluster starts n servers: the first bootstraps the cluster, the
// others join it through the first one's gRPC address. configure, if not
// nil, adjusts every member's configuration. It returns once every member
// reports, over gRPC, all n members, each a voter with its address, and a
// leader.
func StartCluster(t testing.TB, n int, configure func(*server.Config)) []*server.Server {
	t.Helper()
	ss := make([]*server.Server, n)
	for i := range ss {
		cfg := Config(t)
		if configure != nil {
			configure(&cfg)
		}
		if i > 0 {
			cfg.Join = ss[0].Addr()
			if !cfg.TLS.ClientAuth {
				cfg.Security.JoinSecretFile = SecretFile(ss[0])
			}
		}
		ss[i] = Open(t, cfg)
		if i == 0 {
			WaitReady(t, ss[0])
		}
	}
	for _, s := range ss {
		WaitReady(t, s)
	}
	admins := make([]djinnpb.AdminClient, n)
	for i, s := range ss {
		admins[i] = djinnpb.NewAdminClient(Conn(t, s.Addr()))
	}
	Eventually(t, fmt.Sprintf("%d voters with their addresses and a leader, seen by every server", n), func() bool {
		for _, a := range admins {
			st, err := Status(a)
			if err != nil || len(st.GetMembers()) != n || st.GetLeaderAddress() == "" {
				return false
			}
			for _, m := range st.GetMembers() {
				if m.GetGrpcAddress() == "" || !m.GetVoter() {
					return false
				}
			}
		}
		return serving(Leader(ss...))
	})
	return ss
}

// ServingLeader waits until a member of ss leads and serves writes (its
// leases taken over: a leader just elected refuses them as not ready for a
// moment), and returns it.
func ServingLeader(t testing.TB, ss ...*server.Server) *server.Server {
	t.Helper()
	var l *server.Server
	Eventually(t, "a leader serving writes", func() bool {
		l = Leader(ss...)
		return serving(l)
	})
	return l
}

// serving reports whether l is not nil, leads and serves writes.
func serving(l *server.Server) bool {
	if l == nil {
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // WaitReady looks once before it waits
	return l.WaitReady(ctx) == nil && l.Node().IsLeader()
}

// testLog writes to a test's log until the test is over: a server's
// goroutines may still log while it closes, and a test's log must not be
// written after the test ends.
type testLog struct {
	mu   sync.Mutex
	w    io.Writer
	done bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return len(p), nil
	}
	return l.w.Write(p)
}

func (l *testLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
}

// Status asks for a server's status with a short deadline.
func Status(a djinnpb.AdminClient) (*djinnpb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return a.Status(ctx, &djinnpb.StatusRequest{})
}

// Others returns the servers of ss but s, in order: the members left
// when s goes.
func Others(ss []*server.Server, s *server.Server) []*server.Server {
	var out []*server.Server
	for _, o := range ss {
		if o != s {
			out = append(out, o)
		}
	}
	return out
}

// Leader returns the server among ss that leads, or nil.
func Leader(ss ...*server.Server) *server.Server {
	for _, s := range ss {
		if s.Node().IsLeader() {
			return s
		}
	}
	return nil
}

// SecretFile returns the path of s's join secret (a server without mutual
// TLS has one).
func SecretFile(s *server.Server) string { return filepath.Join(s.DataDir(), secret.FileName) }

// Operator returns the client option that presents s's join secret: the
// operator role in s's cluster.
func Operator(t testing.TB, s *server.Server) client.Option {
	t.Helper()
	sec, err := secret.Load(SecretFile(s))
	if err != nil {
		t.Fatalf("join secret of %s: %v", s.NodeID(), err)
	}
	return client.WithJoinSecret(sec.String())
}

// JoinConfig returns a test server's configuration (Config) for a node
// that joins first's cluster: with its address and its join secret.
func JoinConfig(t testing.TB, first *server.Server) server.Config {
	t.Helper()
	cfg := Config(t)
	cfg.Join = first.Addr()
	cfg.Security.JoinSecretFile = SecretFile(first)
	return cfg
}

// OpenWaiting opens a server that waits for a member of first's cluster
// to add it (no bootstrap, first's join secret): until then it has no
// service id and no leader, as a new member or one still starting has.
func OpenWaiting(t testing.TB, first *server.Server) *server.Server {
	t.Helper()
	cfg := Config(t)
	cfg.Cluster.Bootstrap = false
	cfg.Security.JoinSecretFile = SecretFile(first)
	return Open(t, cfg)
}

// Dial connects a client to addr and closes it when the test ends.
func Dial(t testing.TB, addr string, opts ...client.Option) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	c, err := client.Dial(ctx, addr, opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Conn returns a connection to the one server at addr, closed when the test
// ends: unlike a Client's, it does not follow the cluster.
func Conn(t testing.TB, addr string, opts ...client.Option) *grpc.ClientConn {
	t.Helper()
	p := client.NewPool(opts...)
	t.Cleanup(func() { p.Close() })
	cc, err := p.Conn(addr)
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	return cc
}

// MemberConn is Conn from a pool that follows the cluster at addr
// (Pool.Follow): a join secret among opts (Operator) goes to that
// cluster's members alone, and to no endpoint of a pool that follows
// none (client.WithJoinSecret).
func MemberConn(t testing.TB, addr string, opts ...client.Option) *grpc.ClientConn {
	t.Helper()
	p := client.NewPool(opts...)
	t.Cleanup(func() { p.Close() })
	if err := p.Follow(addr); err != nil {
		t.Fatalf("follow the cluster at %s: %v", addr, err)
	}
	cc, err := p.Conn(addr)
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	return cc
}

// Eventually checks cond every 10ms until it holds, and fails the test
// naming what it waited for if it does not within Timeout.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Poll(Timeout, cond) {
		t.Fatalf("waited %v for %s", Timeout, what)
	}
}

// Failover bounds a wait for a cluster to take over from a member that
// left: a new election, the new leader taking the leases over, then its
// work (a joiner's registrations, say). Under load elections may take a
// few rounds, so it is longer than Timeout.
const Failover = time.Minute

// EventuallyWithin is Eventually bounded by d instead of Timeout.
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(d, cond) {
		t.Fatalf("waited %v for %s", d, what)
	}
}

// Poll checks cond every 10ms until it holds or d passes, and reports
// whether it held.
func Poll(d time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
}

// Secret returns s's join secret, which makes an operator of whoever
// presents it (without mutual TLS): on the admin port, in the header
// server.OperatorHeader.
func Secret(t testing.TB, s *server.Server) string {
	t.Helper()
	sec, err := secret.Load(SecretFile(s))
	if err != nil {
		t.Fatalf("join secret of %s: %v", s.NodeID(), err)
	}
	return sec.String()
}
