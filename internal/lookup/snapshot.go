package lookup

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/djinn-go/djinn"
)

// Snapshot is the registry's state as plain values, for raft snapshots.
// Import of an Export rebuilds a registry that answers every call as the
// exported one would.
type Snapshot struct {
	Registrations []Registration // by service id
	Watches       []Watch        // by watch id
}

// Watch is a watch as a snapshot holds it. Its template is in stored form:
// types sorted without duplicates, wildcard fields left out, set fields
// sorted by name.
type Watch struct {
	ID          djinn.ID
	Template    Template
	Transitions Transition
}

// Export returns the registry's state. The caller owns it.
func (r *Registry) Export() Snapshot {
	var s Snapshot
	for _, it := range r.items {
		s.Registrations = append(s.Registrations, Registration{Item: it.public(), Lease: it.lease})
	}
	slices.SortFunc(s.Registrations, func(a, b Registration) int { return bytes.Compare(a.Item.ID[:], b.Item.ID[:]) })
	for _, w := range r.watches.all {
		s.Watches = append(s.Watches, Watch{ID: w.id, Template: w.tmpl.public(), Transitions: w.mask})
	}
	slices.SortFunc(s.Watches, func(a, b Watch) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return s
}

// Import replaces the registry's state with a snapshot's, rebuilding its
// indexes. It checks what Register and AddWatch check except the Limits
// (limits bound requests, and a snapshot may come from a registry with
// larger ones): it names the first bad value and leaves the registry
// unchanged on any error. The registry keeps its own service id and limits.
func (r *Registry) Import(s Snapshot) error {
	n := &Registry{self: r.self, lim: r.lim, own: r.own}
	n.reset()
	lim := unlimited
	for i, reg := range s.Registrations {
		st, err := lim.item(reg.Item, n.self)
		if err == nil && reg.Lease.IsZero() {
			err = djinn.Errorf(djinn.InvalidArgument, "item %s lease id %s: zero", reg.Item.ID, reg.Lease)
		}
		if err == nil && n.items[st.id] != nil {
			err = djinn.Errorf(djinn.InvalidArgument, "service id %s: registered twice", st.id)
		}
		if err != nil {
			return importErr("registration", i, err)
		}
		st.lease = reg.Lease
		n.put(st)
	}
	for i, w := range s.Watches {
		if err := n.addWatch(&lim, w.ID, w.Template, w.Transitions); err != nil {
			return importErr("watch", i, err)
		}
	}
	*r = *n
	return nil
}

func importErr(what string, i int, err error) error {
	return &djinn.Error{Kind: djinn.KindOf(err), Message: fmt.Sprintf("snapshot %s %d: %v", what, i, err)}
}
