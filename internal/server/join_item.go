package server

import (
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/service"
)

// The item a service registers in lookup services: its reference, which
// names the cluster (the service id of every cluster service is the
// cluster's, so a client reaches whichever member serves), its type and
// the type's hierarchy, the entries it sets itself (serviceEntries) and
// the attributes of its join settings.

// joinItem returns p's item under id, with the attributes an operator or
// the configuration gave it.
func (s *Server) joinItem(p *part, id djinn.ID, attrs []service.Entry) service.Item {
	return service.Item{
		ID:         id,
		Service:    []byte(p.ref().String()),
		Types:      []string{p.joins.typ},
		Supertypes: service.Hierarchy(p.joins.typ),
		Entries:    append(s.serviceEntries(p), attrs...),
	}
}

// serviceEntries are the entries p sets itself, which an operator cannot
// change (join.ServiceControlled): a ServiceInfo (its name, djinn as
// manufacturer and vendor, the version the binary was built as) and a
// djinn.Cluster (the cluster's service id; for a cluster service the
// members' endpoints, for a service of one node that node's id).
func (s *Server) serviceEntries(p *part) []service.Entry {
	str := service.NewString
	info := service.Entry{Type: service.ServiceInfoType, Supertypes: []string{service.AbstractEntryType}, Fields: []service.Field{
		{Name: "name", Value: str(p.joins.title)}, {Name: "manufacturer", Value: str("djinn")},
		{Name: "vendor", Value: str("djinn")}, {Name: "version", Value: str(buildVersion())},
	}}
	cluster := service.Entry{Type: service.ClusterType, Fields: []service.Field{{Name: "cluster", Value: str(s.machine.ServiceID().String())}}}
	if p.joins.nodeID != nil {
		cluster.Fields = append(cluster.Fields, service.Field{Name: "node", Value: str(s.node.ID())})
	} else if members := s.memberEndpoints(); len(members) > 0 {
		cluster.Fields = append(cluster.Fields, service.Field{Name: "members", Value: str(strings.Join(members, ","))})
	}
	return []service.Entry{info, cluster}
}

// memberEndpoints returns the gRPC endpoints of the cluster's members that
// recorded one, sorted; this node's at least.
func (s *Server) memberEndpoints() []string {
	out := []string{s.advertise}
	if members, err := s.node.Members(); err == nil {
		for _, m := range members {
			if ep := s.machine.Endpoint(m.ID); ep != "" {
				out = append(out, ep)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// buildVersion is the version the binary was built as: its module version
// (v1.2.3, or "(devel)" for a build of a checkout) and, when the build
// recorded it, the first 12 digits of its commit, "+dirty" if the checkout
// had changes.
var buildVersion = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev string
	dirty := false
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.modified":
			dirty = st.Value == "true"
		}
	}
	if rev != "" {
		v += " " + rev[:min(12, len(rev))]
		if dirty {
			v += "+dirty"
		}
	}
	return v
})

func entriesProto(es []service.Entry) []*djinnpb.Entry { return wire.Entries(es) }

func entriesFrom(pbs []*djinnpb.Entry) []service.Entry { return wire.EntriesFrom(pbs) }

// entriesEqual reports whether two canonical entry lists are equal.
func entriesEqual(a, b []service.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	h := func(es []service.Entry) service.Item {
		return service.Item{Service: []byte("-"), Types: []string{"-"}, Entries: es}
	}
	return h(a).Equal(h(b))
}

// joinTypes returns the types of p's item, its most specific first.
func joinTypes(p *part) []string {
	rest := slices.Sorted(func(yield func(string) bool) {
		seen := map[string]bool{p.joins.typ: true}
		for _, sups := range service.Hierarchy(p.joins.typ) {
			for _, t := range sups {
				if !seen[t] {
					seen[t] = true
					if !yield(t) {
						return
					}
				}
			}
		}
	})
	return append([]string{p.joins.typ}, rest...)
}

// clip shortens a long bad value for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
