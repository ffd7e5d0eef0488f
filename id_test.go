package djinn_test

import (
	"testing"

	"github.com/djinn-go/djinn"
)

func TestNewIDsDiffer(t *testing.T) {
	seen := map[djinn.ID]bool{}
	for range 1000 {
		id := djinn.NewID()
		if id == (djinn.ID{}) || seen[id] {
			t.Fatalf("NewID returned %s twice or zero", id)
		}
		seen[id] = true
	}
}

// BenchmarkNewID measures a random ID: no allocation.
//
//	go test -run XXX -bench NewID -benchmem .
func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = djinn.NewID()
	}
}
