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
	"sync"
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
	"github.com/djinn-go/djinn/internal/disk"
	"github.com/djinn-go/djinn/internal/event"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/lock"
	"github.com/djinn-go/djinn/internal/lookup"
	"github.com/djinn-go/djinn/internal/mailbox"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/replica"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/txn"
	"github.com/djinn-go/djinn/kv"
	"github.com/djinn-go/djinn/participant"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
	"github.com/djinn-go/djinn/service"
)

// Server is a running djinn server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	machine *state.Machine
	states  states
	node    *replica.Node
	lessor  *lease.Lessor
	mailbox *mailbox.Service
	renewal *renewal.Service
	txn     *txn.Service
	lock    *lock.Service
	lookup  *lookup.Service
	lds     *lds.Service

	mu        sync.Mutex
	registrar *discovery.Registrar // guarded by mu: serving discovery while leading
	kvStore   *participant.FileStore
	kv        *kv.DB
	pool      *client.Pool
	metrics   *metrics

	grpc      *grpc.Server
	health    *health.Server
	admin     *http.Server
	grpcLn    net.Listener
	adminLn   net.Listener
	advertise string

	stop      chan struct{}
	left      chan struct{} // closed once this node has left the cluster
	leaveOnce sync.Once
	wg        sync.WaitGroup
}

// MailboxID is the object id of the event mailbox service.
var MailboxID = djinn.ID{'m', 'a', 'i', 'l', 'b', 'o', 'x'}

// Open starts a server: it binds its ports, opens (or bootstraps) its data
// directory and starts serving. The caller must Close it.
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: logger, now: time.Now, stop: make(chan struct{}), left: make(chan struct{})}
	serverTLS, peerTLS, clientTLS, err := loadTLS(cfg.TLS)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", cfg.DataDir, err)
	}
	s.grpcLn, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	s.advertise = cfg.Advertise
	if s.advertise == "" {
		s.advertise = s.grpcLn.Addr().String()
	}
	s.adminLn, err = net.Listen("tcp", cfg.Admin)
	if err != nil {
		s.grpcLn.Close()
		return nil, fmt.Errorf("listen %s: %w", cfg.Admin, err)
	}

	var poolOpts []client.Option
	if clientTLS != nil {
		poolOpts = append(poolOpts, client.WithTLS(clientTLS))
	}
	s.pool = client.NewPool(poolOpts...)
	s.machine, s.states, err = newMachine()
	if err != nil {
		s.grpcLn.Close()
		s.adminLn.Close()
		s.pool.Close()
		return nil, err
	}
	s.node, err = replica.Open(replica.Config{
		DataDir: cfg.DataDir, NodeID: cfg.NodeID, RaftAddr: cfg.Raft, AdvertiseRaft: cfg.RaftAdvertise,
		TLS: peerTLS, Bootstrap: cfg.Join == "" && cfg.Cluster.Bootstrap, Now: s.now, OnLeader: s.lead,
		Endpoint: s.machine.Endpoint, Logger: logger,
		HeartbeatTimeout: time.Duration(cfg.Raftcfg.HeartbeatTimeout), ElectionTimeout: time.Duration(cfg.Raftcfg.ElectionTimeout),
		SnapshotInterval: time.Duration(cfg.Raftcfg.SnapshotInterval), SnapshotThreshold: cfg.Raftcfg.SnapshotThreshold,
		WALSegmentSize: cfg.Raftcfg.WALSegmentSize,
	}, s.machine)
	if err != nil {
		s.grpcLn.Close()
		s.adminLn.Close()
		s.pool.Close()
		return nil, err
	}
	s.lessor = lease.NewLessor(s.machine.Leases, s.node, lease.Config{
		Slack: time.Duration(cfg.Lease.Checkpoint), Grace: s.node.ElectionTimeout(),
		ExpiryBatch: cfg.Lease.ExpiryBatch, ExpiryRate: cfg.Lease.ExpiryRate, Now: s.now, Logger: logger,
	})
	s.mailbox, err = mailbox.New(s.states.mailbox, s.lessor, s.node, s.now, s.ref(MailboxID), mailbox.Config{
		Lease:            lease.Policy{Default: time.Duration(cfg.Mailbox.DefaultLease), Max: time.Duration(cfg.Mailbox.MaxLease)},
		MaxStored:        cfg.Mailbox.MaxStored,
		MaxEventBytes:    cfg.Mailbox.MaxEventBytes,
		MaxRegistrations: cfg.Mailbox.MaxRegistrations,
		Delivery: event.Config{
			Sender: client.NewEventSender(s.pool), MaxBatch: 256,
			MinBackoff: 100 * time.Millisecond, MaxBackoff: 30 * time.Second,
		},
		Logger: logger,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.renewal, err = renewal.New(s.states.renewal, s.lessor, s.node, s.now, s.ref(RenewalID), renewal.Config{
		Lease:     lease.Policy{Default: time.Duration(cfg.Renewal.DefaultLease), Max: time.Duration(cfg.Renewal.MaxLease)},
		MaxSets:   cfg.Renewal.MaxSets,
		MaxLeases: cfg.Renewal.MaxLeases,
		Landlords: landlords{pool: s.pool},
		Delivery: event.Config{
			Sender: client.NewEventSender(s.pool), MaxBatch: 64,
			MinBackoff: 100 * time.Millisecond, MaxBackoff: 30 * time.Second,
		},
		Logger: logger,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.txn, err = txn.New(s.states.txn, s.lessor, s.node, s.now, s.ref(TxnID), txn.Config{
		Lease:        lease.Policy{Default: time.Duration(cfg.Txn.DefaultLease), Max: time.Duration(cfg.Txn.MaxLease)},
		MaxActive:    cfg.Txn.MaxActive,
		Participants: participants{s: s},
		Managers:     otherManagers{pool: s.pool},
		Abandon:      time.Duration(cfg.Txn.Abandon),
		ErrorProto:   grpcerr.ToProto,
		Logger:       logger,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.lock, err = lock.NewService(s.states.lock, s.lessor, s.node, s.now, s.ref(LockID), lock.Config{
		Sets:      lease.Policy{Default: time.Duration(cfg.Lock.DefaultSetLease), Max: time.Duration(cfg.Lock.MaxSetLease)},
		Owners:    lease.Policy{Default: time.Duration(cfg.Lock.DefaultOwnerLease), Max: time.Duration(cfg.Lock.MaxOwnerLease)},
		MaxSets:   cfg.Lock.MaxSets,
		MaxOwners: cfg.Lock.MaxOwners,
		Joiner:    lockJoiner{s: s},
		Logger:    logger,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.lookup, err = lookup.NewService(s.states.lookup, s.lessor, s.node, s.now, s.ref(LookupID), lookup.Config{
		MaxItems: cfg.Lookup.MaxItems,
		Delivery: event.Config{Sender: client.NewEventSender(s.pool), MaxBatch: 64},
		Logger:   logger,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	s.lds, err = lds.NewService(s.states.lds, s.lessor, s.node, s.now, s.ref(LDSID), lds.Config{
		Leases:           lease.Policy{Default: time.Duration(cfg.LDS.DefaultLease), Max: time.Duration(cfg.LDS.MaxLease)},
		MaxRegistrations: cfg.LDS.MaxRegistrations,
		Delivery:         event.Config{Sender: client.NewEventSender(s.pool), MaxBatch: 64},
		Logger:           logger,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	if cfg.KV.Enabled {
		// The reference participant: this node's own key/value store, not
		// replicated, durable in the data directory.
		s.kvStore, err = participant.OpenFileStore(filepath.Join(cfg.DataDir, "kv"))
		if err == nil {
			s.kv, err = kv.Open(kv.Config{Participant: participant.Config{
				Endpoint: s.advertise, Store: s.kvStore, Managers: managers{s: s, remote: participant.Remote(s.pool)}, Logger: logger,
			}})
		}
		if err != nil {
			s.Close()
			return nil, disk.WithRecovery(fmt.Errorf("key/value participant: %w", err), repairAdvice(cfg.DataDir))
		}
	}
	s.metrics = newMetrics(s)

	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(s.unaryEdge),
		grpc.ChainStreamInterceptor(s.streamEdge),
		grpc.MaxConcurrentStreams(4096),
		// Reuse handler goroutines: a fresh goroutine per call grows its
		// stack again on every call.
		grpc.NumStreamWorkers(uint32(4 * runtime.GOMAXPROCS(0))),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if serverTLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(serverTLS)))
	} else {
		opts = append(opts, grpc.Creds(insecure.NewCredentials()))
	}
	s.grpc = grpc.NewServer(opts...)
	djinnpb.RegisterLandlordServer(s.grpc, &landlordRPC{s: s})
	djinnpb.RegisterAdminServer(s.grpc, &adminRPC{s: s})
	if cfg.Mailbox.Enabled {
		djinnpb.RegisterEventMailboxServer(s.grpc, &mailboxRPC{s: s})
		djinnpb.RegisterEventListenerServer(s.grpc, &listenerRPC{s: s})
	}
	if cfg.Renewal.Enabled {
		djinnpb.RegisterLeaseRenewalServiceServer(s.grpc, &renewalRPC{s: s})
	}
	if cfg.Txn.Enabled {
		djinnpb.RegisterTransactionManagerServer(s.grpc, &txnRPC{s: s})
	}
	if cfg.Lock.Enabled {
		djinnpb.RegisterLockServiceServer(s.grpc, &lockRPC{s: s})
	}
	if cfg.LDS.Enabled {
		djinnpb.RegisterLookupDiscoveryServiceServer(s.grpc, &ldsRPC{s: s})
	}
	if cfg.Lookup.Enabled {
		registerLookup(s.grpc, &lookupRPC{s: s})
	}
	if cfg.Txn.Enabled || cfg.Lock.Enabled || s.kv != nil {
		rpc := &participantRPC{s: s}
		if s.kv != nil {
			rpc.hosts = participant.NewServer()
			rpc.hosts.Add(s.kv.Participant())
			kv.NewServer(s.kv).Register(s.grpc)
		}
		djinnpb.RegisterTransactionParticipantServer(s.grpc, rpc)
	}
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)

	s.admin = &http.Server{Handler: s.adminHandler(), ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(s.grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			logger.Error("grpc server stopped", "err", err)
		}
	}()
	go func() {
		defer s.wg.Done()
		if err := s.admin.Serve(s.adminLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("admin server stopped", "err", err)
		}
	}()
	if cfg.Join != "" {
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

// states are the services' replicated states.
type states struct {
	mailbox *mailbox.State
	renewal *renewal.State
	txn     *txn.State
	lock    *lock.State
	lookup  *lookup.State
	lds     *lds.State
}

// newMachine returns a state machine holding every service's state.
func newMachine() (*state.Machine, states, error) {
	m := state.New()
	st := states{
		mailbox: mailbox.NewState(m.Leases, mailbox.DefaultMaxStored, m.ServiceID),
		renewal: renewal.NewState(m.Leases, m.ServiceID),
		txn:     txn.NewState(m.Leases),
		lock:    lock.NewState(m.Leases),
		lookup:  lookup.NewState(m.Leases, m.ServiceID, service.Limits{}),
		lds:     lds.NewState(m.Leases),
	}
	for _, p := range []state.Part{st.mailbox.Part(), st.renewal.Part(), st.txn.Part(), st.lock.Part(), st.lookup.Part(), st.lds.Part()} {
		if err := m.Add(p); err != nil {
			return nil, states{}, err
		}
	}
	if missing := m.Unhandled(); len(missing) > 0 {
		return nil, states{}, djinn.Errorf(djinn.Internal, "state machine: no part handles %v", missing)
	}
	return m, st, nil
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

// AdminAddr returns the admin HTTP address.
func (s *Server) AdminAddr() string { return s.adminLn.Addr().String() }

// RaftAddr returns the Raft address.
func (s *Server) RaftAddr() string { return s.node.RaftAddr() }

// NodeID returns the Raft node id.
func (s *Server) NodeID() string { return s.node.ID() }

// DataDir returns the data directory.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// Failed delivers the first error with which the server failed to write
// its log (replica.Node.Failed): the process should close the server and
// exit, to be started again on what its log holds.
func (s *Server) Failed() <-chan error { return s.node.Failed() }

// Node returns the Raft node (for tests and status).
func (s *Server) Node() *replica.Node { return s.node }

// WaitReady blocks until the server can serve writes through some leader:
// the cluster has its service id and this node knows a leader.
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
	if s.machine.ServiceID().IsZero() {
		return false
	}
	if s.node.IsLeader() {
		return s.lessor.Active()
	}
	id, _ := s.node.Leader()
	return id != ""
}

// lead runs leader-only work for one term.
func (s *Server) lead(ctx context.Context) {
	// A new cluster gets its service id from its first leader. Without it
	// nothing can be served, so keep trying while this node leads.
	for b := backoff.New(100*time.Millisecond, 5*time.Second); s.machine.ServiceID().IsZero(); {
		id := djinn.NewID()
		_, err := s.node.Propose(ctx, &statepb.Command{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: id[:]}}})
		if err == nil {
			break
		}
		s.log.Warn("cluster init failed; retrying", "err", err, "within", b.Next())
		if !b.Wait(ctx) {
			return
		}
	}
	if info, ok := s.machine.Member(s.node.ID()); !ok || info.Endpoint != s.advertise || !info.Voter {
		// A leader votes; a member recorded before records said so is one.
		if err := s.recordMember(ctx, &statepb.Member{NodeId: s.node.ID(), GrpcAddress: s.advertise, Voter: true}); err != nil {
			s.log.Warn("recording member address failed", "err", err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		s.lessor.Run(ctx)
	}()
	go func() {
		defer wg.Done()
		s.tendMembers(ctx)
	}()
	if s.cfg.Mailbox.Enabled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.mailbox.Run(ctx)
		}()
	}
	if s.cfg.Renewal.Enabled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.renewal.Run(ctx)
		}()
	}
	if s.cfg.Txn.Enabled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.txn.Run(ctx)
		}()
	}
	if s.cfg.Lock.Enabled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.lock.Run(ctx)
		}()
	}
	if s.cfg.LDS.Enabled {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.ldsDiscover(ctx)
		}()
	}
	if s.cfg.Lookup.Enabled && s.cfg.Lookup.Discovery != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.discover(ctx)
		}()
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	wg.Wait()
}

// join asks a member of an existing cluster to add this node, trying each
// address given in turn. The pool's connections follow a follower's leader
// hint, so any member will do.
func (s *Server) join(ctx context.Context) error {
	if members, err := s.node.Members(); err == nil && len(members) > 0 {
		return nil // already a member (restart)
	}
	req := &djinnpb.JoinRequest{NodeId: s.node.ID(), RaftAddress: s.node.RaftAddr(), GrpcAddress: s.advertise}
	eps, err := client.SplitEndpoints(s.cfg.Join)
	if err != nil {
		return fmt.Errorf("join %s: %w", s.cfg.Join, err)
	}
	var last error
	for i := range 50 {
		conn, err := s.pool.Conn(eps[i%len(eps)])
		if err == nil {
			if _, err = djinnpb.NewAdminClient(conn).Join(ctx, req); err == nil {
				return nil
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
// shuts down and the log is closed.
func (s *Server) Close() error {
	select {
	case <-s.stop:
		return nil
	default:
	}
	close(s.stop)
	if s.health != nil {
		s.health.Shutdown()
	}
	if s.grpc != nil {
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
	} else if s.grpcLn != nil {
		s.grpcLn.Close()
	}
	if s.admin != nil {
		// Shutdown waits for requests in flight, but takes a connection
		// that has not yet sent a request (a probe, a port scan) for idle
		// only after 5 seconds; Close then ends whatever is left.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := s.admin.Shutdown(ctx); err != nil {
			s.admin.Close()
		}
		cancel()
	} else if s.adminLn != nil {
		s.adminLn.Close()
	}
	var err error
	if s.node != nil {
		err = s.node.Close()
	}
	if s.lds != nil {
		s.lds.Close()
	}
	if s.lookup != nil {
		s.lookup.Close()
	}
	if s.kv != nil {
		s.kv.Close()
	}
	if s.kvStore != nil {
		s.kvStore.Close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	s.wg.Wait()
	return err
}

// loadTLS builds the server's, the Raft peers' and the outgoing clients'
// TLS configurations (all nil without a certificate).
func loadTLS(c TLSConfig) (server, peer, out *tls.Config, err error) {
	if c.Cert == "" {
		return nil, nil, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return nil, nil, nil, djinn.Errorf(djinn.InvalidArgument, "tls cert %s key %s: %v", c.Cert, c.Key, err)
	}
	var pool *x509.CertPool
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return nil, nil, nil, djinn.Errorf(djinn.InvalidArgument, "tls ca %s: %v", c.CA, err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, nil, djinn.Errorf(djinn.InvalidArgument, "tls ca %s: no PEM certificates", c.CA)
		}
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientAuth {
		server.ClientAuth = tls.RequireAndVerifyClientCert
		server.ClientCAs = pool
	}
	peer = &tls.Config{
		Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, RootCAs: pool,
	}
	if pool == nil {
		peer.ClientAuth = tls.RequireAnyClientCert
	}
	out = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, peer, out, nil
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

// Describe returns the server's node, state and service references.
func (s *Server) Describe() Description {
	d := Description{NodeID: s.node.ID(), State: s.node.State()}
	d.Services = append(d.Services, NamedRef{"landlord", s.ref(lease.LandlordID)()})
	if s.cfg.Mailbox.Enabled {
		d.Services = append(d.Services, NamedRef{"mailbox", s.ref(MailboxID)()})
	}
	if s.cfg.Renewal.Enabled {
		d.Services = append(d.Services, NamedRef{"renewal", s.ref(RenewalID)()})
	}
	if s.cfg.Txn.Enabled {
		d.Services = append(d.Services, NamedRef{"txn", s.ref(TxnID)()})
	}
	if s.kv != nil {
		d.Services = append(d.Services, NamedRef{"kv", s.kv.Participant().Ref()})
	}
	return d
}
