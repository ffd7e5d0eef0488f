package lock

import (
	"slices"

	"github.com/djinn-go/djinn"
)

// Snapshot is the whole table as plain values, for raft snapshots: Import
// of an Export rebuilds a table that answers every call as the exported
// one would.
type Snapshot struct {
	Sets []SetState // by id
}

// Export returns the table's state.
func (t *Table) Export() Snapshot {
	ids := t.sortedSets()
	out := Snapshot{Sets: make([]SetState, len(ids))}
	for i, id := range ids {
		out.Sets[i] = t.sets.at(id).state(id)
	}
	return out
}

// Import builds a table from a snapshot. It checks what the table relies
// on — ids, modes, fences, holders' lineages, claims of waiting
// change_mode requests — and names the first bad value it finds; it does
// not check that the snapshot is a state the table could have reached
// (that no two holders conflict, say).
func Import(snap Snapshot) (*Table, error) {
	im := newImporter()
	for _, ss := range snap.Sets {
		if err := im.add(ss); err != nil {
			return nil, err
		}
	}
	return im.finish(), nil
}

// importer builds a table from a snapshot's sets one at a time, as a
// restore decodes them: each set, with its holders and its waiting
// requests, goes into the table as it comes.
type importer struct {
	t      *Table
	groups map[uint64]*group // by the smallest id of the group
}

func newImporter() *importer { return &importer{t: New(), groups: map[uint64]*group{}} }

// add imports set ss.
func (im *importer) add(ss SetState) error {
	if err := im.t.importSet(ss, im.groups); err != nil {
		return err
	}
	return im.t.importWaiters(ss)
}

// finish returns the table: a set alone in its group is related to none.
func (im *importer) finish() *Table {
	for _, g := range im.groups {
		slices.Sort(g.members)
		if len(g.members) == 1 {
			s := im.t.sets.at(g.members[0])
			s.more.group = nil
			s.setQueue(s.queue()) // drops more if no request waits
		}
	}
	return im.t
}

func (t *Table) importSet(ss SetState, groups map[uint64]*group) error {
	if ss.ID == 0 {
		return djinn.Errorf(djinn.InvalidArgument, "snapshot: lock set 0: a set id must be non-zero")
	}
	if _, ok := t.sets.get(ss.ID); ok {
		return djinn.Errorf(djinn.InvalidArgument, "snapshot: lock set %d: appears twice", ss.ID)
	}
	if ss.Fence > maxFence-uint64(len(ss.Waiters)) {
		return djinn.Errorf(djinn.InvalidArgument, "snapshot: lock set %d: fence %d: too large", ss.ID, ss.Fence)
	}
	s := t.sets.add(ss.ID)
	s.txn, s.fence = ss.Transactional, ss.Fence
	if err := t.importGroup(ss, s, groups); err != nil {
		return err
	}
	seen := map[uint64]bool{}
	for _, hi := range ss.Holders {
		if err := hi.Holder.check(); err != nil {
			return err
		}
		if s.txn && !hi.Holder.Txn {
			return djinn.Errorf(djinn.InvalidArgument, "snapshot: lock set %d: transactional, and %s is not a transaction", ss.ID, hi.Holder)
		}
		if len(hi.Locks) == 0 {
			return djinn.Errorf(djinn.InvalidArgument, "snapshot: lock set %d: %s holds no lock", ss.ID, hi.Holder)
		}
		p, err := t.lookup(hi.Holder)
		if err != nil {
			return err
		}
		i, dup := s.find(p.key)
		if dup {
			return djinn.Errorf(djinn.InvalidArgument, "snapshot: lock set %d: %s appears twice", ss.ID, hi.Holder)
		}
		grants := make([]uint64, len(hi.Locks))
		for j, l := range hi.Locks {
			if err := checkMode("snapshot: lock mode", l.Mode); err != nil {
				return err
			}
			if l.Fence == 0 || l.Fence > ss.Fence || seen[l.Fence] {
				return djinn.Errorf(djinn.InvalidArgument, "snapshot: lock set %d: fence %d of %s: zero, repeated or past the set's last fence %d", ss.ID, l.Fence, hi.Holder, ss.Fence)
			}
			seen[l.Fence] = true
			grants[j] = pack(l.Fence, l.Mode)
		}
		slices.Sort(grants)
		t.link(p)
		s.holders = slices.Insert(s.holders, i, holding{p: p, idx: len(p.sets), grants: grants})
		p.sets = append(p.sets, ss.ID)
	}
	return nil
}

// importGroup puts s, set ss, in its related group. A set that names
// itself (or none) as its group stays alone until another names it: most
// sets are alone, and cost no group while the snapshot is read.
func (t *Table) importGroup(ss SetState, s *set, groups map[uint64]*group) error {
	gid := ss.Group
	if gid == 0 {
		gid = ss.ID
	}
	g, ok := groups[gid]
	if !ok && gid == ss.ID {
		return nil
	}
	if !ok {
		g = &group{}
		if lead, ok := t.sets.get(gid); ok && (lead.more == nil || lead.more.group == nil) {
			// The set named is its own group's: it leads this one.
			g.members = []uint64{gid}
			lead.ensureMore().group = g
		}
		groups[gid] = g
	}
	if len(g.members) > 0 {
		if first := t.sets.at(g.members[0]); first.txn != s.txn {
			return djinn.Errorf(djinn.InvalidArgument, "snapshot: lock set %d: %s, but its group %d holds %s sets", ss.ID, kindName(s.txn), ss.Group, kindName(first.txn))
		}
	}
	g.members = append(g.members, ss.ID)
	s.more = &setMore{group: g}
	return nil
}

func (t *Table) importWaiters(ss SetState) error {
	s := t.sets.at(ss.ID)
	q := make([]*waiter, 0, len(ss.Waiters))
	for _, r := range ss.Waiters {
		if r.ID == 0 {
			return djinn.Errorf(djinn.InvalidArgument, "snapshot: lock set %d: request id 0: must be non-zero", ss.ID)
		}
		if _, dup := t.waiting[r.ID]; dup {
			return djinn.Errorf(djinn.InvalidArgument, "snapshot: request %d: appears twice", r.ID)
		}
		if r.Set != ss.ID {
			return djinn.Errorf(djinn.InvalidArgument, "snapshot: request %d: names lock set %d but waits in %d", r.ID, r.Set, ss.ID)
		}
		if err := checkMode("snapshot: lock mode", r.Mode); err != nil {
			return err
		}
		if err := r.Holder.check(); err != nil {
			return err
		}
		if s.txn && !r.Holder.Txn {
			return djinn.Errorf(djinn.InvalidArgument, "snapshot: lock set %d: transactional, and %s is not a transaction", ss.ID, r.Holder)
		}
		p, err := t.lookup(r.Holder)
		if err != nil {
			return err
		}
		if r.From != 0 {
			if err := checkMode("snapshot: held mode", r.From); err != nil {
				return err
			}
			if err := t.checkHeld(ss.ID, s, p.key, r.From, "change"); err != nil {
				return djinn.Errorf(djinn.InvalidArgument, "snapshot: request %d: %v", r.ID, err)
			}
		}
		t.link(p)
		w := &waiter{id: r.ID, set: ss.ID, p: p, mode: r.Mode, from: r.From}
		q = append(q, w)
		t.waiting[w.id] = w
		p.addWait(w)
	}
	s.setQueue(q)
	return nil
}
