package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/internal/netlisten"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// NotifyFunc receives the events sent to a listener (EV.2.3.1's notify). It
// may be called concurrently, for events of one batch in order; ctx ends when
// the sender gives up or the listener closes. The error it returns travels to
// the sender with its djinn kind: djinn.ErrUnknownEvent asks the sender to
// stop sending this kind of event (EV.2.3.3); an error without a kind counts
// as djinn.ErrInternal, which senders retry. As EV.2.3.2 advises, note the
// event and return quickly.
type NotifyFunc func(ctx context.Context, ev *RemoteEvent) error

// ListenOption configures Listen. A nil ListenOption is ignored.
type ListenOption func(*listenConfig)

type listenConfig struct {
	tls        *tls.Config
	advertise  string
	serverOpts []grpc.ServerOption
	pingEvery  time.Duration // the least interval between a sender's pings
}

// WithServerTLS serves listeners over TLS with cfg (which holds the
// certificate; set ClientAuth for mutual TLS). Without it they serve
// plaintext.
func WithServerTLS(cfg *tls.Config) ListenOption {
	return func(c *listenConfig) { c.tls = cfg }
}

// WithAdvertise sets the endpoint written in listener references, for when
// senders must reach this host at another address than the one it listens
// on (a wildcard bind, NAT, a proxy).
func WithAdvertise(endpoint string) ListenOption {
	return func(c *listenConfig) { c.advertise = endpoint }
}

// WithServerOptions adds gRPC server options. A listener given any serves
// every call on its own, so that interceptors given here see each one
// (without, a sender's connection may carry its calls in a session).
func WithServerOptions(opts ...grpc.ServerOption) ListenOption {
	return func(c *listenConfig) { c.serverOpts = appendNonNil(c.serverOpts, opts...) }
}

// WithKeepaliveMinTime sets the least interval between a sender's
// keepalive pings that the listener accepts (default
// DefaultKeepaliveMinTime, which accepts any gRPC client's); a sender that
// pings more often is sent GOAWAY and closed.
func WithKeepaliveMinTime(d time.Duration) ListenOption {
	return func(c *listenConfig) { c.pingEvery = d }
}

// Listener is a remote event listener hosted by this program: anything that
// holds its reference (Ref) can send it events. Listen starts a gRPC server
// for it; AddListener hosts more listeners on the same server, each with its
// own object id.
type Listener struct {
	host    *listenerHost
	id      djinn.ID
	primary bool
}

// listenerHost is the gRPC server behind a group of listeners.
type listenerHost struct {
	djinnpb.UnimplementedEventListenerServer
	service  djinn.ID
	endpoint string
	ln       net.Listener
	srv      *grpc.Server
	wg       sync.WaitGroup // the serve and context-watch goroutines
	calls    sync.WaitGroup // NotifyFuncs running
	stopping chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	deliveries deliveries // the calls being handed, for StopDelivery

	mu     sync.Mutex
	fns    map[djinn.ID]NotifyFunc // guarded by mu
	closed bool                    // guarded by mu
}

// Listen hosts a listener calling fn on a new gRPC server listening on addr
// (host:port; port 0 picks one). It serves until ctx ends or the listener is
// closed. Its reference's endpoint is the address it listens on, unless
// WithAdvertise says otherwise.
func Listen(ctx context.Context, addr string, fn NotifyFunc, opts ...ListenOption) (*Listener, error) {
	if fn == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "notify function: missing")
	}
	var cfg listenConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.advertise != "" {
		if err := djinn.CheckEndpoint(cfg.advertise); err != nil {
			return nil, djinn.Errorf(djinn.InvalidArgument, "advertised %v", err)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return nil, djinn.Errorf(djinn.InvalidArgument, "listen address %q: want host:port (port 0 picks a free one)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, netlisten.Error("listen address", addr, err)
	}
	h := &listenerHost{
		service:  djinn.NewID(),
		endpoint: cfg.advertise,
		ln:       ln,
		fns:      map[djinn.ID]NotifyFunc{},
		stopping: make(chan struct{}),
		done:     make(chan struct{}),
	}
	if h.endpoint == "" {
		h.endpoint = ln.Addr().String()
	}
	srvOpts := append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(recoverUnary), ServerKeepalive(cfg.pingEvery),
		grpc.StaticStreamWindowSize(streamWindow), grpc.StaticConnWindowSize(connWindow)}, cfg.serverOpts...)
	if cfg.tls != nil {
		srvOpts = append([]grpc.ServerOption{grpc.Creds(credentials.NewTLS(cfg.tls))}, srvOpts...)
	}
	h.srv = grpc.NewServer(srvOpts...)
	djinnpb.RegisterEventListenerServer(h.srv, h)
	if len(cfg.serverOpts) == 0 {
		djinnpb.RegisterSessionServer(h.srv, &listenerSession{h: h})
	}
	id := djinn.NewID()
	h.fns[id] = fn
	h.wg.Add(2)
	go func() {
		defer h.wg.Done()
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			h.stop()
		}
	}()
	go func() {
		defer h.wg.Done()
		select {
		case <-ctx.Done():
			h.stop()
		case <-h.stopping:
		}
	}()
	return &Listener{host: h, id: id, primary: true}, nil
}

// stop stops serving: no NotifyFunc starts after it begins, running ones see
// their contexts end, and it returns when they have returned.
func (h *listenerHost) stop() {
	h.stopOnce.Do(func() {
		h.mu.Lock()
		h.closed = true
		h.mu.Unlock()
		close(h.stopping)
		h.srv.Stop()
		h.calls.Wait()
		close(h.done)
	})
	<-h.done
}

// AddListener hosts another listener, calling fn, on l's server. Its
// reference differs from l's in the object id only.
func (l *Listener) AddListener(fn NotifyFunc) (*Listener, error) {
	if fn == nil {
		return nil, djinn.Errorf(djinn.InvalidArgument, "notify function: missing")
	}
	h := l.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errClosed("listener")
	}
	id := djinn.NewID()
	h.fns[id] = fn
	return &Listener{host: h, id: id}, nil
}

// Ref returns the listener's reference, to give to event generators: the
// endpoint senders dial, a service id for this host, the listener's id.
func (l *Listener) Ref() djinn.Ref {
	return djinn.Ref{Endpoint: l.host.endpoint, Service: l.host.service, Object: l.id}
}

// Addr returns the address the listener's server listens on.
func (l *Listener) Addr() string { return l.host.ln.Addr().String() }

// Done is closed when the listener's server has stopped.
func (l *Listener) Done() <-chan struct{} { return l.host.done }

// Close stops the listener: later events get djinn.ErrNoSuchObject, which
// tells senders the listener is gone. Closing the listener Listen returned
// stops the server and every listener on it, and waits for running
// NotifyFuncs to return (their contexts are cancelled).
func (l *Listener) Close() error {
	h := l.host
	if !l.primary {
		h.mu.Lock()
		delete(h.fns, l.id)
		h.mu.Unlock()
		return nil
	}
	h.stop()
	h.wg.Wait()
	return nil
}

// begin finds the listener a call is for and counts the call as running.
func (h *listenerHost) begin(id []byte) (NotifyFunc, error) {
	lid, err := djinn.IDFromBytes("listener id", id)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errClosed("listener")
	}
	fn, ok := h.fns[lid]
	if !ok {
		return nil, djinn.Errorf(djinn.NoSuchObject, "listener %s: no such listener here", lid)
	}
	h.calls.Add(1)
	return fn, nil
}

// Notify implements djinnpb.EventListenerServer.
func (h *listenerHost) Notify(ctx context.Context, req *djinnpb.NotifyRequest) (*djinnpb.NotifyResponse, error) {
	fn, err := h.begin(req.GetListenerId())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	defer h.calls.Done()
	ctx, d, err := h.deliveries.start(ctx, req.GetDeliveryId())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	defer h.deliveries.finish(d)
	ev, err := RemoteEventFromProto(req.GetEvent())
	if err == nil {
		err = h.deliveries.next(ctx, d)
	}
	if err == nil {
		err = fn(ctx, ev)
	}
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	return &djinnpb.NotifyResponse{}, nil
}

// NotifyBatch implements djinnpb.EventListenerServer: events are handed to
// the listener in order, stopping at the first it refuses, or when the
// sender gives up on the call (its context ends, or StopDelivery).
func (h *listenerHost) NotifyBatch(ctx context.Context, req *djinnpb.NotifyBatchRequest) (*djinnpb.NotifyBatchResponse, error) {
	fn, err := h.begin(req.GetListenerId())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	defer h.calls.Done()
	ctx, d, err := h.deliveries.start(ctx, req.GetDeliveryId())
	if err != nil {
		return &djinnpb.NotifyBatchResponse{Error: grpcerr.ToProto(err)}, nil
	}
	defer h.deliveries.finish(d)
	for i, pe := range req.GetEvents() {
		err := h.deliveries.next(ctx, d)
		var ev *RemoteEvent
		if err == nil {
			ev, err = RemoteEventFromProto(pe)
		}
		if err == nil {
			err = fn(ctx, ev)
		}
		if err != nil {
			return &djinnpb.NotifyBatchResponse{Accepted: int32(i), Error: grpcerr.ToProto(err)}, nil
		}
	}
	return &djinnpb.NotifyBatchResponse{Accepted: int32(len(req.GetEvents()))}, nil
}

// StopDelivery implements djinnpb.EventListenerServer: once it returns, no
// event of the call named by the delivery id begins to be handed.
func (h *listenerHost) StopDelivery(_ context.Context, req *djinnpb.StopDeliveryRequest) (*djinnpb.StopDeliveryResponse, error) {
	if _, err := djinn.IDFromBytes("listener id", req.GetListenerId()); err != nil {
		return nil, grpcerr.Status(err)
	}
	id, err := deliveryID(req.GetDeliveryId())
	if err != nil {
		return nil, grpcerr.Status(err)
	}
	// Delivery ids are unique across the host's listeners; a call for a
	// listener closed since may still be handing events, so it is stopped
	// whatever its listener.
	h.deliveries.stop(id)
	return &djinnpb.StopDeliveryResponse{}, nil
}

// recoverUnary turns a panic in a notify function into an Internal error
// for the sender instead of a crash of the listening program.
func recoverUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = grpcerr.Status(djinn.Errorf(djinn.Internal, "listener panicked: %v", p))
		}
	}()
	return h(ctx, req)
}
