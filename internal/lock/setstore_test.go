package lock

import (
	"slices"
	"testing"
)

// TestSetStore: sets live by id, dense ones in pages and others in a map;
// ids come back ascending; a removed set is gone and its page with the
// last of its sets; a set keeps its place while others come and go.
func TestSetStore(t *testing.T) {
	var st setStore
	ids := []uint64{denseLimit + 5, 1, 2, pageLen - 1, pageLen, 3 * pageLen, denseLimit - 1, 1 << 40}
	for _, id := range ids {
		st.add(id).fence = id
	}
	first := st.at(1)
	for _, id := range []uint64{4, 5, 2*pageLen + 1} {
		st.add(id)
		st.del(id)
	}
	if st.at(1) != first {
		t.Fatal("set 1 moved")
	}
	want := slices.Sorted(slices.Values(ids))
	if got := st.ids(); !slices.Equal(got, want) || st.len() != len(want) {
		t.Fatalf("ids %v (len %d), want %v", got, st.len(), want)
	}
	for _, id := range ids {
		if s, ok := st.get(id); !ok || s.fence != id {
			t.Fatalf("set %d: %v %v", id, s, ok)
		}
	}
	st.del(3 * pageLen)
	st.del(1 << 40)
	if _, ok := st.get(3 * pageLen); ok || st.pages[3] != nil {
		t.Fatalf("set %d still there, or its empty page", 3*pageLen)
	}
	if _, ok := st.get(1 << 40); ok {
		t.Fatal("far set still there")
	}
	for _, id := range []uint64{0, 7, 2 * pageLen, 99 * pageLen, denseLimit} {
		if _, ok := st.get(id); ok {
			t.Fatalf("set %d never added is there", id)
		}
	}
	if st.len() != len(ids)-2 {
		t.Fatalf("len %d, want %d", st.len(), len(ids)-2)
	}
}
