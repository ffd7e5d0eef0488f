// Package slab keeps many small records without a heap object per record,
// for the replicated state that holds millions of them (leases, mailbox
// registrations):
//
//   - A Slab holds records by value in fixed-size chunks and names each by
//     its slot, a number that stays the record's while it lives. A slot
//     freed is used again; a chunk left empty is let go.
//   - An Index finds a record's slot by its key. It is open-addressed and
//     holds slot numbers only: the key is read from the record itself, so
//     it is stored once.
//   - A View is the slab as it was when the view was taken, for a snapshot
//     written while the slab goes on changing. Taking one copies only the
//     list of chunks; from then on, the first change to a chunk the view
//     shares copies that chunk (copy-on-write), so the view costs memory
//     only for the chunks that change while it is held.
//
// Nothing here locks: the owner of a slab guards it, its index and the
// taking and releasing of its views with its own mutex. A View, once
// taken, is read without that lock.
package slab

import "math/bits"

const (
	chunkBits = 10
	// ChunkLen is the number of records in a chunk.
	ChunkLen  = 1 << chunkBits
	chunkMask = ChunkLen - 1
	liveWords = ChunkLen / 64
)

// chunk is ChunkLen records and which of them are live. gen is the
// generation of the slab it was made or copied in, which tells whether a
// view shares it. The records are an allocation of their own: ChunkLen
// records of a size that is a multiple of 8 fill whole pages, where one
// object with a header beside them would take a page more.
type chunk[T any] struct {
	recs *[ChunkLen]T
	live [liveWords]uint64
	gen  uint64
}

func (c *chunk[T]) isLive(i uint32) bool { return c.live[i/64]&(1<<(i%64)) != 0 }

// Slab holds records of type T by slot. The zero Slab is empty and ready.
//
// T should hold no pointers where that can be avoided: a chunk of
// pointer-free records is one object the collector does not scan. A T
// that holds pointers (a slice, a map, a string) shares what they point
// to with every view of the slab: while a view is held (Shared), replace
// such a value instead of changing it in place.
type Slab[T any] struct {
	chunks []*chunk[T]
	// counts are the live records of each chunk.
	counts []uint16
	// partial are the chunks with a free slot, each once; slots are
	// taken from the last.
	partial   []uint32
	onPartial []bool
	n         int
	// gen is the generation of the chunks made or copied since the last
	// view was taken; chunks of generation shared or older are seen by a
	// view and copied before they change (shared 0: none is).
	gen, shared uint64
	views       int
}

// Len returns the number of live records.
func (s *Slab[T]) Len() int { return s.n }

// Cap returns one more than the highest slot there is room for: every
// live slot is below it.
func (s *Slab[T]) Cap() uint32 { return uint32(len(s.chunks)) * ChunkLen }

// Shared reports whether a view is held: what the records point to must
// then be replaced, not changed.
func (s *Slab[T]) Shared() bool { return s.views > 0 }

// Alloc takes a free slot, holding T's zero value, and returns it.
func (s *Slab[T]) Alloc() uint32 {
	if len(s.partial) == 0 {
		ci := uint32(len(s.chunks))
		s.chunks = append(s.chunks, nil)
		s.counts = append(s.counts, 0)
		s.onPartial = append(s.onPartial, true)
		s.partial = append(s.partial, ci)
	}
	ci := s.partial[len(s.partial)-1]
	c := s.writable(ci)
	i := freeBit(&c.live)
	c.live[i/64] |= 1 << (i % 64)
	s.counts[ci]++
	s.n++
	if s.counts[ci] == ChunkLen {
		s.partial = s.partial[:len(s.partial)-1]
		s.onPartial[ci] = false
	}
	return ci<<chunkBits | i
}

// freeBit returns the first clear bit of a chunk that has one.
func freeBit(live *[liveWords]uint64) uint32 {
	for w, word := range live {
		if word != ^uint64(0) {
			return uint32(w*64 + bits.TrailingZeros64(^word))
		}
	}
	panic("slab: a chunk on the free list is full")
}

// Free lets a live slot go; its record becomes T's zero value. Freeing a
// slot that is not live does nothing.
func (s *Slab[T]) Free(slot uint32) {
	ci, i := slot>>chunkBits, slot&chunkMask
	if !s.Live(slot) {
		return
	}
	c := s.writable(ci)
	var zero T
	c.recs[i] = zero
	c.live[i/64] &^= 1 << (i % 64)
	s.counts[ci]--
	s.n--
	if !s.onPartial[ci] {
		s.onPartial[ci] = true
		s.partial = append(s.partial, ci)
		// The chunk the next Alloc would have used is let go if empty.
		if top := len(s.partial) - 2; top >= 0 {
			s.letGoEmpty(s.partial[top])
		}
	}
	// An empty chunk is let go, but the one the next Alloc would make
	// again.
	if s.partial[len(s.partial)-1] != ci {
		s.letGoEmpty(ci)
	}
}

func (s *Slab[T]) letGoEmpty(ci uint32) {
	if s.counts[ci] == 0 {
		s.chunks[ci] = nil
	}
}

// Live reports whether slot holds a record.
func (s *Slab[T]) Live(slot uint32) bool {
	ci := slot >> chunkBits
	if int(ci) >= len(s.chunks) || s.chunks[ci] == nil {
		return false
	}
	return s.chunks[ci].isLive(slot & chunkMask)
}

// At returns the record at a live slot, to read only: a view may share it.
// Its pointer is good until the slab next changes.
func (s *Slab[T]) At(slot uint32) *T {
	return &s.chunks[slot>>chunkBits].recs[slot&chunkMask]
}

// Mut returns the record at a live slot, to change: its chunk is copied
// first when a view shares it. Its pointer is good until the slab next
// changes.
func (s *Slab[T]) Mut(slot uint32) *T {
	return &s.writable(slot >> chunkBits).recs[slot&chunkMask]
}

// writable returns chunk ci, made when missing and copied when a view
// shares it.
func (s *Slab[T]) writable(ci uint32) *chunk[T] {
	if s.gen == 0 {
		s.gen = 1
	}
	c := s.chunks[ci]
	switch {
	case c == nil:
		c = &chunk[T]{recs: new([ChunkLen]T), gen: s.gen}
	case c.gen <= s.shared:
		recs := new([ChunkLen]T)
		*recs = *c.recs
		c = &chunk[T]{recs: recs, live: c.live, gen: s.gen}
	default:
		return c
	}
	s.chunks[ci] = c
	return c
}

// Each calls fn with every live slot and its record, to read only, in
// slot order. fn must not change the slab.
func (s *Slab[T]) Each(fn func(slot uint32, r *T)) {
	for ci, c := range s.chunks {
		if c != nil {
			c.each(uint32(ci), func(slot uint32, r *T) error { fn(slot, r); return nil })
		}
	}
}

func (c *chunk[T]) each(ci uint32, fn func(slot uint32, r *T) error) error {
	for w, word := range c.live {
		for word != 0 {
			b := uint32(bits.TrailingZeros64(word))
			word &= word - 1
			i := uint32(w)*64 + b
			if err := fn(ci<<chunkBits|i, &c.recs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Reset empties the slab. Views taken before keep what they saw.
func (s *Slab[T]) Reset() {
	s.chunks, s.counts, s.partial, s.onPartial, s.n = nil, nil, nil, nil, 0
}

// View is a slab as it was when taken: it does not change, and it is read
// without the owner's lock. Release it, under the owner's lock, once read.
type View[T any] struct {
	chunks   []*chunk[T]
	n        int
	released bool
}

// View takes a view of the slab.
func (s *Slab[T]) View() *View[T] {
	if s.gen == 0 {
		s.gen = 1
	}
	s.views++
	s.shared = s.gen
	s.gen++
	return &View[T]{chunks: append([]*chunk[T](nil), s.chunks...), n: s.n}
}

// Release lets a view go: once none is held, chunks change in place
// again. A view is released once.
func (s *Slab[T]) Release(v *View[T]) {
	if v == nil || v.released {
		return
	}
	v.released = true
	v.chunks = nil
	s.views--
	if s.views == 0 {
		s.shared = 0
	}
}

// Len returns the number of live records the view holds.
func (v *View[T]) Len() int { return v.n }

// Live reports whether the view holds a record at slot.
func (v *View[T]) Live(slot uint32) bool {
	ci := slot >> chunkBits
	if int(ci) >= len(v.chunks) || v.chunks[ci] == nil {
		return false
	}
	return v.chunks[ci].isLive(slot & chunkMask)
}

// At returns the record at a slot the view holds, to read only.
func (v *View[T]) At(slot uint32) *T {
	return &v.chunks[slot>>chunkBits].recs[slot&chunkMask]
}

// Each calls fn with every record the view holds, in slot order, and
// stops at fn's first error.
func (v *View[T]) Each(fn func(slot uint32, r *T) error) error {
	for ci, c := range v.chunks {
		if c == nil {
			continue
		}
		if err := c.each(uint32(ci), fn); err != nil {
			return err
		}
	}
	return nil
}
