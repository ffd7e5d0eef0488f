package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/join"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
	"github.com/djinn-go/djinn/service"
)

// JoinConfig says how this cluster's services join lookup services: each
// service that declares a joinKind (the landlord, the mailbox, the renewal
// service, the transaction manager, the lock service, the lookup discovery
// service, the key/value store) keeps an item registered at the lookup
// services it discovers — by group, over multicast when Multicast is on;
// at its locators; and at the cluster's own lookup service when Own is on
// — so that clients find it by type. The groups, locators and attributes
// here are every service's; a [lookup-join.service.NAME] section gives one
// service its own groups or locators (replacing these) and more attributes
// (added to these). They seed the cluster's replicated join settings,
// which the JoinAdmin calls (djinn join) change at run time: what an
// operator set stays set, whatever the configuration says, until reset.
type JoinConfig struct {
	// Enabled: the services register in lookup services at all.
	Enabled bool `toml:"enabled"`
	// Own: every service joins the cluster's own lookup service, when it
	// runs, whatever its groups and locators.
	Own bool `toml:"own"`
	// Multicast discovers lookup services of the groups by multicast, on
	// Interfaces (every multicast-capable one when empty); without it the
	// groups are kept but only locators and the own lookup service are
	// joined.
	Multicast  bool     `toml:"multicast"`
	Interfaces []string `toml:"interfaces"`
	Groups     []string `toml:"groups"`   // "" is the public group
	Locators   []string `toml:"locators"` // jini://host[:port]
	// Attributes are entries as text: "Type.field=value" or a bare "Type"
	// (service.ParseAttributes).
	Attributes []string `toml:"attributes"`
	// Service holds a service's own settings, by the service's name.
	Service map[string]JoinServiceConfig `toml:"service"`
}

// JoinServiceConfig is one service's own join settings: a key given
// replaces (groups, locators) or adds to (attributes) [lookup-join]'s.
type JoinServiceConfig struct {
	Groups     []string `toml:"groups"`
	Locators   []string `toml:"locators"`
	Attributes []string `toml:"attributes"`
}

func (c *JoinConfig) check() error {
	if _, _, _, err := c.settings(""); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(c.Service)) {
		if _, _, _, err := c.settings(name); err != nil {
			return err
		}
	}
	return nil
}

// settings returns the checked settings of the service name ("" for every
// service's), naming the configuration key of a bad value.
func (c *JoinConfig) settings(name string) (groups, locators []string, attrs []service.Entry, err error) {
	key, own := "lookup-join", JoinServiceConfig{}
	if name != "" {
		key, own = "lookup-join.service."+name, c.Service[name]
	}
	groupsKey, locatorsKey := "lookup-join", "lookup-join"
	groups, locators = c.Groups, c.Locators
	if own.Groups != nil {
		groups, groupsKey = own.Groups, key
	}
	if own.Locators != nil {
		locators, locatorsKey = own.Locators, key
	}
	if groups, err = join.CheckGroups(groupsKey+" groups", groups); err != nil {
		return nil, nil, nil, err
	}
	if locators, err = lds.CheckLocators(locatorsKey+" locators", locators); err != nil {
		return nil, nil, nil, err
	}
	text := append(slices.Clone(c.Attributes), own.Attributes...)
	es, err := service.ParseAttributes(text)
	if err == nil {
		es, err = join.CheckAttributes(es)
	}
	if err != nil {
		return nil, nil, nil, djinn.Errorf(djinn.KindOf(err), "%s attributes: %v", key, err)
	}
	return groups, locators, es, nil
}

// joinKind is how a service registers in lookup services: its type (one
// of package service's …Type) and the name its ServiceInfo entry gives it.
// A service of each node (the key/value store) is registered by every node
// under its own id (nodeID); the others by the leader, under the id the
// cluster's join settings keep for them.
type joinKind struct {
	typ, title string
	nodeID     func() djinn.ID // for a service of each node: its id
}

// joinPart keeps the services that declare a joinKind registered in lookup
// services, and serves JoinAdmin: reads for any authenticated caller,
// changes for operators.
func joinPart(s *Server) *part {
	st := join.NewState()
	j := &joins{s: s, st: st, running: map[string]*joiner{}}
	s.joins = j
	j.closed, j.closeAll = context.WithCancel(context.Background())
	return &part{
		name:    "join",
		enabled: true,
		state: func(m *state.Machine) error {
			if err := s.checkJoinNames(); err != nil {
				return err
			}
			st.OnChange(j.poke)
			return m.Add(st.Part())
		},
		open: func() error { j.startNode(); return nil },
		serve: func(r *registrar) error {
			return r.serve(&djinnpb.JoinAdmin_ServiceDesc, &joinRPC{j: j}, joinRules)
		},
		run:     j.lead,
		metrics: func() []prometheus.Collector { return j.metrics() },
		stop:    j.stop,
	}
}

// joinRules declares who may call each JoinAdmin RPC: reads any
// authenticated caller (a service's groups, locators and attributes are
// what it tells every lookup service anyway), changes the operator role.
var joinRules = Rules{
	"ListJoins": authenticated, "GetLookupGroups": authenticated, "GetLookupLocators": authenticated, "GetLookupAttributes": authenticated,
	"ResetJoin":       operator,
	"AddLookupGroups": operator, "RemoveLookupGroups": operator, "SetLookupGroups": operator,
	"AddLookupLocators": operator, "RemoveLookupLocators": operator, "SetLookupLocators": operator,
	"AddLookupAttributes": operator, "ModifyLookupAttributes": operator, "SetLookupAttributes": operator,
}

// joining returns the parts that register in lookup services, in order.
func (s *Server) joining() []*part {
	var out []*part
	for _, p := range s.parts {
		if p.joins != nil {
			out = append(out, p)
		}
	}
	return out
}

// joinPartNamed returns the part name names, if it registers in lookup
// services; the error names the services that do.
func (s *Server) joinPartNamed(name string) (*part, error) {
	var names []string
	for _, p := range s.joining() {
		if p.name == name {
			return p, nil
		}
		names = append(names, p.name)
	}
	return nil, djinn.Errorf(djinn.InvalidArgument, "service %q: no such service joins lookup services; those that do are %s", clip(name), strings.Join(names, ", "))
}

// checkJoinNames refuses a [lookup-join.service.NAME] section for a service that
// does not join lookup services.
func (s *Server) checkJoinNames() error {
	for _, name := range slices.Sorted(maps.Keys(s.cfg.LookupJoin.Service)) {
		if _, err := s.joinPartNamed(name); err != nil {
			return djinn.Errorf(djinn.InvalidArgument, "lookup-join.service.%s: %v", name, err)
		}
	}
	return nil
}

// configure proposes the leader's configuration of every service's join
// where the cluster's settings differ from it (or the service has no id
// yet), so that a changed configuration file takes effect for what no
// operator has set.
func (j *joins) configure(ctx context.Context) error {
	for _, p := range j.s.joining() {
		c, err := j.configuration(p, false)
		if err != nil {
			return err
		}
		cur, ok := j.st.Get(p.name)
		if ok && !j.differs(cur, c) {
			continue
		}
		if _, err := j.s.node.Propose(ctx, &statepb.Command{Op: &statepb.Command_JoinConfigure{JoinConfigure: c}}); err != nil {
			return fmt.Errorf("join settings of %s: %w", p.name, err)
		}
	}
	return nil
}

// configuration returns the JoinConfigure of p's configured settings: for
// a cluster service, with a new id to keep if it has none.
func (j *joins) configuration(p *part, revert bool) (*statepb.JoinConfigure, error) {
	groups, locators, attrs, err := j.s.cfg.LookupJoin.settings(p.name)
	if err != nil {
		return nil, err
	}
	c := &statepb.JoinConfigure{Service: p.name, Groups: groups, Locators: locators, Attributes: entriesProto(attrs), Revert: revert}
	if p.joins.nodeID == nil {
		id := djinn.NewID()
		c.ServiceId = id[:]
	}
	return c, nil
}

// current returns p's join settings: the cluster's, or, until the leader
// has recorded them, its configuration's.
func (j *joins) current(p *part) join.Join {
	if st, ok := j.st.Get(p.name); ok {
		return st
	}
	groups, locators, attrs, _ := j.s.cfg.LookupJoin.settings(p.name) // checked at Open
	return join.Join{Service: p.name, Groups: groups, Locators: locators, Attributes: attrs}
}

// differs reports whether configuring c would change cur.
func (j *joins) differs(cur join.Join, c *statepb.JoinConfigure) bool {
	if cur.ID.IsZero() && len(c.GetServiceId()) > 0 {
		return true
	}
	attrs, _ := join.CheckAttributes(entriesFrom(c.GetAttributes()))
	return (!cur.GroupsSet && !slices.Equal(cur.Groups, c.GetGroups())) ||
		(!cur.LocatorsSet && !slices.Equal(cur.Locators, c.GetLocators())) ||
		(!cur.AttributesSet && !entriesEqual(cur.Attributes, attrs))
}
