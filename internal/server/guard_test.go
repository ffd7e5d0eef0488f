package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/internal/logtest"
	"github.com/djinn-go/djinn/internal/secret"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// adminCalls makes every Admin call that changes the membership, with
// arguments that would pass authorization and then fail or act.
func adminCalls(a djinnpb.AdminClient) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"Join": func(ctx context.Context) error {
			_, err := a.Join(ctx, &djinnpb.JoinRequest{NodeId: "evil", RaftAddress: "127.0.0.1:1", GrpcAddress: "x:1"})
			return err
		},
		"AddMember": func(ctx context.Context) error {
			_, err := a.AddMember(ctx, &djinnpb.AddMemberRequest{NodeId: "evil", RaftAddress: "127.0.0.1:1", GrpcAddress: "bad address"})
			return err
		},
		"RemoveMember": func(ctx context.Context) error {
			_, err := a.RemoveMember(ctx, &djinnpb.RemoveMemberRequest{NodeId: "no-such-node"})
			return err
		},
		"TransferLeadership": func(ctx context.Context) error {
			_, err := a.TransferLeadership(ctx, &djinnpb.TransferLeadershipRequest{NodeId: "no-such-node"})
			return err
		},
		"Leave": func(ctx context.Context) error {
			_, err := a.Leave(ctx, &djinnpb.LeaveRequest{})
			return err
		},
	}
}

// TestMembershipNeedsTheJoinSecret (issue 17, finding 1): without TLS, a
// call that changes the membership needs the cluster's join secret; the
// plaintext Join that once added a bogus voter and took the quorum is
// refused, and the server goes on serving writes.
func TestMembershipNeedsTheJoinSecret(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, servertest.Config(t))
	for _, tt := range []struct {
		name string
		opts []client.Option
	}{
		{"no secret", nil},
		{"a wrong secret", []client.Option{client.WithJoinSecret(secret.New().String())}},
		{"a malformed secret", []client.Option{client.WithJoinSecret("letmein")}},
	} {
		a := djinnpb.NewAdminClient(servertest.MemberConn(t, s.Addr(), tt.opts...))
		for name, call := range adminCalls(a) {
			wantErr(t, tt.name+": "+name, call(testContext(t)), djinn.ErrPermissionDenied, "join secret")
		}
	}
	c := servertest.Dial(t, s.Addr())
	ms, err := c.Members(testContext(t), false)
	if err != nil || len(ms.Members) != 1 {
		t.Fatalf("members after refused joins: %+v, %v; want this node alone", ms, err)
	}
	if _, err := c.Mailbox().Register(testContext(t), time.Minute); err != nil {
		t.Fatalf("a write after refused joins: %v", err)
	}

	// With the secret the calls pass authorization (and then do what
	// they do: here, refuse their arguments).
	a := djinnpb.NewAdminClient(servertest.MemberConn(t, s.Addr(), servertest.Operator(t, s)))
	calls := adminCalls(a)
	wantErr(t, "AddMember with the secret", calls["AddMember"](testContext(t)), djinn.ErrInvalidArgument, "grpc address")
	wantErr(t, "RemoveMember with the secret", calls["RemoveMember"](testContext(t)), djinn.ErrNoSuchObject, "no-such-node")
}

// TestJoinSecretFile: the first node writes its join secret into its data
// directory, readable by its owner alone, and keeps it across a restart; a
// node that joins needs it, and refuses to start without it or with
// another cluster's.
func TestJoinSecretFile(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	first := servertest.Start(t, cfg)
	path := servertest.SecretFile(first)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("join secret %s: %v, %v; want mode 0600", path, fi, err)
	}
	sec, err := secret.Load(path)
	if err != nil {
		t.Fatal(err)
	}

	joining := servertest.Config(t)
	joining.Join = first.Addr()
	_, err = server.Open(testContext(t), joining, nil)
	wantErr(t, "join without the secret", err, djinn.ErrInvalidArgument, "join-secret-file")

	other := filepath.Join(t.TempDir(), "other-secret")
	if err := secret.New().Write(other); err != nil {
		t.Fatal(err)
	}
	joining = servertest.Config(t)
	joining.Join, joining.Security.JoinSecretFile = first.Addr(), other
	_, err = server.Open(testContext(t), joining, nil)
	wantErr(t, "join with another cluster's secret", err, djinn.ErrPermissionDenied, "join secret")

	joined := servertest.Open(t, servertest.JoinConfig(t, first))
	if got, err := secret.Load(servertest.SecretFile(joined)); err != nil || got != sec {
		t.Fatalf("the joined node keeps %v, %v; want the cluster's secret", got, err)
	}
	servertest.Eventually(t, "two members", func() bool {
		ms, err := first.Node().Members()
		return err == nil && len(ms) == 2
	})

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := servertest.Open(t, cfg)
	if got, err := secret.Load(servertest.SecretFile(again)); err != nil || got != sec {
		t.Fatalf("after a restart the secret is %v, %v; want the same", got, err)
	}
}

// TestJoinSecretDamageRefused: a join secret gone, emptied or cut short
// beside the node's log is refused as damage naming the file and how to
// recover — not replaced by a new secret, which would change the
// operator's secret and shut a member out of its cluster; restored, or
// given with --join-secret-file, the node starts with the secret it had.
// In a data directory without a log, a damaged secret is made again.
func TestJoinSecretDamageRefused(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	first := servertest.Open(t, cfg)
	path := servertest.SecretFile(first)
	kept, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		damage func() error
		want   string
	}{
		{"removed", func() error { return os.Remove(path) }, path + ": the join secret is gone but the node's log is there"},
		{"emptied", func() error { return os.WriteFile(path, nil, 0o600) }, path + ": the join secret is empty but the node's log is there"},
		{"cut short", func() error { return os.WriteFile(path, kept[:16], 0o600) }, path + ": does not hold a join secret (join secret: 16 characters, want 32 hex digits) but the node's log is there"},
	} {
		if err := tc.damage(); err != nil {
			t.Fatal(err)
		}
		_, err := server.Open(testContext(t), cfg, nil)
		for _, want := range []string{tc.want, "to recover: restore " + path + " from a backup", "another member's data directory", "--join-secret-file"} {
			wantErr(t, "join secret "+tc.name, err, disk.ErrDamaged, want)
		}
		if err := os.WriteFile(path, kept, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := servertest.Open(t, cfg).Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Gone, and given with --join-secret-file: copied back.
	backup := filepath.Join(t.TempDir(), "join-secret")
	if err := os.WriteFile(backup, kept, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	given := cfg
	given.Security.JoinSecretFile = backup
	if err := servertest.Open(t, given).Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != string(kept) {
		t.Fatalf("join secret after a start with --join-secret-file: %q, %v; want the one it had", got, err)
	}

	// Without a log beside it (a first start killed while it wrote the
	// secret: nothing acknowledged yet), an empty or unreadable secret is
	// made again, and that is logged; a node that joins still needs the
	// cluster's.
	for name, text := range map[string]string{"empty": "", "cut short": "0123\n"} {
		fresh := servertest.Config(t)
		freshPath := filepath.Join(fresh.DataDir, secret.FileName)
		if err := os.WriteFile(freshPath, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		joiner := fresh
		joiner.Cluster.Bootstrap = false
		_, err = server.Open(testContext(t), joiner, nil)
		wantErr(t, "a joining node's "+name+" join secret without a log", err, djinn.ErrInvalidArgument, "needs its join secret")
		var logged logtest.Buffer
		s, err := server.Open(testContext(t), fresh, slog.New(slog.NewTextHandler(&logged, nil)))
		if err != nil {
			t.Fatalf("%s join secret without a log: %v", name, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := secret.Load(freshPath); err != nil {
			t.Fatalf("%s join secret without a log: not made again: %v", name, err)
		}
		if l := strings.Join(logged.Lines(), "\n"); !strings.Contains(l, "level=WARN msg=\"join secret:") || !strings.Contains(l, "replaced") {
			t.Errorf("%s join secret without a log: replacing it not logged:\n%s", name, l)
		}
	}
}

// mtlsConfig is a test server's configuration under mutual TLS with the
// peer certificate of node and operators.
func mtlsConfig(t *testing.T, pki *servertest.PKI, node string, operators ...string) server.Config {
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
	if node != servertest.ServerNode {
		cfg.TLS.PeerCert, cfg.TLS.PeerKey = pki.NewPeer(t, node)
	}
	cfg.Security.Operators = operators
	return cfg
}

// TestPeersAuthenticateAsPeers (issue 17, finding 5): under TLS a node's
// peer certificate carries djinn-peer://NODE-ID; the Raft port refuses
// client certificates, certificates of another CA and self-signed ones; a node whose
// certificate is no peer's refuses to start, saying why; a peer joins as
// its own node only, and the operators named in configuration change the
// membership — nobody else.
func TestPeersAuthenticateAsPeers(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	other := servertest.NewPKI(t)

	t.Run("a certificate that is no peer's", func(t *testing.T) {
		cfg := servertest.Config(t)
		cfg.TLS = server.TLSConfig{Cert: pki.ClientCert, Key: pki.ClientKey, CA: pki.CA, ClientAuth: true}
		_, err := server.Open(testContext(t), cfg, nil)
		wantErr(t, "open", err, djinn.ErrInvalidArgument, "djinn-peer://NODE-ID")
	})
	t.Run("a node id the peer certificate does not name", func(t *testing.T) {
		cfg := mtlsConfig(t, pki, servertest.ServerNode)
		cfg.NodeID = "n9"
		_, err := server.Open(testContext(t), cfg, nil)
		wantErr(t, "open", err, djinn.ErrInvalidArgument, "n9")
	})

	first := servertest.Start(t, mtlsConfig(t, pki, servertest.ServerNode, "cn:ops"))
	if first.NodeID() != servertest.ServerNode {
		t.Fatalf("node id %q, want the peer certificate's %q", first.NodeID(), servertest.ServerNode)
	}
	for _, tt := range []struct {
		name string
		cert tls.Certificate
		ca   *servertest.PKI
	}{
		{"a client certificate", pki.Client, pki},
		{"a peer certificate of another CA", other.Server, pki},
		{"a self-signed peer certificate", servertest.SelfSignedPeer(t, servertest.ServerNode), pki},
	} {
		t.Run("the raft port refuses "+tt.name, func(t *testing.T) {
			if err := raftHandshake(first.RaftAddr(), tt.cert, tt.ca); err == nil {
				t.Fatal("raft port accepted it")
			}
		})
	}

	ops := djinnpb.NewAdminClient(servertest.Conn(t, first.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "ops")))))
	bob := djinnpb.NewAdminClient(servertest.Conn(t, first.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "bob")))))
	for name, call := range adminCalls(bob) {
		wantErr(t, "bob: "+name, call(testContext(t)), djinn.ErrPermissionDenied, "")
	}
	wantErr(t, "the operator's AddMember", adminCalls(ops)["AddMember"](testContext(t)), djinn.ErrInvalidArgument, "grpc address")

	n2Cert, n2Key := pki.NewPeer(t, "n2")
	n2, err := tls.LoadX509KeyPair(n2Cert, n2Key)
	if err != nil {
		t.Fatal(err)
	}
	asN2 := djinnpb.NewAdminClient(servertest.Conn(t, first.Addr(), client.WithTLS(pki.TLSFor(n2))))
	_, err = asN2.Join(testContext(t), &djinnpb.JoinRequest{NodeId: "n3", RaftAddress: "127.0.0.1:1", GrpcAddress: "127.0.0.1:1"})
	wantErr(t, "n2's certificate joins as n3", err, djinn.ErrPermissionDenied, "n2")

	second := servertest.Open(t, func() server.Config {
		cfg := mtlsConfig(t, pki, "n2")
		cfg.TLS.PeerCert, cfg.TLS.PeerKey = n2Cert, n2Key
		cfg.Join = first.Addr()
		return cfg
	}())
	servertest.Eventually(t, "n2 a voter, caught up over the peer port", func() bool {
		ms, err := first.Node().Members()
		return err == nil && len(ms) == 2 && ms[0].Voter && ms[1].Voter && second.Node().AppliedIndex() > 0
	})
}

// raftHandshake completes a TLS handshake with the Raft port at addr as
// cert, trusting ca, and reads: a refused certificate ends the connection.
func raftHandshake(addr string, cert tls.Certificate, ca *servertest.PKI) error {
	d := &net.Dialer{Timeout: servertest.Timeout}
	conn, err := tls.DialWithDialer(d, "tcp", addr, ca.TLSFor(cert))
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(servertest.Timeout)); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil // the port waits for a request: accepted
	}
	return err
}
