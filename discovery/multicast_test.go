package discovery

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	wire "github.com/djinn-go/djinn/internal/discovery"
)

// These tests use real multicast on the interfaces of the test network
// namespace (see TestMain): lo, and the veth pair dv0/dv1.

// A registrar's announcements are heard and lead to its discovery; its
// Close sends a last announcement with no groups, which discards it.
func TestMulticastAnnouncementDiscoversAndCloseDiscards(t *testing.T) {
	g := group(t, "g")
	// No requests: only the announcements can find the registrar.
	d := startGroupDiscovery(t, LookupDiscoveryConfig{Groups: []string{g}, Requests: -1})
	id := djinn.NewID()
	r := startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g, "other"}, Endpoint: "127.0.0.1:9090"})

	e := expectEvent(t, d.Events(), Discovered, id)
	want := RegistrarInfo{ServiceID: id, Groups: []string{g, "other"}, Endpoint: "127.0.0.1:9090", Locator: r.Locator()}
	if !e.Registrar.sameAs(want) {
		t.Fatalf("discovered %+v, want %+v", e.Registrar, want)
	}
	if got := d.Registrars(); len(got) != 1 || !got[0].sameAs(want) {
		t.Fatalf("Registrars = %+v", got)
	}
	if s := d.Stats(); s.AnnouncementsReceived == 0 || s.RequestsSent != 0 || s.ResponsesReceived != 0 {
		t.Fatalf("stats %+v: want discovery by announcement alone", s)
	}

	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if e := expectEvent(t, d.Events(), Discarded, id); e.Reason != Left {
		t.Fatalf("reason %v, want Left", e.Reason)
	}
	if len(d.Registrars()) != 0 {
		t.Fatalf("Registrars after the discard: %v", d.Registrars())
	}
}

// A client that starts after a registrar announced finds it with its
// requests: the registrar connects to the client's response server. The
// requests that follow list it as heard, and it no longer answers.
func TestMulticastRequestsFindEarlierRegistrar(t *testing.T) {
	g := group(t, "g")
	id := djinn.NewID()
	r := startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}})
	d := startGroupDiscovery(t, LookupDiscoveryConfig{Groups: []string{g}})
	expectEvent(t, d.Events(), Discovered, id)
	if s := d.Stats(); s.ResponsesReceived == 0 || s.AnnouncementsReceived != 0 {
		t.Fatalf("client stats %+v: want discovery by response alone", s)
	}
	s := waitFor(t, &r.stats, "a request listing the registrar as heard", func(s RegistrarStats) bool { return s.RequestsHeard > 0 })
	if s.RequestsAnswered == 0 {
		t.Fatalf("registrar stats %+v: no request answered", s)
	}
	waitFor(t, &d.stats, "the burst", func(s LookupDiscoveryStats) bool { return s.RequestsSent == DefaultRequests })
	expectNoEvent(t, d.Events())
}

// A registrar that stops without a word (kill -9) is discarded once three
// announcement intervals pass and a unicast check fails.
func TestMulticastSilentDeadRegistrarIsDiscarded(t *testing.T) {
	g := group(t, "g")
	id := djinn.NewID()
	r := startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}, AnnouncementInterval: 10 * time.Millisecond})
	d := startGroupDiscovery(t, LookupDiscoveryConfig{Groups: []string{g}, AnnouncementInterval: 30 * time.Millisecond})
	expectEvent(t, d.Events(), Discovered, id)
	crash(t, r)
	if e := expectEvent(t, d.Events(), Discarded, id); e.Reason != Unreachable {
		t.Fatalf("reason %v, want Unreachable", e.Reason)
	}
	if s := d.Stats(); s.ChecksFailed == 0 {
		t.Fatalf("stats %+v: discarded without a failed check", s)
	}
}

// A registrar that stops announcing but still answers unicast discovery
// is kept, however many intervals pass.
func TestMulticastSilentLiveRegistrarIsKept(t *testing.T) {
	g := group(t, "g")
	id := djinn.NewID()
	d := startGroupDiscovery(t, LookupDiscoveryConfig{Groups: []string{g}, Requests: -1, AnnouncementInterval: 10 * time.Millisecond})
	startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}}) // announces only at start
	expectEvent(t, d.Events(), Discovered, id)
	s := waitFor(t, &d.stats, "several checks", func(s LookupDiscoveryStats) bool { return s.Checks >= 5 })
	if s.ChecksFailed != 0 {
		t.Fatalf("stats %+v: a check failed", s)
	}
	if !hasRegistrar(d.Registrars(), id) {
		t.Fatal("a reachable registrar was discarded")
	}
	expectNoEvent(t, d.Events())
}

// The client's group changes discover and discard registrars; so do the
// registrar's, which a unicast check confirms.
func TestMulticastGroupChanges(t *testing.T) {
	a, b, x := group(t, "a"), group(t, "b"), group(t, "x")
	idA, idB := djinn.NewID(), djinn.NewID()
	ra := startRegistrar(t, RegistrarConfig{ServiceID: idA, Groups: []string{a}})
	startRegistrar(t, RegistrarConfig{ServiceID: idB, Groups: []string{b}})
	// Requests name the response server by host name here.
	d := startGroupDiscovery(t, LookupDiscoveryConfig{Groups: []string{a}, ResponseHost: "localhost"})
	expectEvent(t, d.Events(), Discovered, idA)

	// The client's groups.
	if err := d.AddGroups(b); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, d.Events(), Discovered, idB)
	if err := d.RemoveGroups(b); err != nil {
		t.Fatal(err)
	}
	if e := expectEvent(t, d.Events(), Discarded, idB); e.Reason != NoInterest {
		t.Fatalf("reason %v, want NoInterest", e.Reason)
	}
	if groups, all := d.Groups(); all || !slices.Equal(groups, []string{a}) {
		t.Fatalf("Groups = %v, %v", groups, all)
	}

	// The registrar's groups.
	if err := ra.SetGroups([]string{a, x}); err != nil {
		t.Fatal(err)
	}
	if e := expectEvent(t, d.Events(), Changed, idA); !sameGroups(e.Registrar.Groups, []string{a, x}) {
		t.Fatalf("changed to groups %v", e.Registrar.Groups)
	}
	if err := ra.SetGroups([]string{x}); err != nil {
		t.Fatal(err)
	}
	if e := expectEvent(t, d.Events(), Discarded, idA); e.Reason != NoInterest || !sameGroups(e.Registrar.Groups, []string{x}) {
		t.Fatalf("discarded for %v with groups %v, want NoInterest with its new groups", e.Reason, e.Registrar.Groups)
	}
	if err := ra.SetGroups([]string{a}); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, d.Events(), Discovered, idA)

	// Every group, then none.
	if err := d.SetAllGroups(); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, d.Events(), Discovered, idB)
	if err := d.AddGroups("y"); !errors.Is(err, ErrAllGroups) {
		t.Fatalf("AddGroups when all = %v, want ErrAllGroups", err)
	}
	if err := d.SetGroups(); err != nil {
		t.Fatal(err)
	}
	got := []djinn.ID{nextEvent(t, d.Events()).Registrar.ServiceID, nextEvent(t, d.Events()).Registrar.ServiceID}
	if !slices.Contains(got, idA) || !slices.Contains(got, idB) || len(d.Registrars()) != 0 {
		t.Fatalf("after SetGroups(): discarded %v, left %v", got, d.Registrars())
	}
	if err := d.SetGroups("bad\x00group"); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("SetGroups with a NUL = %v, want invalid argument", err)
	}
}

// Several registrars, the default interfaces (lo, dv0, dv1: every packet
// arrives more than once) and a client of every group: each registrar of a
// group is discovered once; the one of no group is not.
func TestMulticastSeveralRegistrarsAllGroups(t *testing.T) {
	ids := []djinn.ID{djinn.NewID(), djinn.NewID(), djinn.NewID()}
	for i, id := range ids {
		gs := []string{group(t, string(rune('a'+i)))}
		if i == 2 {
			gs = append(gs, "") // the public group
		}
		startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: gs, Interfaces: []string{}, AnnouncementInterval: 20 * time.Millisecond})
	}
	none := startRegistrar(t, RegistrarConfig{Interfaces: []string{}})
	d := startGroupDiscovery(t, LookupDiscoveryConfig{AllGroups: true, Interfaces: []string{}})
	var got []djinn.ID
	for range ids {
		e := nextEvent(t, d.Events())
		if e.Kind != Discovered || slices.Contains(got, e.Registrar.ServiceID) {
			t.Fatalf("event %v after %v", e, got)
		}
		got = append(got, e.Registrar.ServiceID)
	}
	for _, id := range ids {
		if !slices.Contains(got, id) {
			t.Fatalf("discovered %v, want %v", got, ids)
		}
	}
	// More announcements of each arrive; none makes an event.
	n := d.Stats().AnnouncementsReceived
	waitFor(t, &d.stats, "more announcements", func(s LookupDiscoveryStats) bool { return s.AnnouncementsReceived >= n+20 })
	expectNoEvent(t, d.Events())
	if hasRegistrar(d.Registrars(), none.cfg.ServiceID) {
		t.Fatal("a registrar of no group was discovered")
	}
	if len(d.ifaces) != 3 {
		t.Fatalf("default interfaces %v, want lo, dv0 and dv1", d.ifaces)
	}
}

// A registrar that restarts with its service id on another port is
// followed there: its known locator fails, the announced one answers with
// its id.
func TestMulticastRegistrarRestartsElsewhere(t *testing.T) {
	g := group(t, "g")
	id := djinn.NewID()
	d := startGroupDiscovery(t, LookupDiscoveryConfig{Groups: []string{g}, Requests: -1})
	r := startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}})
	expectEvent(t, d.Events(), Discovered, id)
	crash(t, r)
	r2 := startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}, Endpoint: "127.0.0.1:7001", ListenAddr: "127.0.0.2:0"})
	e := expectEvent(t, d.Events(), Changed, id)
	if e.Registrar.Locator != r2.Locator() || e.Registrar.Endpoint != "127.0.0.1:7001" {
		t.Fatalf("changed to %+v, want locator %v", e.Registrar, r2.Locator())
	}

	// An announcement of an unknown registrar whose locator does not
	// answer discovers nothing.
	sendRaw(t, "lo", wire.AnnouncementGroup, encodeAnnouncement(t, wire.MulticastAnnouncement{
		Seq: 1, Host: "127.0.0.1", Port: r.Locator().Port, ServiceID: djinn.NewID(), Groups: []string{g}})...)
	waitFor(t, &d.stats, "a failed exchange", func(s LookupDiscoveryStats) bool { return s.ExchangesFailed == 1 })
	expectNoEvent(t, d.Events())
}

// Discard by the user drops a registrar; its next announcement finds it
// again.
func TestMulticastDiscardRearms(t *testing.T) {
	g := group(t, "g")
	id := djinn.NewID()
	startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}, AnnouncementInterval: 10 * time.Millisecond})
	d := startGroupDiscovery(t, LookupDiscoveryConfig{Groups: []string{g}, Requests: -1})
	expectEvent(t, d.Events(), Discovered, id)
	d.Discard(id)
	if e := expectEvent(t, d.Events(), Discarded, id); e.Reason != ByUser {
		t.Fatalf("reason %v, want ByUser", e.Reason)
	}
	expectEvent(t, d.Events(), Discovered, id)
	d.Discard(djinn.NewID()) // unknown: ignored
}

// Malformed and forged packets, to both sides, are counted and change
// nothing.
func TestMulticastSpoofedAndMalformedPackets(t *testing.T) {
	g := group(t, "g")
	id := djinn.NewID()
	r := startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}, Interfaces: []string{"lo", "dv1"}})
	d := startGroupDiscovery(t, LookupDiscoveryConfig{Groups: []string{g}, Requests: 1})
	expectEvent(t, d.Events(), Discovered, id)
	// The burst of one request has been answered; further requests come
	// only from this test.
	waitFor(t, &r.stats, "the client's request answered", func(s RegistrarStats) bool { return s.RequestsAnswered == 1 })

	t.Run("announcements", func(t *testing.T) {
		sendRaw(t, "lo", wire.AnnouncementGroup, []byte{0, 0, 0, 2, 0, 0x76, 0x0f}) // truncated
		waitFor(t, &d.stats, "a malformed packet", func(s LookupDiscoveryStats) bool { return s.MalformedPackets == 1 })
		v1 := encodeAnnouncement(t, wire.MulticastAnnouncement{Seq: 1, Host: "127.0.0.1", Port: 1, ServiceID: id, Groups: []string{g}})[0]
		v1[3] = 1 // protocol version 1
		sendRaw(t, "lo", wire.AnnouncementGroup, v1)
		waitFor(t, &d.stats, "an unsupported packet", func(s LookupDiscoveryStats) bool { return s.UnsupportedPackets == 1 })

		// Another id at the real registrar's locator: unicast discovery
		// there answers with the real id.
		forged := djinn.NewID()
		sendRaw(t, "lo", wire.AnnouncementGroup, encodeAnnouncement(t, wire.MulticastAnnouncement{
			Seq: 1, Host: r.Locator().Host, Port: r.Locator().Port, ServiceID: forged, Groups: []string{g}})...)
		waitFor(t, &d.stats, "a spoofed announcement", func(s LookupDiscoveryStats) bool { return s.SpoofedAnnouncements == 1 })

		// A forged farewell of the real registrar: a check finds it alive
		// and still in the group.
		checks := d.Stats().Checks
		sendRaw(t, "lo", wire.AnnouncementGroup, encodeAnnouncement(t, wire.MulticastAnnouncement{
			Seq: 1 << 62, Host: r.Locator().Host, Port: r.Locator().Port, ServiceID: id})...)
		s := waitFor(t, &d.stats, "a check", func(s LookupDiscoveryStats) bool { return s.Checks == checks+1 })
		if s.SpoofedAnnouncements != 2 || s.ChecksFailed != 0 {
			t.Fatalf("stats %+v: want the farewell found spoofed", s)
		}

		// Forged answers on the response server, claiming the real id with
		// another endpoint, or with groups the client does not want: each
		// only triggers a check.
		for i, fake := range []wire.UnicastResponse{
			{Locator: r.Locator(), Endpoint: "10.6.6.6:666", ServiceID: id, Groups: []string{g}},
			{Locator: r.Locator(), Endpoint: "127.0.0.1:7000", ServiceID: id, Groups: []string{"elsewhere"}},
		} {
			conn, err := net.Dial("tcp", d.ResponseAddr().String())
			if err != nil {
				t.Fatal(err)
			}
			conn.SetDeadline(time.Now().Add(patience))
			if err := wire.ServeUnicast(conn, fake, 0); err != nil {
				t.Fatal(err)
			}
			conn.Close()
			waitFor(t, &d.stats, "a check", func(s LookupDiscoveryStats) bool { return s.Checks == checks+2+uint64(i) })
		}
		// Garbage on the response server.
		conn, err := net.Dial("tcp", d.ResponseAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("garbage that is not an answer"))
		conn.Close()
		waitFor(t, &d.stats, "a failed response", func(s LookupDiscoveryStats) bool { return s.ResponsesFailed == 1 })

		if got := d.Registrars(); len(got) != 1 || got[0].Endpoint != "127.0.0.1:7000" {
			t.Fatalf("Registrars = %+v: forged packets changed them", got)
		}
		expectNoEvent(t, d.Events())

		// The forged sequence number was forgotten: the registrar's next
		// real announcement still counts.
		if err := r.SetGroups([]string{g, "extra"}); err != nil {
			t.Fatal(err)
		}
		expectEvent(t, d.Events(), Changed, id)
	})

	t.Run("requests", func(t *testing.T) {
		closed := freeLocator(t)
		for _, tc := range []struct {
			name   string
			ifname string // the interface the request goes out of
			req    wire.MulticastRequest
			count  func(RegistrarStats) uint64
		}{
			{"garbage", "lo", wire.MulticastRequest{}, func(s RegistrarStats) uint64 { return s.RequestsMalformed }},
			{"heard", "lo", wire.MulticastRequest{Host: "127.0.0.1", Port: closed.Port, Groups: []string{g}, Heard: []djinn.ID{djinn.NewID(), id}},
				func(s RegistrarStats) uint64 { return s.RequestsHeard }},
			{"other groups", "lo", wire.MulticastRequest{Host: "127.0.0.1", Port: closed.Port, Groups: []string{"nope"}},
				func(s RegistrarStats) uint64 { return s.RequestsOtherGroups }},
			{"nobody listens at the response address", "lo", wire.MulticastRequest{Host: "127.0.0.1", Port: closed.Port},
				func(s RegistrarStats) uint64 { return s.ResponsesFailed }},
			{"wildcard response address", "lo", wire.MulticastRequest{Host: "0.0.0.0", Port: 80, Groups: []string{g}},
				func(s RegistrarStats) uint64 { return s.RequestsSpoofed }},
			{"multicast response address", "lo", wire.MulticastRequest{Host: "224.0.1.84", Port: 4160},
				func(s RegistrarStats) uint64 { return s.RequestsSpoofed }},
			{"loopback named from another host", "dv0", wire.MulticastRequest{Host: "127.0.0.1", Port: 22},
				func(s RegistrarStats) uint64 { return s.RequestsSpoofed }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := tc.count(r.Stats())
				packet := []byte{0, 0, 0, 2, 1, 0xff}
				if tc.req.Host != "" {
					packet = encodeRequest(t, tc.req)[0]
				}
				sendRaw(t, tc.ifname, wire.RequestGroup, packet)
				waitFor(t, &r.stats, tc.name, func(s RegistrarStats) bool { return tc.count(s) == before+1 })
			})
		}
		if s := r.Stats(); s.RequestsAnswered != 1 {
			t.Fatalf("registrar stats %+v: a forged request was answered", s)
		}
	})
}

// Interfaces are chosen: a registrar on dv0 only and a client on dv1 only
// meet across the veth pair, by announcement and by request, the requests
// naming dv1's address.
func TestMulticastChosenInterfaces(t *testing.T) {
	g := group(t, "g")
	id := djinn.NewID()
	r := startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}, Interfaces: []string{"dv0"}, ListenAddr: "10.77.0.1:0"})
	if r.Locator().Host != "10.77.0.1" {
		t.Fatalf("locator %v", r.Locator())
	}
	// Started after the registrar's announcement: found by request.
	d := startGroupDiscovery(t, LookupDiscoveryConfig{Groups: []string{g}, Interfaces: []string{"dv1"}})
	expectEvent(t, d.Events(), Discovered, id)
	waitFor(t, &r.stats, "a request answered", func(s RegistrarStats) bool { return s.RequestsAnswered >= 1 })

	// A client on dv1 that only listens finds it by announcement.
	d2 := startGroupDiscovery(t, LookupDiscoveryConfig{Groups: []string{g}, Interfaces: []string{"dv1"}, Requests: -1})
	if err := r.SetGroups([]string{g, "more"}); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, d2.Events(), Discovered, id)
	expectEvent(t, d.Events(), Changed, id)
}

func TestLookupDiscoveryListenerAndClose(t *testing.T) {
	g := group(t, "g")
	id := djinn.NewID()
	events := make(chan Event, 10)
	d := startGroupDiscovery(t, LookupDiscoveryConfig{Groups: []string{g}, Listener: func(e Event) { events <- e }})
	if d.Events() != nil {
		t.Fatal("Events with a Listener is not nil")
	}
	startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}})
	expectEvent(t, events, Discovered, id)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.SetGroups("x"); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetGroups after Close = %v", err)
	}
}

func TestLookupDiscoveryConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  LookupDiscoveryConfig
	}{
		{"groups and all groups", LookupDiscoveryConfig{Groups: []string{"a"}, AllGroups: true}},
		{"bad group", LookupDiscoveryConfig{Groups: []string{"\xff"}}},
		{"ttl 300", LookupDiscoveryConfig{TTL: 300}},
		{"unknown interface", LookupDiscoveryConfig{Interfaces: []string{"nosuch0"}}},
		{"negative interval", LookupDiscoveryConfig{RequestInterval: -1}},
		{"response host with a nul", LookupDiscoveryConfig{ResponseHost: "a\x00b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewLookupDiscovery(tc.cfg)
			if err == nil {
				d.Close()
				t.Fatal("NewLookupDiscovery succeeded")
			}
			if !errors.Is(err, djinn.ErrInvalidArgument) {
				t.Fatalf("NewLookupDiscovery = %v, want invalid argument", err)
			}
		})
	}
}

// The manager reports a registrar found both by group and by locator once,
// and discards it only when both have let it go.
func TestManagerMergesGroupAndLocatorDiscovery(t *testing.T) {
	g := group(t, "g")
	id := djinn.NewID()
	r := startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}, AnnouncementInterval: 10 * time.Millisecond})
	other := startRegistrar(t, RegistrarConfig{Groups: []string{group(t, "other")}, DisableMulticast: true})
	m, err := NewLookupDiscoveryManager(LookupDiscoveryManagerConfig{
		Groups:   LookupDiscoveryConfig{Groups: []string{g}, Interfaces: []string{"lo"}, RequestInterval: 20 * time.Millisecond, AnnouncementInterval: quiet},
		Locators: LookupLocatorDiscoveryConfig{Locators: []Locator{r.Locator()}, RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond},
		Logger:   testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	expectEvent(t, m.Events(), Discovered, id)
	bothHold(t, m, id)
	if err := m.AddLocators(other.Locator()); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, m.Events(), Discovered, other.cfg.ServiceID)
	if got := m.Registrars(); len(got) != 2 {
		t.Fatalf("Registrars = %+v", got)
	}

	m.Discard(id)
	if e := expectEvent(t, m.Events(), Discarded, id); e.Reason != ByUser {
		t.Fatalf("reason %v, want ByUser", e.Reason)
	}
	expectEvent(t, m.Events(), Discovered, id) // again, by either side
	bothHold(t, m, id)

	// Dropped by locator discovery, kept by group discovery.
	if err := m.RemoveLocators(r.Locator()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &m.merges, "the locator side to let go", func(uint64) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.regs[id] != nil && m.regs[id].byLoc == 0
	})
	expectNoEvent(t, m.Events())
	if err := m.RemoveGroups(g); err != nil {
		t.Fatal(err)
	}
	if e := expectEvent(t, m.Events(), Discarded, id); e.Reason != NoInterest {
		t.Fatalf("reason %v, want NoInterest", e.Reason)
	}
	if got := m.Registrars(); len(got) != 1 || got[0].ServiceID != other.cfg.ServiceID {
		t.Fatalf("Registrars = %+v", got)
	}
	if err := m.SetAllGroups(); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, m.Events(), Discovered, id)
	if groups, all, err := m.Groups(); err != nil || !all || len(groups) != 0 {
		t.Fatalf("Groups = %v, %v, %v", groups, all, err)
	}
	if gs, ls := m.Stats(); gs.RequestsSent == 0 || ls.Attempts == 0 {
		t.Fatalf("Stats = %+v, %+v", gs, ls)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-m.Events(); ok {
		t.Fatal("event after Close")
	}
	if err := m.SetLocators(); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetLocators after Close = %v", err)
	}
}

// A registrar that group discovery finds unreachable (a communication
// discard) is discarded at once even though locator discovery holds it
// too: locator discovery lets it go and looks for it again, and finds it
// when it is back (DU.2.4.1, as River's manager chains the discard).
func TestManagerCommunicationDiscard(t *testing.T) {
	g := group(t, "g")
	id := djinn.NewID()
	r := startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}, AnnouncementInterval: 10 * time.Millisecond})
	loc := r.Locator()
	m, err := NewLookupDiscoveryManager(LookupDiscoveryManagerConfig{
		Groups:   LookupDiscoveryConfig{Groups: []string{g}, Interfaces: []string{"lo"}, AnnouncementInterval: 30 * time.Millisecond},
		Locators: LookupLocatorDiscoveryConfig{Locators: []Locator{loc}, RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond},
		Logger:   testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	expectEvent(t, m.Events(), Discovered, id)
	bothHold(t, m, id)
	crash(t, r)
	if e := expectEvent(t, m.Events(), Discarded, id); e.Reason != Unreachable {
		t.Fatalf("reason %v, want Unreachable", e.Reason)
	}
	if hasRegistrar(m.Registrars(), id) {
		t.Fatal("an unreachable registrar is still held")
	}
	// Back at the same address: locator discovery finds it again.
	startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{g}, ListenAddr: loc.Addr(), AnnouncementInterval: 10 * time.Millisecond})
	expectEvent(t, m.Events(), Discovered, id)
}

// bothHold waits until both of m's utilities hold registrar id.
func bothHold(t *testing.T, m *LookupDiscoveryManager, id djinn.ID) {
	t.Helper()
	waitFor(t, &m.merges, "both utilities to hold the registrar", func(uint64) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		r := m.regs[id]
		return r != nil && r.byGroup && r.byLoc == 1
	})
}

// Unicast honours its context.
func TestUnicastContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	loc, _ := NewLocator("127.0.0.1", ln.Addr().(*net.TCPAddr).Port)
	if _, err := Unicast(ctx, loc); err == nil {
		t.Fatal("Unicast of a silent server succeeded")
	}
	if c, ok := <-accepted; ok {
		c.Close()
	}
}
