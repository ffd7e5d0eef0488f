package lock

import (
	"encoding/json"
	"slices"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/statepb"
	"google.golang.org/protobuf/proto"
)

// A snapshot is written from a view: taken between applies, it copies
// nothing of the sets; the writer reads them afterwards, a batch at a
// time under the state's lock, while applies go on. A set, a set's names
// or a holder's name about to change keeps, in each open view taken
// since it last changed, a copy of itself as it was: a view costs what
// changes while it is open, not what the state holds.

// tableView is a view of a table's sets.
type tableView struct {
	gen   uint32
	saved map[uint64]SetState // sets changed since the view, as they were
}

// touch is called before set id changes.
func (t *Table) touch(id uint64, s *set) {
	if s.gen == t.gen {
		return
	}
	for _, v := range t.views {
		if v.gen > s.gen {
			v.saved[id] = s.state(id)
		}
	}
	s.gen = t.gen
}

// touchGroup touches set id and the sets related to it: a change of the
// group changes how each of them names it.
func (t *Table) touchGroup(id uint64, s *set) {
	if s.more == nil || s.more.group == nil {
		t.touch(id, s)
		return
	}
	for _, m := range s.more.group.members {
		t.touch(m, t.sets.at(m))
	}
}

func (t *Table) view() *tableView {
	t.gen++
	v := &tableView{gen: t.gen, saved: map[uint64]SetState{}}
	t.views = append(t.views, v)
	return v
}

func (t *Table) release(v *tableView) {
	t.views = slices.DeleteFunc(t.views, func(x *tableView) bool { return x == v })
}

// at returns set id as view v sees it.
func (t *Table) at(v *tableView, id uint64) (SetState, bool) {
	if ss, ok := v.saved[id]; ok {
		return ss, true
	}
	if s, ok := t.sets.get(id); ok && s.gen < v.gen {
		return s.state(id), true
	}
	return SetState{}, false
}

// stateView is a view of the state: its table's, and of the names. The
// short or bounded parts — free ids, recent grants, waiting requests'
// principals, holder ids — are copied.
type stateView struct {
	table   *Table
	tv      *tableView
	epoch   uint64
	nextSet uint64                // the table ids 1..nextSet
	names   map[uint64]setInfo    // names of table ids changed since, as they were
	holders map[uint64]holderName // holder names changed since, as they were
	ids     []uint64              // the holders, ascending
	snap    snapshot              // NextID, FreeSets, Recent, Waiting
}

// takeView takes a view of the state now.
func (s *State) takeView() *stateView {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := &stateView{table: s.table, tv: s.table.view(), epoch: s.epoch, nextSet: s.nextSet,
		names: map[uint64]setInfo{}, holders: map[uint64]holderName{}}
	rest := s.exportRest()
	v.snap = snapshot{NextSet: s.nextSet, NextID: s.nextID, FreeSets: rest.FreeSets, Recent: rest.Recent, Waiting: rest.Waiting, Aborted: rest.Aborted}
	v.ids = make([]uint64, 0, len(s.holders))
	for id := range s.holders {
		v.ids = append(v.ids, id)
	}
	slices.Sort(v.ids)
	s.views = append(s.views, v)
	return v
}

func (s *State) releaseView(v *stateView) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v.table.release(v.tv)
	s.views = slices.DeleteFunc(s.views, func(x *stateView) bool { return x == v })
}

// nameChanging is called before the names of table id tid change.
func (s *State) nameChanging(tid uint64) {
	for _, v := range s.views {
		if _, ok := v.names[tid]; !ok && tid <= v.nextSet {
			v.names[tid] = s.setInfo[tid]
		}
	}
}

// holderChanging is called before the name of holder id changes or goes.
func (s *State) holderChanging(id uint64) {
	for _, v := range s.views {
		if _, ok := v.holders[id]; !ok && id <= v.snap.NextID {
			if n, ok := s.holders[id]; ok {
				v.holders[id] = n
			}
		}
	}
}

// View is the lock part's state.Part.View.
func (s *State) View() (state.Dump, func()) {
	v := s.takeView()
	dump := func(emit func(proto.Message) error) error {
		return s.writeView(v, wire.RecordSize, func(r *statepb.LockRecord) error { return emit(r) })
	}
	return dump, func() { s.releaseView(v) }
}

// viewBatch is how many sets or names the writer reads under the lock at
// a time.
const viewBatch = 256

// writeView writes view v as records of at most size bytes: the bytes
// encode writes of the state exported when v was taken.
func (s *State) writeView(v *stateView, size int, emit func(*statepb.LockRecord) error) error {
	e := &encoder{w: recordWriter{size: size, emit: emit}}
	e.enc = json.NewEncoder(&e.buf)
	e.raw(`{"Table":{"Sets":`)
	err := viewList(s, v, e, v.nextSet, "[]", func(i uint64) (SetState, bool) { return v.table.at(v.tv, i+1) })
	e.raw(`},"Sets":`)
	if err == nil {
		err = viewList(s, v, e, v.nextSet, "null", func(i uint64) (snapSet, bool) { return s.viewName(v, i+1) })
	}
	e.raw(`,"NextSet":`)
	e.number(v.snap.NextSet)
	if len(v.snap.FreeSets) > 0 {
		e.raw(`,"FreeSets":`)
		e.uints(v.snap.FreeSets)
	}
	e.raw(`,"Holders":`)
	if err == nil {
		err = viewList(s, v, e, uint64(len(v.ids)), "null", func(i uint64) (snapHolder, bool) { return s.viewHolder(v, v.ids[i]), true })
	}
	e.raw(`,"NextID":`)
	e.number(v.snap.NextID)
	e.raw(`,"Recent":`)
	e.uints(v.snap.Recent)
	if len(v.snap.Waiting) > 0 {
		e.raw(`,"Waiting":`)
		e.value(v.snap.Waiting)
	}
	if len(v.snap.Aborted) > 0 {
		e.raw(`,"Aborted":`)
		list(e, v.snap.Aborted)
	}
	e.raw(`}`)
	if err != nil {
		return err
	}
	return e.w.finish()
}

// viewList writes the elements get gives for 0..n-1 (those it has) as a
// JSON list, empty as none says, reading them a batch at a time under the
// state's lock.
func viewList[T any](s *State, v *stateView, e *encoder, n uint64, none string, get func(i uint64) (T, bool)) error {
	batch := make([]T, 0, viewBatch)
	wrote := false
	for i := uint64(0); i < n; {
		batch = batch[:0]
		s.mu.Lock()
		if s.epoch != v.epoch {
			s.mu.Unlock()
			return djinn.Errorf(djinn.Unavailable, "lock state snapshot: the state was replaced (a snapshot installed) while it was written: take another")
		}
		for end := min(n, i+viewBatch); i < end; i++ {
			if x, ok := get(i); ok {
				batch = append(batch, x)
			}
		}
		s.mu.Unlock()
		for j := range batch {
			if wrote {
				e.raw(",")
			} else {
				e.raw("[")
				wrote = true
			}
			e.value(&batch[j])
		}
	}
	if !wrote {
		e.raw(none)
		return nil
	}
	e.raw("]")
	return nil
}

// viewName returns the names of table id tid as view v sees them.
func (s *State) viewName(v *stateView, tid uint64) (snapSet, bool) {
	in, ok := v.names[tid]
	if !ok && tid < uint64(len(s.setInfo)) {
		in = s.setInfo[tid]
	}
	return snapSet{ID: in.id, Cookie: in.cookie, Table: tid}, !in.id.IsZero()
}

// viewHolder returns holder id's name as view v sees it.
func (s *State) viewHolder(v *stateView, id uint64) snapHolder {
	n, ok := v.holders[id]
	if !ok {
		n = s.holders[id]
	}
	return holderSnap(id, n)
}
