package lookup_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/discovery"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/lookup"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

func newJoinManager(t *testing.T, dm lookup.DiscoveryManagement, cfg lookup.JoinManagerConfig) *lookup.JoinManager {
	t.Helper()
	cfg.RetryMin, cfg.RetryMax = 10*time.Millisecond, 200*time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	m, err := lookup.NewJoinManager(dm, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Terminate() })
	return m
}

func registrarIDs(infos []discovery.RegistrarInfo) []djinn.ID {
	var out []djinn.ID
	for _, info := range infos {
		out = append(out, info.ServiceID)
	}
	return out
}

func sortedPair(a, b djinn.ID) []djinn.ID {
	if bytes.Compare(a[:], b[:]) > 0 {
		a, b = b, a
	}
	return []djinn.ID{a, b}
}

// TestJoinManagerJoinsEveryLookupService: the item is registered at every
// lookup service discovered, under one service id, generated once and
// reported once.
func TestJoinManagerJoinsEveryLookupService(t *testing.T) {
	s1, s2 := startLookup(t), startLookup(t)
	var reported []djinn.ID
	m := newJoinManager(t, discoverAt(t, s1, s2), lookup.JoinManagerConfig{
		Item:              lookup.Printer(djinn.ID{}, "laser"),
		ServiceIDListener: func(id djinn.ID) { reported = append(reported, id) },
	})
	id := m.ServiceID()
	if id.IsZero() || len(reported) != 1 || reported[0] != id {
		t.Fatalf("service id %s, reported %v: want one new id, reported once before NewJoinManager returned", id, reported)
	}
	servertest.Eventually(t, "the item at both lookup services", func() bool {
		return lookup.HasName(s1.found(t, id), "laser") && lookup.HasName(s2.found(t, id), "laser") && len(m.Registrars()) == 2
	})
	if got, want := registrarIDs(m.Registrars()), sortedPair(s1.id, s2.id); !slices.Equal(got, want) {
		t.Errorf("Registrars %v, want %v", got, want)
	}
	if m.Item().ID != id {
		t.Errorf("held item's id %s, want %s", m.Item().ID, id)
	}
	if len(reported) != 1 {
		t.Errorf("service id reported %d times", len(reported))
	}
}

// TestJoinManagerAttributes: attribute changes reach every registration
// before the call returns, bad ones change nothing, and lookup services
// joined later get the item as it is then.
func TestJoinManagerAttributes(t *testing.T) {
	s1, s2 := startLookup(t), startLookup(t)
	dm := discoverAt(t, s1)
	id := djinn.NewID()
	called := false
	m := newJoinManager(t, dm, lookup.JoinManagerConfig{Item: lookup.Printer(id, "laser"), ServiceIDListener: func(djinn.ID) { called = true }})
	if called || m.ServiceID() != id {
		t.Fatalf("service id %s (listener called: %v), want the item's %s and no call", m.ServiceID(), called, id)
	}
	servertest.Eventually(t, "the item at the first lookup service", func() bool { return s1.found(t, id) != nil })
	ctx := testContext(t)

	if err := m.AddAttributes(ctx, []service.Entry{lookup.NameEntry("added"), lookup.NameEntry("laser")}); err != nil {
		t.Fatal(err)
	}
	if it := s1.found(t, id); !lookup.HasName(it, "added") || !lookup.HasName(it, "laser") || len(it.Entries) != 2 {
		t.Errorf("after AddAttributes: %+v, want laser and added (the duplicate dropped)", it)
	}
	if err := m.ModifyAttributes(ctx, []service.EntryTemplate{lookup.NameTemplate("added")}, []service.Entry{lookup.NameEntry("modified")}); err != nil {
		t.Fatal(err)
	}
	if it, held := s1.found(t, id), m.Item(); !lookup.HasName(it, "modified") || lookup.HasName(it, "added") || !lookup.ItemsEqual(*it, held) {
		t.Errorf("after ModifyAttributes: registered %+v, held %+v: want the same, modified", it, held)
	}
	if err := m.SetAttributes(ctx, []service.Entry{lookup.NameEntry("set")}); err != nil {
		t.Fatal(err)
	}
	if it := s1.found(t, id); !lookup.HasName(it, "set") || len(it.Entries) != 1 {
		t.Errorf("after SetAttributes: %+v", it)
	}
	// A bad change is refused before anything is sent, naming the value.
	err := m.AddAttributes(ctx, []service.Entry{{Type: "", Fields: []service.Field{{Name: "x"}}}})
	if !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("AddAttributes with an entry without a type: %v, want InvalidArgument", err)
	}
	err = m.ModifyAttributes(ctx, []service.EntryTemplate{lookup.NameTemplate("set")}, nil)
	if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "1 templates") {
		t.Errorf("ModifyAttributes with a template and no change: %v, want InvalidArgument naming the counts", err)
	}
	if it := m.Item(); !lookup.HasName(&it, "set") || len(it.Entries) != 1 {
		t.Errorf("held item after refused changes: %+v", it)
	}

	// A lookup service discovered later gets the item as it is now.
	if err := dm.AddLocators(s2.loc); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the current item at the lookup service joined later", func() bool {
		it := s2.found(t, id)
		return lookup.HasName(it, "set") && len(it.Entries) == 1 && len(m.Registrars()) == 2
	})

	// Replace registers another reference and types everywhere.
	if err := m.Replace(ctx, service.Item{Service: []byte("127.0.0.1:10"), Types: []string{"Printer", "Scanner"}, Entries: []service.Entry{lookup.NameEntry("replaced")}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*lookupServer{s1, s2} {
		if it := s.found(t, id); it == nil || string(it.Service) != "127.0.0.1:10" || len(it.Types) != 2 || !lookup.HasName(it, "replaced") {
			t.Errorf("after Replace at %s: %+v", s.id, it)
		}
	}
	if err := m.Replace(ctx, lookup.Printer(djinn.NewID(), "other")); !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("Replace with another service id: %v, want InvalidArgument", err)
	}
}

// TestJoinManagerRenewsLeases: registrations outlive their leases because
// the manager renews them.
func TestJoinManagerRenewsLeases(t *testing.T) {
	s1, s2 := startLookup(t), startLookup(t)
	id := djinn.NewID()
	const lease = time.Second
	m := newJoinManager(t, discoverAt(t, s1, s2), lookup.JoinManagerConfig{Item: lookup.Printer(id, "laser"), LeaseDuration: lease})
	servertest.Eventually(t, "registered at both", func() bool {
		return m.RegistrationAt(s1.id) != nil && m.RegistrationAt(s2.id) != nil
	})
	first := map[djinn.ID]time.Time{}
	for _, s := range []*lookupServer{s1, s2} {
		reg := m.RegistrationAt(s.id)
		first[s.id] = reg.Lease.Expiration()
		if d := time.Until(first[s.id]); d > lease {
			t.Fatalf("lease at %s granted %v, want at most %v", s.id, d, lease)
		}
	}
	// Wait, without sleeping, until the first grants are well over.
	latest := later(first[s1.id], first[s2.id])
	servertest.Eventually(t, "the first leases to have ended", func() bool { return time.Now().After(latest.Add(lease)) })
	for _, s := range []*lookupServer{s1, s2} {
		reg := m.RegistrationAt(s.id)
		if reg == nil || !reg.Lease.Expiration().After(first[s.id]) {
			t.Errorf("lease at %s not renewed: %v", s.id, reg)
		}
		if s.found(t, id) == nil {
			t.Errorf("the item left %s: its lease was not renewed", s.id)
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// TestJoinManagerRegistersAgain: a registration the lookup service lost
// (its lease cancelled behind the manager's back) is made again, with the
// current attributes.
func TestJoinManagerRegistersAgain(t *testing.T) {
	s1 := startLookup(t)
	id := djinn.NewID()
	m := newJoinManager(t, discoverAt(t, s1), lookup.JoinManagerConfig{Item: lookup.Printer(id, "laser"), LeaseDuration: time.Second})
	servertest.Eventually(t, "registered", func() bool { return m.RegistrationAt(s1.id) != nil })
	ctx := testContext(t)
	if err := m.SetAttributes(ctx, []service.Entry{lookup.NameEntry("current")}); err != nil {
		t.Fatal(err)
	}
	lost := m.RegistrationAt(s1.id)
	if err := lost.Lease.Cancel(ctx, s1.c); err != nil {
		t.Fatal(err)
	}
	if s1.found(t, id) != nil {
		t.Fatal("the item is still registered after its lease was cancelled")
	}
	servertest.Eventually(t, "registered again", func() bool {
		reg := m.RegistrationAt(s1.id)
		return reg != nil && reg.Lease.Cookie() != lost.Lease.Cookie() && lookup.HasName(s1.found(t, id), "current")
	})
}

// TestJoinManagerLeavesDiscarded: a lookup service discovery discards is
// left, not fatal, and the others carry on; one whose locator was removed
// is left at once, its registration cancelled (the lease is an hour).
func TestJoinManagerLeavesDiscarded(t *testing.T) {
	s1, s2 := startLookup(t), startLookup(t)
	dm := discoverAt(t, s1, s2)
	id := djinn.NewID()
	m := newJoinManager(t, dm, lookup.JoinManagerConfig{Item: lookup.Printer(id, "laser"), LeaseDuration: time.Hour})
	servertest.Eventually(t, "joined both", func() bool { return len(m.Registrars()) == 2 })
	if err := dm.RemoveLocators(s2.loc); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the discarded lookup service left", func() bool {
		got := registrarIDs(m.Registrars())
		return len(got) == 1 && got[0] == s1.id
	})
	servertest.Eventually(t, "the registration at the discarded lookup service cancelled", func() bool { return s2.found(t, id) == nil })
	if err := m.SetAttributes(testContext(t), []service.Entry{lookup.NameEntry("after")}); err != nil {
		t.Fatal(err)
	}
	if !lookup.HasName(s1.found(t, id), "after") {
		t.Errorf("the remaining lookup service did not get the change: %+v", s1.found(t, id))
	}
}

// TestJoinManagerTerminate: Terminate cancels every registration, at once;
// it is idempotent and safe concurrently; later calls get lookup.ErrTerminated.
func TestJoinManagerTerminate(t *testing.T) {
	s1, s2 := startLookup(t), startLookup(t)
	id := djinn.NewID()
	m := newJoinManager(t, discoverAt(t, s1, s2), lookup.JoinManagerConfig{Item: lookup.Printer(id, "laser")})
	servertest.Eventually(t, "registered at both", func() bool { return len(m.Registrars()) == 2 })
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = m.Terminate() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Terminate %d: %v", i, err)
		}
	}
	select {
	case <-m.Done():
	default:
		t.Error("Done not closed after Terminate")
	}
	for _, s := range []*lookupServer{s1, s2} {
		if it := s.found(t, id); it != nil {
			t.Errorf("after Terminate the item is still at %s", s.id)
		}
	}
	if got := m.Registrars(); len(got) != 0 {
		t.Errorf("Registrars after Terminate: %v", got)
	}
	if err := m.AddAttributes(testContext(t), []service.Entry{lookup.NameEntry("late")}); !errors.Is(err, lookup.ErrTerminated) || !errors.Is(err, djinn.ErrUnavailable) {
		t.Errorf("AddAttributes after Terminate: %v, want lookup.ErrTerminated (Unavailable)", err)
	}
	if err := m.Terminate(); err != nil {
		t.Errorf("Terminate again: %v", err)
	}
}

// TestJoinManagerTerminateDuringRegister: a Register under way when
// Terminate is called lands at the lookup service, however long its
// answer takes: Terminate lets the call finish and cancels the
// registration it made, instead of cutting the call short and leaving an
// item it holds no lease of until the lease ends (a server that stopped
// while registering its key/value store left the store registered for
// minutes).
func TestJoinManagerTerminateDuringRegister(t *testing.T) {
	s1 := startLookup(t)
	id := djinn.NewID()
	m, answer := joinWithRegisterHeld(t, s1, discoverAt(t, s1), id)
	done := make(chan error, 1)
	go func() { done <- m.Terminate() }()
	servertest.Eventually(t, "Terminate under way", m.Terminating)
	close(answer)
	if err := <-done; err != nil {
		t.Errorf("Terminate: %v", err)
	}
	if it := s1.found(t, id); it != nil {
		t.Error("after Terminate the item a Register under way made is still at the lookup service")
	}
}

// TestJoinManagerLeavesDuringRegister: a lookup service no longer wanted
// (its locator removed) while a Register to it is under way is left once
// the call ends, and the registration the call made there is cancelled,
// instead of the call being cut short and its registration, unknown here,
// left there until its lease ended (an hour here).
func TestJoinManagerLeavesDuringRegister(t *testing.T) {
	s1 := startLookup(t)
	dm := discoverAt(t, s1)
	id := djinn.NewID()
	m, answer := joinWithRegisterHeld(t, s1, dm, id)
	if err := dm.RemoveLocators(s1.loc); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "the lookup service no longer wanted left", func() bool { return !m.Joining(s1.id) })
	close(answer)
	servertest.Eventually(t, "the registration the call under way made cancelled", func() bool { return s1.found(t, id) == nil })
	if got := m.Registrars(); len(got) != 0 {
		t.Errorf("registered at %v after its only lookup service was removed", got)
	}
}

// TestJoinManagerAbandon: Abandon stops the manager and leaves its
// registrations in place, and another manager with the same service id
// takes them over: the lookup services hold one item, the newer.
func TestJoinManagerAbandon(t *testing.T) {
	s1, s2 := startLookup(t), startLookup(t)
	id := djinn.NewID()
	m := newJoinManager(t, discoverAt(t, s1, s2), lookup.JoinManagerConfig{Item: lookup.Printer(id, "laser")})
	servertest.Eventually(t, "registered at both", func() bool { return len(m.Registrars()) == 2 })
	if err := m.Abandon(); err != nil {
		t.Fatalf("Abandon: %v", err)
	}
	select {
	case <-m.Done():
	default:
		t.Error("Done not closed after Abandon")
	}
	for _, s := range []*lookupServer{s1, s2} {
		if !lookup.HasName(s.found(t, id), "laser") {
			t.Errorf("after Abandon the item is gone from %s", s.id)
		}
	}
	if err := m.Terminate(); err != nil {
		t.Errorf("Terminate after Abandon: %v", err)
	}
	if !lookup.HasName(s1.found(t, id), "laser") {
		t.Error("Terminate after Abandon cancelled the registrations")
	}
	next := newJoinManager(t, discoverAt(t, s1, s2), lookup.JoinManagerConfig{Item: lookup.Printer(id, "inkjet")})
	servertest.Eventually(t, "the next manager's item at both", func() bool {
		return lookup.HasName(s1.found(t, id), "inkjet") && lookup.HasName(s2.found(t, id), "inkjet") && len(next.Registrars()) == 2
	})
	for _, s := range []*lookupServer{s1, s2} {
		total, _, err := s.r.LookupN(testContext(t), service.Template{ID: &id}, 10)
		if err != nil || total != 1 {
			t.Errorf("items with the service id at %s: %d, %v; want one", s.id, total, err)
		}
	}
}

// TestJoinManagerDiscardsMisnamedRegistrar: an endpoint that serves a
// lookup service with another service id than discovery reported is
// discarded, and nothing is registered there.
func TestJoinManagerDiscardsMisnamedRegistrar(t *testing.T) {
	s1 := startLookup(t)
	dm := newMemDiscovery()
	wrong := djinn.NewID()
	id := djinn.NewID()
	m := newJoinManager(t, dm, lookup.JoinManagerConfig{Item: lookup.Printer(id, "laser")})
	dm.events <- discovery.Event{Kind: discovery.Discovered, Registrar: discovery.RegistrarInfo{ServiceID: wrong, Endpoint: s1.srv.Addr()}}
	servertest.Eventually(t, "the misnamed registrar discarded", func() bool { return dm.wasDiscarded(wrong) })
	if s1.found(t, id) != nil || len(m.Registrars()) != 0 {
		t.Error("registered at a misnamed registrar")
	}
}

// TestJoinManagerConfigErrors: bad configurations are refused, naming the
// bad value.
func TestJoinManagerConfigErrors(t *testing.T) {
	dm := newMemDiscovery()
	ok := lookup.Printer(djinn.ID{}, "x")
	for _, tc := range []struct {
		name string
		dm   lookup.DiscoveryManagement
		cfg  lookup.JoinManagerConfig
		want string
	}{
		{"no discovery", nil, lookup.JoinManagerConfig{Item: ok}, "discovery management: missing"},
		{"discovery reporting to a function", &memDiscovery{}, lookup.JoinManagerConfig{Item: ok}, "no event channel"},
		{"item without reference", dm, lookup.JoinManagerConfig{Item: service.Item{Types: []string{"T"}}}, "service reference"},
		{"negative lease", dm, lookup.JoinManagerConfig{Item: ok, LeaseDuration: -5}, "lease duration"},
		{"retry bounds", dm, lookup.JoinManagerConfig{Item: ok, RetryMin: time.Second, RetryMax: time.Millisecond}, "retry bounds"},
		{"bad entry", dm, lookup.JoinManagerConfig{Item: service.Item{Service: []byte("a:1"), Types: []string{"T"}, Entries: []service.Entry{{}}}}, "type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := lookup.NewJoinManager(tc.dm, tc.cfg)
			if err == nil {
				m.Terminate()
			}
			if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewJoinManager: %v, want InvalidArgument naming %q", err, tc.want)
			}
		})
	}
}

// TestJoinManagerCheckTakesItsItemBack: a registration of the same service
// id made elsewhere (a deposed cluster leader's late Register) replaces the
// manager's; Check finds its lease gone and the item is registered again,
// long before the hour-long lease would need renewing.
func TestJoinManagerCheckTakesItsItemBack(t *testing.T) {
	s1 := startLookup(t)
	id := djinn.NewID()
	m := newJoinManager(t, discoverAt(t, s1), lookup.JoinManagerConfig{Item: lookup.Printer(id, "inkjet"), LeaseDuration: time.Hour})
	servertest.Eventually(t, "registered", func() bool { return m.RegistrationAt(s1.id) != nil })
	ctx := testContext(t)
	replaced := m.RegistrationAt(s1.id)
	if _, err := s1.r.Register(ctx, lookup.Printer(id, "laser"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if !lookup.HasName(s1.found(t, id), "laser") {
		t.Fatal("the late registration did not replace the item")
	}
	m.Check(ctx)
	servertest.Eventually(t, "the manager's item back", func() bool {
		reg := m.RegistrationAt(s1.id)
		return reg != nil && reg.Lease.Cookie() != replaced.Lease.Cookie() && lookup.HasName(s1.found(t, id), "inkjet")
	})
	kept := m.RegistrationAt(s1.id)
	m.Check(ctx)
	if reg := m.RegistrationAt(s1.id); reg != kept {
		t.Error("Check registered again a registration that stands")
	}
}

// joinWithRegisterHeld starts a join manager of printer id (an hour's
// lease) at the lookup services dm discovers, s the first, and returns
// once its first Register reached s: that call's answer is held until
// answer is closed or the caller gives up, so it is under way.
func joinWithRegisterHeld(t *testing.T, s *lookupServer, dm *discovery.LookupDiscoveryManager, id djinn.ID) (m *lookup.JoinManager, answer chan struct{}) {
	t.Helper()
	landed := make(chan struct{})
	answer = make(chan struct{})
	var held atomic.Bool
	hold := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method != djinnpb.LookupService_Register_FullMethodName || !held.CompareAndSwap(false, true) {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		err := invoker(context.WithoutCancel(ctx), method, req, reply, cc, opts...)
		close(landed)
		select {
		case <-answer:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m = newJoinManager(t, dm, lookup.JoinManagerConfig{Item: lookup.Printer(id, "laser"), LeaseDuration: time.Hour,
		DialOptions: []client.Option{client.WithDialOptions(grpc.WithChainUnaryInterceptor(hold))}})
	select {
	case <-landed:
	case <-testContext(t).Done():
		t.Fatal("no registration reached the lookup service")
	}
	if s.found(t, id) == nil {
		t.Fatal("the registration under way is not at the lookup service")
	}
	return m, answer
}
