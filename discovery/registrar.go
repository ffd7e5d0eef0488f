package discovery

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	wire "github.com/djinn-go/djinn/internal/discovery"
	"github.com/djinn-go/djinn/internal/netlisten"
)

// Registrar defaults.
const (
	// DefaultTTL is the time to live of multicast packets (DJ.2.4.6).
	DefaultTTL = 15
	// DefaultAnnouncementInterval is how often a registrar announces
	// itself, and what a discovering entity expects.
	DefaultAnnouncementInterval = 2 * time.Minute
	// DefaultMaxConnections bounds the unicast discovery connections a
	// registrar serves at once.
	DefaultMaxConnections = 64
	// DefaultMaxResponses bounds the connections a registrar opens at once
	// to answer multicast requests.
	DefaultMaxResponses = 16
	// DefaultMaxRequestSize bounds a unicast request a registrar reads: 127
	// proposed formats.
	DefaultMaxRequestSize = 1024
	// responseDialTimeout bounds the connection a registrar opens to a
	// multicast requester: long enough for one SYN retransmission on a LAN,
	// short enough that a spoofed request costs its victim two SYNs at most.
	responseDialTimeout = 2 * time.Second
)

// RegistrarConfig configures a Registrar. Zero fields take the defaults.
type RegistrarConfig struct {
	// ServiceID is the registrar's service id; it must not be zero.
	ServiceID djinn.ID
	// Groups are its member groups; "" is the public group.
	Groups []string
	// Endpoint is its gRPC endpoint, "host:port", given to every client
	// that discovers it.
	Endpoint string

	// ListenAddr is the unicast discovery server's TCP address, ":4160" by
	// default.
	ListenAddr string
	// Locator is the address the registrar advertises, in announcements and
	// unicast answers. A zero Host is the listener's host when it is not a
	// wildcard, and otherwise the first IPv4 address of an up interface
	// other than loopback (loopback if there is none); a zero Port is the
	// listener's port.
	Locator Locator

	// Interfaces names the network interfaces to announce on and to hear
	// multicast requests on; none means every interface that is up and
	// multicast-capable.
	Interfaces []string
	// DisableMulticast makes a unicast-only registrar: no announcements,
	// no multicast requests heard. For networks without multicast, where
	// clients use locators, DNS SRV records or static seeds.
	DisableMulticast bool
	// TTL is the multicast time to live, DefaultTTL by default.
	TTL int
	// AnnouncementInterval is the time between announcements,
	// DefaultAnnouncementInterval by default.
	AnnouncementInterval time.Duration

	// Timeout bounds each unicast discovery connection, accepted or opened
	// (DefaultTimeout).
	Timeout time.Duration
	// MaxConnections bounds the unicast connections served at once; more
	// are closed at once (DefaultMaxConnections).
	MaxConnections int
	// MaxResponses bounds the connections opened at once to answer
	// multicast requests; more requests are dropped (DefaultMaxResponses).
	MaxResponses int
	// MaxRequestSize bounds the unicast request read from a client
	// (DefaultMaxRequestSize).
	MaxRequestSize int

	// Logger gets what goes wrong; nil discards it.
	Logger *slog.Logger
}

// RegistrarStats are a registrar's counters, for metrics. Each only grows.
type RegistrarStats struct {
	// Unicast discovery connections accepted, by outcome.
	UnicastServed      uint64 // answered in djinn's format
	UnicastNoFormat    uint64 // answered with the null format: a Java client
	UnicastMalformed   uint64 // bytes that break the layout; closed
	UnicastTooLarge    uint64 // a request over MaxRequestSize; closed
	UnicastUnsupported uint64 // another protocol version (1); closed
	UnicastFailed      uint64 // the connection failed or timed out
	UnicastRejected    uint64 // over MaxConnections; closed unread

	// Announcements sent (each one or more packets) and failed sends.
	AnnouncementsSent uint64
	SendErrors        uint64

	// Multicast request packets received, by outcome.
	RequestsAnswered    uint64 // answered over a connection to the requester
	RequestsHeard       uint64 // listed this registrar as already heard
	RequestsOtherGroups uint64 // sought none of its groups (or it has none)
	RequestsMalformed   uint64 // did not decode; ignored
	RequestsUnsupported uint64 // another version or format; ignored
	// RequestsSpoofed named an address a request may not name: a
	// wildcard, multicast or broadcast address, or a loopback address in a
	// packet that did not arrive on loopback. Ignored.
	RequestsSpoofed uint64
	// RequestsDropped were not answered because MaxResponses connections
	// were busy, or one to the same requester was.
	RequestsDropped uint64
	// ResponsesFailed: the connection to the requester could not be made
	// or broke, or the requester sent no valid unicast request. Spoofed
	// requests, which name someone else's address, end up here.
	ResponsesFailed uint64
}

// Registrar runs the network side of a lookup service's discovery: a unicast
// discovery server, multicast announcements, and answers to multicast
// requests. See the package documentation. Its methods are safe for
// concurrent use.
type Registrar struct {
	cfg     RegistrarConfig // normalized; read-only
	log     *slog.Logger
	locator Locator
	ln      net.Listener
	ifaces  []net.Interface
	reqs    *receiver // nil without multicast
	send    *sender   // nil without multicast
	conns   chan struct{}
	resps   chan struct{}
	stats   counters[RegistrarStats]

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// sendMu serializes announcements, so that sequence numbers go out in
	// order. Held before mu.
	sendMu sync.Mutex

	mu         sync.Mutex
	groups     []string            // guarded by mu; sorted, no duplicates
	seq        int64               // guarded by mu; the last announcement's
	closed     bool                // guarded by mu
	responding map[string]struct{} // guarded by mu; requesters being answered
}

// NewRegistrar checks cfg, binds the unicast discovery server and the
// multicast sockets, sends the first announcement and starts serving. Close
// stops it.
func NewRegistrar(cfg RegistrarConfig) (*Registrar, error) {
	if cfg.ServiceID.IsZero() {
		return nil, djinn.Errorf(djinn.InvalidArgument, "registrar service id: missing (all zeros)")
	}
	groups, err := normalGroups(cfg.Groups)
	if err != nil {
		return nil, err
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = ":" + strconv.Itoa(DefaultPort)
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL < 1 || cfg.TTL > 255 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "registrar multicast ttl %d: must be 1 to 255", cfg.TTL)
	}
	cfg.AnnouncementInterval = orDefault(cfg.AnnouncementInterval, DefaultAnnouncementInterval)
	cfg.Timeout = orDefault(cfg.Timeout, DefaultTimeout)
	cfg.MaxConnections = orDefault(cfg.MaxConnections, DefaultMaxConnections)
	cfg.MaxResponses = orDefault(cfg.MaxResponses, DefaultMaxResponses)
	cfg.MaxRequestSize = orDefault(cfg.MaxRequestSize, DefaultMaxRequestSize)
	if cfg.AnnouncementInterval < 0 || cfg.Timeout < 0 || cfg.MaxConnections < 0 || cfg.MaxResponses < 0 || cfg.MaxRequestSize < 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "registrar config: negative interval, timeout or bound")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	var ifaces []net.Interface
	if !cfg.DisableMulticast {
		if ifaces, err = multicastInterfaces(cfg.Interfaces); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", cfg.ListenAddr)
	if err != nil {
		return nil, netlisten.Error("registrar unicast discovery listener", cfg.ListenAddr, err)
	}
	loc, err := advertised(cfg.Locator, ln.Addr())
	if err != nil {
		ln.Close()
		return nil, err
	}
	r := &Registrar{
		cfg: cfg, log: log.With("registrar", cfg.ServiceID.String()), locator: loc, ln: ln, ifaces: ifaces,
		conns: make(chan struct{}, cfg.MaxConnections), resps: make(chan struct{}, cfg.MaxResponses),
		groups: groups, seq: time.Now().UnixNano(), responding: make(map[string]struct{}),
	}
	// Check what the registrar will send, now rather than at each send.
	if err := wire.WriteGRPCResponse(io.Discard, r.responseLocked()); err != nil {
		ln.Close()
		return nil, err
	}
	if _, err := wire.EncodeMulticastAnnouncement(r.announcementLocked(groups)); err != nil {
		ln.Close()
		return nil, err
	}
	if err := r.openMulticast(); err != nil {
		ln.Close()
		return nil, err
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.wg.Add(1)
	go r.serve()
	if r.send != nil {
		if err := r.announce(false); err != nil {
			r.log.Warn("djinn registrar: first announcement failed", "err", err)
		}
		r.wg.Add(1)
		go r.announceLoop()
	}
	if r.reqs != nil {
		r.wg.Add(1)
		go r.hearRequests()
	}
	return r, nil
}

func orDefault[T time.Duration | int](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// advertised completes the configured locator from the listener's address.
func advertised(loc Locator, addr net.Addr) (Locator, error) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return Locator{}, djinn.Errorf(djinn.Internal, "registrar listener address %v: %v", addr, err)
	}
	host, port := loc.Host, loc.Port
	if port == 0 {
		port = int(ap.Port())
	}
	if host == "" {
		if a := ap.Addr().Unmap(); !a.IsUnspecified() {
			host = a.String()
		} else {
			host = defaultHost()
		}
	}
	l, err := NewLocator(host, port)
	if err != nil {
		return Locator{}, err
	}
	return l, nil
}

// defaultHost returns the first IPv4 address of an up interface other than
// loopback, or loopback's.
func defaultHost() string {
	ifaces, _ := net.Interfaces()
	fallback := "127.0.0.1"
	for _, ifi := range ifaces {
		if ifi.Flags&net.FlagUp == 0 {
			continue
		}
		if a, ok := interfaceIPv4(ifi); ok {
			if !a.IsLoopback() {
				return a.String()
			}
			fallback = a.String()
		}
	}
	return fallback
}

func (r *Registrar) openMulticast() error {
	if r.cfg.DisableMulticast {
		return nil
	}
	if len(r.ifaces) == 0 {
		r.log.Warn("djinn registrar: no up, multicast-capable interface: unicast discovery only")
		return nil
	}
	reqs, failed, err := listenGroup(wire.RequestGroup, r.ifaces)
	for _, f := range failed {
		r.log.Warn("djinn registrar: not hearing multicast requests on an interface", "err", f)
	}
	var send *sender
	if err == nil {
		if send, err = newSender(r.ifaces, r.cfg.TTL); err != nil {
			reqs.Close()
		}
	}
	switch {
	case err == nil:
		r.reqs, r.send = reqs, send
	case len(r.cfg.Interfaces) > 0:
		return err // the interfaces asked for cannot multicast
	default:
		r.log.Warn("djinn registrar: multicast unusable: unicast discovery only", "err", err)
		r.ifaces = nil
	}
	return nil
}

// Locator returns the locator the registrar advertises.
func (r *Registrar) Locator() Locator { return r.locator }

// Addr returns the unicast discovery server's address.
func (r *Registrar) Addr() net.Addr { return r.ln.Addr() }

// Groups returns the registrar's member groups, sorted.
func (r *Registrar) Groups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.groups)
}

// SetGroups replaces the member groups and announces them at once (an
// empty set is announced too: it tells discovering entities that the
// registrar left every group). Bad groups are an error of kind
// InvalidArgument and change nothing; after Close it returns ErrClosed.
func (r *Registrar) SetGroups(groups []string) error {
	groups, err := normalGroups(groups)
	if err != nil {
		return err
	}
	r.mu.Lock()
	_, err = wire.EncodeMulticastAnnouncement(r.announcementLocked(groups))
	r.mu.Unlock()
	if err != nil {
		return err
	}
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.groups = groups
	r.mu.Unlock()
	if r.send == nil {
		return nil
	}
	return r.announceSendLocked(false)
}

// Stats returns the registrar's counters.
func (r *Registrar) Stats() RegistrarStats { return r.stats.get() }

// Close stops the registrar: it closes the unicast discovery server (so a
// unicast check of it fails from now on), stops hearing requests, ends
// every connection, waits for its goroutines and then sends a last
// announcement with no groups, which tells discovering entities it is gone.
// Later calls return nil.
func (r *Registrar) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.ln.Close()
	if r.reqs != nil {
		r.reqs.Close()
	}
	r.wg.Wait()
	if r.send == nil {
		return nil
	}
	err := r.announce(true)
	r.send.Close()
	return err
}

// responseLocked returns the registrar's unicast answer.
func (r *Registrar) responseLocked() wire.UnicastResponse {
	return wire.UnicastResponse{Locator: r.locator, Endpoint: r.cfg.Endpoint, ServiceID: r.cfg.ServiceID, Groups: slices.Clone(r.groups)}
}

func (r *Registrar) response() wire.UnicastResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.responseLocked()
}

func (r *Registrar) announcementLocked(groups []string) wire.MulticastAnnouncement {
	return wire.MulticastAnnouncement{Seq: r.seq, Host: r.locator.Host, Port: r.locator.Port, ServiceID: r.cfg.ServiceID, Groups: groups}
}

// announceLoop announces the registrar every interval while it has groups:
// one with none has nothing to announce, and said so when it left them.
func (r *Registrar) announceLoop() {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.AnnouncementInterval)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			if len(r.Groups()) == 0 {
				continue
			}
			if err := r.announce(false); err != nil && !errors.Is(err, ErrClosed) {
				r.log.Warn("djinn registrar: announcement failed", "err", err)
			}
		}
	}
}

// announce sends an announcement of the current groups, or the final one
// with none.
func (r *Registrar) announce(final bool) error {
	r.sendMu.Lock()
	defer r.sendMu.Unlock()
	return r.announceSendLocked(final)
}

// announceSendLocked sends an announcement; sendMu is held.
func (r *Registrar) announceSendLocked(final bool) error {
	r.mu.Lock()
	if r.closed && !final {
		r.mu.Unlock()
		return ErrClosed
	}
	r.seq++
	var groups []string
	if !final {
		groups = slices.Clone(r.groups)
	}
	a := r.announcementLocked(groups)
	r.mu.Unlock()
	packets, err := wire.EncodeMulticastAnnouncement(a)
	if err != nil {
		return err // checked when the groups were set: cannot happen
	}
	var errs []error
	for i := range r.ifaces {
		if err := r.send.send(&r.ifaces[i], wire.AnnouncementGroup, packets); err != nil {
			errs = append(errs, err)
		}
	}
	r.stats.add(func(s *RegistrarStats) {
		s.AnnouncementsSent++
		s.SendErrors += uint64(len(errs))
	})
	if len(errs) > 0 {
		return djinn.Errorf(djinn.Unavailable, "registrar announcement: %v", errors.Join(errs...))
	}
	return nil
}
