package discovery

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
)

// freeLocator returns a loopback locator where nothing listens now.
func freeLocator(t *testing.T) Locator {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	loc, err := NewLocator("127.0.0.1", port)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func startLocatorDiscovery(t *testing.T, cfg LookupLocatorDiscoveryConfig) *LookupLocatorDiscovery {
	t.Helper()
	if cfg.RetryMin == 0 {
		cfg.RetryMin, cfg.RetryMax = 5*time.Millisecond, 20*time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t).With("side", "client")
	}
	d, err := NewLookupLocatorDiscovery(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Locator discovery retries a locator until a registrar starts there, then
// reports it; removing the locator discards it.
func TestLocatorDiscoveryRetriesUntilRegistrarStarts(t *testing.T) {
	loc := freeLocator(t)
	d := startLocatorDiscovery(t, LookupLocatorDiscoveryConfig{Locators: []Locator{loc}})
	waitFor(t, &d.stats, "failed attempts", func(s LookupLocatorDiscoveryStats) bool { return s.Failures >= 3 })
	expectNoEvent(t, d.Events())

	id := djinn.NewID()
	r := startRegistrar(t, RegistrarConfig{ServiceID: id, Groups: []string{"g"}, ListenAddr: loc.Addr(), DisableMulticast: true})
	e := expectEvent(t, d.Events(), Discovered, id)
	want := RegistrarInfo{ServiceID: id, Groups: []string{"g"}, Endpoint: "127.0.0.1:7000", Locator: r.Locator()}
	if !e.Registrar.sameAs(want) {
		t.Fatalf("discovered %+v, want %+v", e.Registrar, want)
	}
	if got := d.Registrars(); len(got) != 1 || got[0].ServiceID != id {
		t.Fatalf("Registrars = %+v", got)
	}
	// Discovered once: no more attempts.
	attempts := d.Stats().Attempts

	if err := d.RemoveLocators(loc); err != nil {
		t.Fatal(err)
	}
	if e := expectEvent(t, d.Events(), Discarded, id); e.Reason != Removed {
		t.Fatalf("reason %v, want Removed", e.Reason)
	}
	if len(d.Locators()) != 0 || len(d.Registrars()) != 0 {
		t.Fatalf("after removal: locators %v, registrars %v", d.Locators(), d.Registrars())
	}
	if got := d.Stats().Attempts; got != attempts {
		t.Errorf("%d attempts after discovery, want none", got-attempts)
	}
}

// Discard starts discovery of the locator over, which finds the registrar
// again; two locators of one registrar give one event each.
func TestLocatorDiscoveryDiscardRearms(t *testing.T) {
	id := djinn.NewID()
	r := startRegistrar(t, RegistrarConfig{ServiceID: id, DisableMulticast: true})
	byName := Locator{Host: "localhost", Port: r.Locator().Port}
	d := startLocatorDiscovery(t, LookupLocatorDiscoveryConfig{Locators: []Locator{r.Locator()}})
	expectEvent(t, d.Events(), Discovered, id)
	if err := d.AddLocators(byName, r.Locator()); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, d.Events(), Discovered, id)
	if got := d.Registrars(); len(got) != 1 {
		t.Fatalf("Registrars = %+v, want one", got)
	}

	d.Discard(id)
	for range 2 {
		if e := expectEvent(t, d.Events(), Discarded, id); e.Reason != ByUser {
			t.Fatalf("reason %v, want ByUser", e.Reason)
		}
	}
	expectEvent(t, d.Events(), Discovered, id)
	expectEvent(t, d.Events(), Discovered, id)

	if err := d.SetLocators(byName); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, d.Events(), Discarded, id)
	if got := d.Locators(); !slices.Equal(got, []Locator{byName}) {
		t.Fatalf("Locators = %v", got)
	}
}

func TestLocatorDiscoveryCloseWhileRetrying(t *testing.T) {
	d := startLocatorDiscovery(t, LookupLocatorDiscoveryConfig{Locators: []Locator{freeLocator(t), freeLocator(t)}})
	waitFor(t, &d.stats, "failed attempts", func(s LookupLocatorDiscoveryStats) bool { return s.Failures >= 2 })
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-d.Events(); ok {
		t.Fatal("event after Close")
	}
	if err := d.AddLocators(freeLocator(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddLocators after Close = %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLocatorDiscoveryRefusesNonCanonicalLocators(t *testing.T) {
	_, err := NewLookupLocatorDiscovery(LookupLocatorDiscoveryConfig{Locators: []Locator{{Host: "LookUp.Example.com", Port: 4160}}})
	if !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("NewLookupLocatorDiscovery = %v, want invalid argument", err)
	}
}

func TestParseSeeds(t *testing.T) {
	got, err := ParseSeeds("jini://a.example.com", "b.example.com:4161", "10.0.0.1", "[::1]:99", "::2", "A.example.com:4160")
	if err != nil {
		t.Fatal(err)
	}
	want := []Locator{{Host: "a.example.com", Port: 4160}, {Host: "b.example.com", Port: 4161}, {Host: "10.0.0.1", Port: 4160}, {Host: "::1", Port: 99}, {Host: "::2", Port: 4160}}
	if !slices.Equal(got, want) {
		t.Fatalf("ParseSeeds = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "http://x", "host:0", "host:99999", "a_b"} {
		if _, err := ParseSeeds(bad); !errors.Is(err, djinn.ErrInvalidArgument) {
			t.Errorf("ParseSeeds(%q) = %v, want invalid argument", bad, err)
		}
	}
}

// fakeResolver answers SRV lookups from a table it can change, and counts
// them.
type fakeResolver struct {
	mu      sync.Mutex
	records []*net.SRV // guarded by mu
	err     error      // guarded by mu
	last    string     // guarded by mu: the last name looked up
	calls   counters[int]
}

func (f *fakeResolver) set(err error, records ...*net.SRV) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records, f.err = records, err
}

func (f *fakeResolver) LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error) {
	f.mu.Lock()
	records, err := f.records, f.err
	f.last = "_" + service + "._" + proto + "." + name
	f.mu.Unlock()
	f.calls.add(func(n *int) { *n++ })
	return "", records, err
}

var _ SRVResolver = (*fakeResolver)(nil)

func TestLookupSRV(t *testing.T) {
	ctx := context.Background()
	f := &fakeResolver{}
	f.set(nil,
		&net.SRV{Target: "b.example.com.", Port: 4160, Priority: 10, Weight: 5},
		&net.SRV{Target: "a.example.com.", Port: 4161, Priority: 20, Weight: 1},
		&net.SRV{Target: "c.example.com.", Port: 4160, Priority: 10, Weight: 50},
		&net.SRV{Target: "b.example.com.", Port: 4160, Priority: 30, Weight: 5},
	)
	got, err := LookupSRV(ctx, f, "example.com.")
	if err != nil {
		t.Fatal(err)
	}
	want := []Locator{{Host: "c.example.com", Port: 4160}, {Host: "b.example.com", Port: 4160}, {Host: "a.example.com", Port: 4161}}
	if !slices.Equal(got, want) {
		t.Fatalf("LookupSRV = %v, want %v", got, want)
	}

	f.set(nil, &net.SRV{Target: ".", Port: 0})
	if got, err := LookupSRV(ctx, f, "example.com"); err != nil || len(got) != 0 {
		t.Fatalf("service not available: LookupSRV = %v, %v; want none", got, err)
	}
	f.set(errors.New("no such host"))
	if _, err := LookupSRV(ctx, f, "example.com"); !errors.Is(err, djinn.ErrUnavailable) {
		t.Fatalf("failing resolver: LookupSRV = %v, want unavailable", err)
	}
	f.set(nil, &net.SRV{Target: "bad_host.", Port: 1})
	if _, err := LookupSRV(ctx, f, "example.com"); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("bad target: LookupSRV = %v, want invalid argument", err)
	}
	if _, err := LookupSRV(ctx, f, ""); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Fatalf("empty domain: LookupSRV = %v, want invalid argument", err)
	}
}

// The manager follows the SRV records: a registrar named there is
// discovered, and discarded when the records drop it.
func TestManagerFollowsSRVRecords(t *testing.T) {
	id := djinn.NewID()
	r := startRegistrar(t, RegistrarConfig{ServiceID: id, DisableMulticast: true})
	f := &fakeResolver{}
	f.set(nil, &net.SRV{Target: "127.0.0.1.", Port: uint16(r.Locator().Port)})
	m, err := NewLookupDiscoveryManager(LookupDiscoveryManagerConfig{
		DisableMulticast: true,
		Locators:         LookupLocatorDiscoveryConfig{RetryMin: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond},
		SRVDomain:        "example.com",
		SRVInterval:      10 * time.Millisecond,
		Resolver:         f,
		Logger:           testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	expectEvent(t, m.Events(), Discovered, id)
	f.mu.Lock()
	if f.last != "_jini._tcp.example.com" {
		t.Fatalf("looked up %q", f.last)
	}
	f.mu.Unlock()

	f.set(errors.New("temporary failure"))
	n := f.calls.get()
	// Two more lookups: the second began after the failure was set, and
	// the first ended before it, so one failure was handled.
	waitFor(t, &f.calls, "lookups", func(c int) bool { return c >= n+3 })
	if got := m.Locators(); len(got) != 1 {
		t.Fatalf("after a failed lookup: Locators = %v, want the last ones kept", got)
	}
	f.set(nil)
	if e := expectEvent(t, m.Events(), Discarded, id); e.Reason != Removed {
		t.Fatalf("reason %v, want Removed", e.Reason)
	}
	if _, _, err := m.Groups(); !errors.Is(err, ErrMulticastDisabled) {
		t.Fatalf("Groups without multicast = %v", err)
	}
	if err := m.AddGroups("x"); !errors.Is(err, ErrMulticastDisabled) {
		t.Fatalf("AddGroups without multicast = %v", err)
	}
}
