package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/service"
)

// locatorOf returns the locator of the lookup service the client c is
// dialled to, once it answers unicast discovery.
func locatorOf(t *testing.T, c *client.Client) string {
	t.Helper()
	var loc string
	servertest.Eventually(t, "the lookup service's locator", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		r, err := c.Lookup(ctx)
		if err != nil {
			return false
		}
		info, err := r.Info(ctx)
		if err == nil {
			loc = info.Locator
		}
		return loc != ""
	})
	return loc
}

func findContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), servertest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// TestFind: every djinn service is found by type at a lookup service's
// locator, connected and of its kind; attributes narrow the search; a
// found service is of one kind only.
func TestFind(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	loc := locatorOf(t, servertest.Dial(t, srv.Addr()))
	ctx := findContext(t)
	at := client.AtLocators(loc)

	found, err := client.Find(ctx, service.TransactionManagerType, at)
	if err != nil {
		t.Fatal(err)
	}
	defer found.Close()
	mgr, err := found.TransactionManager()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := mgr.Create(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit at the found manager: %v", err)
	}
	if _, err := found.Mailbox(); !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), "is not a djinn.EventMailbox") {
		t.Errorf("a transaction manager as a mailbox: %v", err)
	}

	mb, err := client.Find(ctx, service.EventMailboxType, at)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	m, err := mb.Mailbox()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Register(ctx, time.Minute); err != nil {
		t.Errorf("register at the found mailbox: %v", err)
	}
	for typ, kind := range map[string]func(*client.Found) error{
		service.LeaseRenewalServiceType:    func(f *client.Found) error { _, err := f.RenewalService(); return err },
		service.LockServiceType:            func(f *client.Found) error { _, err := f.LockService(); return err },
		service.LookupDiscoveryServiceType: func(f *client.Found) error { _, err := f.LookupDiscovery(); return err },
		service.LandlordType:               func(*client.Found) error { return nil },
		service.KeyValueType:               func(*client.Found) error { return nil },
	} {
		f, err := client.Find(ctx, typ, at)
		if err != nil {
			t.Fatalf("find %s: %v", typ, err)
		}
		if err := kind(f); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
		f.Close()
	}

	// Attributes: the version the server was built as.
	info := service.EntryTemplate{Type: service.ServiceInfoType, Fields: []service.Field{{Name: "manufacturer", Value: service.NewString("djinn")}}}
	if f, err := client.Find(ctx, service.TransactionManagerType, at, client.Matching(info)); err != nil {
		t.Errorf("find by attribute: %v", err)
	} else {
		f.Close()
	}
	none := service.EntryTemplate{Type: service.ServiceInfoType, Fields: []service.Field{{Name: "manufacturer", Value: service.NewString("acme")}}}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = client.Find(short, service.TransactionManagerType, at, client.Matching(none))
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, djinn.ErrUnavailable) || !strings.Contains(err.Error(), "1 lookup services discovered") {
		t.Errorf("find what no lookup service holds: %v, want the deadline, saying how many lookup services it asked", err)
	}
}

// TestFindBadInput: bad arguments are refused at once, naming the value.
func TestFindBadInput(t *testing.T) {
	ctx := findContext(t)
	for _, tt := range []struct {
		name string
		typ  string
		opts []client.FindOption
		says string
	}{
		{"no type", "", []client.FindOption{client.InGroups("x")}, "no service type"},
		{"nowhere to look", service.TransactionManagerType, nil, "nowhere to look"},
		{"a bad locator", service.TransactionManagerType, []client.FindOption{client.AtLocators("http://x")}, "http://x"},
		{"a bad attribute template", service.TransactionManagerType, []client.FindOption{client.AtLocators("jini://127.0.0.1:1"),
			client.Matching(service.EntryTemplate{Type: ""})}, "type"},
	} {
		_, err := client.Find(ctx, tt.typ, tt.opts...)
		if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: %v, want an invalid argument saying %q", tt.name, err, tt.says)
		}
	}
}

// TestFindFollowsTheCluster: a service found in a cluster is reached
// through the cluster — its item names every member — so that when the
// member that registered it goes, the found client carries on at the
// others.
func TestFindFollowsTheCluster(t *testing.T) {
	t.Parallel()
	// Timeouts that keep leadership steady under the race detector and
	// parallel tests: the item names the members once the leader's joiner
	// has followed them.
	ss := servertest.StartCluster(t, 3, servertest.Steady)
	c := servertest.Dial(t, ss[0].Addr())
	ctx, cancel := context.WithTimeout(t.Context(), 2*servertest.Failover)
	defer cancel()
	var found *client.Found
	servertest.EventuallyWithin(t, servertest.Failover, "the transaction manager, naming every member", func() bool {
		// Every member serves discovery on its own port for as long as
		// it runs, so the locator read stays good when leadership moves.
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		f, err := client.Find(fctx, service.TransactionManagerType, client.AtLocators(locatorOf(t, c)))
		if errors.Is(err, djinn.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		var members string
		for _, e := range f.Item.Entries {
			if e.Type == service.ClusterType {
				v, _ := e.Get("members")
				members, _ = v.AsString()
			}
		}
		if strings.Count(members, ",") == 2 {
			found = f
			return true
		}
		f.Close()
		return false
	})
	defer found.Close()
	mgr, err := found.TransactionManager()
	if err != nil {
		t.Fatal(err)
	}
	// The member that registered the item goes: the one its reference
	// names, whether or not it still leads.
	var registrant *server.Server
	for _, s := range ss {
		if s.Addr() == found.Ref.Endpoint {
			registrant = s
		}
	}
	if registrant == nil {
		t.Fatalf("the item's reference names %s, no member of the cluster", found.Ref.Endpoint)
	}
	if err := registrant.Close(); err != nil {
		t.Fatal(err)
	}
	servertest.EventuallyWithin(t, servertest.Failover, "a transaction created through the found client after its member left", func() bool {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := mgr.Create(cctx, time.Minute)
		if err != nil && !errors.Is(err, djinn.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("create after the leader left: %v", err)
		}
		return err == nil
	})
}
