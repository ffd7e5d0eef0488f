package lock

import (
	"maps"
	"math/bits"
	"slices"
)

// setStore holds a table's sets by id. The service numbers its sets
// densely (a removed set's number is taken again), so sets below
// denseLimit live by value in pages of pageLen, found by their number
// with no map entry or allocation of their own; any other id (a table
// used with ids of its caller's, an odd snapshot) lives in a map. A set
// stays where it is until it is removed: a *set is good until then.
type setStore struct {
	pages []*setPage // by id / pageLen; nil: none of its sets live
	far   map[uint64]*set
	n     int
}

const (
	pageLen    = 128
	denseLimit = 1 << 24
)

type setPage struct {
	live [pageLen / 64]uint64
	n    int
	sets [pageLen]set
}

func (p *setPage) has(i uint64) bool { return p.live[i/64]&(1<<(i%64)) != 0 }

func (st *setStore) len() int { return st.n }

// get returns set id.
func (st *setStore) get(id uint64) (*set, bool) {
	if id >= denseLimit {
		s, ok := st.far[id]
		return s, ok
	}
	pi, i := id/pageLen, id%pageLen
	if pi >= uint64(len(st.pages)) || st.pages[pi] == nil || !st.pages[pi].has(i) {
		return nil, false
	}
	return &st.pages[pi].sets[i], true
}

// at returns set id, which must be live.
func (st *setStore) at(id uint64) *set {
	s, _ := st.get(id)
	return s
}

// add makes set id, a zero set, and returns it. Id must not be live.
func (st *setStore) add(id uint64) *set {
	st.n++
	if id >= denseLimit {
		if st.far == nil {
			st.far = map[uint64]*set{}
		}
		s := &set{}
		st.far[id] = s
		return s
	}
	pi, i := id/pageLen, id%pageLen
	if pi >= uint64(len(st.pages)) {
		st.pages = append(st.pages, make([]*setPage, pi+1-uint64(len(st.pages)))...)
	}
	p := st.pages[pi]
	if p == nil {
		p = &setPage{}
		st.pages[pi] = p
	}
	p.live[i/64] |= 1 << (i % 64)
	p.n++
	return &p.sets[i]
}

// del removes set id, which must be live.
func (st *setStore) del(id uint64) {
	st.n--
	if id >= denseLimit {
		delete(st.far, id)
		return
	}
	pi, i := id/pageLen, id%pageLen
	p := st.pages[pi]
	p.live[i/64] &^= 1 << (i % 64)
	p.sets[i] = set{}
	if p.n--; p.n == 0 {
		st.pages[pi] = nil
	}
}

// ids returns the live ids, ascending.
func (st *setStore) ids() []uint64 {
	out := make([]uint64, 0, st.n)
	for pi, p := range st.pages {
		if p == nil {
			continue
		}
		for w, word := range p.live {
			for ; word != 0; word &= word - 1 {
				out = append(out, uint64(pi)*pageLen+uint64(w)*64+uint64(bits.TrailingZeros64(word)))
			}
		}
	}
	return append(out, slices.Sorted(maps.Keys(st.far))...)
}
