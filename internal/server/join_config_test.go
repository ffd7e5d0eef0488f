package server_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/server"
	"github.com/djinn-go/djinn/internal/server/servertest"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// TestJoinConfigLoad: [lookup-join] and its per-service sections from a
// file, and the environment.
func TestJoinConfigLoad(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `
[lookup-join]
multicast = true
interfaces = ["eth0"]
groups = ["prod", ""]
locators = ["jini://lookup.example"]
attributes = ["Location.building=B1", "Location.floor=3"]

[lookup-join.service.txn]
groups = []
attributes = ["net.jini.lookup.entry.Name.name=payments"]
`)
	cfg := server.Default()
	if err := cfg.LoadFile(path); err != nil {
		t.Fatal(err)
	}
	want := server.Default().LookupJoin
	want.Multicast, want.Interfaces = true, []string{"eth0"}
	want.Groups, want.Locators = []string{"prod", ""}, []string{"jini://lookup.example"}
	want.Attributes = []string{"Location.building=B1", "Location.floor=3"}
	want.Service = map[string]server.JoinServiceConfig{"txn": {Groups: []string{}, Attributes: []string{"net.jini.lookup.entry.Name.name=payments"}}}
	if !reflect.DeepEqual(cfg.LookupJoin, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", cfg.LookupJoin, want)
	}
	if err := cfg.Check(); err != nil {
		t.Errorf("check: %v", err)
	}
	env := server.Default()
	if err := env.LoadEnv([]string{"DJINN_LOOKUP_JOIN_GROUPS=a,b", "DJINN_LOOKUP_JOIN_ENABLED=false", "DJINN_LOOKUP_JOIN_LOCATORS=jini://h:1"}); err != nil {
		t.Fatal(err)
	}
	if j := env.LookupJoin; !slices.Equal(j.Groups, []string{"a", "b"}) || j.Enabled || !slices.Equal(j.Locators, []string{"jini://h:1"}) {
		t.Errorf("from the environment: %+v", j)
	}
}

// TestJoinConfigCheck: every bad value of [lookup-join] is refused, naming
// its key and the value.
func TestJoinConfigCheck(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		change func(*server.JoinConfig)
		names  string
	}{
		{"a group no packet can carry", func(c *server.JoinConfig) { c.Groups = []string{strings.Repeat("g", 600)} }, "lookup-join groups: group"},
		{"a locator that is not jini://", func(c *server.JoinConfig) { c.Locators = []string{"http://x"} }, "lookup-join locators"},
		{"an attribute that does not parse", func(c *server.JoinConfig) { c.Attributes = []string{"floor=3"} }, `lookup-join attributes: attribute "floor=3"`},
		{"an attribute the services set themselves", func(c *server.JoinConfig) { c.Attributes = []string{service.ServiceInfoType + ".name=x"} }, "the service sets"},
		{"a service's bad locator names its section", func(c *server.JoinConfig) {
			c.Service = map[string]server.JoinServiceConfig{"txn": {Locators: []string{"jini://"}}}
		}, "lookup-join.service.txn locators"},
		{"a service's bad attribute names its section", func(c *server.JoinConfig) {
			c.Service = map[string]server.JoinServiceConfig{"mailbox": {Attributes: []string{"=x"}}}
		}, "lookup-join.service.mailbox attributes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := server.Default()
			tt.change(&cfg.LookupJoin)
			wantErr(t, "check", cfg.Check(), djinn.ErrInvalidArgument, tt.names)
		})
	}
	t.Run("a section for a service that does not join", func(t *testing.T) {
		cfg := servertest.Config(t)
		cfg.LookupJoin.Service = map[string]server.JoinServiceConfig{"printer": {}}
		s, err := server.Open(testContext(t), cfg, nil)
		if err == nil {
			s.Close()
		}
		wantErr(t, "open", err, djinn.ErrInvalidArgument, `lookup-join.service.printer: service "printer": no such service joins lookup services; those that do are landlord,`)
	})
}

// TestJoinConfigured: the configuration's attributes reach the items — a
// service's own section adds to every service's — and after a restart
// with another configuration, what an operator set stays while the rest
// follows the new configuration.
func TestJoinConfigured(t *testing.T) {
	t.Parallel()
	cfg := servertest.Config(t)
	cfg.LookupJoin.Attributes = []string{"Location.floor=3"}
	cfg.LookupJoin.Service = map[string]server.JoinServiceConfig{"txn": {Attributes: []string{"Name.name=payments"}}}
	srv := servertest.Start(t, cfg)
	c := servertest.Dial(t, srv.Addr(), servertest.Operator(t, srv))
	r, err := c.Lookup(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	floor3 := service.EntryTemplate{Type: "Location", Fields: []service.Field{{Name: "floor", Value: service.NewInt(3)}}}
	payments := service.EntryTemplate{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString("payments")}}}
	servertest.Eventually(t, "the configured attributes on every service, the txn's own on it alone", func() bool {
		return len(byType(t, r, service.TransactionManagerType, floor3, payments)) == 1 && len(byType(t, r, service.EventMailboxType, floor3)) == 1 &&
			len(byType(t, r, service.EventMailboxType, payments)) == 0
	})
	admin := djinnpb.NewJoinAdminClient(c.ClientConn())
	if _, err := admin.SetLookupAttributes(testContext(t), &djinnpb.JoinAttributesRequest{Service: "mailbox",
		Attributes: wire.Entries([]service.Entry{nameEntry("inbox")})}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.LookupJoin.Attributes = []string{"Location.floor=4"}
	again := servertest.Start(t, cfg)
	c2 := servertest.Dial(t, again.Addr())
	r2, err := c2.Lookup(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	floor4 := service.EntryTemplate{Type: "Location", Fields: []service.Field{{Name: "floor", Value: service.NewInt(4)}}}
	inbox := service.EntryTemplate{Type: "Name", Fields: []service.Field{{Name: "name", Value: service.NewString("inbox")}}}
	servertest.Eventually(t, "the new configuration where no operator set the attributes, the operator's where one did", func() bool {
		return len(byType(t, r2, service.TransactionManagerType, floor4, payments)) == 1 && len(byType(t, r2, service.EventMailboxType, inbox)) == 1 &&
			len(byType(t, r2, service.EventMailboxType, floor4)) == 0
	})
}
