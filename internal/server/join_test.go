package server_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// clusterTypes are the types the cluster's services register under, by
// service name; the key/value store, a service of each node, is apart.
var clusterTypes = map[string]string{
	"landlord": service.LandlordType, "mailbox": service.EventMailboxType, "renewal": service.LeaseRenewalServiceType,
	"txn": service.TransactionManagerType, "lock": service.LockServiceType, "lds": service.LookupDiscoveryServiceType,
}

// byType returns the items of type typ a lookup service holds.
func byType(t *testing.T, r *client.Registrar, typ string, entries ...service.EntryTemplate) []service.Item {
	t.Helper()
	items, err := lookupType(t, r, typ, entries...)
	if err != nil {
		t.Fatalf("lookup %s: %v", typ, err)
	}
	return items
}

// lookupType is byType for a lookup service that may be between leaders.
func lookupType(t *testing.T, r *client.Registrar, typ string, entries ...service.EntryTemplate) ([]service.Item, error) {
	_, items, err := r.LookupN(testContext(t), service.Template{Types: []string{typ}, Entries: entries}, 100)
	return items, err
}

// between reports whether err says a cluster is between leaders: a poll
// asks again.
func between(t *testing.T, err error) bool {
	t.Helper()
	if err != nil && !errors.Is(err, djinn.ErrUnavailable) {
		t.Fatal(err)
	}
	return err != nil
}

// ofCluster matches the items of the cluster whose service id is id.
func ofCluster(id djinn.ID) service.EntryTemplate {
	return service.EntryTemplate{Type: service.ClusterType, Fields: []service.Field{{Name: "cluster", Value: service.NewString(id.String())}}}
}

// field returns the string field name of it's entry of type typ.
func field(it service.Item, typ, name string) string {
	for _, e := range it.Entries {
		if e.Type == typ {
			v, _ := e.Get(name)
			s, _ := v.AsString()
			return s
		}
	}
	return ""
}

// joined waits until r holds one item of each cluster service of the
// cluster id and as many key/value stores as one of kvs says, and returns
// them by service name (the key/value stores as kv/NODE).
func joined(t *testing.T, r *client.Registrar, id djinn.ID, kvs ...int) map[string]service.Item {
	t.Helper()
	var out map[string]service.Item
	var seen []string // what the last look found, for the failure
	ok := servertest.Poll(servertest.Failover, func() bool {
		out, seen = map[string]service.Item{}, nil
		for name, typ := range clusterTypes {
			items, err := lookupType(t, r, typ, ofCluster(id))
			if between(t, err) {
				seen = append(seen, err.Error())
				return false
			}
			seen = append(seen, fmt.Sprintf("%s: %d", name, len(items)))
			if len(items) != 1 {
				return false
			}
			out[name] = items[0]
		}
		items, err := lookupType(t, r, service.KeyValueType, ofCluster(id))
		if between(t, err) {
			seen = append(seen, err.Error())
			return false
		}
		var nodes []string
		for _, it := range items {
			node := field(it, service.ClusterType, "node")
			out["kv/"+node], nodes = it, append(nodes, node)
		}
		slices.Sort(nodes)
		seen = append(seen, fmt.Sprintf("kv: %d (nodes %s)", len(items), strings.Join(nodes, ", ")))
		return slices.Contains(kvs, len(items))
	})
	if !ok {
		t.Fatalf("waited %v for one item of each service of cluster %s and %v key/value stores; the last look found %v", servertest.Failover, id, kvs, seen)
	}
	return out
}

// refOf reads an item's service reference.
func refOf(t *testing.T, it service.Item) djinn.Ref {
	t.Helper()
	ref, err := djinn.ParseRef(string(it.Service))
	if err != nil {
		t.Fatalf("item %s: reference %q: %v", it.ID, it.Service, err)
	}
	return ref
}

// TestJoinEveryService: every service of a server registers in its lookup
// service, found by its djinn type and by the Jini type it implements,
// with its reference, a ServiceInfo and the cluster it belongs to.
func TestJoinEveryService(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	c := servertest.Dial(t, srv.Addr())
	ctx := testContext(t)
	r, err := c.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := servertest.Status(djinnpb.NewAdminClient(c.ClientConn()))
	if err != nil {
		t.Fatal(err)
	}
	cluster := c.ServiceID()
	items := joined(t, r, cluster, 1)
	refs := map[string]*djinnpb.Ref{"landlord": st.GetLandlord(), "mailbox": st.GetMailbox(), "renewal": st.GetRenewal(),
		"txn": st.GetTxn(), "lock": st.GetLock(), "lds": st.GetLds()}
	for name, want := range refs {
		it := items[name]
		ref := refOf(t, it)
		if ref.Service != cluster || string(ref.Object[:]) != string(want.GetObjectId()) || ref.Endpoint != srv.Advertise() {
			t.Errorf("%s: reference %s, want the cluster's service %s object %x at %s", name, ref, cluster, want.GetObjectId(), srv.Advertise())
		}
		if it.ID == cluster || it.ID.IsZero() {
			t.Errorf("%s: service id %s, want one of its own", name, it.ID)
		}
		if got := field(it, service.ServiceInfoType, "manufacturer"); got != "djinn" || !strings.HasPrefix(field(it, service.ServiceInfoType, "name"), "djinn ") ||
			field(it, service.ServiceInfoType, "version") == "" {
			t.Errorf("%s: ServiceInfo %v", name, it.Entries)
		}
		if got := field(it, service.ClusterType, "members"); got != srv.Advertise() {
			t.Errorf("%s: members %q, want %s", name, got, srv.Advertise())
		}
	}
	kv := items["kv/"+srv.NodeID()]
	if ref := refOf(t, kv); kv.ID != ref.Service || ref.Endpoint != srv.Advertise() {
		t.Errorf("kv: item %s with reference %s, want the participant's own service id, at %s", kv.ID, ref, srv.Advertise())
	}
	for typ, name := range map[string]string{
		"net.jini.core.transaction.server.TransactionManager":     "txn",
		"net.jini.event.EventMailbox":                             "mailbox",
		"net.jini.lease.LeaseRenewalService":                      "renewal",
		"net.jini.discovery.LookupDiscoveryService":               "lds",
		"djinn.v1.LockService":                                    "lock",
		"net.jini.core.transaction.server.TransactionParticipant": "kv/" + srv.NodeID(),
	} {
		if got := byType(t, r, typ, ofCluster(cluster)); len(got) != 1 || got[0].ID != items[name].ID {
			t.Errorf("found as %s: %d items, want %s's", typ, len(got), name)
		}
	}
	// The items' ids are the cluster's for good: a restart keeps them.
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := servertest.Config(t)
	cfg.DataDir = srv.DataDir()
	again := servertest.Start(t, cfg)
	c2 := servertest.Dial(t, again.Addr())
	r2, err := c2.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := joined(t, r2, cluster, 1)
	for name, it := range items {
		if after[name].ID != it.ID {
			t.Errorf("%s: service id %s after a restart, was %s", name, after[name].ID, it.ID)
		}
	}
}

// TestJoinAdminNeedsOperator: JoinAdmin reads are any authenticated
// caller's; every change needs the operator role, and is refused without
// it, changing nothing.
func TestJoinAdminNeedsOperator(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	anyone := djinnpb.NewJoinAdminClient(servertest.Dial(t, srv.Addr()).ClientConn())
	op := djinnpb.NewJoinAdminClient(servertest.Dial(t, srv.Addr(), servertest.Operator(t, srv)).ClientConn())
	ctx := testContext(t)
	svc := &djinnpb.JoinServiceRequest{Service: "txn"}
	groups := &djinnpb.JoinGroupsRequest{Service: "txn", Groups: []string{"ops"}}
	locs := &djinnpb.JoinLocatorsRequest{Service: "txn", Locators: []string{"jini://127.0.0.1:9"}}
	attrs := &djinnpb.JoinAttributesRequest{Service: "txn", Attributes: wire.Entries([]service.Entry{nameEntry("tm")})}
	modify := &djinnpb.JoinModifyRequest{Service: "txn", Templates: []*djinnpb.EntryTemplate{{Type: "Name"}}, Changes: []*djinnpb.Entry{{}}}
	changes := map[string]func(djinnpb.JoinAdminClient) error{
		"ResetJoin":              func(a djinnpb.JoinAdminClient) error { _, err := a.ResetJoin(ctx, svc); return err },
		"AddLookupGroups":        func(a djinnpb.JoinAdminClient) error { _, err := a.AddLookupGroups(ctx, groups); return err },
		"RemoveLookupGroups":     func(a djinnpb.JoinAdminClient) error { _, err := a.RemoveLookupGroups(ctx, groups); return err },
		"SetLookupGroups":        func(a djinnpb.JoinAdminClient) error { _, err := a.SetLookupGroups(ctx, groups); return err },
		"AddLookupLocators":      func(a djinnpb.JoinAdminClient) error { _, err := a.AddLookupLocators(ctx, locs); return err },
		"RemoveLookupLocators":   func(a djinnpb.JoinAdminClient) error { _, err := a.RemoveLookupLocators(ctx, locs); return err },
		"SetLookupLocators":      func(a djinnpb.JoinAdminClient) error { _, err := a.SetLookupLocators(ctx, locs); return err },
		"AddLookupAttributes":    func(a djinnpb.JoinAdminClient) error { _, err := a.AddLookupAttributes(ctx, attrs); return err },
		"ModifyLookupAttributes": func(a djinnpb.JoinAdminClient) error { _, err := a.ModifyLookupAttributes(ctx, modify); return err },
		"SetLookupAttributes":    func(a djinnpb.JoinAdminClient) error { _, err := a.SetLookupAttributes(ctx, attrs); return err },
	}
	for name, call := range changes {
		err := call(anyone)
		if !errors.Is(err, djinn.ErrPermissionDenied) || !strings.Contains(err.Error(), "operator") {
			t.Errorf("%s without the operator role: %v, want PermissionDenied naming the role", name, err)
		}
	}
	g, err := anyone.GetLookupGroups(ctx, svc)
	if err != nil || !slices.Equal(g.GetGroups(), []string{""}) || !g.GetConfigured() {
		t.Fatalf("GetLookupGroups: %v, %v; want the configuration's public group, untouched", g, err)
	}
	if _, err := anyone.ListJoins(ctx, &djinnpb.ListJoinsRequest{}); err != nil {
		t.Errorf("ListJoins: %v", err)
	}
	if _, err := anyone.GetLookupLocators(ctx, svc); err != nil {
		t.Errorf("GetLookupLocators: %v", err)
	}
	if _, err := anyone.GetLookupAttributes(ctx, svc); err != nil {
		t.Errorf("GetLookupAttributes: %v", err)
	}
	for name, call := range changes {
		if err := call(op); err != nil {
			t.Errorf("%s as the operator: %v", name, err)
		}
	}
}

func nameEntry(v string) service.Entry {
	return service.Entry{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString(v)}}}
}

// TestJoinAdminBadInput: bad arguments are refused naming the bad value.
func TestJoinAdminBadInput(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, servertest.Config(t))
	op := djinnpb.NewJoinAdminClient(servertest.Dial(t, srv.Addr(), servertest.Operator(t, srv)).ClientConn())
	ctx := testContext(t)
	for _, tt := range []struct {
		name string
		call func() error
		says string
	}{
		{"no such service", func() error {
			_, err := op.GetLookupGroups(ctx, &djinnpb.JoinServiceRequest{Service: "printer"})
			return err
		}, `service "printer": no such service joins lookup services; those that do are landlord, mailbox, renewal, txn, lock, lds, kv`},
		{"a locator that is not one", func() error {
			_, err := op.AddLookupLocators(ctx, &djinnpb.JoinLocatorsRequest{Service: "txn", Locators: []string{"http://x"}})
			return err
		}, "http://x"},
		{"a ServiceInfo of the operator's", func() error {
			_, err := op.AddLookupAttributes(ctx, &djinnpb.JoinAttributesRequest{Service: "txn", Attributes: []*djinnpb.Entry{{Type: service.ServiceInfoType}}})
			return err
		}, "the service sets its net.jini.lookup.entry.ServiceInfo entries itself"},
		{"templates and changes that do not pair", func() error {
			_, err := op.ModifyLookupAttributes(ctx, &djinnpb.JoinModifyRequest{Service: "txn", Templates: []*djinnpb.EntryTemplate{{Type: "Name"}}})
			return err
		}, "1 templates and 0 changes"},
	} {
		err := tt.call()
		if !errors.Is(err, djinn.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: %v, want an invalid argument saying %q", tt.name, err, tt.says)
		}
	}
}

// locatorOf waits until a server's lookup service answers unicast
// discovery and returns its locator.
func locatorOf(t *testing.T, r *client.Registrar) string {
	t.Helper()
	var loc string
	servertest.Eventually(t, "the lookup service's locator", func() bool {
		info, err := r.Info(testContext(t))
		if err == nil {
			loc = info.Locator
		}
		return loc != ""
	})
	return loc
}

// TestJoinAdminAtRunTime: locators and attributes an operator changes are
// seen by lookups at once — a lookup service named by a new locator gets
// the items, one whose locator is removed loses them at once (cancelled,
// not left to lapse), new attributes are found everywhere — and a reset
// gives the settings back to the configuration.
func TestJoinAdminAtRunTime(t *testing.T) {
	t.Parallel()
	a, b := servertest.Start(t, servertest.Config(t)), servertest.Start(t, servertest.Config(t))
	ca, cb := servertest.Dial(t, a.Addr(), servertest.Operator(t, a)), servertest.Dial(t, b.Addr())
	ctx := testContext(t)
	ra, err := ca.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := cb.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin := djinnpb.NewJoinAdminClient(ca.ClientConn())
	own := joined(t, ra, ca.ServiceID(), 1)
	if got := byType(t, rb, service.TransactionManagerType, ofCluster(ca.ServiceID())); len(got) != 0 {
		t.Fatalf("a's transaction manager at b before any locator names it: %v", got)
	}

	locB := locatorOf(t, rb)
	if _, err := admin.AddLookupLocators(ctx, &djinnpb.JoinLocatorsRequest{Service: "txn", Locators: []string{locB}}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "a's transaction manager at b", func() bool {
		got := byType(t, rb, service.TransactionManagerType, ofCluster(ca.ServiceID()))
		return len(got) == 1 && got[0].ID == own["txn"].ID
	})
	if got := byType(t, rb, service.EventMailboxType, ofCluster(ca.ServiceID())); len(got) != 0 {
		t.Errorf("a's mailbox at b, whose locator only the transaction manager was given: %v", got)
	}

	payments := service.EntryTemplate{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString("payments")}}}
	if _, err := admin.AddLookupAttributes(ctx, &djinnpb.JoinAttributesRequest{Service: "txn", Attributes: wire.Entries([]service.Entry{nameEntry("payments")})}); err != nil {
		t.Fatal(err)
	}
	for at, r := range map[string]*client.Registrar{"a": ra, "b": rb} {
		servertest.Eventually(t, "the new attribute seen at "+at, func() bool {
			got := byType(t, r, service.TransactionManagerType, payments)
			return len(got) == 1 && got[0].ID == own["txn"].ID
		})
	}
	got, err := admin.ModifyLookupAttributes(ctx, &djinnpb.JoinModifyRequest{Service: "txn",
		Templates: []*djinnpb.EntryTemplate{wire.EntryTemplate(payments)}, Changes: wire.Entries([]service.Entry{nameEntry("billing")})})
	if err != nil || got.GetConfigured() || len(got.GetAttributes()) != 1 || len(got.GetServiceAttributes()) != 2 {
		t.Fatalf("modify: %v, %v", got, err)
	}
	billing := service.EntryTemplate{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString("billing")}}}
	servertest.Eventually(t, "the modified attribute seen", func() bool {
		return len(byType(t, rb, service.TransactionManagerType, billing)) == 1 && len(byType(t, ra, service.TransactionManagerType, payments)) == 0
	})

	if _, err := admin.RemoveLookupLocators(ctx, &djinnpb.JoinLocatorsRequest{Service: "txn", Locators: []string{locB}}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "a's transaction manager gone from b at once", func() bool {
		return len(byType(t, rb, service.TransactionManagerType, ofCluster(ca.ServiceID()))) == 0
	})

	info, err := admin.ResetJoin(ctx, &djinnpb.JoinServiceRequest{Service: "txn"})
	if err != nil || !info.GetAttributes().GetConfigured() || len(info.GetAttributes().GetAttributes()) != 0 || !info.GetLocators().GetConfigured() {
		t.Fatalf("reset: %v, %v", info, err)
	}
	servertest.Eventually(t, "the operator's attribute gone after the reset", func() bool {
		return len(byType(t, ra, service.TransactionManagerType, billing)) == 0
	})
}

// TestJoinFailover: in a three-node cluster the leader registers each
// service once, under ids that are the cluster's, naming every member;
// each node registers its key/value store. When the leader goes, the next
// one takes the items over: the same ids, one item each, pointing to a
// live member — and the departed node's key/value store leaves: the
// departed node cancelled its registration as it closed, or, when its
// cluster could not take the cancel within its bound (electing a leader
// all that time, as may happen under load), said so and left it to lapse
// with its lease, minutes later.
func TestJoinFailover(t *testing.T) {
	t.Parallel()
	ss := servertest.StartCluster(t, 3, servertest.Steady)
	var eps []string
	for _, s := range ss {
		eps = append(eps, s.Advertise())
	}
	c := servertest.Dial(t, strings.Join(eps, ","))
	r, err := c.Lookup(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	cluster := c.ServiceID()
	slices.Sort(eps)
	// Leadership may move under load before the test moves it: wait for
	// the items of the leader of the moment, naming the three members.
	var before map[string]service.Item
	var leader *server.Server
	servertest.Eventually(t, "every item registered by the leader, naming the three members", func() bool {
		before, leader = joined(t, r, cluster, 3), servertest.Leader(ss...)
		if leader == nil || field(before["txn"], service.ClusterType, "members") != strings.Join(eps, ",") {
			return false
		}
		for name := range clusterTypes {
			if refOf(t, before[name]).Endpoint != leader.Advertise() {
				return false
			}
		}
		return true
	})
	if err := leader.Close(); err != nil {
		t.Fatal(err)
	}
	rest := servertest.Others(ss, leader)
	kvs := []int{2}
	lapsing := slices.Contains(server.JoinsLapsing(leader), "kv")
	if lapsing {
		// A cancel given up on may still have been taken.
		t.Logf("the departed leader could not cancel its key/value store's registration as it closed: it lapses with its lease")
		kvs = []int{2, 3}
	}
	// Elections may take a few rounds under load, and leadership move
	// again among the rest: wait for the items of the leader of the
	// moment.
	var after map[string]service.Item
	servertest.EventuallyWithin(t, servertest.Failover, "every item taken over by a new leader", func() bool {
		next := servertest.Leader(rest...)
		if next == nil {
			return false
		}
		after = joined(t, r, cluster, kvs...)
		for name := range clusterTypes {
			if refOf(t, after[name]).Endpoint != next.Advertise() {
				return false
			}
		}
		return true
	})
	for name := range clusterTypes {
		if after[name].ID != before[name].ID {
			t.Errorf("%s: service id %s after the failover, was %s", name, after[name].ID, before[name].ID)
		}
	}
	if _, stays := after["kv/"+leader.NodeID()]; stays && !lapsing {
		t.Errorf("the departed leader's key/value store is still registered, though its registration was cancelled")
	}
	for _, s := range rest {
		if it, ok := after["kv/"+s.NodeID()]; !ok || it.ID != before["kv/"+s.NodeID()].ID {
			t.Errorf("%s's key/value store: %v, want it kept under its id", s.NodeID(), it)
		}
	}
}

// TestJoinGroupsMulticast: groups an operator changes are seen by lookups
// at once — a lookup service of a group added is joined (found by
// multicast), and left at once when the group is removed — in a private
// network namespace where loopback carries multicast.
func TestJoinGroupsMulticast(t *testing.T) {
	if !inMulticastNetns(t, "^TestJoinGroupsMulticast$") {
		return
	}
	west := servertest.Config(t)
	west.Lookup.Groups, west.Lookup.Multicast, west.Lookup.Interfaces = []string{"west"}, true, []string{"lo"}
	west.Lookup.Announce = server.Duration(300 * time.Millisecond)
	b := servertest.Start(t, west)
	east := servertest.Config(t)
	east.LookupJoin.Multicast, east.LookupJoin.Interfaces, east.LookupJoin.Groups = true, []string{"lo"}, []string{"east"}
	a := servertest.Start(t, east)
	ca, cb := servertest.Dial(t, a.Addr(), servertest.Operator(t, a)), servertest.Dial(t, b.Addr())
	ctx := testContext(t)
	rb, err := cb.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := ca.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	joined(t, ra, ca.ServiceID(), 1)
	if got := byType(t, rb, service.TransactionManagerType, ofCluster(ca.ServiceID())); len(got) != 0 {
		t.Fatalf("a's transaction manager, of group east, at a lookup service of group west: %v", got)
	}
	admin := djinnpb.NewJoinAdminClient(ca.ClientConn())
	if _, err := admin.AddLookupGroups(ctx, &djinnpb.JoinGroupsRequest{Service: "txn", Groups: []string{"west"}}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "a's transaction manager at the lookup service of group west", func() bool {
		return len(byType(t, rb, service.TransactionManagerType, ofCluster(ca.ServiceID()))) == 1
	})
	if got := byType(t, rb, service.EventMailboxType, ofCluster(ca.ServiceID())); len(got) != 0 {
		t.Errorf("a's mailbox, still of group east only, at west's lookup service: %v", got)
	}
	if _, err := admin.RemoveLookupGroups(ctx, &djinnpb.JoinGroupsRequest{Service: "txn", Groups: []string{"west"}}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "a's transaction manager gone from west's lookup service at once", func() bool {
		return len(byType(t, rb, service.TransactionManagerType, ofCluster(ca.ServiceID()))) == 0
	})
}

// TestJoinMutualTLS: under mutual TLS the servers register their services
// over TLS with their peer certificates, so the items are the peers'
// principal's: a client cannot replace one under its service id, nor
// change a service's join without being a configured operator.
func TestJoinMutualTLS(t *testing.T) {
	t.Parallel()
	pki := servertest.NewPKI(t)
	cfg := servertest.Config(t)
	cfg.TLS = server.TLSConfig{Cert: pki.ServerCert, Key: pki.ServerKey, CA: pki.CA, ClientAuth: true}
	cfg.Security.Operators = []string{"cn:op"}
	srv := servertest.Start(t, cfg)
	alice := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "alice"))))
	ctx := testContext(t)
	r, err := alice.Lookup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	items := joined(t, r, alice.ServiceID(), 1)
	txn := items["txn"]

	// alice registers an item under the transaction manager's id.
	fake := service.Item{ID: txn.ID, Service: []byte("djinn://127.0.0.1:9/" + djinn.NewID().String() + "/" + djinn.NewID().String()),
		Types: []string{service.TransactionManagerType}}
	if _, err := r.Register(ctx, fake, time.Minute); err == nil {
		t.Error("a client replaced the server's transaction manager item under its service id")
	}
	if got := byType(t, r, service.TransactionManagerType); len(got) != 1 || string(got[0].Service) != string(txn.Service) {
		t.Errorf("the transaction manager's items after alice's try: %v", got)
	}

	asAlice := djinnpb.NewJoinAdminClient(alice.ClientConn())
	req := &djinnpb.JoinAttributesRequest{Service: "txn", Attributes: wire.Entries([]service.Entry{nameEntry("payments")})}
	if _, err := asAlice.AddLookupAttributes(ctx, req); !errors.Is(err, djinn.ErrPermissionDenied) {
		t.Errorf("alice changes the join: %v, want PermissionDenied", err)
	}
	op := servertest.Dial(t, srv.Addr(), client.WithTLS(pki.TLSFor(pki.NewClient(t, "op"))))
	if _, err := djinnpb.NewJoinAdminClient(op.ClientConn()).AddLookupAttributes(ctx, req); err != nil {
		t.Fatalf("the operator changes the join: %v", err)
	}
	payments := service.EntryTemplate{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString("payments")}}}
	servertest.Eventually(t, "the operator's attribute seen over TLS", func() bool {
		return len(byType(t, r, service.TransactionManagerType, payments)) == 1
	})
}
