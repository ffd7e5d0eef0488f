package lookup

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/service"
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
	Template    service.Template
	Transitions service.Transition
}

// Export returns the registry's state. The caller owns it.
func (r *Registry) Export() Snapshot {
	var s Snapshot
	for _, it := range r.items {
		s.Registrations = append(s.Registrations, Registration{Item: it.Item(), Lease: it.lease})
	}
	slices.SortFunc(s.Registrations, func(a, b Registration) int { return bytes.Compare(a.Item.ID[:], b.Item.ID[:]) })
	s.Watches = r.ExportWatches()
	return s
}

// ExportWatches returns the watches as Export does, by watch id. The
// caller owns them.
func (r *Registry) ExportWatches() []Watch {
	var ws []Watch
	for _, w := range r.watches.all {
		ws = append(ws, Watch{ID: w.id, Template: w.tmpl.Template(), Transitions: w.mask})
	}
	slices.SortFunc(ws, func(a, b Watch) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return ws
}

// EncodedRegistration is a registration as ExportEncoded gives it: the
// item in its wire form (service.Record.AppendWire) and its lease.
type EncodedRegistration struct {
	Item  []byte
	Lease djinn.ID
}

// ExportEncoded returns the registrations as Export does, by service id,
// with each item in its wire form, written straight from the stored item:
// a snapshot of a large registry then costs one buffer rather than
// messages for every entry and field. The items share that buffer; the
// caller owns it.
func (r *Registry) ExportEncoded() []EncodedRegistration {
	its := make([]*item, 0, len(r.items))
	for _, it := range r.items {
		its = append(its, it)
	}
	slices.SortFunc(its, byID)
	regs := make([]EncodedRegistration, len(its))
	for i, b := range encodeItems(its) {
		regs[i] = EncodedRegistration{Item: b, Lease: its[i].lease}
	}
	return regs
}

// Import replaces the registry's state with a snapshot's, rebuilding its
// indexes. It checks what Register and AddWatch check except the Limits
// (limits bound requests, and a snapshot may come from a registry with
// larger ones): it names the first bad value and leaves the registry
// unchanged on any error. The registry keeps its own service id and limits.
func (r *Registry) Import(s Snapshot) error {
	n := &Registry{self: r.self, lim: r.lim, own: r.own}
	n.reset()
	for i, reg := range s.Registrations {
		st, err := checkItem(unlimited, reg.Item, n.self)
		if err == nil && reg.Lease.IsZero() {
			err = djinn.Errorf(djinn.InvalidArgument, "item %s lease id %s: zero", reg.Item.ID, reg.Lease)
		}
		if err == nil && n.items[st.ID()] != nil {
			err = djinn.Errorf(djinn.InvalidArgument, "service id %s: registered twice", st.ID())
		}
		if err != nil {
			return importErr("registration", i, err)
		}
		st.lease = reg.Lease
		n.put(st)
	}
	for i, w := range s.Watches {
		if err := n.addWatch(unlimited, w.ID, w.Template, w.Transitions); err != nil {
			return importErr("watch", i, err)
		}
	}
	*r = *n
	return nil
}

func importErr(what string, i int, err error) error {
	return &djinn.Error{Kind: djinn.KindOf(err), Message: fmt.Sprintf("snapshot %s %d: %v", what, i, err)}
}
