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
type Index[K comparable] struct {
	keyOf func(slot uint32) K
	seed  maphash.Seed
	// table holds slot+1 per entry, 0 for none.
	table []uint32
	n     int
}

// minTable is the smallest table an index keeps.
const minTable = 16

// NewIndex returns an empty index whose keys keyOf reads from the records.
func NewIndex[K comparable](keyOf func(slot uint32) K) *Index[K] {
	return &Index[K]{keyOf: keyOf, seed: maphash.MakeSeed(), table: make([]uint32, minTable)}
}

// Len returns the number of slots the index holds.
func (x *Index[K]) Len() int { return x.n }

// home is the position k's probe starts at: the hash scaled to the
// table's size (which need not be a power of two).
func (x *Index[K]) home(k K) int {
	hi, _ := bits.Mul64(maphash.Comparable(x.seed, k), uint64(len(x.table)))
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
	return x.table[i] - 1, true
}

// find returns the table position holding k, or false.
func (x *Index[K]) find(k K) (int, bool) {
	for i := x.home(k); ; i = x.after(i) {
		e := x.table[i]
		if e == 0 {
			return 0, false
		}
		if x.keyOf(e-1) == k {
			return i, true
		}
	}
}

// Insert adds slot, whose record's key no other slot in the index has.
func (x *Index[K]) Insert(slot uint32) {
	if (x.n+1)*4 > len(x.table)*3 {
		x.resize(len(x.table) * 3 / 2)
	}
	x.place(slot)
	x.n++
}

// place puts slot in the first free position from its key's home.
func (x *Index[K]) place(slot uint32) {
	i := x.home(x.keyOf(slot))
	for x.table[i] != 0 {
		i = x.after(i)
	}
	x.table[i] = slot + 1
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
	for j := x.after(i); x.table[j] != 0; j = x.after(j) {
		h := x.home(x.keyOf(x.table[j] - 1))
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
func (x *Index[K]) resize(size int) {
	old := x.table
	x.table = make([]uint32, size)
	for _, e := range old {
		if e != 0 {
			x.place(e - 1)
		}
	}
}

// Reset empties the index.
func (x *Index[K]) Reset() {
	x.table, x.n = make([]uint32, minTable), 0
}
