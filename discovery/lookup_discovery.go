package discovery

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/backoff"
	wire "github.com/djinn-go/djinn/internal/discovery"
	"github.com/djinn-go/djinn/internal/netlisten"
)

// Group discovery defaults.
const (
	// DefaultRequests is the number of multicast requests of a burst.
	DefaultRequests = 7
	// DefaultRequestInterval is the time between requests of a burst.
	DefaultRequestInterval = 5 * time.Second
	// DefaultMaxExchanges bounds the unicast exchanges a discovering
	// utility runs at once.
	DefaultMaxExchanges = 32
	// missedAnnouncements is how many announcement intervals a registrar
	// may stay silent before a unicast check decides whether it is gone.
	missedAnnouncements = 3
)

// LookupDiscoveryConfig configures a LookupDiscovery. Zero fields take the
// defaults.
type LookupDiscoveryConfig struct {
	// Groups are the groups to discover; "" is the public group. With none
	// and AllGroups false, nothing is discovered until groups are set.
	Groups []string
	// AllGroups discovers registrars of every group (Jini's ALL_GROUPS);
	// Groups must then be empty.
	AllGroups bool

	// Interfaces names the network interfaces to send requests on and hear
	// announcements on; none means every interface that is up and
	// multicast-capable.
	Interfaces []string
	// TTL is the requests' multicast time to live (DefaultTTL).
	TTL int
	// Requests is the number of multicast requests of a burst, sent at
	// start and whenever groups are added (DefaultRequests); negative sends
	// none, leaving discovery to announcements.
	Requests int
	// RequestInterval is the time between the requests of a burst
	// (DefaultRequestInterval).
	RequestInterval time.Duration
	// AnnouncementInterval is the registrars' announcement interval
	// (DefaultAnnouncementInterval). A registrar unheard for three of them
	// is checked by unicast discovery every interval, and discarded when
	// the check fails.
	AnnouncementInterval time.Duration

	// ResponseAddr is the TCP address of the response server that
	// registrars connect to in answer to requests, ":0" (any port) by
	// default.
	ResponseAddr string
	// ResponseHost is the host requests tell registrars to connect to. By
	// default each interface's requests carry that interface's first IPv4
	// address, and an interface without one sends none.
	ResponseHost string

	// Timeout bounds each unicast exchange (DefaultTimeout).
	Timeout time.Duration
	// MaxResponseSize bounds each unicast answer read
	// (DefaultMaxResponseSize).
	MaxResponseSize int
	// MaxExchanges bounds the unicast exchanges run at once; more are
	// dropped, to be retried at the registrar's next announcement
	// (DefaultMaxExchanges).
	MaxExchanges int

	// Listener, if set, receives the events, one at a time and in order,
	// from a goroutine of the LookupDiscovery's own; it should return
	// quickly (later events wait for it) and must not call Close. Without
	// a Listener the events go to the channel Events returns.
	Listener func(Event)
	// Logger gets what goes wrong; nil discards it.
	Logger *slog.Logger
}

// LookupDiscoveryStats are a LookupDiscovery's counters, for metrics. Each
// only grows.
type LookupDiscoveryStats struct {
	RequestsSent          uint64 // multicast request packets
	AnnouncementsReceived uint64 // well-formed announcement packets
	MalformedPackets      uint64 // announcement packets that did not decode
	UnsupportedPackets    uint64 // announcements of another version or format
	// SpoofedAnnouncements are announcements that the registrar they name
	// contradicted: its locator answered with another service id, or it
	// answered with wanted groups to an announcement that it had left them.
	SpoofedAnnouncements uint64
	ResponsesReceived    uint64 // valid answers on the response server
	ResponsesFailed      uint64 // response connections that failed or sent garbage
	ExchangesFailed      uint64 // unicast discoveries after announcements that failed
	ExchangesDropped     uint64 // not run: MaxExchanges were busy
	Checks               uint64 // unicast checks of discovered registrars
	ChecksFailed         uint64 // checks that could not reach the registrar
}

// LookupDiscovery discovers lookup services by group with the multicast
// request and announcement protocols (Jini's net.jini.discovery.
// LookupDiscovery). See the package documentation. Its methods are safe for
// concurrent use.
type LookupDiscovery struct {
	cfg    LookupDiscoveryConfig // normalized; read-only
	log    *slog.Logger
	ifaces []net.Interface
	resp   net.Listener
	ann    *receiver // nil without a multicast interface
	send   *sender   // nil without a multicast interface
	events *notifier
	stats  counters[LookupDiscoveryStats]
	work   chan struct{} // semaphore of unicast exchanges
	burst  chan struct{} // a new request burst is due

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	want    wanted                // guarded by mu
	regs    map[djinn.ID]*known   // guarded by mu: the discovered registrars
	pending map[djinn.ID]struct{} // guarded by mu: discoveries under way
	closed  bool                  // guarded by mu
}

// known is a discovered registrar.
type known struct {
	info RegistrarInfo
	// seq is the sequence number of the last announcement that changed
	// something or was checked; a later one that differs is checked.
	seq int64
	// heard is when its last announcement arrived (or it was discovered).
	heard time.Time
	// checking: a unicast check is under way.
	checking bool
}

// NewLookupDiscovery starts group discovery: it opens the response server
// and the multicast sockets, and sends the first burst of requests. Close
// stops it.
func NewLookupDiscovery(cfg LookupDiscoveryConfig) (*LookupDiscovery, error) {
	if cfg.AllGroups && len(cfg.Groups) > 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup discovery: AllGroups with groups %q: choose one", cfg.Groups)
	}
	groups, err := normalGroups(cfg.Groups)
	if err != nil {
		return nil, err
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.TTL < 1 || cfg.TTL > 255 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup discovery multicast ttl %d: must be 1 to 255", cfg.TTL)
	}
	if cfg.Requests == 0 {
		cfg.Requests = DefaultRequests
	}
	cfg.RequestInterval = orDefault(cfg.RequestInterval, DefaultRequestInterval)
	cfg.AnnouncementInterval = orDefault(cfg.AnnouncementInterval, DefaultAnnouncementInterval)
	cfg.Timeout = orDefault(cfg.Timeout, DefaultTimeout)
	cfg.MaxResponseSize = orDefault(cfg.MaxResponseSize, DefaultMaxResponseSize)
	cfg.MaxExchanges = orDefault(cfg.MaxExchanges, DefaultMaxExchanges)
	if cfg.RequestInterval < 0 || cfg.AnnouncementInterval < 0 || cfg.Timeout < 0 || cfg.MaxResponseSize < 0 || cfg.MaxExchanges < 0 {
		return nil, djinn.Errorf(djinn.InvalidArgument, "lookup discovery config: negative interval, timeout or bound")
	}
	if cfg.ResponseAddr == "" {
		cfg.ResponseAddr = ":0"
	}
	if cfg.ResponseHost != "" {
		if _, err := wire.EncodeMulticastRequest(wire.MulticastRequest{Host: cfg.ResponseHost, Port: DefaultPort}); err != nil {
			return nil, err
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ifaces, err := multicastInterfaces(cfg.Interfaces)
	if err != nil {
		return nil, err
	}
	d := &LookupDiscovery{
		cfg: cfg, log: log, ifaces: ifaces, events: newNotifier(cfg.Listener),
		work: make(chan struct{}, cfg.MaxExchanges), burst: make(chan struct{}, 1),
		want: newWanted(groups, cfg.AllGroups), regs: make(map[djinn.ID]*known), pending: make(map[djinn.ID]struct{}),
	}
	if d.resp, err = net.Listen("tcp", cfg.ResponseAddr); err != nil {
		return nil, netlisten.Error("lookup discovery response server", cfg.ResponseAddr, err)
	}
	if err := d.openMulticast(); err != nil {
		d.resp.Close()
		return nil, err
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	d.wg.Add(3)
	go func() { defer d.wg.Done(); d.events.run(d.ctx) }()
	go d.acceptResponses()
	go d.checkSilent()
	if d.ann != nil {
		d.wg.Add(2)
		go d.hearAnnouncements()
		go d.sendRequests()
		d.requestBurst()
	}
	return d, nil
}

func (d *LookupDiscovery) openMulticast() error {
	if len(d.ifaces) == 0 {
		d.log.Warn("djinn lookup discovery: no up, multicast-capable interface: nothing to discover")
		return nil
	}
	ann, failed, err := listenGroup(wire.AnnouncementGroup, d.ifaces)
	for _, f := range failed {
		d.log.Warn("djinn lookup discovery: not hearing announcements on an interface", "err", f)
	}
	var send *sender
	if err == nil {
		if send, err = newSender(d.ifaces, d.cfg.TTL); err != nil {
			ann.Close()
		}
	}
	switch {
	case err == nil:
		d.ann, d.send = ann, send
	case len(d.cfg.Interfaces) > 0:
		return err // the interfaces asked for cannot multicast
	default:
		d.log.Warn("djinn lookup discovery: multicast unusable: nothing to discover", "err", err)
		d.ifaces = nil
	}
	return nil
}

// Events returns the channel of events, which must be read; it is closed
// when Close returns, and nil with a Listener.
func (d *LookupDiscovery) Events() <-chan Event { return d.events.out }

// Stats returns the counters.
func (d *LookupDiscovery) Stats() LookupDiscoveryStats { return d.stats.get() }

// ResponseAddr returns the address of the response server.
func (d *LookupDiscovery) ResponseAddr() net.Addr { return d.resp.Addr() }

// Registrars returns the registrars discovered and not discarded, by
// service id.
func (d *LookupDiscovery) Registrars() []RegistrarInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]RegistrarInfo, 0, len(d.regs))
	for _, k := range d.regs {
		out = append(out, k.info.clone())
	}
	sortInfos(out)
	return out
}

func sortInfos(infos []RegistrarInfo) {
	slices.SortFunc(infos, func(a, b RegistrarInfo) int { return slices.Compare(a.ServiceID[:], b.ServiceID[:]) })
}

// Groups returns the groups discovered, sorted, or all = true.
func (d *LookupDiscovery) Groups() (groups []string, all bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.want.list(), d.want.all
}

// SetGroups replaces the groups to discover. Registrars of none of them are
// discarded (NoInterest); a burst of requests seeks the new ones.
func (d *LookupDiscovery) SetGroups(groups ...string) error {
	return d.changeGroups(func(w wanted) (wanted, error) {
		gs, err := normalGroups(groups)
		return newWanted(gs, false), err
	})
}

// SetAllGroups makes the utility discover registrars of every group.
func (d *LookupDiscovery) SetAllGroups() error {
	return d.changeGroups(func(w wanted) (wanted, error) { return newWanted(nil, true), nil })
}

// AddGroups adds groups to discover and sends a burst of requests for
// them. It returns ErrAllGroups when every group is discovered already.
func (d *LookupDiscovery) AddGroups(groups ...string) error {
	return d.changeGroups(func(w wanted) (wanted, error) {
		if w.all {
			return w, ErrAllGroups
		}
		gs, err := normalGroups(groups)
		if err != nil {
			return w, err
		}
		return newWanted(append(w.list(), gs...), false), nil
	})
}

// RemoveGroups stops discovering groups; registrars of no remaining group
// are discarded (NoInterest). It returns ErrAllGroups when every group is
// discovered.
func (d *LookupDiscovery) RemoveGroups(groups ...string) error {
	return d.changeGroups(func(w wanted) (wanted, error) {
		if w.all {
			return w, ErrAllGroups
		}
		left := w.list()
		left = slices.DeleteFunc(left, func(g string) bool { return slices.Contains(groups, g) })
		return newWanted(left, false), nil
	})
}

// changeGroups applies a change of the wanted groups: it discards the
// registrars no longer wanted, and starts a request burst when groups were
// added.
func (d *LookupDiscovery) changeGroups(change func(wanted) (wanted, error)) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	w, err := change(d.want)
	if err != nil {
		return err
	}
	added := w.all && !d.want.all
	if !w.all && !d.want.all {
		for g := range w.set {
			if _, ok := d.want.set[g]; !ok {
				added = true
			}
		}
	}
	d.want = w
	for _, id := range sortedIDs(d.regs) {
		if k := d.regs[id]; !w.wants(k.info.Groups) {
			d.discardLocked(k, NoInterest)
		}
	}
	if added {
		d.requestBurst()
	}
	return nil
}

func sortedIDs[V any](m map[djinn.ID]V) []djinn.ID {
	ids := make([]djinn.ID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b djinn.ID) int { return slices.Compare(a[:], b[:]) })
	return ids
}

// Discard drops a discovered registrar, typically because a call to it
// failed. It is discovered again when it next answers a request or
// announces itself (as any registrar not yet discovered is). Unknown ids are
// ignored.
func (d *LookupDiscovery) Discard(id djinn.ID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if k, ok := d.regs[id]; ok && !d.closed {
		d.discardLocked(k, ByUser)
	}
}

func (d *LookupDiscovery) discardLocked(k *known, why Reason) {
	delete(d.regs, k.info.ServiceID)
	d.events.push(Event{Kind: Discarded, Registrar: k.info.clone(), Reason: why})
}

// Close stops discovery and waits for its goroutines; the event channel is
// closed and undelivered events are dropped. Later calls return nil.
func (d *LookupDiscovery) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	d.cancel()
	d.resp.Close()
	if d.ann != nil {
		d.ann.Close()
	}
	d.wg.Wait()
	if d.send != nil {
		d.send.Close()
	}
	return nil
}

// requestBurst asks for a new burst of requests.
func (d *LookupDiscovery) requestBurst() {
	select {
	case d.burst <- struct{}{}:
	default:
	}
}

// sendRequests sends the request bursts: Requests requests, RequestInterval
// apart, each listing the registrars already discovered. A new burst starts
// over.
func (d *LookupDiscovery) sendRequests() {
	defer d.wg.Done()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-d.burst:
		}
	restart:
		for i := 0; i < d.cfg.Requests; i++ {
			d.sendRequest()
			if i == d.cfg.Requests-1 {
				break
			}
			t := time.NewTimer(d.cfg.RequestInterval)
			select {
			case <-d.ctx.Done():
				t.Stop()
				return
			case <-d.burst:
				t.Stop()
				goto restart
			case <-t.C:
			}
		}
	}
}

// sendRequest sends one request out of every interface.
func (d *LookupDiscovery) sendRequest() {
	d.mu.Lock()
	if d.want.none() {
		d.mu.Unlock()
		return
	}
	req := wire.MulticastRequest{Port: d.resp.Addr().(*net.TCPAddr).Port, Groups: d.want.list(), Heard: sortedIDs(d.regs)}
	d.mu.Unlock()
	sent := 0
	for i := range d.ifaces {
		req.Host = d.cfg.ResponseHost
		if req.Host == "" {
			a, ok := interfaceIPv4(d.ifaces[i])
			if !ok {
				continue
			}
			req.Host = a.String()
		}
		packets, err := wire.EncodeMulticastRequest(req)
		if err != nil {
			d.log.Warn("djinn lookup discovery: encoding a request", "err", err)
			return
		}
		if err := d.send.send(&d.ifaces[i], wire.RequestGroup, packets); err != nil {
			d.log.Warn("djinn lookup discovery: sending a request", "err", err)
			continue
		}
		sent += len(packets)
	}
	d.stats.add(func(s *LookupDiscoveryStats) { s.RequestsSent += uint64(sent) })
}

// acceptResponses accepts the connections registrars open in answer to
// requests and runs unicast discovery on them.
func (d *LookupDiscovery) acceptResponses() {
	defer d.wg.Done()
	for {
		conn, err := d.resp.Accept()
		if err != nil {
			if d.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			d.log.Warn("djinn lookup discovery: accept failed", "err", err)
			if !backoff.Pause(d.ctx, 50*time.Millisecond) {
				return
			}
			continue
		}
		if !d.spawn(func(ctx context.Context) {
			defer conn.Close()
			ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
			defer cancel()
			info, err := exchange(ctx, conn, d.cfg.MaxResponseSize)
			if err != nil {
				d.stats.add(func(s *LookupDiscoveryStats) { s.ResponsesFailed++ })
				d.log.Debug("djinn lookup discovery: multicast response", "peer", conn.RemoteAddr().String(), "err", err)
				return
			}
			d.stats.add(func(s *LookupDiscoveryStats) { s.ResponsesReceived++ })
			d.found(info, nil)
		}) {
			conn.Close()
		}
	}
}

// spawn runs f in a goroutine unless MaxExchanges are running (it then
// counts a drop and returns false).
func (d *LookupDiscovery) spawn(f func(ctx context.Context)) bool {
	select {
	case d.work <- struct{}{}:
	default:
		d.stats.add(func(s *LookupDiscoveryStats) { s.ExchangesDropped++ })
		return false
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer func() { <-d.work }()
		f(d.ctx)
	}()
	return true
}

// hearAnnouncements reads multicast announcements.
func (d *LookupDiscovery) hearAnnouncements() {
	defer d.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, from, ok, err := d.ann.read(buf)
		if err != nil {
			if d.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			d.log.Warn("djinn lookup discovery: reading announcements", "err", err)
			if !backoff.Pause(d.ctx, 10*time.Millisecond) {
				return
			}
			continue
		}
		if !ok {
			continue
		}
		a, err := wire.DecodeMulticastAnnouncement(buf[:n])
		var loc Locator
		if err == nil {
			loc, err = NewLocator(a.Host, a.Port)
		}
		if err != nil {
			unsupported := errors.Is(err, wire.ErrVersion) || errors.Is(err, wire.ErrFormat)
			d.stats.add(func(s *LookupDiscoveryStats) {
				if unsupported {
					s.UnsupportedPackets++
				} else {
					s.MalformedPackets++
				}
			})
			d.log.Debug("djinn lookup discovery: announcement ignored", "from", from.src.String(), "err", err)
			continue
		}
		d.stats.add(func(s *LookupDiscoveryStats) { s.AnnouncementsReceived++ })
		d.announced(a, loc, time.Now())
	}
}

// announced handles one announcement packet (DJ.2.5). From an unknown
// registrar of a wanted group, it leads to unicast discovery at the
// announced locator, whose answer must carry the announced service id. From
// a discovered registrar it counts as a sign of life; and when it is newer
// than the last one checked and differs from what the registrar said (other
// groups, none, another locator), a unicast check asks the registrar
// itself, so that one forged packet never changes or discards a registrar.
// A split announcement (several packets, each with some of the groups)
// differs from the whole, and so costs one check per announcement, as in
// River.
func (d *LookupDiscovery) announced(a wire.MulticastAnnouncement, loc Locator, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	id := a.ServiceID
	if k, ok := d.regs[id]; ok {
		k.heard = now
		if a.Seq > k.seq && !k.checking && (loc != k.info.Locator || !sameGroups(a.Groups, k.info.Groups)) {
			prev := k.seq
			k.seq = a.Seq
			k.checking = true
			if !d.spawn(func(ctx context.Context) { d.check(ctx, k, checkAnnounced, &a, loc, prev) }) {
				k.seq, k.checking = prev, false
			}
		}
		return
	}
	if _, ok := d.pending[id]; ok || !d.want.wants(a.Groups) {
		return
	}
	d.pending[id] = struct{}{}
	if !d.spawn(func(ctx context.Context) { d.discoverAnnounced(ctx, a, loc) }) {
		delete(d.pending, id)
	}
}

// discoverAnnounced runs unicast discovery at an announced locator.
func (d *LookupDiscovery) discoverAnnounced(ctx context.Context, a wire.MulticastAnnouncement, loc Locator) {
	info, err := unicast(ctx, loc, d.cfg.Timeout, d.cfg.MaxResponseSize)
	d.mu.Lock()
	delete(d.pending, a.ServiceID)
	d.mu.Unlock()
	switch {
	case err != nil:
		d.stats.add(func(s *LookupDiscoveryStats) { s.ExchangesFailed++ })
		d.log.Debug("djinn lookup discovery: announced registrar unreachable", "locator", loc.String(), "err", err)
	case info.ServiceID != a.ServiceID:
		d.stats.add(func(s *LookupDiscoveryStats) { s.SpoofedAnnouncements++ })
		d.log.Debug("djinn lookup discovery: announcement of another registrar's locator",
			"locator", loc.String(), "announced", a.ServiceID.String(), "answered", info.ServiceID.String())
	default:
		d.found(info, &a)
	}
}

// found takes a registrar's own answer, from unicast discovery at an
// announced locator (with the announcement a) or on the response server
// (a nil). A registrar not yet discovered is kept if one of its groups is
// wanted. One already discovered is never changed by such an answer, which
// anyone could have given (anyone can connect to the response server, or
// announce a locator of theirs): a differing answer only makes the utility
// check the registrar at its known locator.
func (d *LookupDiscovery) found(info RegistrarInfo, a *wire.MulticastAnnouncement) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	k, ok := d.regs[info.ServiceID]
	switch {
	case ok:
		if !k.info.sameAs(info) && !k.checking {
			k.checking = true
			if !d.spawn(func(ctx context.Context) { d.check(ctx, k, checkAnswer, nil, Locator{}, 0) }) {
				k.checking = false
			}
		}
	case d.want.wants(info.Groups):
		k = &known{info: info.clone(), seq: math.MinInt64, heard: time.Now()}
		if a != nil {
			k.seq = a.Seq
		}
		d.regs[info.ServiceID] = k
		d.events.push(Event{Kind: Discovered, Registrar: info.clone()})
	}
}

// updateLocked applies a registrar's own answer to a discovered registrar.
func (d *LookupDiscovery) updateLocked(k *known, info RegistrarInfo) {
	if !d.want.wants(info.Groups) {
		k.info = info.clone() // the event tells the groups that made it unwanted
		d.discardLocked(k, NoInterest)
		return
	}
	if !k.info.sameAs(info) {
		k.info = info.clone()
		d.events.push(Event{Kind: Changed, Registrar: info.clone()})
	}
}

// checkSilent checks, every announcement interval, the registrars unheard
// for three intervals.
func (d *LookupDiscovery) checkSilent() {
	defer d.wg.Done()
	t := time.NewTicker(d.cfg.AnnouncementInterval)
	defer t.Stop()
	for {
		select {
		case <-d.ctx.Done():
			return
		case now := <-t.C:
			d.mu.Lock()
			for _, id := range sortedIDs(d.regs) {
				k := d.regs[id]
				if k.checking || now.Sub(k.heard) <= missedAnnouncements*d.cfg.AnnouncementInterval {
					continue
				}
				k.checking = true
				if !d.spawn(func(ctx context.Context) { d.check(ctx, k, checkSilent, nil, Locator{}, 0) }) {
					k.checking = false
				}
			}
			d.mu.Unlock()
		}
	}
}

// confirms reports whether a registrar's answer agrees with an announcement
// packet of it, at loc: same locator, and groups that are some of its
// groups (a split announcement carries some), or none when it has none.
func confirms(info RegistrarInfo, a *wire.MulticastAnnouncement, loc Locator) bool {
	if loc != info.Locator || len(a.Groups) == 0 && len(info.Groups) > 0 {
		return false
	}
	for _, g := range a.Groups {
		if !slices.Contains(info.Groups, g) {
			return false
		}
	}
	return true
}

// checkKind says why a discovered registrar is checked.
type checkKind int

const (
	// checkSilent: unheard for three announcement intervals.
	checkSilent checkKind = iota
	// checkAnnounced: an announcement differs from what it said.
	checkAnnounced
	// checkAnswer: an answer from elsewhere claimed its id with other data.
	checkAnswer
)

// check asks a discovered registrar, at its known locator, what it is now.
// a is the announcement that prompted a checkAnnounced, at loc; prevSeq is
// the sequence number before it.
//
// An answer with the registrar's id is the truth: it updates the registrar,
// or discards it when no group of it is wanted (NoInterest). An
// announcement that answer contradicts (groups the registrar is not in, no
// groups, another locator) is counted as spoofed, and its sequence number
// forgotten, so that a forged packet with a huge one cannot hide the
// registrar's real announcements. With no such answer, the registrar is
// discarded if it went silent (Unreachable) or announced it has left every
// group (Left); an announcement of a new locator is checked there; and
// otherwise a failed check changes nothing, leaving the silence check to
// decide.
func (d *LookupDiscovery) check(ctx context.Context, k *known, why checkKind, a *wire.MulticastAnnouncement, loc Locator, prevSeq int64) {
	d.mu.Lock()
	id, at := k.info.ServiceID, k.info.Locator
	d.mu.Unlock()
	info, err := unicast(ctx, at, d.cfg.Timeout, d.cfg.MaxResponseSize)
	if err == nil && info.ServiceID != id {
		err = djinn.Errorf(djinn.Unavailable, "locator %v answers as %v now", at, info.ServiceID)
	}
	spoofed := 0
	if err != nil && a != nil && loc != at {
		info, err = unicast(ctx, loc, d.cfg.Timeout, d.cfg.MaxResponseSize)
		if err == nil && info.ServiceID != id {
			spoofed++
			err = djinn.Errorf(djinn.Unavailable, "announced locator %v answers as %v", loc, info.ServiceID)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	k.checking = false
	if err == nil && a != nil && !confirms(info, a, loc) {
		spoofed++
	}
	// Counted at once, under mu, which the outcome is applied under too:
	// who sees the count and then looks sees what the check left.
	d.stats.add(func(s *LookupDiscoveryStats) {
		s.Checks++
		if err != nil {
			s.ChecksFailed++
		}
		s.SpoofedAnnouncements += uint64(spoofed)
	})
	if d.closed || d.regs[id] != k {
		return // discarded meanwhile
	}
	leaving := a != nil && len(a.Groups) == 0
	switch {
	case err == nil:
		if spoofed > 0 && k.seq == a.Seq {
			k.seq = prevSeq
		}
		d.updateLocked(k, info)
	case why == checkSilent:
		d.log.Info("djinn lookup discovery: discarding an unreachable registrar", "registrar", id.String(), "err", err)
		d.discardLocked(k, Unreachable)
	case leaving:
		d.discardLocked(k, Left)
	default:
		d.log.Debug("djinn lookup discovery: check failed", "registrar", id.String(), "err", err)
	}
}
