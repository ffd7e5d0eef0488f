package join

import (
	"slices"
	"sync"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lds"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
	"github.com/djinn-go/djinn/service"
)

// Bounds on a service's settings.
const (
	MaxGroups      = 64
	MaxServiceName = 64
)

// Limits bound the attributes an operator gives a service: half an item's
// entries and a quarter of its attribute bytes, so that with those the
// service sets itself the item stays within any registrar's default
// limits.
var Limits = service.Limits{MaxEntries: 32, MaxAttributeBytes: 16 << 10}

// ServiceControlled are the entry types a service sets itself (Jini's
// ServiceControlled entries): an operator's attributes may not be of these
// types or have them among their supertypes.
var ServiceControlled = []string{service.ServiceInfoType, service.ClusterType}

// The attribute operations of JoinAttributesChange.
const (
	OpAdd    = 1
	OpModify = 2
	OpSet    = 3
)

// Join is one service's settings.
type Join struct {
	Service string
	// ID is the service's id in lookup services; zero for a service of
	// each node, and until the first JoinConfigure gives one.
	ID         djinn.ID
	Groups     []string        // sorted, without duplicates
	Locators   []string        // canonical jini://host:port/, sorted
	Attributes []service.Entry // canonical
	// Set by an operator: the configuration no longer governs them.
	GroupsSet, LocatorsSet, AttributesSet bool
}

func (j *Join) clone() Join {
	c := *j
	c.Groups, c.Locators, c.Attributes = slices.Clone(j.Groups), slices.Clone(j.Locators), slices.Clone(j.Attributes)
	return c
}

// State holds every service's settings.
type State struct {
	mu       sync.RWMutex
	joins    map[string]*Join  // guarded by mu: by service name
	onChange func(name string) // guarded by mu
}

// NewState returns an empty state.
func NewState() *State { return &State{joins: map[string]*Join{}} }

// OnChange sets the function told, after each applied change and outside
// the state's lock, which service changed. It must not block.
func (s *State) OnChange(fn func(name string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = fn
}

func (s *State) changed(name string) {
	s.mu.RLock()
	fn := s.onChange
	s.mu.RUnlock()
	if fn != nil {
		fn(name)
	}
}

// Get returns a copy of a service's settings, and whether it has any.
func (s *State) Get(name string) (Join, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	j, ok := s.joins[name]
	if !ok {
		return Join{Service: name}, false
	}
	return j.clone(), true
}

// Len returns how many services have settings.
func (s *State) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.joins)
}

// Reset empties the state, before a snapshot is restored.
func (s *State) Reset() {
	s.mu.Lock()
	s.joins = map[string]*Join{}
	s.mu.Unlock()
}

// checkName refuses a service name that cannot name a service.
func checkName(name string) error {
	if name == "" || len(name) > MaxServiceName {
		return djinn.Errorf(djinn.InvalidArgument, "service name %q: want 1 to %d bytes", clip(name), MaxServiceName)
	}
	return nil
}

// apply changes the settings of the service name with f, on a copy, and
// keeps the copy when f succeeds. A service without settings starts with
// none.
func (s *State) apply(name string, f func(j *Join) error) (Join, error) {
	if err := checkName(name); err != nil {
		return Join{}, err
	}
	s.mu.Lock()
	cur, ok := s.joins[name]
	next := Join{Service: name}
	if ok {
		next = cur.clone()
	}
	if err := f(&next); err != nil {
		s.mu.Unlock()
		return Join{}, err
	}
	same := ok && equal(cur, &next)
	if !same {
		s.joins[name] = &next
	}
	out := next.clone()
	s.mu.Unlock()
	if !same {
		s.changed(name)
	}
	return out, nil
}

// ApplyConfigure applies the leader's configuration of a service (see the
// package doc).
func (s *State) ApplyConfigure(c *statepb.JoinConfigure) (Join, error) {
	var id djinn.ID
	if len(c.GetServiceId()) > 0 {
		var err error
		if id, err = djinn.IDFromBytes("service id", c.GetServiceId()); err != nil {
			return Join{}, err
		}
	}
	groups, err := CheckGroups("groups", c.GetGroups())
	if err != nil {
		return Join{}, err
	}
	locators, err := lds.CheckLocators("locators", c.GetLocators())
	if err != nil {
		return Join{}, err
	}
	attrs, err := checkAttributes(c.GetAttributes())
	if err != nil {
		return Join{}, err
	}
	return s.apply(c.GetService(), func(j *Join) error {
		if j.ID.IsZero() {
			j.ID = id
		}
		if c.GetRevert() {
			j.GroupsSet, j.LocatorsSet, j.AttributesSet = false, false, false
		}
		if !j.GroupsSet {
			j.Groups = groups
		}
		if !j.LocatorsSet {
			j.Locators = locators
		}
		if !j.AttributesSet {
			j.Attributes = attrs
		}
		return nil
	})
}

// ApplyGroups applies an operator's change of a service's groups.
func (s *State) ApplyGroups(c *statepb.JoinGroupsChange) (Join, error) {
	in, err := CheckGroups("groups", c.GetGroups())
	if err != nil {
		return Join{}, err
	}
	return s.apply(c.GetService(), func(j *Join) error {
		out, err := setOp("groups", c.GetOp(), j.Groups, in)
		if err != nil {
			return err
		}
		if len(out) > MaxGroups {
			return djinn.Errorf(djinn.ResourceExhausted, "groups: the service would join by %d groups, at most %d", len(out), MaxGroups)
		}
		j.Groups, j.GroupsSet = out, true
		return nil
	})
}

// ApplyLocators applies an operator's change of a service's locators.
func (s *State) ApplyLocators(c *statepb.JoinLocatorsChange) (Join, error) {
	in, err := lds.CheckLocators("locators", c.GetLocators())
	if err != nil {
		return Join{}, err
	}
	return s.apply(c.GetService(), func(j *Join) error {
		out, err := setOp("locators", c.GetOp(), j.Locators, in)
		if err != nil {
			return err
		}
		if len(out) > lds.MaxLocators {
			return djinn.Errorf(djinn.ResourceExhausted, "locators: the service would join at %d locators, at most %d", len(out), lds.MaxLocators)
		}
		j.Locators, j.LocatorsSet = out, true
		return nil
	})
}

// ApplyAttributes applies an operator's change of a service's attributes,
// as a lookup service applies the attribute calls of a registration.
func (s *State) ApplyAttributes(c *statepb.JoinAttributesChange) (Join, error) {
	entries := wire.EntriesFrom(c.GetEntries())
	templates := make([]service.EntryTemplate, len(c.GetTemplates()))
	for i, t := range c.GetTemplates() {
		templates[i] = wire.EntryTemplateFrom(t)
	}
	if err := checkControlled(entries); err != nil {
		return Join{}, err
	}
	for _, t := range templates {
		if slices.Contains(ServiceControlled, t.Type) {
			return Join{}, djinn.Errorf(djinn.InvalidArgument, "attribute template type %s: the service sets its %s entries itself; an operator cannot change them", clip(t.Type), clip(t.Type))
		}
	}
	return s.apply(c.GetService(), func(j *Join) error {
		r, err := Limits.Record(holder(j.Attributes))
		if err != nil {
			return err
		}
		var next service.Record
		switch c.GetOp() {
		case OpAdd:
			next, _, err = r.AddAttributes(Limits, entries)
		case OpModify:
			next, _, err = r.ModifyAttributes(Limits, templates, entries)
		case OpSet:
			next, _, err = r.SetAttributes(Limits, entries)
		default:
			return djinn.Errorf(djinn.InvalidArgument, "attributes operation %d: want add (1), modify (2) or set (3)", c.GetOp())
		}
		if err != nil {
			return err
		}
		j.Attributes, j.AttributesSet = next.Item().Entries, true
		return nil
	})
}

// setOp adds, removes or sets the elements of a sorted set.
func setOp(what string, op djinnpb.SetOp, cur, in []string) ([]string, error) {
	switch op {
	case djinnpb.SetOp_SET_OP_ADD:
		out := append(slices.Clone(cur), in...)
		slices.Sort(out)
		return slices.Compact(out), nil
	case djinnpb.SetOp_SET_OP_REMOVE:
		return slices.DeleteFunc(slices.Clone(cur), func(x string) bool { return slices.Contains(in, x) }), nil
	case djinnpb.SetOp_SET_OP_SET:
		return in, nil
	}
	return nil, djinn.Errorf(djinn.InvalidArgument, "%s operation %d: want add, set or remove", what, op)
}

// CheckGroups checks group names ("" is the public group) as a multicast
// packet carries them and returns them sorted without duplicates; more
// than MaxGroups is ResourceExhausted.
func CheckGroups(what string, groups []string) ([]string, error) {
	return lds.CheckGroups(what, groups, MaxGroups)
}

// CheckAttributes checks an operator's attributes and returns them
// canonical: what the configuration's attributes must pass.
func CheckAttributes(entries []service.Entry) ([]service.Entry, error) {
	if err := checkControlled(entries); err != nil {
		return nil, err
	}
	r, err := Limits.Record(holder(entries))
	if err != nil {
		return nil, err
	}
	return r.Item().Entries, nil
}

func checkAttributes(pbs []*djinnpb.Entry) ([]service.Entry, error) {
	return CheckAttributes(wire.EntriesFrom(pbs))
}

// checkControlled refuses entries of a type the service sets itself.
func checkControlled(entries []service.Entry) error {
	for _, e := range entries {
		for _, t := range append([]string{e.Type}, e.Supertypes...) {
			if slices.Contains(ServiceControlled, t) {
				return djinn.Errorf(djinn.InvalidArgument, "attribute type %s: the service sets its %s entries itself; an operator cannot add, change or remove them", clip(e.Type), clip(t))
			}
		}
	}
	return nil
}

// holder is an item that holds entries, so that the lookup service's own
// rules can compute the attribute calls on them.
func holder(entries []service.Entry) service.Item {
	return service.Item{Service: []byte("-"), Types: []string{"-"}, Entries: entries}
}

func equal(a, b *Join) bool {
	if a.ID != b.ID || a.GroupsSet != b.GroupsSet || a.LocatorsSet != b.LocatorsSet || a.AttributesSet != b.AttributesSet ||
		!slices.Equal(a.Groups, b.Groups) || !slices.Equal(a.Locators, b.Locators) || len(a.Attributes) != len(b.Attributes) {
		return false
	}
	return holder(a.Attributes).Equal(holder(b.Attributes))
}

// clip shortens a long bad value for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
