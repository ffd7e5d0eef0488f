package slab

import (
	"math/rand/v2"
	"testing"
)

// TestIndexAcrossSlotWidths holds keys in slots spread up to 2^26 — past
// the bits an entry first gives its slot, so the index retags its entries
// as larger slots come — and finds each, misses keys not held, and
// still finds the rest after half are deleted.
func TestIndexAcrossSlotWidths(t *testing.T) {
	keys := map[uint32][16]byte{}
	x := NewIndex(func(slot uint32) [16]byte { return keys[slot] })
	r := rand.New(rand.NewPCG(1, 2))
	var slots []uint32
	for n := uint64(0); n < 5000; n++ {
		slot := uint32(n)
		if n%3 == 0 {
			slot = r.Uint32N(1 << 26)
		}
		if _, dup := keys[slot]; dup {
			continue
		}
		keys[slot] = keyFor(n)
		x.Insert(slot)
		slots = append(slots, slot)
	}
	check := func(held []uint32) {
		t.Helper()
		for _, slot := range held {
			if got, ok := x.Find(keys[slot]); !ok || got != slot {
				t.Fatalf("Find(key of slot %d) = %d, %v", slot, got, ok)
			}
		}
		for n := uint64(1 << 40); n < 1<<40+1000; n++ {
			if got, ok := x.Find(keyFor(n)); ok {
				t.Fatalf("Find(a key not held) = %d, true", got)
			}
		}
	}
	check(slots)
	kept := slots[:0:0]
	for i, slot := range slots {
		if i%2 == 0 {
			kept = append(kept, slot)
			continue
		}
		if !x.Delete(keys[slot]) {
			t.Fatalf("Delete(key of slot %d) = false", slot)
		}
		delete(keys, slot)
	}
	if x.Len() != len(kept) {
		t.Fatalf("Len = %d, want %d", x.Len(), len(kept))
	}
	check(kept)
}

// BenchmarkIndexMiss measures a lookup of a key not held, in an index of
// a million keys whose records are spread over a slab (the check every
// new key makes).
//
//	go test -run XXX -bench IndexMiss ./internal/slab
func BenchmarkIndexMiss(b *testing.B) {
	var s Slab[rec]
	x := NewIndex(func(slot uint32) [16]byte { return s.At(slot).key })
	for n := uint64(0); n < 1<<20; n++ {
		slot := s.Alloc()
		*s.Mut(slot) = rec{key: keyFor(n)}
		x.Insert(slot)
	}
	n := uint64(1 << 40)
	b.ResetTimer()
	for b.Loop() {
		n++
		if _, ok := x.Find(keyFor(n)); ok {
			b.Fatal("found a key not held")
		}
	}
}
