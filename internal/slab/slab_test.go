package slab

import (
	"encoding/binary"
	"maps"
	"testing"

	"pgregory.net/rapid"
)

// rec is a record keyed by a 16-byte key, as the lease table's are.
type rec struct {
	key [16]byte
	val uint64
}

func keyFor(n uint64) [16]byte {
	var k [16]byte
	binary.BigEndian.PutUint64(k[8:], n)
	return k
}

// model is a slab, its index and the views taken, beside what each should
// hold.
type model struct {
	s     Slab[rec]
	x     *Index[[16]byte]
	want  map[[16]byte]uint64 // the live records by key
	slots map[[16]byte]uint32
	views []heldView
}

type heldView struct {
	v    *View[rec]
	want map[[16]byte]uint64
}

func newModel() *model {
	m := &model{want: map[[16]byte]uint64{}, slots: map[[16]byte]uint32{}}
	m.x = NewIndex(func(slot uint32) [16]byte { return m.s.At(slot).key })
	return m
}

func (m *model) check(t *rapid.T) {
	if m.s.Len() != len(m.want) || m.x.Len() != len(m.want) {
		t.Fatalf("slab holds %d, index %d, want %d", m.s.Len(), m.x.Len(), len(m.want))
	}
	for k, v := range m.want {
		slot, ok := m.x.Find(k)
		if !ok || slot != m.slots[k] || !m.s.Live(slot) || *m.s.At(slot) != (rec{k, v}) {
			t.Fatalf("key %x: found %d %v, want slot %d holding %d", k, slot, ok, m.slots[k], v)
		}
	}
	seen := 0
	m.s.Each(func(slot uint32, r *rec) {
		seen++
		if m.want[r.key] != r.val || m.slots[r.key] != slot {
			t.Fatalf("Each gives slot %d %+v, not live", slot, *r)
		}
	})
	if seen != len(m.want) {
		t.Fatalf("Each gives %d records, want %d", seen, len(m.want))
	}
	for _, h := range m.views {
		got := map[[16]byte]uint64{}
		_ = h.v.Each(func(slot uint32, r *rec) error {
			if !h.v.Live(slot) || h.v.At(slot) != r {
				t.Fatalf("view's Each and At disagree at slot %d", slot)
			}
			got[r.key] = r.val
			return nil
		})
		if !maps.Equal(got, h.want) || h.v.Len() != len(h.want) {
			t.Fatalf("a view holds %v, want what the slab held when it was taken: %v", got, h.want)
		}
	}
}

// TestSlabModel: a slab and its index answer as a map does through any
// sequence of inserts, changes and deletes, and every view held answers
// as the map did when the view was taken.
func TestSlabModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := newModel()
		// Few keys over many steps, so slots and chunks are reused and let
		// go; many keys in bursts, so chunks fill and the index grows.
		keys := rapid.Uint64Range(0, uint64(rapid.SampledFrom([]int{8, 3000}).Draw(t, "keys")))
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0, 1, 2:
				for range rapid.IntRange(1, 400).Draw(t, "burst") {
					k := keyFor(keys.Draw(t, "k"))
					if _, ok := m.want[k]; ok {
						continue
					}
					slot := m.s.Alloc()
					*m.s.Mut(slot) = rec{key: k, val: 1}
					m.x.Insert(slot)
					m.want[k], m.slots[k] = 1, slot
				}
			case 3, 4:
				for range rapid.IntRange(1, 400).Draw(t, "burst") {
					k := keyFor(keys.Draw(t, "k"))
					slot, ok := m.x.Find(k)
					if _, live := m.want[k]; ok != live {
						t.Fatalf("Find(%x) = %v, want %v", k, ok, live)
					}
					if ok {
						if !m.x.Delete(k) {
							t.Fatal("Delete of a key found found nothing")
						}
						m.s.Free(slot)
						delete(m.want, k)
						delete(m.slots, k)
					}
				}
			case 5, 6:
				for k, slot := range m.slots {
					m.s.Mut(slot).val++
					m.want[k]++
					if rapid.Bool().Draw(t, "stop") {
						break
					}
				}
			case 7:
				m.views = append(m.views, heldView{m.s.View(), maps.Clone(m.want)})
			case 8:
				if len(m.views) > 0 {
					i := rapid.IntRange(0, len(m.views)-1).Draw(t, "view")
					m.s.Release(m.views[i].v)
					m.s.Release(m.views[i].v) // a second release does nothing
					m.views = append(m.views[:i], m.views[i+1:]...)
				}
			case 9:
				if rapid.IntRange(0, 5).Draw(t, "reset") == 0 {
					m.s.Reset()
					m.x.Reset()
					clear(m.want)
					clear(m.slots)
				}
			}
			m.check(t)
			if m.s.Shared() != (len(m.views) > 0) {
				t.Fatalf("Shared = %v with %d views held", m.s.Shared(), len(m.views))
			}
		}
	})
}

// TestViewCopiesOnlyChangedChunks: while a view is held, a change copies
// the one chunk it touches, and once the view is released changes are
// made in place again.
func TestViewCopiesOnlyChangedChunks(t *testing.T) {
	var s Slab[rec]
	for range 3 * ChunkLen {
		s.Alloc()
	}
	before := append([]*chunk[rec](nil), s.chunks...)
	v := s.View()
	s.Mut(ChunkLen + 5).val = 7
	for ci, c := range s.chunks {
		if copied := c != before[ci]; copied != (ci == 1) {
			t.Fatalf("chunk %d copied: %v; want only chunk 1 copied", ci, copied)
		}
	}
	if v.At(ChunkLen+5).val != 0 {
		t.Fatal("the view sees a change made after it")
	}
	s.Release(v)
	c1 := s.chunks[1]
	s.Mut(ChunkLen + 6).val = 8
	s.Mut(5).val = 9
	if s.chunks[1] != c1 || s.chunks[0] != before[0] {
		t.Fatal("a change with no view held copied its chunk")
	}
}

// TestEmptyChunksAreLetGo: freeing every record lets all chunks but the
// one the next record goes in go, and the index shrinks.
func TestEmptyChunksAreLetGo(t *testing.T) {
	m := newModel()
	n := uint64(10 * ChunkLen)
	for i := range n {
		slot := m.s.Alloc()
		*m.s.Mut(slot) = rec{key: keyFor(i)}
		m.x.Insert(slot)
	}
	grown := len(m.x.table)
	for i := range n {
		k := keyFor(i)
		slot, _ := m.x.Find(k)
		m.x.Delete(k)
		m.s.Free(slot)
	}
	kept := 0
	for _, c := range m.s.chunks {
		if c != nil {
			kept++
		}
	}
	if kept > 1 || m.s.Len() != 0 {
		t.Fatalf("%d chunks kept with no record", kept)
	}
	if len(m.x.table) >= grown/4 {
		t.Fatalf("the index kept %d positions for no key (it had grown to %d)", len(m.x.table), grown)
	}
}

// TestRecordsHaveNoPointer: the records of a chunk are values: a million
// of them are two allocations per chunk of ChunkLen, not one per record.
func TestRecordsHaveNoPointer(t *testing.T) {
	allocs := testing.AllocsPerRun(1, func() {
		var s Slab[rec]
		for range 1 << 20 {
			s.Alloc()
		}
	})
	if want := 2 * float64(1<<20) / ChunkLen * 1.1; allocs > want {
		t.Fatalf("a million records took %.0f allocations, want under %.0f", allocs, want)
	}
}
