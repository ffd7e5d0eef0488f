package client

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
)

// leaderTrailer is the trailer in which a djinn follower names the leader's
// endpoint when it refuses a call that only the leader may serve.
const leaderTrailer = "djinn-leader"

// Option configures a Pool or a Client. A nil Option is ignored, so that
// an option chosen at run time may be left out by leaving it nil.
type Option func(*options)

type options struct {
	tls        *tls.Config
	tlsFiles   *fileCreds // WithTLSFiles; tls or tlsFiles, not both
	dialOpts   []grpc.DialOption
	maxConns   int
	noSession  bool        // every call on its own (session.go)
	joinSecret *joinSecret // WithJoinSecret, WithLocalJoinSecret (joinsecret.go)

	keepTime, keepTimeout, connectTimeout time.Duration // liveness.go
}

// WithTLS makes connections use TLS with cfg (mutual TLS when cfg holds a
// client certificate). Without it connections are plaintext, which suits the
// loopback quick start only. A nil cfg keeps plaintext.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) { o.tls, o.tlsFiles = cfg, nil }
}

// WithTLSFiles makes connections use TLS with the PEM files named, read
// again whenever they change: ca verifies the servers (empty: the
// system's roots), cert and key are the client certificate presented
// (both empty: none). Each new connection looks at the files first (a
// stat of each) and loads them again if one changed, so a client that
// runs for months follows the renewals of its certificate and of the CA
// without a restart; connections already open keep theirs. Files that
// cannot be used make the connections fail naming the file and the
// cause; after a renewal gone wrong (a certificate before its new key is
// written, a file half written), the certificates loaded before stay in
// use until the files change again. It replaces WithTLS, as WithTLS
// replaces it.
func WithTLSFiles(ca, cert, key string) Option {
	c := newFileCreds(ca, cert, key) // one for every Pool the option makes
	return func(o *options) { o.tls, o.tlsFiles = nil, c }
}

// transportCreds are the connections' credentials.
func (o *options) transportCreds() credentials.TransportCredentials {
	switch {
	case o.tlsFiles != nil:
		return o.tlsFiles
	case o.tls != nil:
		return credentials.NewTLS(o.tls)
	}
	return insecure.NewCredentials()
}

// WithDialOptions adds gRPC dial options to every connection, for needs the
// other options do not cover (interceptors, keepalive, message sizes).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOpts = appendNonNil(o.dialOpts, opts...) }
}

// Connector gives a connection to an endpoint (host:port). *Pool and *Client
// implement it; every call in this package that reaches a remote object takes
// one, because leases and references name the endpoint to call.
//
// Conn must be safe for concurrent use. The connection stays owned by the
// Connector: callers must not close it.
type Connector interface {
	Conn(endpoint string) (*grpc.ClientConn, error)
}

var (
	_ Connector = (*Pool)(nil)
	_ Connector = (*Client)(nil)
)

// Pool holds one gRPC connection per endpoint, dialled lazily on first use
// and kept until Close, or until the pool holds its maximum of connections
// (WithMaxConns, default 4096) and this one is the least recently used: a
// server delivering events to many listeners does not keep a connection to
// every listener it ever met. A call in flight on an evicted connection
// fails as Unavailable (indefinite, so retried). It is safe for concurrent
// use.
//
// Connections from a Pool convert every error a call returns into a
// *djinn.Error of the server's kind, so errors.Is(err, djinn.ErrUnknownLease)
// works on raw gRPC calls too; the converted error still carries its gRPC
// status for status.FromError. A call refused by a djinn follower that names
// the leader is retried once at the leader (the follower did nothing).
type Pool struct {
	opts   options
	ctx    context.Context // the pool's life: ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the clusters' refresh loops and the learning calls

	mu         sync.Mutex
	conns      map[string]*pooled       // guarded by mu
	tick       uint64                   // guarded by mu: a clock of uses, for LRU
	closed     bool                     // guarded by mu
	clusters   map[djinn.ID]*cluster    // guarded by mu: by service id
	byEndpoint map[string]*cluster      // guarded by mu: members' and seeds' endpoints
	learning   map[djinn.ID]*learnState // guarded by mu: service ids asked about
	owned      []*cluster               // guarded by mu: every cluster made, closed at Close
	told       []*cluster               // guarded by mu: the clusters Dial or Follow reached, appended to only (joinsecret.go)
}

type pooled struct {
	cc      *grpc.ClientConn
	lastUse uint64
}

// DefaultMaxConns bounds a pool's connections.
const DefaultMaxConns = 4096

// WithMaxConns bounds the connections a pool keeps (at least 1).
func WithMaxConns(n int) Option {
	return func(o *options) { o.maxConns = max(n, 1) }
}

// NewPool returns an empty pool.
func NewPool(opts ...Option) *Pool {
	p := &Pool{conns: map[string]*pooled{}, clusters: map[djinn.ID]*cluster{},
		byEndpoint: map[string]*cluster{}, learning: map[djinn.ID]*learnState{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.opts.maxConns = DefaultMaxConns
	p.opts.setLinkDefaults()
	for _, o := range opts {
		if o != nil {
			o(&p.opts)
		}
	}
	return p
}

// Conn returns the connection to endpoint, creating it if needed. It does not
// wait for the connection to be established: the first call does.
func (p *Pool) Conn(endpoint string) (*grpc.ClientConn, error) {
	// Endpoints come from answers too, which may carry one stored before
	// endpoints were checked strictly: what was accepted then is dialled.
	if err := djinn.CheckStoredEndpoint(endpoint); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errClosed("pool")
	}
	p.tick++
	if pc, ok := p.conns[endpoint]; ok {
		pc.lastUse = p.tick
		return pc.cc, nil
	}
	dialOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(p.opts.transportCreds()),
		grpc.WithChainUnaryInterceptor(p.unaryInterceptor(endpoint)),
		grpc.WithChainStreamInterceptor(p.streamInterceptor),
	}, windows...)
	dialOpts = append(dialOpts, p.opts.linkOptions()...)
	dialOpts = append(dialOpts, p.opts.dialOpts...)
	dialOpts = append(dialOpts, p.secretOption(func() bool { return p.inScope(endpoint) })...)
	dialOpts = append(dialOpts, p.sessionOption(nil)...)
	cc, err := grpc.NewClient(endpoint, dialOpts...)
	if err != nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "endpoint %q: %v", endpoint, err)
	}
	if len(p.conns) >= p.opts.maxConns {
		p.evictLocked()
	}
	p.conns[endpoint] = &pooled{cc: cc, lastUse: p.tick}
	return cc, nil
}

// sessionOption returns the dial option that carries a connection's
// calls in its session (session.go), the innermost interceptor; none
// WithoutSession. leader, on a cluster's connection, names the leader.
func (p *Pool) sessionOption(leader func() (string, bool)) []grpc.DialOption {
	if p.opts.noSession {
		return nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(newSessionConn(p, leader).intercept)}
}

// goOwned runs f on a goroutine the pool waits for at Close; false when
// the pool is closed.
func (p *Pool) goOwned(f func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
	return true
}

// evictLocked closes the least recently used connection.
func (p *Pool) evictLocked() {
	var (
		oldest string
		use    uint64 = math.MaxUint64
	)
	for ep, pc := range p.conns {
		if pc.lastUse < use {
			oldest, use = ep, pc.lastUse
		}
	}
	if pc, ok := p.conns[oldest]; ok {
		delete(p.conns, oldest)
		_ = pc.cc.Close()
	}
}

// Close stops following clusters and closes every connection. Calls in
// flight fail; later Conn calls return an error.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	conns, owned := p.conns, p.owned
	p.conns, p.owned = map[string]*pooled{}, nil
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	var errs []error
	for _, pc := range conns {
		if err := pc.cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, cl := range owned {
		if err := cl.cc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// redirectedKey marks a call already redirected to the leader, so a confused
// cluster cannot bounce it around.
type redirectedKey struct{}

// unaryInterceptor converts errors and follows one leader hint.
func (p *Pool) unaryInterceptor(endpoint string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		t := newTrailerOpts(opts) // never into the caller's array
		err := invoker(ctx, method, req, reply, cc, t.opts...)
		trailer := t.trailer
		t.release()
		if err == nil {
			return nil
		}
		if hint := leaderOf(trailer); hint != "" && hint != endpoint && ctx.Value(redirectedKey{}) == nil &&
			status.Code(err) == codes.Unavailable {
			if cl := p.toldClusterOf(endpoint); cl != nil {
				cl.setLeader(hint) // a member's word: the join secret goes there too
			}
			if leader, cerr := p.Conn(hint); cerr == nil {
				return leader.Invoke(context.WithValue(ctx, redirectedKey{}, true), method, req, reply, opts...)
			}
		}
		return p.fromCall(ctx, err)
	}
}

// fromCall converts a call's error as fromRPC does, except the Canceled
// that gRPC answers a call on a connection closed under it: when the call's
// own context has not ended and the pool is closed, the error says that the
// client or pool was closed, as it is, instead of reading as the caller's
// context ending.
func (p *Pool) fromCall(ctx context.Context, err error) error {
	if status.Code(err) == codes.Canceled && ctx.Err() == nil && p.isClosed() {
		return &closedError{djinn.Errorf(djinn.Unavailable, "connection closed: its client or pool was closed (Close); dial again to go on")}
	}
	return fromRPC(err)
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func leaderOf(md metadata.MD) string {
	if v := md.Get(leaderTrailer); len(v) > 0 {
		return v[0]
	}
	return ""
}

// streamInterceptor converts the errors of streaming calls.
func (p *Pool) streamInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, p.fromCall(ctx, err)
	}
	return convertingStream{s}, nil
}

type convertingStream struct{ grpc.ClientStream }

func (s convertingStream) SendMsg(m any) error { return fromStream(s.ClientStream.SendMsg(m)) }
func (s convertingStream) RecvMsg(m any) error { return fromStream(s.ClientStream.RecvMsg(m)) }
func (s convertingStream) CloseSend() error    { return fromStream(s.ClientStream.CloseSend()) }

func (s convertingStream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	return md, fromStream(err)
}

// fromStream converts a stream error, leaving io.EOF (the normal end) alone.
func fromStream(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	return fromRPC(err)
}

// rpcError is a gRPC call's error as a djinn error: it unwraps to the
// *djinn.Error of the server's kind and still reports its gRPC status.
type rpcError struct {
	err error
	st  *status.Status
}

func (e *rpcError) Error() string              { return e.err.Error() }
func (e *rpcError) Unwrap() error              { return e.err }
func (e *rpcError) GRPCStatus() *status.Status { return e.st }

// fromRPC converts an error returned by a gRPC call into a djinn error. It is
// idempotent: errors that already carry a kind pass through.
func fromRPC(err error) error {
	if err == nil {
		return nil
	}
	var de *djinn.Error
	var k djinn.Kind
	if errors.As(err, &de) || errors.As(err, &k) {
		return err
	}
	st, ok := status.FromError(err)
	conv := grpcerr.FromStatus(err)
	if !ok {
		return conv
	}
	return &rpcError{err: conv, st: st}
}

// errClosed reports a call on a closed object; its kind is Unavailable, so
// work that retries indefinite failures keeps its state for the next try.
// Loops that would retry for ever (Pull, Receive) stop on it: isClosed.
func errClosed(what string) error {
	return &closedError{djinn.Errorf(djinn.Unavailable, "%s closed", what)}
}

// closedError marks an error that no retry can mend: the Client, Pool or
// Listener it came through was closed.
type closedError struct{ err error }

func (e *closedError) Error() string { return e.err.Error() }
func (e *closedError) Unwrap() error { return e.err }

// isClosed reports whether err says the client, pool or listener was
// closed.
func isClosed(err error) bool {
	var c *closedError
	return errors.As(err, &c)
}

// Client is a connection to a djinn server or cluster, the usual start of
// a program: Dial it, use ClientConn for the cluster's services, and pass
// it as the Connector for leases and references, which may name other
// endpoints (a Client reaches those through its own Pool, and the members
// of every cluster it knows through that cluster's connection).
type Client struct {
	pool    *Pool
	addr    string
	cluster *cluster
}

// Dial connects to the djinn server or cluster at target: an endpoint
// (host:port), several separated by commas, or a DNS name that resolves to
// several addresses. It waits until a connection to one of them is up, ctx
// ends, or the first attempt at each has failed: it does not retry servers
// that are not there. It then asks for the cluster's member list, and
// follows the cluster from then on: calls go to the leader first and to the
// other members when it is down, and the list is kept fresh.
func Dial(ctx context.Context, target string, opts ...Option) (*Client, error) {
	eps, err := SplitEndpoints(target)
	if err != nil {
		return nil, err
	}
	if len(eps) == 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "dial: no endpoint given: want host:port, several comma-separated, or a DNS name")
	}
	if err := ctx.Err(); err != nil {
		return nil, errors.Join(err, djinn.Errorf(djinn.Unavailable, "dial %s: %v", target, err))
	}
	p := NewPool(opts...)
	cl, err := p.follow(eps, true)
	if err != nil {
		p.Close()
		return nil, err
	}
	if err := waitReady(ctx, target, cl.cc); err != nil {
		p.Close()
		return nil, err
	}
	cl.refresh(ctx)
	p.start(cl)
	return &Client{pool: p, addr: eps[0], cluster: cl}, nil
}

// waitReady waits until cc has a connection up, fails at once, or ctx
// ends.
func waitReady(ctx context.Context, target string, cc *grpc.ClientConn) error {
	cc.Connect()
	for {
		s := cc.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if s == connectivity.TransientFailure || s == connectivity.Shutdown {
			return djinn.Errorf(djinn.Unavailable, "dial %s: cannot connect: %s", target, connectError(ctx, cc))
		}
		if !cc.WaitForStateChange(ctx, s) {
			return errors.Join(ctx.Err(), djinn.Errorf(djinn.Unavailable, "dial %s: %v", target, ctx.Err()))
		}
	}
}

// Addr returns the (first) endpoint the client dialled.
func (c *Client) Addr() string { return c.addr }

// ClientConn returns the connection to the dialled cluster, for its gRPC
// services (for example djinnpb.NewEventMailboxClient(c.ClientConn())):
// calls go to the leader while it is up, and to the other members when it
// is not. Use Conn(Addr()) to reach one member in particular, as for
// what is each member's own (its key/value store, its status).
func (c *Client) ClientConn() *grpc.ClientConn { return c.cluster.cc }

// ServiceID returns the dialled cluster's service id, zero when the server
// did not give it (a server that is not a djinn server, or a cluster not
// yet initialised).
func (c *Client) ServiceID() djinn.ID { return c.cluster.serviceID() }

// Conn returns a connection to endpoint through the client's pool.
func (c *Client) Conn(endpoint string) (*grpc.ClientConn, error) { return c.pool.Conn(endpoint) }

// ConnFor returns the connection for the object ref names, through the
// client's pool: the dialled cluster's for a reference to one of its
// services, wherever its endpoint points.
func (c *Client) ConnFor(ref djinn.Ref) (*grpc.ClientConn, error) {
	if ref.Service.IsZero() && ref.Endpoint == c.addr {
		return c.cluster.cc, nil
	}
	return c.pool.ConnFor(ref)
}

// Learn has the client's pool learn the djinn cluster of ref's service
// from ref's endpoint, and waits for the answer (Pool.Learn), so that
// ConnFor(ref) reaches that cluster once the member ref names is gone.
func (c *Client) Learn(ctx context.Context, ref djinn.Ref) error { return c.pool.Learn(ctx, ref) }

// Pool returns the client's pool.
func (c *Client) Pool() *Pool { return c.pool }

// Close closes the client's connections.
func (c *Client) Close() error { return c.pool.Close() }

// connectError asks a failed connection why it failed: one call that does
// not wait for readiness reports the last connection error (refused, TLS
// handshake, unknown authority, ...).
func connectError(ctx context.Context, cc *grpc.ClientConn) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if st, ok := status.FromError(err); ok && err != nil {
		return grpcerr.TransportMessage(st.Message())
	}
	return "no connection"
}

// HTTP/2 flow control windows of the pool's connections, and of a
// listener's server: set, not estimated. gRPC's estimation answers data
// with a window update and a ping whenever no ping is out, and the peer
// acknowledges each: on a connection of small calls, about three control
// frames per message each way, for windows that small messages never
// fill. A stream may have streamWindow bytes unread, a connection
// connWindow: 1 MiB per round trip is 2 GB/s at half a millisecond.
// WithDialOptions may set others.
const (
	streamWindow = 1 << 20
	connWindow   = 4 << 20
)

// windows are the dial options that set the flow control windows.
var windows = []grpc.DialOption{grpc.WithStaticStreamWindowSize(streamWindow), grpc.WithStaticConnWindowSize(connWindow)}

// appendNonNil appends the options that are not nil: gRPC calls each option
// it is given, and a nil one would panic there instead of being left out.
func appendNonNil[O comparable](to []O, opts ...O) []O {
	var none O
	for _, o := range opts {
		if o != none {
			to = append(to, o)
		}
	}
	return to
}
