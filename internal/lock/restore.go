package lock

import (
	"math"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/proto/statepb"
)

// A snapshot is restored as its records come: each record's bytes go to
// a decoder that reads as much of the document as they complete — a set,
// a name, a holder at a time — and puts it into the state being built, so
// neither the document nor its plain values are ever whole in memory.

// Restore adds a snapshot record; the last one replaces the state with
// the records' (leases are restored separately).
func (s *State) Restore(r *statepb.LockRecord) error {
	s.mu.Lock()
	d := s.restoring
	if d == nil {
		d = newDocDecoder()
		s.restoring = d
	}
	if r.GetLast() {
		s.restoring = nil
	}
	s.mu.Unlock()
	if err := d.push(r.GetTable(), r.GetLast()); err != nil {
		s.abandon(d)
		return err
	}
	if !r.GetLast() {
		return nil
	}
	if err := d.st.finish(); err != nil {
		return err
	}
	return s.install(d.st)
}

// Restored says whether the snapshot just read ended inside the lock
// document: records came, but not its last one.
func (s *State) Restored() error {
	s.mu.Lock()
	d := s.restoring
	s.restoring = nil
	s.mu.Unlock()
	if d != nil {
		return snapErr("the lock document's last record is missing: the snapshot was cut short")
	}
	return nil
}

// abandon forgets restore d if it is the one under way.
func (s *State) abandon(d *docDecoder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.restoring == d {
		s.restoring = nil
	}
}

// staged is a state decoded from a snapshot, not yet in place.
type staged struct {
	im       *importer
	setInfo  []setInfo
	far      map[uint64]setInfo // names of sets past setInfo's end, until NextSet is known
	maxSet   snapSet            // the set with the highest table id
	nSets    int
	freeSets []uint64
	nextSet  uint64
	nextID   uint64
	owners   map[djinn.ID]uint64
	txns     map[TxnKey]uint64
	holders  map[uint64]holderName
	recent   []uint64
	waiting  map[uint64]string
	votes    abortedVotes
}

// install puts st in place of the state. It indexes the sets by id, and
// refuses a set id named twice.
func (s *State) install(st *staged) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch++
	s.table, s.nextSet, s.nextID = st.im.t, st.nextSet, st.nextID
	s.sets, s.setInfo, s.freeSets = s.newSetIndex(), st.setInfo, st.freeSets
	for tid, in := range s.setInfo {
		if in.id.IsZero() {
			continue
		}
		if _, dup := s.sets.Find(in.id); dup {
			return snapErr("set %s appears twice", in.id)
		}
		s.sets.Insert(uint32(tid))
	}
	s.owners, s.txns, s.holders = st.owners, st.txns, st.holders
	s.recent = recentGrants{}
	for i := 0; i < len(st.recent); i += 2 {
		s.recent.add(st.recent[i], st.recent[i+1])
	}
	s.waiting = map[uint64]string{}
	for id, p := range st.waiting {
		s.waiting[id] = p
		s.leases.Quotas().Add(p, quota.LockWaiters, 1)
	}
	s.votes = st.votes
	return nil
}

func snapErr(format string, args ...any) error {
	return djinn.Errorf(djinn.Internal, "lock state snapshot: "+format, args...)
}

// addSet adds a set's names.
func (st *staged) addSet(ss snapSet) error {
	if ss.ID.IsZero() {
		return snapErr("a set with the zero id")
	}
	if ss.Table == 0 || ss.Table > math.MaxUint32 {
		return snapErr("set %s has table id %d: want 1 to %d", ss.ID, ss.Table, uint32(math.MaxUint32))
	}
	st.nSets++
	if ss.Table > st.maxSet.Table {
		st.maxSet = ss
	}
	in := setInfo{id: ss.ID, cookie: ss.Cookie}
	switch n := uint64(len(st.setInfo)); {
	case ss.Table < n:
		st.setInfo[ss.Table] = in
	case ss.Table <= 2*uint64(st.nSets)+1024:
		// The ids are dense (removed sets' are taken again): the slice
		// grows as it would holding them, bounded by the sets read.
		st.setInfo = append(st.setInfo, make([]setInfo, ss.Table+1-n)...)
		st.setInfo[ss.Table] = in
	default:
		st.far[ss.Table] = in // placed once NextSet bounds the slice
	}
	return nil
}

// addHolder adds a holder's name.
func (st *staged) addHolder(h snapHolder) error {
	if h.Txn != nil {
		st.txns[*h.Txn] = h.ID
		n := holderName{txn: *h.Txn, isTxn: true}
		if h.Secret != nil {
			n.secret = *h.Secret
		}
		st.holders[h.ID] = n
		return nil
	}
	st.owners[h.Owner] = h.ID
	st.holders[h.ID] = holderName{owner: h.Owner}
	return nil
}

// finish checks what only the whole document tells, and completes st.
func (st *staged) finish() error {
	// Every table id up to NextSet is a live set's or a free one.
	if st.nextSet > uint64(st.nSets+len(st.freeSets)) {
		return snapErr("table ids up to %d, but %d sets and %d free ids", st.nextSet, st.nSets, len(st.freeSets))
	}
	if st.maxSet.Table > st.nextSet {
		return snapErr("set %s has table id %d, beyond %d", st.maxSet.ID, st.maxSet.Table, st.nextSet)
	}
	if n := uint64(len(st.setInfo)); n <= st.nextSet {
		st.setInfo = append(st.setInfo, make([]setInfo, st.nextSet+1-n)...)
	}
	for tid, in := range st.far {
		st.setInfo[tid] = in
	}
	st.far = nil
	if len(st.recent)%2 != 0 {
		return snapErr("odd recent grants")
	}
	st.im.finish()
	return nil
}
