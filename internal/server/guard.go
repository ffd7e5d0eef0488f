package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/internal/secret"
)

// SecurityConfig says who holds the operator role (DESIGN.md 7).
type SecurityConfig struct {
	// Operators names the principals with the operator role under mutual
	// TLS, as the server names a client certificate's principal:
	// "cn:COMMON-NAME", "dns:DNS-NAME" or "uri:URI" (its first URI SAN).
	// Without mutual TLS there are none: the operator is whoever presents
	// the cluster's join secret.
	Operators []string `toml:"operators"`
	// JoinSecretFile, without mutual TLS, is a file holding the cluster's
	// join secret (a copy of the join-secret file in a member's data
	// directory), for a node that joins a cluster (--join, or bootstrap
	// off): it presents it to join and keeps a copy in its own data
	// directory.
	JoinSecretFile string `toml:"join-secret-file"`
}

// check validates the section on its own; checkSecurity checks it against
// the TLS settings.
func (c *SecurityConfig) check() error {
	for _, op := range c.Operators {
		if err := principal.Check(op); err != nil {
			return djinn.Errorf(djinn.InvalidArgument, "security operators: %v", err)
		}
	}
	return nil
}

// checkSecurity checks the security section against TLS: operators are
// named only by client certificates, and a join secret exists only
// without them.
func (c *Config) checkSecurity() error {
	mutual := c.TLS.ClientAuth
	if len(c.Security.Operators) > 0 && !mutual {
		return djinn.Errorf(djinn.InvalidArgument, "security operators: principals are named by client certificates, which needs tls client-auth; without it the operator is whoever presents the join secret")
	}
	if len(c.Quota.Principals) > 0 && !mutual {
		return djinn.Errorf(djinn.InvalidArgument, "quota principals: principals are named by client certificates, which needs tls client-auth; without it every caller is the one local principal")
	}
	if c.Security.JoinSecretFile != "" && mutual {
		return djinn.Errorf(djinn.InvalidArgument, "security join-secret-file: under mutual TLS a joining node proves itself with its peer certificate; there is no join secret")
	}
	return nil
}

// guard decides the rights that take more than a principal: the operator
// role and a peer's identity.
type guard struct {
	// mutual: client certificates name principals (tls client-auth), and
	// operators are the principals configuration names.
	mutual    bool
	operators map[string]bool
	// secret, without mutual TLS, is the cluster's join secret; whoever
	// presents it is an operator and may join.
	secret    secret.Secret
	hasSecret bool
	// serving answers nil on the node serving as leader and Unavailable
	// naming what elsewhere (lease.Lessor.Serving): an ownership hook
	// decides only there.
	serving func(what string) error
	// revoked, under TLS with revocation lists, refuses a certificate they
	// list (nil: none do).
	revoked func(*x509.Certificate) error
}

// newGuard returns the guard of a server configured with cfg; without
// mutual TLS it loads or makes the join secret (loadSecret), logging to
// log.
func newGuard(cfg Config, log *slog.Logger) (guard, error) {
	g := guard{mutual: cfg.TLS.ClientAuth, operators: map[string]bool{}}
	for _, op := range cfg.Security.Operators {
		g.operators[op] = true
	}
	if g.mutual {
		return g, nil
	}
	s, err := loadSecret(cfg, log)
	if err != nil {
		return guard{}, err
	}
	g.secret, g.hasSecret = s, true
	return g, nil
}

// loadSecret returns the join secret of a node without mutual TLS: the one
// in its data directory; else the one its join-secret-file holds, which it
// copies there; else, for a node that starts a cluster, a new one it
// writes there. A node that joins needs the cluster's. A secret gone or
// empty beside the node's log, or one that does not parse, is damage: a
// new one would shut a member out of its cluster and change the
// operator's secret. Without a log beside it (a fresh data directory:
// nothing acknowledged yet, as when a first start is killed while it
// writes the secret) an empty or unreadable secret is made again like a
// missing one, and that is logged.
func loadSecret(cfg Config, log *slog.Logger) (secret.Secret, error) {
	path := filepath.Join(cfg.DataDir, secret.FileName)
	stored, problem, err := storedSecret(path)
	if err != nil {
		return secret.Secret{}, err
	}
	if problem == "" {
		if f := cfg.Security.JoinSecretFile; f != "" {
			given, err := secret.Load(f)
			if err != nil {
				return secret.Secret{}, djinn.Errorf(djinn.InvalidArgument, "security join-secret-file: %v", err)
			}
			if given != stored {
				return secret.Secret{}, djinn.Errorf(djinn.InvalidArgument, "security join-secret-file %s: not the join secret this node keeps in %s, the one of the cluster it belongs to; drop the flag (or, if this node never joined, remove %s)", f, path, path)
			}
		}
		return stored, nil
	}
	hasLog := replica.HasLog(cfg.DataDir)
	damaged := problem != secretGone
	if damaged && hasLog {
		return secret.Secret{}, lostSecret(path, problem+" but the node's log is there")
	}
	s, from := secret.New(), "a new one"
	if f := cfg.Security.JoinSecretFile; f != "" {
		if s, err = secret.Load(f); err != nil {
			return secret.Secret{}, djinn.Errorf(djinn.InvalidArgument, "security join-secret-file: %v", err)
		}
		from = "the one in " + f
	} else if hasLog {
		return secret.Secret{}, lostSecret(path, problem+" but the node's log is there")
	} else if cfg.Join != "" || !cfg.Cluster.Bootstrap {
		return secret.Secret{}, djinn.Errorf(djinn.InvalidArgument, "a node that joins a cluster needs its join secret: copy the %s file from a member's data directory and pass it with --join-secret-file", secret.FileName)
	}
	if damaged {
		if err := disk.Remove(path); err != nil {
			return secret.Secret{}, fmt.Errorf("join secret: removing the unusable %s: %w", path, err)
		}
	}
	if err := s.Write(path); err != nil {
		return secret.Secret{}, fmt.Errorf("join secret: %w", err)
	}
	if damaged {
		log.Warn("join secret: the file "+problem+", and the data directory holds no log yet (nothing acknowledged): replaced", "file", path, "by", from)
	}
	return s, nil
}

// secretGone is storedSecret's problem when there is no secret.
const secretGone = "the join secret is gone"

// storedSecret reads the join secret at path. A secret gone, empty or
// unreadable is a problem (secretGone when gone); err is a failure to
// read.
func storedSecret(path string) (s secret.Secret, problem string, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, secretGone, nil
	}
	if err != nil {
		return s, "", fmt.Errorf("join secret: %w", err)
	}
	s, err = secret.Parse(string(b))
	switch {
	case err == nil:
		return s, "", nil
	case strings.TrimSpace(string(b)) == "":
		return s, "the join secret is empty", nil
	}
	return s, fmt.Sprintf("does not hold a join secret (%v)", err), nil
}

// lostSecret is the damage of a join secret gone or unreadable beside
// the node's log.
func lostSecret(path, problem string) error {
	return disk.WithRecovery(&disk.DamageError{Path: path, Offset: -1, Problem: problem},
		fmt.Sprintf("restore %s from a backup, or copy the %s file of another member's data directory there "+
			"(or, with it gone, start once with --join-secret-file naming such a copy); a new secret would shut this member "+
			"out of its cluster and change the operator's secret (a single node whose secret has no copy anywhere: "+
			"write 32 new random hex digits there, and give its operators the new secret)", path, secret.FileName))
}

// presented reports whether the call carries the join secret.
func (g *guard) presented(ctx context.Context) bool {
	if !g.hasSecret {
		return false
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(secret.Header) {
		if g.secret.Matches(v) {
			return true
		}
	}
	return false
}

// operator answers nil when the caller holds the operator role, and
// PermissionDenied saying how to get it otherwise.
func (g *guard) operator(ctx context.Context, method string) error {
	if g.mutual {
		p := principal.From(ctx)
		if g.operators[p] {
			return nil
		}
		return djinn.Errorf(djinn.PermissionDenied, "%s needs the operator role: principal %q is not among the [security] operators of the server's configuration", method, p)
	}
	if g.presented(ctx) {
		return nil
	}
	return djinn.Errorf(djinn.PermissionDenied, "%s needs the operator role: present the cluster's join secret (the %s file in the data directory of its first node; djinn --join-secret-file FILE)", method, secret.FileName)
}

// peer answers nil when the caller is a peer (its certificate says so, or,
// without mutual TLS, it presents the join secret) or an operator. A peer
// certificate proves one node: a call that acts on another node (node,
// when not "") needs the operator role.
func (g *guard) peer(ctx context.Context, method, node string) error {
	if self, ok := principal.PeerNode(ctx); ok {
		if node == "" || node == self || g.operator(ctx, method) == nil {
			return nil
		}
		return djinn.Errorf(djinn.PermissionDenied, "%s of node %q: the peer certificate presented is node %q's, which acts on itself alone; another node is an operator's to change", method, node, self)
	}
	if g.presented(ctx) {
		return nil
	}
	if err := g.operator(ctx, method); err == nil {
		return nil
	}
	if g.mutual {
		return djinn.Errorf(djinn.PermissionDenied, "%s is for the cluster's servers and operators: present a peer certificate (one with a %s://NODE-ID URI SAN) or an operator's", method, principal.PeerScheme)
	}
	return djinn.Errorf(djinn.PermissionDenied, "%s is for the cluster's servers and operators: present the cluster's join secret (--join-secret-file)", method)
}

// authorize decides whether a call may go on under its rule: Owner calls
// when the service's hook finds nothing of another principal's, Operator
// calls from operators, Peer calls from peers and operators. Public,
// Authenticated and Capability calls pass here: the transport
// authenticated the caller, and the service checks that a capability
// names something. An Owner call reaches its hook on the serving leader
// only (but for AnyMember rules): elsewhere it is refused Unavailable,
// whoever's resource it names and whether or not it exists, as the
// handler refuses one that does not.
//
// The order is: the caller (a revoked certificate), then the arguments
// that do not depend on the resource the call names (Rule.Args), then
// the ownership hook; checks on the resource's state come after, in the
// handler. A malformed argument is thus answered InvalidArgument naming
// it whatever the call names, and only a well-formed call learns "not
// found".
func (g *guard) authorize(ctx context.Context, method string, r Rule, req any) error {
	if !r.Carrier {
		if err := g.revokedCaller(ctx); err != nil {
			return err
		}
	}
	if r.Args != nil {
		if err := r.Args(req); err != nil {
			return err
		}
	}
	switch r.Access {
	case Owner:
		if !r.AnyMember && g.serving != nil {
			if err := g.serving(strings.TrimPrefix(method, "/")); err != nil {
				return err
			}
		}
		return r.Owns(ctx, req)
	case Operator:
		return g.operator(ctx, method)
	case Peer:
		node := ""
		if r.Node != nil {
			var err error
			if node, err = r.Node(req); err != nil {
				return err
			}
		}
		return g.peer(ctx, method, node)
	}
	return nil
}

// revokedCaller refuses a caller whose certificate a revocation list of
// the server's lists (tls crl): every call is checked, on connections made
// before the revocation too, against the lists loaded now.
func (g *guard) revokedCaller(ctx context.Context) error {
	if g.revoked == nil {
		return nil
	}
	c := principal.Certificate(ctx)
	if c == nil {
		return nil
	}
	return g.revoked(c)
}

// OperatorHeader is the HTTP header that carries the join secret to the
// admin port.
const OperatorHeader = "Djinn-Join-Secret"

// operatorHTTP answers nil when an admin-port request comes from an
// operator: under mutual TLS, its verified client certificate names one;
// otherwise it carries the join secret in OperatorHeader. The admin
// port's actions (the console's) call it before they act.
func (s *Server) operatorHTTP(r *http.Request) error {
	g := &s.guard
	ctx := r.Context()
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		ctx = withCertificate(ctx, r.TLS.VerifiedChains[0][0], g.revoked != nil)
	}
	if err := g.revokedCaller(ctx); err != nil {
		return err
	}
	if v := r.Header.Get(OperatorHeader); v != "" {
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(secret.Header, v))
	}
	return g.operator(ctx, r.Method+" "+r.URL.Path)
}

// withCertificate names the caller by a verified certificate: a peer, or
// a client principal; with keep, ctx carries the certificate too (for the
// revocation check).
func withCertificate(ctx context.Context, c *x509.Certificate, keep bool) context.Context {
	if keep {
		ctx = principal.WithCertificate(ctx, c)
	}
	if node, ok := principal.PeerNodeOf(c); ok {
		return principal.WithPeer(ctx, node)
	}
	return principal.With(ctx, principal.OfCertificate(c))
}
