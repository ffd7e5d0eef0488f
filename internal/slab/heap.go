package slab

// Heap is a min-heap of slots by an int64 key (an expiration, a due
// time), with where each slot sits, so that a slot can be moved or taken
// off in O(log n) without a pointer per entry: 16 bytes a slot. The keys
// are the heap's own, not read from the records, so that moving a slot
// does not change its record (and copy its chunk under a view). The zero
// Heap is empty and ready.
type Heap struct {
	keys  []int64
	slots []uint32
	pos   []int32 // by slot: its index in keys and slots, -1 when not on the heap
}

// Len returns the number of slots on the heap.
func (h *Heap) Len() int { return len(h.keys) }

// Min returns the earliest slot and its key; the heap must not be empty.
func (h *Heap) Min() (slot uint32, key int64) { return h.slots[0], h.keys[0] }

// Reset empties the heap.
func (h *Heap) Reset() {
	h.keys, h.slots, h.pos = h.keys[:0], h.slots[:0], nil
}

// Has reports whether slot is on the heap.
func (h *Heap) Has(slot uint32) bool {
	return int(slot) < len(h.pos) && h.pos[slot] >= 0
}

// Key returns the key of a slot on the heap.
func (h *Heap) Key(slot uint32) int64 { return h.keys[h.pos[slot]] }

// IsMin reports whether slot is the heap's earliest.
func (h *Heap) IsMin(slot uint32) bool { return h.Has(slot) && h.pos[slot] == 0 }

func (h *Heap) grow(slot uint32) {
	for uint32(len(h.pos)) <= slot {
		h.pos = append(h.pos, -1)
	}
}

// Push adds slot, which is not on the heap, with key.
func (h *Heap) Push(slot uint32, key int64) {
	h.Append(slot, key)
	h.up(len(h.keys) - 1)
}

// Append adds slot, which is not on the heap, with key, without ordering
// the heap: call Init after the last.
func (h *Heap) Append(slot uint32, key int64) {
	h.grow(slot)
	h.keys = append(h.keys, key)
	h.slots = append(h.slots, slot)
	h.pos[slot] = int32(len(h.keys) - 1)
}

// Init orders the heap after Appends.
func (h *Heap) Init() {
	for i := len(h.keys)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// Set gives a slot on the heap a new key, or puts it on with key.
func (h *Heap) Set(slot uint32, key int64) {
	if !h.Has(slot) {
		h.Push(slot, key)
		return
	}
	i := int(h.pos[slot])
	h.keys[i] = key
	if !h.up(i) {
		h.down(i)
	}
}

// Pop takes the earliest slot off the heap.
func (h *Heap) Pop() uint32 {
	slot := h.slots[0]
	h.removeAt(0)
	return slot
}

// Remove takes slot off the heap, if it is on it.
func (h *Heap) Remove(slot uint32) {
	if h.Has(slot) {
		h.removeAt(int(h.pos[slot]))
	}
}

func (h *Heap) removeAt(i int) {
	last := len(h.keys) - 1
	h.pos[h.slots[i]] = -1
	if i != last {
		h.keys[i], h.slots[i] = h.keys[last], h.slots[last]
		h.pos[h.slots[i]] = int32(i)
	}
	h.keys, h.slots = h.keys[:last], h.slots[:last]
	if i != last && !h.up(i) {
		h.down(i)
	}
}

func (h *Heap) swap(i, j int) {
	h.keys[i], h.keys[j] = h.keys[j], h.keys[i]
	h.slots[i], h.slots[j] = h.slots[j], h.slots[i]
	h.pos[h.slots[i]] = int32(i)
	h.pos[h.slots[j]] = int32(j)
}

// up moves the entry at i towards the root while it is earlier than its
// parent, and reports whether it moved.
func (h *Heap) up(i int) bool {
	start := i
	for i > 0 {
		p := (i - 1) / 2
		if h.keys[p] <= h.keys[i] {
			break
		}
		h.swap(i, p)
		i = p
	}
	return i != start
}

// down moves the entry at i away from the root while a child is earlier.
func (h *Heap) down(i int) {
	n := len(h.keys)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && h.keys[r] < h.keys[c] {
			c = r
		}
		if h.keys[i] <= h.keys[c] {
			return
		}
		h.swap(i, c)
		i = c
	}
}
