package join

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
)

// lookupServer starts a server whose lookup service answers unicast
// discovery at the returned locator.
func lookupServer(t *testing.T) (*server.Server, discovery.Locator) {
	t.Helper()
	cfg := servertest.Config(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Lookup.Discovery = l.Addr().String()
	l.Close()
	srv := servertest.Start(t, cfg)
	loc, err := discovery.ParseLocator("jini://" + cfg.Lookup.Discovery)
	if err != nil {
		t.Fatal(err)
	}
	return srv, loc
}

func registrar(t *testing.T, srv *server.Server) *client.Registrar {
	t.Helper()
	c := servertest.Dial(t, srv.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	r, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// found returns the item id has at r, nil when it has none.
func found(t *testing.T, r *client.Registrar, id djinn.ID) *client.ServiceItem {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	_, items, err := r.LookupN(ctx, client.ServiceTemplate{ID: &id}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) == 0 {
		return nil
	}
	return &items[0]
}

func name(v string) client.Entry {
	return client.Entry{Type: "Name", Fields: []client.Field{{Name: "name", Value: client.NewString(v)}}}
}

func hasName(it *client.ServiceItem, v string) bool {
	return it != nil && slices.ContainsFunc(it.Entries, func(e client.Entry) bool {
		got, ok := e.Get("name")
		return e.Type == "Name" && ok && got == client.NewString(v)
	})
}

// TestJoinManager: the item is registered, with one service id, at every
// lookup service discovered; attribute changes reach every registration;
// leases are renewed past their length; a registration the lookup service
// lost is made again; Terminate cancels every lease.
func TestJoinManager(t *testing.T) {
	s1, loc1 := lookupServer(t)
	s2, loc2 := lookupServer(t)
	r1, r2 := registrar(t, s1), registrar(t, s2)
	dm, err := discovery.NewLookupDiscoveryManager(discovery.LookupDiscoveryManagerConfig{DisableMulticast: true,
		Locators: discovery.LookupLocatorDiscoveryConfig{Locators: []discovery.Locator{loc1, loc2}, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()

	var assigned []djinn.ID
	const lease = 600 * time.Millisecond
	m, err := New(Config{Discovery: dm, Item: client.ServiceItem{Service: []byte("127.0.0.1:9"), Types: []string{"Printer"}, Entries: []client.Entry{name("laser")}},
		LeaseDuration: lease, ServiceID: func(id djinn.ID) { assigned = append(assigned, id) }, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Terminate()
	id := m.ServiceID()
	if len(assigned) != 1 || assigned[0] != id || id.IsZero() {
		t.Fatalf("assigned ids %v, ServiceID %s: want one, reported once", assigned, id)
	}
	servertest.Eventually(t, "registered at both lookup services, one service id", func() bool {
		return hasName(found(t, r1, id), "laser") && hasName(found(t, r2, id), "laser") && len(m.Registrars()) == 2
	})

	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	if err := m.AddAttributes(ctx, []client.Entry{name("added")}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*client.Registrar{r1, r2} {
		if it := found(t, r, id); !hasName(it, "added") || !hasName(it, "laser") {
			t.Errorf("after add: %+v", it)
		}
	}
	err = m.ModifyAttributes(ctx, []client.EntryTemplate{{Type: "Name", Fields: []client.Field{{Name: "name", Value: client.NewString("added")}}}}, []client.Entry{name("modified")})
	if err != nil {
		t.Fatal(err)
	}
	if !hasName(found(t, r1, id), "modified") || !hasName(found(t, r2, id), "modified") || !hasName(ptr(m.Item()), "modified") || hasName(ptr(m.Item()), "added") {
		t.Errorf("after modify: %+v, %+v; held %+v", found(t, r1, id), found(t, r2, id), m.Item())
	}
	if err := m.SetAttributes(ctx, []client.Entry{name("set")}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*client.Registrar{r1, r2} {
		if it := found(t, r, id); !hasName(it, "set") || len(it.Entries) != 1 {
			t.Errorf("after set: %+v", it)
		}
	}

	// The leases last 600 ms: the item stays registered for several of
	// them only if they are renewed.
	deadline := time.Now().Add(4 * lease)
	for time.Now().Before(deadline) {
		if found(t, r1, id) == nil || found(t, r2, id) == nil {
			t.Fatalf("the item's registration lapsed: leases not renewed")
		}
		servertest.Poll(lease/4, func() bool { return false })
	}

	// The lookup service loses the registration (its lease cancelled
	// behind the manager's back): the manager registers again, with the
	// current attributes.
	m.mu.Lock()
	var lost *joining
	for _, j := range m.joined {
		if j.info.Endpoint == s1.Addr() {
			lost = j
		}
	}
	reg, c := lost.reg, lost.c
	m.mu.Unlock()
	if err := reg.Lease.Cancel(ctx, c); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "registered again after the registration was lost", func() bool {
		m.mu.Lock()
		again := lost.reg != nil && lost.reg != reg
		m.mu.Unlock()
		return again && hasName(found(t, r1, id), "set")
	})

	if err := m.Terminate(); err != nil {
		t.Fatal(err)
	}
	if found(t, r1, id) != nil || found(t, r2, id) != nil {
		t.Errorf("after Terminate the item is still registered")
	}
	if err := m.Terminate(); err != nil {
		t.Errorf("second Terminate: %v", err)
	}
	if err := m.SetAttributes(ctx, nil); !errors.Is(err, djinn.ErrUnavailable) {
		t.Errorf("SetAttributes after Terminate: %v, want Unavailable", err)
	}
}

func ptr(it client.ServiceItem) *client.ServiceItem { return &it }

// TestJoinManagerDiscard: a discarded lookup service is left (Registrars
// drops it), and joined again when it is rediscovered; lookup services
// found later get the current attributes.
func TestJoinManagerDiscard(t *testing.T) {
	s1, loc1 := lookupServer(t)
	r1 := registrar(t, s1)
	dm, err := discovery.NewLookupDiscoveryManager(discovery.LookupDiscoveryManagerConfig{DisableMulticast: true,
		Locators: discovery.LookupLocatorDiscoveryConfig{Locators: []discovery.Locator{loc1}, RetryMin: 10 * time.Millisecond, RetryMax: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()
	m, err := New(Config{Discovery: dm, Item: client.ServiceItem{ID: djinn.NewID(), Service: []byte("127.0.0.1:8"), Types: []string{"Scanner"}}, RetryMin: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Terminate()
	id := m.ServiceID()
	servertest.Eventually(t, "joined", func() bool { return len(m.Registrars()) == 1 })
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	defer cancel()
	if err := m.ModifyAttributes(ctx, nil, nil); err != nil {
		t.Fatalf("modify with no templates: %v", err)
	}
	regID := m.Registrars()[0].ServiceID
	dm.Discard(regID)
	// Offline changes reach the lookup service when it is joined again.
	if err := m.SetAttributes(ctx, []client.Entry{name("later")}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "joined again after the discard, with the current attributes", func() bool {
		return len(m.Registrars()) == 1 && hasName(found(t, r1, id), "later")
	})
}

// TestJoinConfigErrors: bad configurations are refused with the value named.
func TestJoinConfigErrors(t *testing.T) {
	dm, err := discovery.NewLookupDiscoveryManager(discovery.LookupDiscoveryManagerConfig{DisableMulticast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dm.Close()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Item: client.ServiceItem{Service: []byte("a:1"), Types: []string{"T"}}}, "discovery source"},
		{Config{Discovery: dm, Item: client.ServiceItem{Types: []string{"T"}}}, "no service reference"},
		{Config{Discovery: dm, Item: client.ServiceItem{Service: []byte("a:1")}}, "no service types"},
		{Config{Discovery: dm, Item: client.ServiceItem{Service: []byte("a:1"), Types: []string{"T"}}, LeaseDuration: -5}, "lease duration"},
	} {
		if _, err := New(tc.cfg); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v): %v, want InvalidArgument naming %q", tc.cfg, err, tc.want)
		}
	}
}
