package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/backoff"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/principal"
	"github.com/djinn-go/djinn/internal/pstream"
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/internal/secret"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// Server is a running djinn server: the replicated state machine and its
// Raft node, and the parts (parts.go) that make up its services.
type Server struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	machine *state.Machine
	node    *replica.Node
	lessor  *lease.Lessor
	pool    *client.Pool
	// readPoints is what this node, as a follower, learned of the
	// leader's read index, for reads that allow staleness.
	readPoints readPoints
	// participantCalls makes the transaction manager's calls to
	// participants in other processes, over one stream to each.
	participantCalls *pstream.Caller
	metrics          *metrics
	// guard decides the operator role and peers' identity; peers is the
	// pool for the calls this server makes as a member of its cluster
	// (joining, leaving), which present the join secret when there is one.
	guard guard
	peers *client.Pool
	// streams counts the streams each principal has open here; calls
	// bounds the calls each has in flight here.
	streams *streams
	calls   callSlots
	// outOpts are the options of the server's outgoing connections (TLS
	// with the peer certificate, metrics), for those it makes itself.
	outOpts []client.Option

	parts  []*part
	opened []*part // parts whose open ran, to close
	rules  map[string]Rule

	// unary is the interceptor chain of every unary call, on its own or in
	// a session; sessionMethods are the unary methods a session may call;
	// workers run sessions' calls; sessions counts the sessions open.
	unary          grpc.UnaryServerInterceptor
	sessionMethods map[string]sessionMethod
	workers        *workers
	sessions       sync.WaitGroup
	sessionStats   sessionStats

	// The services other parts call in process, nil until opened: the
	// transaction manager (joined by the lock service and the key/value
	// participant), the lock service and the key/value participant
	// (called by the transaction manager).
	txn     *txn.Service
	txnSt   *txn.State // its replicated state
	lock    *lock.Service
	kv      *kv.DB
	kvStore *participant.FileStore
	// joins keeps the services registered in lookup services (joiner.go).
	joins *joins

	mu        sync.Mutex
	registrar *discovery.Registrar // guarded by mu: this node's, while it serves discovery (discover)
	// discovers: this node serves unicast discovery for its whole life
	// (no multicast); discoveryTried: it has tried to start once.
	discovers      bool
	discoveryTried atomic.Bool

	grpc      *grpc.Server
	health    *health.Server
	admin     *http.Server
	adminTLS  *tls.Config // nil without TLS
	grpcLn    net.Listener
	adminLn   net.Listener
	advertise string

	stop      chan struct{}
	left      chan struct{} // closed once this node has left the cluster
	partsOpen chan struct{} // closed once open has opened every part; lead waits for it
	leaveOnce sync.Once
	wg        sync.WaitGroup
}

// Open starts a server: it binds its ports, opens (or bootstraps) its data
// directory and starts serving. The caller must Close it.
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t, err := loadTLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	if t.node != "" {
		// The peer certificate names the node.
		if cfg.NodeID != "" && cfg.NodeID != t.node {
			return nil, djinn.Errorf(djinn.InvalidArgument, "node id %q: the peer certificate is node %q's (%s://%s)", cfg.NodeID, t.node, principal.PeerScheme, t.node)
		}
		cfg.NodeID = t.node
	}
	s := &Server{cfg: cfg, log: logger, now: time.Now, metrics: newMetrics(), stop: make(chan struct{}), left: make(chan struct{}), partsOpen: make(chan struct{}), streams: newStreams(cfg)}
	s.calls.configure(cfg)
	s.discovers = cfg.Lookup.Enabled && cfg.Lookup.Discovery != "" && !cfg.Lookup.Multicast
	if err := s.listen(); err != nil {
		return nil, err
	}
	if s.guard, err = newGuard(cfg, logger); err != nil {
		s.Close()
		return nil, err
	}
	s.guard.serving = func(what string) error { return s.lessor.Serving(what) } // the lessor opens with the parts, before any call
	s.adminTLS = t.admin
	if t.files != nil {
		t.files.SetLogger(logger)
		if cfg.TLS.CRL != "" {
			f := t.files
			s.guard.revoked = func(c *x509.Certificate) error { return revoked(f, c) }
		}
		s.metrics.registry.MustRegister(certCollectors(t.files)...)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t.files.Watch(s.stop, certCheckInterval)
		}()
	}
	s.pool, s.peers = s.pools(t.out)
	s.participantCalls = pstream.NewCaller(s.participantRoute)
	if err := s.open(t.peer, t.peerDial, t.server); err != nil {
		s.Close()
		return nil, err
	}
	close(s.partsOpen)
	s.serve()
	if s.discovers {
		// Every member answers unicast discovery (discover).
		ctx, cancel := context.WithCancel(context.Background())
		s.wg.Go(func() {
			<-s.stop
			cancel()
		})
		s.wg.Go(func() { s.discover(ctx) })
	}
	if cfg.Join != "" {
		if hasPendingRestore(cfg.DataDir) {
			s.Close()
			return nil, djinn.Errorf(djinn.InvalidArgument, "data directory %s holds a snapshot to restore: start it without --join, as the first member of the new cluster it seeds, and join the others to it", cfg.DataDir)
		}
		if err := s.join(ctx); err != nil {
			s.Close()
			return nil, err
		}
	}
	// The server reaches its own cluster's services (the renewal service
	// renewing leases this cluster granted, ...) at whichever member
	// serves, not at the member a reference names, which may be gone.
	if err := s.pool.Follow(s.advertise); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// pools returns the server's connection pools: pool for every call it
// makes, peers for the calls only a member may make. Both present the peer
// certificate under TLS; peers alone carries the join secret, which must
// never reach a listener or anything outside the cluster: it goes to this
// cluster's members (isPeer) and to the cluster it joins (join).
func (s *Server) pools(out credentials.TransportCredentials) (pool, peers *client.Pool) {
	// The server's outgoing calls are counted (grpc_client_*).
	opts := []client.Option{client.WithDialOptions(
		grpc.WithChainUnaryInterceptor(s.metrics.client.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(s.metrics.client.StreamClientInterceptor()),
	), client.WithConnectTimeout(time.Duration(s.cfg.ConnectTimeout)),
		client.WithKeepalive(time.Duration(s.cfg.KeepaliveTime), time.Duration(s.cfg.KeepaliveTimeout))}
	if out != nil {
		// After the pool's own credentials: these replace them.
		opts = append(opts, client.WithDialOptions(grpc.WithTransportCredentials(out)))
	}
	s.outOpts = opts
	pool = client.NewPool(opts...)
	if s.guard.hasSecret {
		opts = append(opts, client.WithJoinSecretTo(s.guard.secret.String(), s.isPeer))
	}
	return pool, client.NewPool(opts...)
}

// isPeer reports whether endpoint is a member's of this cluster, as its
// configuration lists them.
func (s *Server) isPeer(endpoint string) bool {
	return s.node != nil && slices.Contains(s.memberEndpoints(), endpoint)
}

// raftSecret is the join secret the Raft port's connections must prove
// (DESIGN.md 7: peers authenticate as peers): without TLS, where no peer
// certificate does.
func (s *Server) raftSecret(peerTLS *tls.Config) []byte {
	if peerTLS != nil || !s.guard.hasSecret {
		return nil
	}
	return s.guard.secret[:]
}

// listen makes the data directory and binds the gRPC and admin ports.
func (s *Server) listen() error {
	cfg := s.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	var err error
	s.grpcLn, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	s.advertise = cfg.Advertise
	if s.advertise == "" {
		s.advertise = s.grpcLn.Addr().String()
	}
	s.adminLn, err = net.Listen("tcp", cfg.Admin)
	if err != nil {
		s.grpcLn.Close()
		return fmt.Errorf("listen %s: %w", cfg.Admin, err)
	}
	return nil
}

// open builds the state machine from the parts, replays the log into it
// through the Raft node, opens the parts' cores and their gRPC services.
func (s *Server) open(peerTLS *tls.Config, peerDial func() *tls.Config, serverTLS *tls.Config) error {
	cfg := s.cfg
	s.machine = state.New()
	if cfg.Cluster.rulesMax != 0 {
		s.machine.SetMaxRules(cfg.Cluster.rulesMax)
	}
	if err := checkRules(cfg.DataDir, s.machine.MaxRules()); err != nil {
		return err
	}
	if err := s.openParts(); err != nil {
		return err
	}
	// Before the node, which makes the log on a first start.
	if cfg.KV.Enabled {
		if err := checkKVStore(cfg.DataDir); err != nil {
			return err
		}
	} else if err := markKVOff(cfg.DataDir); err != nil {
		return err
	}
	// Before the node: it may lead at once, and lead marks health serving.
	s.health = health.NewServer()
	var err error
	s.node, err = replica.Open(replica.Config{
		DataDir: cfg.DataDir, NodeID: cfg.NodeID, RaftAddr: cfg.Raft, AdvertiseRaft: cfg.RaftAdvertise,
		TLS: peerTLS, DialTLS: peerDial, Secret: s.raftSecret(peerTLS), Bootstrap: cfg.Join == "" && cfg.Cluster.Bootstrap, Now: s.now, OnLeader: s.lead,
		Endpoint: s.machine.Endpoint, Logger: s.log, OnLogWrite: s.metrics.logWrite,
		HeartbeatTimeout: time.Duration(cfg.Raftcfg.HeartbeatTimeout), ElectionTimeout: time.Duration(cfg.Raftcfg.ElectionTimeout),
		SnapshotInterval: time.Duration(cfg.Raftcfg.SnapshotInterval), SnapshotThreshold: cfg.Raftcfg.SnapshotThreshold, TrailingLogs: cfg.Raftcfg.TrailingLogs,
		WALSegmentSize: cfg.Raftcfg.WALSegmentSize, HandshakeTimeout: time.Duration(cfg.HandshakeTimeout),
	}, s.machine)
	if err != nil {
		return err
	}
	s.wg.Go(s.watchRules)
	if err := s.openCores(); err != nil {
		return err
	}
	if err := s.openGRPC(serverTLS); err != nil {
		return err
	}
	return s.metrics.addServer(s)
}

// openGRPC makes the gRPC server and registers the parts' services, the
// health service and reflection, each method under its rule.
func (s *Server) openGRPC(serverTLS *tls.Config) error {
	s.unary = s.unaryChain(s.metrics.server.UnaryServerInterceptor())
	s.workers = newWorkers(maxIdleWorkers)
	opts := []grpc.ServerOption{
		grpc.UnaryInterceptor(s.unary),
		grpc.ChainStreamInterceptor(s.streamEdge, s.metrics.server.StreamServerInterceptor(), s.streamErrors),
		grpc.MaxConcurrentStreams(maxSessionCalls),
		// Reuse handler goroutines: a fresh goroutine per call grows its
		// stack again on every call. Calls block (on the log, on a lock),
		// so there are as many workers as calls commonly in flight.
		grpc.NumStreamWorkers(uint32(max(streamWorkers, 4*runtime.GOMAXPROCS(0)))),
		grpc.StaticStreamWindowSize(streamWindow),
		grpc.StaticConnWindowSize(connWindow),
		client.ServerKeepalive(time.Duration(s.cfg.KeepaliveMinTime)), // other members' and clients' pings
		// A client connection idle for keepalive-time is pinged, and closed
		// when no answer comes within keepalive-timeout: the streams of a
		// subscriber whose host died are released, not held until TCP
		// gives up.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Duration(s.cfg.KeepaliveTime), Timeout: time.Duration(s.cfg.KeepaliveTimeout)}),
		// A connection that does not finish its TLS and HTTP/2 handshakes
		// in time is closed.
		grpc.ConnectionTimeout(time.Duration(s.cfg.HandshakeTimeout)),
	}
	if serverTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(serverTLS)))
	} else {
		opts = append(opts, grpc.Creds(insecure.NewCredentials()))
	}
	undecoded := new(sync.Map)
	opts = append(opts, grpc.ForceServerCodecV2(newRequestCodec(undecoded)))
	s.grpc = grpc.NewServer(opts...)
	r := newRegistrar(s.grpc)
	r.undecoded = undecoded
	if err := s.serveParts(r); err != nil {
		return err
	}
	everyone := Rules{anyMethod: public} // probes and tools, before any identity
	if err := r.serve(&healthpb.Health_ServiceDesc, s.health, everyone); err != nil {
		return err
	}
	if err := r.with(everyone, func(g grpc.ServiceRegistrar) { reflection.Register(g.(reflection.GRPCServer)) }); err != nil {
		return err
	}
	if err := r.verify(); err != nil {
		return err
	}
	s.rules, s.sessionMethods = r.rules, r.unary
	return nil
}

// serve starts serving gRPC and the admin HTTP endpoints.
func (s *Server) serve() {
	s.admin = &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 10 * time.Second,
		// Failed handshakes and the like: debug lines, not stderr.
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	ln := s.adminLn
	if s.adminTLS != nil {
		ln = tls.NewListener(ln, s.adminTLS)
	}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(s.grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("grpc server stopped", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		if err := s.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin server stopped", "err", err)
		}
	}()
}

// ref returns a function giving the reference of one of this server's
// objects.
func (s *Server) ref(obj djinn.ID) func() djinn.Ref {
	return func() djinn.Ref {
		return djinn.Ref{Endpoint: s.advertise, Service: s.machine.ServiceID(), Object: obj}
	}
}

// Addr returns the gRPC address the server listens on.
func (s *Server) Addr() string { return s.grpcLn.Addr().String() }

// Advertise returns the gRPC address put in references and member records.
func (s *Server) Advertise() string { return s.advertise }

// DiscoveryAddr returns the address this node answers unicast discovery
// on, "" while it does not (yet).
func (s *Server) DiscoveryAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.registrar == nil {
		return ""
	}
	return s.registrar.Addr().String()
}

// AdminAddr returns the admin HTTP address.
func (s *Server) AdminAddr() string { return s.adminLn.Addr().String() }

// AdminURL returns the admin port's base URL: https under TLS.
func (s *Server) AdminURL() string {
	if s.adminTLS != nil {
		return "https://" + s.AdminAddr()
	}
	return "http://" + s.AdminAddr()
}

// RaftAddr returns the Raft address.
func (s *Server) RaftAddr() string { return s.node.RaftAddr() }

// NodeID returns the Raft node id.
func (s *Server) NodeID() string { return s.node.ID() }

// JoinSecretFile returns the file holding the cluster's join secret, or
// "" under mutual TLS, where there is none.
func (s *Server) JoinSecretFile() string {
	if !s.guard.hasSecret {
		return ""
	}
	return filepath.Join(s.cfg.DataDir, secret.FileName)
}

// DataDir returns the data directory.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// Failed delivers the first error with which the server failed to write
// its log (replica.Node.Failed): the process should close the server and
// exit, to be started again on what its log holds.
func (s *Server) Failed() <-chan error { return s.node.Failed() }

// Node returns the Raft node (for tests and status).
func (s *Server) Node() *replica.Node { return s.node }

// WaitReady blocks until the server can serve writes through some leader:
// the cluster has its service id and this node knows a leader; on the
// leader, its services serve (its term's leader work has started).
func (s *Server) WaitReady(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if s.ready() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server not ready: %w", ctx.Err())
		case <-t.C:
		}
	}
}

func (s *Server) ready() bool {
	if s.machine.ServiceID().IsZero() || s.discovers && !s.discoveryTried.Load() {
		return false
	}
	if s.node.IsLeader() {
		return s.partsServing()
	}
	id, _ := s.node.Leader()
	return id != ""
}

// lead runs leader-only work for one term: it makes sure the cluster has
// its service id and this node's address is recorded, then runs every
// enabled part's leader work until the term ends.
func (s *Server) lead(ctx context.Context) {
	// The node may lead as soon as it starts, before open has opened the
	// parts (and set s.node).
	select {
	case <-s.partsOpen:
	case <-ctx.Done():
		return
	}
	// A data directory seeded from a snapshot takes it on first: until it
	// has, this new cluster has no identity and serves nothing.
	for b := backoff.New(100*time.Millisecond, 5*time.Second); ; {
		err := s.installRestore(ctx)
		if err == nil {
			break
		}
		s.log.Error("restoring the snapshot failed; retrying", "err", err, "within", b.Next())
		if !b.Wait(ctx) {
			return
		}
	}
	if !s.initCluster(ctx) || !s.proposeQuotas(ctx) {
		return
	}
	own := s.machine.MaxRules()
	if info, ok := s.machine.Member(s.node.ID()); !ok || info.Endpoint != s.advertise || !info.Voter || info.RulesMax != own {
		// A leader votes; a member recorded before records said so is one.
		if err := s.recordMember(ctx, &statepb.Member{NodeId: s.node.ID(), GrpcAddress: s.advertise, Voter: true, RulesMax: own}); err != nil {
			s.log.Warn("recording member address failed", "err", err)
		}
	}
	s.runParts(ctx, func() { s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING) })
}

// initCluster gives a new cluster its service id, from its first leader.
// Without it nothing can be served, so it keeps trying while this node
// leads; false when the term ended first.
func (s *Server) initCluster(ctx context.Context) bool {
	for b := backoff.New(100*time.Millisecond, 5*time.Second); s.machine.ServiceID().IsZero(); {
		id := djinn.NewID()
		// A new cluster starts at the highest rules version its first
		// leader supports; members that support less cannot join it.
		init := &statepb.Init{ServiceId: id[:], RulesVersion: s.machine.MaxRules()}
		_, err := s.node.Propose(ctx, &statepb.Command{Op: &statepb.Command_Init{Init: init}})
		if err == nil {
			break
		}
		s.log.Warn("cluster init failed; retrying", "err", err, "within", b.Next())
		if !b.Wait(ctx) {
			return false
		}
	}
	return true
}

// join asks a member of an existing cluster to add this node, trying each
// address given in turn. The pool's connections follow a follower's leader
// hint, so any member will do.
func (s *Server) join(ctx context.Context) error {
	if members, err := s.node.Members(); err == nil && len(members) > 0 {
		return nil // already a member (restart)
	}
	req := &djinnpb.JoinRequest{NodeId: s.node.ID(), RaftAddress: s.node.RaftAddr(), GrpcAddress: s.advertise, RulesMax: s.machine.MaxRules()}
	eps, err := client.SplitEndpoints(s.cfg.Join)
	if err != nil {
		return fmt.Errorf("join %s: %w", s.cfg.Join, err)
	}
	// The cluster to join is the one the join secret goes to.
	if err := s.peers.Follow(eps...); err != nil {
		return fmt.Errorf("join %s: %w", s.cfg.Join, err)
	}
	var last error
	for i := range 50 {
		conn, err := s.peers.Conn(eps[i%len(eps)])
		if err == nil {
			if _, err = djinnpb.NewAdminClient(conn).Join(ctx, req); err == nil {
				return nil
			}
			if k := djinn.KindOf(err); k == djinn.PermissionDenied || k == djinn.InvalidArgument || k == djinn.Unsupported {
				return fmt.Errorf("join %s: %w", s.cfg.Join, err) // asking again cannot help
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("join %s: %w", s.cfg.Join, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("join %s: %w", s.cfg.Join, last)
}

// Close stops serving: the gRPC server drains, leader work stops, Raft
// shuts down and the log is closed, then the parts close.
func (s *Server) Close() error {
	select {
	case <-s.stop:
		return nil
	default:
	}
	close(s.stop)
	s.stopParts()
	if s.health != nil {
		s.health.Shutdown()
	}
	s.stopGRPC()
	s.sessions.Wait() // sessions a forced stop cut short end with their calls
	if s.workers != nil {
		s.workers.stop()
	}
	s.stopAdmin()
	var err error
	if s.node != nil {
		err = s.node.Close()
	}
	s.closeParts()
	if s.participantCalls != nil {
		s.participantCalls.Close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	if s.peers != nil {
		s.peers.Close()
	}
	s.wg.Wait()
	return err
}

// stopGRPC drains the gRPC server, for at most 5 seconds.
func (s *Server) stopGRPC() {
	if s.grpc == nil {
		if s.grpcLn != nil {
			s.grpcLn.Close()
		}
		return
	}
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.grpc.Stop()
	}
}

// stopAdmin stops the admin HTTP server. Shutdown waits for requests in
// flight, but takes a connection that has not yet sent a request (a
// probe, a port scan) for idle only after 5 seconds; Close then ends
// whatever is left.
func (s *Server) stopAdmin() {
	if s.admin == nil {
		if s.adminLn != nil {
			s.adminLn.Close()
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.admin.Shutdown(ctx); err != nil {
		s.admin.Close()
	}
}

// Description says where a server's services are.
type Description struct {
	NodeID, State string
	Services      []NamedRef
}

// NamedRef is a service and its reference.
type NamedRef struct {
	Name string
	Ref  djinn.Ref
}

// Describe returns the server's node, state and the references of its
// enabled services.
func (s *Server) Describe() Description {
	d := Description{NodeID: s.node.ID(), State: s.node.State()}
	for _, p := range s.parts {
		if p.enabled && p.ref != nil {
			d.Services = append(d.Services, NamedRef{p.name, p.ref()})
		}
	}
	return d
}
