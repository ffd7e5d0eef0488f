package join_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/join"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
	"github.com/djinn-go/djinn/service"
)

func newState(*state.Machine) *join.State { return join.NewState() }

// world is one service's state under test and what it heard.
type world struct {
	t       *testing.T
	log     statetest.Service[*join.State]
	changes []string
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, log: statetest.For(newState)}
	w.log.State.OnChange(func(name string) { w.changes = append(w.changes, name) })
	return w
}

func (w *world) propose(cmd *statepb.Command) (join.Join, error) {
	w.t.Helper()
	res, err := w.log.Propose(context.Background(), cmd)
	if err != nil {
		return join.Join{}, err
	}
	return res.(join.Join), nil
}

func (w *world) configure(c *statepb.JoinConfigure) (join.Join, error) {
	return w.propose(&statepb.Command{Op: &statepb.Command_JoinConfigure{JoinConfigure: c}})
}

func (w *world) groups(op djinnpb.SetOp, groups ...string) (join.Join, error) {
	return w.propose(&statepb.Command{Op: &statepb.Command_JoinGroups{JoinGroups: &statepb.JoinGroupsChange{Service: "txn", Op: op, Groups: groups}}})
}

func (w *world) locators(op djinnpb.SetOp, locs ...string) (join.Join, error) {
	return w.propose(&statepb.Command{Op: &statepb.Command_JoinLocators{JoinLocators: &statepb.JoinLocatorsChange{Service: "txn", Op: op, Locators: locs}}})
}

func (w *world) attributes(op int32, entries []service.Entry, templates ...service.EntryTemplate) (join.Join, error) {
	c := &statepb.JoinAttributesChange{Service: "txn", Op: op, Entries: wire.Entries(entries)}
	for _, t := range templates {
		c.Templates = append(c.Templates, wire.EntryTemplate(t))
	}
	return w.propose(&statepb.Command{Op: &statepb.Command_JoinAttributes{JoinAttributes: c}})
}

func (w *world) must(j join.Join, err error) join.Join {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
	return j
}

func name(v string) service.Entry {
	return service.Entry{Type: "net.jini.lookup.entry.Name", Fields: []service.Field{{Name: "name", Value: service.NewString(v)}}}
}

func names(j join.Join) []string {
	var out []string
	for _, e := range j.Attributes {
		v, _ := e.Get("name")
		s, _ := v.AsString()
		out = append(out, s)
	}
	return out
}

var (
	id1 = djinn.ID{1}
	id2 = djinn.ID{2}
)

// configured is a configuration of txn: groups a, b; one locator; one name.
func configured(id djinn.ID) *statepb.JoinConfigure {
	return &statepb.JoinConfigure{Service: "txn", ServiceId: id[:], Groups: []string{"b", "a", "a"}, Locators: []string{"jini://Lookup.Example:4160"},
		Attributes: wire.Entries([]service.Entry{name("tm")})}
}

// rule is one row of the rules tests: run acts on a fresh world and
// checks it.
type rule struct {
	name string
	run  func(w *world)
}

// runRules runs each row on a world of its own.
func runRules(t *testing.T, rows []rule) {
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) { tt.run(newWorld(t)) })
	}
}

// TestRules: how configuration sets a service's join, one row per rule of
// the package doc; TestAdminRules has the operator's.
func TestRules(t *testing.T) {
	runRules(t, []rule{
		{"configure: the first id is kept, settings canonical", func(w *world) {
			j := w.must(w.configure(configured(id1)))
			if j.ID != id1 || !slices.Equal(j.Groups, []string{"a", "b"}) || !slices.Equal(j.Locators, []string{"jini://lookup.example:4160/"}) ||
				!slices.Equal(names(j), []string{"tm"}) || j.GroupsSet || j.LocatorsSet || j.AttributesSet {
				t.Errorf("configured: %+v", j)
			}
			if j = w.must(w.configure(configured(id2))); j.ID != id1 {
				t.Errorf("a later leader's id %s replaced the first %s", j.ID, id1)
			}
		}},
		{"configure: a new configuration applies to what no operator set", func(w *world) {
			w.must(w.configure(configured(id1)))
			w.must(w.groups(djinnpb.SetOp_SET_OP_ADD, "ops"))
			c := configured(id1)
			c.Groups, c.Locators, c.Attributes = []string{"new"}, nil, wire.Entries([]service.Entry{name("renamed")})
			j := w.must(w.configure(c))
			if !slices.Equal(j.Groups, []string{"a", "b", "ops"}) || len(j.Locators) != 0 || !slices.Equal(names(j), []string{"renamed"}) {
				t.Errorf("after a new configuration: %+v, want the operator's groups and the configuration's locators and attributes", j)
			}
		}},
		{"configure with revert: the configuration governs all three again", func(w *world) {
			w.must(w.configure(configured(id1)))
			w.must(w.groups(djinnpb.SetOp_SET_OP_SET, "x"))
			w.must(w.locators(djinnpb.SetOp_SET_OP_SET))
			w.must(w.attributes(join.OpSet, nil))
			c := configured(id2)
			c.Revert = true
			j := w.must(w.configure(c))
			if j.ID != id1 || !slices.Equal(j.Groups, []string{"a", "b"}) || len(j.Locators) != 1 || !slices.Equal(names(j), []string{"tm"}) ||
				j.GroupsSet || j.LocatorsSet || j.AttributesSet {
				t.Errorf("after revert: %+v", j)
			}
		}},
		{"configure: a service of each node has no id", func(w *world) {
			j := w.must(w.configure(&statepb.JoinConfigure{Service: "kv"}))
			if !j.ID.IsZero() {
				t.Errorf("id %s, want none", j.ID)
			}
		}},
	})
}

// TestAdminRules: how operators set a service's join through JoinAdmin,
// one row per rule of the package doc.
func TestAdminRules(t *testing.T) {
	runRules(t, []rule{
		{"JoinAdmin add, remove, set groups; the public group is a group", func(w *world) {
			w.must(w.configure(configured(id1)))
			if j := w.must(w.groups(djinnpb.SetOp_SET_OP_ADD, "", "c", "a")); !slices.Equal(j.Groups, []string{"", "a", "b", "c"}) || !j.GroupsSet {
				t.Errorf("add: %+v", j)
			}
			if j := w.must(w.groups(djinnpb.SetOp_SET_OP_REMOVE, "a", "zz")); !slices.Equal(j.Groups, []string{"", "b", "c"}) {
				t.Errorf("remove: %v", j.Groups)
			}
			if j := w.must(w.groups(djinnpb.SetOp_SET_OP_SET)); len(j.Groups) != 0 || !j.GroupsSet {
				t.Errorf("set none: %+v", j)
			}
		}},
		{"JoinAdmin add, remove, set locators: two spellings of one locator are one", func(w *world) {
			w.must(w.configure(configured(id1)))
			j := w.must(w.locators(djinnpb.SetOp_SET_OP_ADD, "jini://lookup.example", "jini://10.0.0.9:4161/"))
			if !slices.Equal(j.Locators, []string{"jini://10.0.0.9:4161/", "jini://lookup.example:4160/"}) {
				t.Errorf("add: %v", j.Locators)
			}
			if j = w.must(w.locators(djinnpb.SetOp_SET_OP_REMOVE, "JINI://LOOKUP.EXAMPLE:4160")); !slices.Equal(j.Locators, []string{"jini://10.0.0.9:4161/"}) {
				t.Errorf("remove: %v", j.Locators)
			}
		}},
		{"JoinAdmin attributes: add drops duplicates, modify and set as a registrar does", func(w *world) {
			w.must(w.configure(configured(id1)))
			if j := w.must(w.attributes(join.OpAdd, []service.Entry{name("tm"), name("second")})); !slices.Equal(names(j), []string{"tm", "second"}) || !j.AttributesSet {
				t.Errorf("add: %v", names(j))
			}
			tmpl := service.EntryTemplate{Type: "net.jini.lookup.entry.Name", Fields: []service.Field{{Name: "name", Value: service.NewString("second")}}}
			if j := w.must(w.attributes(join.OpModify, []service.Entry{name("2nd")}, tmpl)); !slices.Equal(names(j), []string{"tm", "2nd"}) {
				t.Errorf("modify: %v", names(j))
			}
			if j := w.must(w.attributes(join.OpModify, []service.Entry{{}}, service.EntryTemplate{Type: "net.jini.lookup.entry.Name"})); len(j.Attributes) != 0 {
				t.Errorf("modify to delete every name: %v", names(j))
			}
			if j := w.must(w.attributes(join.OpSet, []service.Entry{name("only")})); !slices.Equal(names(j), []string{"only"}) {
				t.Errorf("set: %v", names(j))
			}
		}},
		{"an operator's change before any configuration starts the service's settings", func(w *world) {
			j := w.must(w.groups(djinnpb.SetOp_SET_OP_ADD, "a"))
			if !j.ID.IsZero() || !slices.Equal(j.Groups, []string{"a"}) {
				t.Errorf("%+v", j)
			}
			if j = w.must(w.configure(configured(id1))); j.ID != id1 || !slices.Equal(j.Groups, []string{"a"}) {
				t.Errorf("configured after: %+v, want the id given and the operator's groups kept", j)
			}
		}},
		{"a change that changes nothing is not heard", func(w *world) {
			w.must(w.configure(configured(id1)))
			w.must(w.configure(configured(id1)))
			if !slices.Equal(w.changes, []string{"txn"}) {
				t.Errorf("changes heard: %v, want one", w.changes)
			}
		}},
	})
}

// TestBadInput: every bad value is refused, naming it, and nothing
// changes.
func TestBadInput(t *testing.T) {
	long := strings.Repeat("g", 600)
	info := service.Entry{Type: service.ServiceInfoType, Fields: []service.Field{{Name: "name", Value: service.NewString("x")}}}
	sneaky := service.Entry{Type: "my.Info", Supertypes: []string{service.ClusterType}}
	many := make([]service.Entry, 40)
	for i := range many {
		many[i] = name(strings.Repeat("n", i+1))
	}
	for _, tt := range []struct {
		name string
		run  func(w *world) (join.Join, error)
		kind djinn.Kind
		says string
	}{
		{"no service name", func(w *world) (join.Join, error) { return w.configure(&statepb.JoinConfigure{}) }, djinn.InvalidArgument, `service name ""`},
		{"a short service id", func(w *world) (join.Join, error) {
			return w.configure(&statepb.JoinConfigure{Service: "txn", ServiceId: []byte{1, 2}})
		}, djinn.InvalidArgument, "service id"},
		{"a group a packet cannot carry", func(w *world) (join.Join, error) { return w.groups(djinnpb.SetOp_SET_OP_ADD, long) }, djinn.InvalidArgument, "group"},
		{"too many groups", func(w *world) (join.Join, error) {
			var gs []string
			for i := range 65 {
				gs = append(gs, strings.Repeat("x", i+1))
			}
			return w.groups(djinnpb.SetOp_SET_OP_SET, gs...)
		}, djinn.ResourceExhausted, "65 groups, at most 64"},
		{"no groups operation", func(w *world) (join.Join, error) { return w.groups(djinnpb.SetOp_SET_OP_UNSPECIFIED, "a") }, djinn.InvalidArgument, "groups operation 0"},
		{"a locator that is not jini://", func(w *world) (join.Join, error) {
			return w.locators(djinnpb.SetOp_SET_OP_ADD, "http://x")
		}, djinn.InvalidArgument, "http://x"},
		{"an attribute of a type the service sets", func(w *world) (join.Join, error) {
			return w.attributes(join.OpAdd, []service.Entry{info})
		}, djinn.InvalidArgument, "attribute type net.jini.lookup.entry.ServiceInfo: the service sets"},
		{"an attribute posing as one the service sets", func(w *world) (join.Join, error) {
			return w.attributes(join.OpSet, []service.Entry{sneaky})
		}, djinn.InvalidArgument, "attribute type my.Info: the service sets its djinn.Cluster entries"},
		{"a template of a type the service sets", func(w *world) (join.Join, error) {
			return w.attributes(join.OpModify, []service.Entry{{}}, service.EntryTemplate{Type: service.ClusterType})
		}, djinn.InvalidArgument, "attribute template type djinn.Cluster"},
		{"more attributes than an item leaves room for", func(w *world) (join.Join, error) {
			return w.attributes(join.OpSet, many)
		}, djinn.ResourceExhausted, "MaxEntries of 32"},
		{"a bad entry", func(w *world) (join.Join, error) {
			return w.attributes(join.OpAdd, []service.Entry{{Type: "", Fields: []service.Field{{Name: "x"}}}})
		}, djinn.InvalidArgument, "type"},
		{"no attributes operation", func(w *world) (join.Join, error) { return w.attributes(9, nil) }, djinn.InvalidArgument, "attributes operation 9"},
		{"a bad configured attribute", func(w *world) (join.Join, error) {
			c := configured(id1)
			c.Attributes = wire.Entries([]service.Entry{info})
			return w.configure(c)
		}, djinn.InvalidArgument, "ServiceInfo"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			before := w.must(w.configure(configured(id1)))
			w.changes = nil
			_, err := tt.run(w)
			if djinn.KindOf(err) != tt.kind || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("error %v, want %v saying %q", err, tt.kind, tt.says)
			}
			if after, _ := w.log.State.Get("txn"); !slices.Equal(after.Groups, before.Groups) || !slices.Equal(after.Locators, before.Locators) ||
				!slices.Equal(names(after), names(before)) || len(w.changes) != 0 {
				t.Errorf("after the refusal: %+v (changes heard %v), want %+v", after, w.changes, before)
			}
		})
	}
}

// TestSnapshot: a restarted node has every service's settings, the
// operator's marks included.
func TestSnapshot(t *testing.T) {
	w := newWorld(t)
	w.must(w.configure(configured(id1)))
	w.must(w.configure(&statepb.JoinConfigure{Service: "kv", Groups: []string{""}}))
	w.must(w.groups(djinnpb.SetOp_SET_OP_ADD, "ops"))
	w.must(w.attributes(join.OpAdd, []service.Entry{name("x")}))
	re, err := statetest.Restart(w.log.Log, newState)
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"txn", "kv"} {
		a, _ := w.log.State.Get(svc)
		b, ok := re.State.Get(svc)
		if !ok || a.ID != b.ID || !slices.Equal(a.Groups, b.Groups) || !slices.Equal(a.Locators, b.Locators) || !slices.Equal(names(a), names(b)) ||
			a.GroupsSet != b.GroupsSet || a.LocatorsSet != b.LocatorsSet || a.AttributesSet != b.AttributesSet {
			t.Errorf("%s restored as %+v, want %+v", svc, b, a)
		}
	}
	if re.State.Len() != 2 {
		t.Errorf("restored %d services, want 2", re.State.Len())
	}
	if err := re.State.Restore(&statepb.JoinRecord{Service: "txn"}); err == nil || !errors.Is(err, djinn.ErrInvalidArgument) {
		t.Errorf("a record twice: %v, want refused", err)
	}
}
