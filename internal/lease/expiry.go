package lease

// expiryHeap is a min-heap of leases by key, earliest first: keys and
// slots side by side, and where each slot sits (pos, -1 when not on the
// heap). A key is at most the lease's expiration — renewals that extend a
// lease leave its key alone, and the lease goes back on with its new
// expiration when the old key pops.
type expiryHeap struct {
	keys  []int64
	slots []uint32
	pos   []int32 // by slot
}

// grow makes room in pos for every slot below n.
func (h *expiryHeap) grow(n uint32) {
	for uint32(len(h.pos)) < n {
		h.pos = append(h.pos, -1)
	}
}

func (h *expiryHeap) len() int { return len(h.keys) }

func (h *expiryHeap) reset() {
	h.keys, h.slots, h.pos = h.keys[:0], h.slots[:0], nil
}

// onHeap reports whether slot is on the heap.
func (h *expiryHeap) onHeap(slot uint32) bool {
	return int(slot) < len(h.pos) && h.pos[slot] >= 0
}

// push adds slot, which is not on the heap, with key.
func (h *expiryHeap) push(slot uint32, key int64) {
	h.grow(slot + 1)
	h.keys = append(h.keys, key)
	h.slots = append(h.slots, slot)
	h.pos[slot] = int32(len(h.keys) - 1)
	h.up(len(h.keys) - 1)
}

// pop takes the earliest slot off the heap.
func (h *expiryHeap) pop() uint32 {
	slot := h.slots[0]
	h.removeAt(0)
	return slot
}

// remove takes slot off the heap, if it is on it.
func (h *expiryHeap) remove(slot uint32) {
	if h.onHeap(slot) {
		h.removeAt(int(h.pos[slot]))
	}
}

func (h *expiryHeap) removeAt(i int) {
	last := len(h.keys) - 1
	h.pos[h.slots[i]] = -1
	if i != last {
		h.move(last, i)
	}
	h.keys, h.slots = h.keys[:last], h.slots[:last]
	if i != last {
		if !h.up(i) {
			h.down(i)
		}
	}
}

// move puts the entry at j in position i.
func (h *expiryHeap) move(j, i int) {
	h.keys[i], h.slots[i] = h.keys[j], h.slots[j]
	h.pos[h.slots[i]] = int32(i)
}

func (h *expiryHeap) swap(i, j int) {
	h.keys[i], h.keys[j] = h.keys[j], h.keys[i]
	h.slots[i], h.slots[j] = h.slots[j], h.slots[i]
	h.pos[h.slots[i]] = int32(i)
	h.pos[h.slots[j]] = int32(j)
}

// up moves the entry at i towards the root while it is earlier than its
// parent, and reports whether it moved.
func (h *expiryHeap) up(i int) bool {
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
func (h *expiryHeap) down(i int) {
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

// init orders the heap after its entries were appended in any order.
func (h *expiryHeap) init() {
	for i := len(h.keys)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}
