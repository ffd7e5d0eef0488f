package lock

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/quota"
	"github.com/djinn-go/djinn/proto/statepb"
)

// A snapshot is restored as its records come: their bytes go through a
// pipe to a decoder that reads the document a value at a time and puts
// each set, holder and name into the state being built, so the document
// is never whole in memory, nor are its plain values.

// restoring is a restore under way.
type restoring struct {
	w    *io.PipeWriter
	done chan restored // the decoder's result, once it has read it all
}

type restored struct {
	st  *staged
	err error
}

// errAbandoned stops a restore that Reset cut short.
var errAbandoned = errors.New("lock state snapshot: restore abandoned")

func startRestore() *restoring {
	pr, pw := io.Pipe()
	rs := &restoring{w: pw, done: make(chan restored, 1)}
	go func() {
		st, err := decodeSnapshot(pr)
		_ = pr.CloseWithError(err) // a writer still writing hears it
		rs.done <- restored{st: st, err: err}
	}()
	return rs
}

// Restore adds a snapshot record; the last one replaces the state with
// the records' (leases are restored separately).
func (s *State) Restore(r *statepb.LockRecord) error {
	s.mu.Lock()
	rs := s.restoring
	if rs == nil {
		rs = startRestore()
		s.restoring = rs
	}
	if r.GetLast() {
		s.restoring = nil
	}
	s.mu.Unlock()
	if _, err := rs.w.Write(r.GetTable()); err != nil {
		s.abandon(rs)
		return (<-rs.done).err
	}
	if !r.GetLast() {
		return nil
	}
	_ = rs.w.Close()
	res := <-rs.done
	if res.err != nil {
		return res.err
	}
	return s.install(res.st)
}

// abandon forgets restore rs if it is the one under way.
func (s *State) abandon(rs *restoring) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.restoring == rs {
		s.restoring = nil
	}
}

// stopRestore ends a restore under way, if any, and waits for its decoder.
func (s *State) stopRestore() {
	s.mu.Lock()
	rs := s.restoring
	s.restoring = nil
	s.mu.Unlock()
	if rs != nil {
		_ = rs.w.CloseWithError(errAbandoned)
		<-rs.done
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
	return nil
}

func snapErr(format string, args ...any) error {
	return djinn.Errorf(djinn.Internal, "lock state snapshot: "+format, args...)
}

// decodeSnapshot reads a snapshot's document from r: one JSON object
// whose fields are those of snapshot, in any order, matched as
// json.Unmarshal matches them (case aside); unknown fields are skipped.
func decodeSnapshot(r io.Reader) (*staged, error) { return newDocDecoder(r).decode() }

func newDocDecoder(r io.Reader) *docDecoder {
	return &docDecoder{dec: json.NewDecoder(r), st: &staged{im: newImporter(),
		setInfo: []setInfo{{}}, far: map[uint64]setInfo{}, owners: map[djinn.ID]uint64{}, txns: map[TxnKey]uint64{},
		holders: map[uint64]holderName{}, waiting: map[uint64]string{}}}
}

func (d *docDecoder) decode() (*staged, error) {
	if err := d.object(d.field); err != nil {
		return nil, err
	}
	if _, err := d.dec.Token(); err != io.EOF {
		return nil, snapErr("data after the document")
	}
	return d.st, d.st.finish()
}

// docDecoder decodes a snapshot's document into st.
type docDecoder struct {
	dec  *json.Decoder
	st   *staged
	seen []string
}

// syntax names a decoding error of the document.
func syntax(err error) error {
	if err == nil {
		return nil
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	var dj *djinn.Error
	if errors.As(err, &dj) {
		return err
	}
	return snapErr("%v", err)
}

// object reads a JSON object, handing each field's name to fn, which
// reads its value.
func (d *docDecoder) object(fn func(name string) error) error {
	if err := d.delim('{'); err != nil {
		return err
	}
	for d.dec.More() {
		tok, err := d.dec.Token()
		if err != nil {
			return syntax(err)
		}
		if err := fn(tok.(string)); err != nil {
			return err
		}
	}
	_, err := d.dec.Token() // '}'
	return syntax(err)
}

func (d *docDecoder) delim(want json.Delim) error {
	tok, err := d.dec.Token()
	if err != nil {
		return syntax(err)
	}
	if tok != want {
		return snapErr("%v where %v was expected", tok, want)
	}
	return nil
}

// once refuses a field seen before, by json.Unmarshal's matching of names.
func (d *docDecoder) once(name string) error {
	for _, s := range d.seen {
		if strings.EqualFold(s, name) {
			return snapErr("field %q appears twice", name)
		}
	}
	d.seen = append(d.seen, name)
	return nil
}

// field reads the value of the document's field name.
func (d *docDecoder) field(name string) error {
	if err := d.once(name); err != nil {
		return err
	}
	st := d.st
	switch strings.ToLower(name) {
	case "table":
		return d.object(func(name string) error {
			if strings.EqualFold(name, "Sets") {
				return each(d, st.im.add)
			}
			return d.skip()
		})
	case "sets":
		return each(d, st.addSet)
	case "holders":
		return each(d, st.addHolder)
	case "nextset":
		return d.value(&st.nextSet)
	case "freesets":
		return d.value(&st.freeSets)
	case "nextid":
		return d.value(&st.nextID)
	case "recent":
		return d.value(&st.recent)
	case "waiting":
		return d.value(&st.waiting)
	}
	return d.skip()
}

func (d *docDecoder) value(v any) error { return syntax(d.dec.Decode(v)) }

func (d *docDecoder) skip() error {
	var v json.RawMessage
	return d.value(&v)
}

// each reads a JSON array (or null) and hands its elements to fn one at
// a time.
func each[T any](d *docDecoder, fn func(T) error) error {
	tok, err := d.dec.Token()
	if err != nil {
		return syntax(err)
	}
	if tok == nil {
		return nil
	}
	if tok != json.Delim('[') {
		return snapErr("%v where a list was expected", tok)
	}
	for d.dec.More() {
		var v T
		if err := d.value(&v); err != nil {
			return err
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	_, err = d.dec.Token() // ']'
	return syntax(err)
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
