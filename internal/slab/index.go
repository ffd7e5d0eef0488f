package slab

import (
	"hash/maphash"
	"math/bits"
)

// Index finds the slot of a record by its key. It holds slot numbers only,
// in one open-addressed table (linear probing; grown by half its size
// when three quarters full, so that a growing index is half to three
// quarters full: 5.3 to 8 bytes a key): the key of a slot is read from the record
// through the function it was made with. The zero Index is not ready:
// make one with NewIndex.
//
// Keys are hashed with a seed of the process's own, so that keys a client
// chooses cannot be made to collide.
//
// An entry's bits above those its slot needs hold some of its key's hash
// (a tag): a probe reads a record's key only where the tag matches, so a
// lookup of a key not held — every new key's check — reads about one
// record in 2^tag bits instead of one for each entry it passes, each of
// them a cache miss in a large slab.
type Index[K comparable] struct {
	keyOf func(slot uint32) K
	seed  maphash.Seed
	// table holds per entry slot+1 in its low slotBits bits and the tag
	// above them; 0 for none.
	table    []uint32
	slotBits uint
	n        int
}

// minTable is the smallest table an index keeps; minSlotBits the fewest
// bits an entry gives its slot, slotHeadroom the bits added to those a
// slot needs when a larger slot comes.
const (
	minTable     = 16
	minSlotBits  = 16
	slotHeadroom = 2
)

// NewIndex returns an empty index whose keys keyOf reads from the records.
func NewIndex[K comparable](keyOf func(slot uint32) K) *Index[K] {
	return &Index[K]{keyOf: keyOf, seed: maphash.MakeSeed(), table: make([]uint32, minTable), slotBits: minSlotBits}
}

// slotMask selects an entry's slot+1.
func (x *Index[K]) slotMask() uint32 {
	if x.slotBits >= 32 {
		return ^uint32(0)
	}
	return 1<<x.slotBits - 1
}

// tagOf is the tag of hash h, in an entry's tag bits (0 when the slot
// takes them all: every entry then matches).
func (x *Index[K]) tagOf(h uint64) uint32 {
	return uint32(h) >> x.slotBits << x.slotBits
}

// hash is k's hash.
func (x *Index[K]) hash(k K) uint64 { return maphash.Comparable(x.seed, k) }

// Len returns the number of slots the index holds.
func (x *Index[K]) Len() int { return x.n }

// home is the position k's probe starts at: the hash scaled to the
// table's size (which need not be a power of two).
func (x *Index[K]) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(x.table)))
	return int(hi)
}

// after is the position after i, wrapping at the table's end.
func (x *Index[K]) after(i int) int {
	if i++; i == len(x.table) {
		return 0
	}
	return i
}

// Find returns the slot of the record whose key is k.
func (x *Index[K]) Find(k K) (uint32, bool) {
	i, ok := x.find(k)
	if !ok {
		return 0, false
	}
	return x.table[i]&x.slotMask() - 1, true
}

// find returns the table position holding k, or false.
func (x *Index[K]) find(k K) (int, bool) {
	h := x.hash(k)
	tag, mask := x.tagOf(h), x.slotMask()
	for i := x.home(h); ; i = x.after(i) {
		e := x.table[i]
		if e == 0 {
			return 0, false
		}
		if e&^mask == tag && x.keyOf(e&mask-1) == k {
			return i, true
		}
	}
}

// Insert adds slot, whose record's key no other slot in the index has.
func (x *Index[K]) Insert(slot uint32) {
	if uint64(slot)+1 > uint64(x.slotMask()) {
		// The slot needs more bits than the entries give it: retag
		// every entry, with room for the slots to come.
		was := x.slotMask()
		x.slotBits = min(32, uint(bits.Len32(slot+1))+slotHeadroom)
		x.rebuild(len(x.table), was)
	}
	if (x.n+1)*4 > len(x.table)*3 {
		x.resize(len(x.table) * 3 / 2)
	}
	x.place(slot)
	x.n++
}

// place puts slot in the first free position from its key's home.
func (x *Index[K]) place(slot uint32) {
	h := x.hash(x.keyOf(slot))
	i := x.home(h)
	for x.table[i] != 0 {
		i = x.after(i)
	}
	x.table[i] = x.tagOf(h) | (slot + 1)
}

// Delete removes the slot whose record's key is k, and reports whether
// there was one. It must be called while that record still holds k.
func (x *Index[K]) Delete(k K) bool {
	i, ok := x.find(k)
	if !ok {
		return false
	}
	// Backward-shift deletion: move each later entry of the run whose home
	// does not lie cyclically in (i, j] into the hole, so that no lookup
	// stops short of it.
	mask := x.slotMask()
	for j := x.after(i); x.table[j] != 0; j = x.after(j) {
		h := x.home(x.hash(x.keyOf(x.table[j]&mask - 1)))
		if i <= j && (h <= i || h > j) || i > j && h <= i && h > j {
			x.table[i] = x.table[j]
			i = j
		}
	}
	x.table[i] = 0
	x.n--
	if len(x.table) > minTable && x.n*4 < len(x.table) {
		x.resize(max(minTable, len(x.table)*2/3))
	}
	return true
}

// resize moves every entry to a table of size positions.
func (x *Index[K]) resize(size int) { x.rebuild(size, x.slotMask()) }

// rebuild moves every entry, whose slot+1 is in the bits was selects, to
// a table of size positions, tagged as the index tags now.
func (x *Index[K]) rebuild(size int, was uint32) {
	old := x.table
	x.table = make([]uint32, size)
	for _, e := range old {
		if e != 0 {
			x.place(e&was - 1)
		}
	}
}

// Reset empties the index.
func (x *Index[K]) Reset() {
	x.table, x.n, x.slotBits = make([]uint32, minTable), 0, minSlotBits
}
