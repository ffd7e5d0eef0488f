package discovery

import (
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	wire "github.com/djinn-go/djinn/internal/discovery"
)

// patience bounds every wait of a test: far longer than anything takes,
// short enough that a hung test fails with a message rather than at the
// package timeout.
const patience = 15 * time.Second

// quiet is an interval long enough that its timer never fires in a test.
const quiet = time.Hour

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// group returns a group name of this test's own, so that the registrars of
// one test never answer another's requests.
func group(t *testing.T, suffix string) string {
	return strings.NewReplacer("/", ".", " ", "_").Replace(t.Name()) + "." + suffix
}

// startRegistrar starts a registrar on loopback, with announcements only at
// start and on changes unless cfg says otherwise; it closes with the test.
func startRegistrar(t *testing.T, cfg RegistrarConfig) *Registrar {
	t.Helper()
	if cfg.ServiceID.IsZero() {
		cfg.ServiceID = djinn.NewID()
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "127.0.0.1:7000"
	}
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	if cfg.Interfaces == nil && !cfg.DisableMulticast {
		cfg.Interfaces = []string{"lo"}
	}
	if cfg.AnnouncementInterval == 0 {
		cfg.AnnouncementInterval = quiet
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t).With("side", "registrar")
	}
	r, err := NewRegistrar(cfg)
	if err != nil {
		t.Fatalf("NewRegistrar: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// startGroupDiscovery starts group discovery on loopback; it closes with
// the test.
func startGroupDiscovery(t *testing.T, cfg LookupDiscoveryConfig) *LookupDiscovery {
	t.Helper()
	if cfg.Interfaces == nil {
		cfg.Interfaces = []string{"lo"}
	}
	if cfg.RequestInterval == 0 {
		cfg.RequestInterval = 20 * time.Millisecond
	}
	if cfg.AnnouncementInterval == 0 {
		cfg.AnnouncementInterval = quiet
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t).With("side", "client")
	}
	d, err := NewLookupDiscovery(cfg)
	if err != nil {
		t.Fatalf("NewLookupDiscovery: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// crash stops a registrar the way kill -9 would: sockets closed, no last
// announcement.
func crash(t *testing.T, r *Registrar) {
	t.Helper()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.ln.Close()
	if r.reqs != nil {
		r.reqs.Close()
	}
	r.wg.Wait()
	if r.send != nil {
		r.send.Close()
	}
}

// nextEvent returns the next event.
func nextEvent(t *testing.T, events <-chan Event) Event {
	t.Helper()
	select {
	case e, ok := <-events:
		if !ok {
			t.Fatal("event channel closed")
		}
		return e
	case <-time.After(patience):
		t.Fatalf("no event within %v", patience)
		return Event{}
	}
}

// expectEvent checks that the next event is of kind about id, and returns
// it.
func expectEvent(t *testing.T, events <-chan Event, kind EventKind, id djinn.ID) Event {
	t.Helper()
	e := nextEvent(t, events)
	if e.Kind != kind || e.Registrar.ServiceID != id {
		t.Fatalf("event %v, want %v of %v", e, kind, id)
	}
	return e
}

// expectNoEvent checks that no event is waiting now.
func expectNoEvent(t *testing.T, events <-chan Event) {
	t.Helper()
	select {
	case e := <-events:
		t.Fatalf("unexpected event %v", e)
	default:
	}
}

// waitFor waits until cond holds of the counters c, and returns them.
func waitFor[T any](t *testing.T, c *counters[T], what string, cond func(T) bool) T {
	t.Helper()
	deadline := time.After(patience)
	for {
		v, changed := c.watch()
		if cond(v) {
			return v
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("waited %v for %s; counters %+v", patience, what, v)
		}
	}
}

// sendRaw sends packets to a multicast group out of one interface, as a
// peer (or an attacker) on that interface would.
func sendRaw(t *testing.T, ifname string, dst netip.AddrPort, packets ...[]byte) {
	t.Helper()
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newSender([]net.Interface{*ifi}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.send(ifi, dst, packets); err != nil {
		t.Fatal(err)
	}
}

func encodeAnnouncement(t *testing.T, a wire.MulticastAnnouncement) [][]byte {
	t.Helper()
	p, err := wire.EncodeMulticastAnnouncement(a)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func encodeRequest(t *testing.T, req wire.MulticastRequest) [][]byte {
	t.Helper()
	p, err := wire.EncodeMulticastRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func hasRegistrar(infos []RegistrarInfo, id djinn.ID) bool {
	return slices.ContainsFunc(infos, func(i RegistrarInfo) bool { return i.ServiceID == id })
}
