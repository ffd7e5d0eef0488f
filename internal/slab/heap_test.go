package slab

import (
	"testing"

	"pgregory.net/rapid"
)

// TestHeapModel: the heap pops slots in key order through any mix of
// pushes, key changes, removals and pops, and says where each slot is.
func TestHeapModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var h Heap
		want := map[uint32]int64{}
		for range rapid.IntRange(1, 300).Draw(t, "steps") {
			slot := uint32(rapid.IntRange(0, 40).Draw(t, "slot"))
			key := int64(rapid.IntRange(-50, 50).Draw(t, "key"))
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0:
				if _, ok := want[slot]; !ok {
					h.Push(slot, key)
					want[slot] = key
				}
			case 1:
				h.Set(slot, key)
				want[slot] = key
			case 2:
				h.Remove(slot)
				delete(want, slot)
			case 3:
				if h.Len() > 0 {
					got, k := h.Min()
					for s, wk := range want {
						if wk < k {
							t.Fatalf("Min is slot %d at %d, but slot %d is at %d", got, k, s, wk)
						}
					}
					if h.Pop() != got || want[got] != k {
						t.Fatalf("Pop gave another slot than Min, or its key was %d, want %d", k, want[got])
					}
					delete(want, got)
				}
			case 4:
				// Rebuild from scratch with Append and Init.
				var h2 Heap
				for s, k := range want {
					h2.Append(s, k)
				}
				h2.Init()
				h = h2
			}
			if h.Len() != len(want) {
				t.Fatalf("heap holds %d, want %d", h.Len(), len(want))
			}
			for s := range uint32(41) {
				if k, ok := want[s]; h.Has(s) != ok || ok && h.Key(s) != k {
					t.Fatalf("slot %d: on the heap %v, want %v (key %d)", s, h.Has(s), ok, k)
				}
			}
		}
	})
}
