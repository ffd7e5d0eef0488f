package lookup_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/service"
)

// typical is the item the memory figure is for: 2 service types, a 40-byte
// reference, 3 entries of 3 string fields, some values shared with other
// items and some its own.
func typical(i int) service.Item {
	var id djinn.ID
	id[0], id[1], id[2], id[15] = byte(i>>16), byte(i>>8), byte(i), 1
	ref := fmt.Appendf(nil, "tcp://10.0.%d.%d:4160/svc/%024d", i>>8&255, i&255, i)[:40]
	return service.Item{
		ID:      id,
		Service: ref,
		Types:   []string{"com.example.Printer", "net.jini.admin.Administrable"},
		Entries: []service.Entry{
			{Type: "net.jini.lookup.entry.Name", Supertypes: []string{"net.jini.entry.AbstractEntry"}, Fields: []service.Field{
				f("name", str(fmt.Sprintf("printer-%d", i))), f("language", str("en")), f("organization", str("acme"))}},
			{Type: "net.jini.lookup.entry.Location", Supertypes: []string{"net.jini.entry.AbstractEntry"}, Fields: []service.Field{
				f("floor", str(fmt.Sprint(i%20))), f("room", str(fmt.Sprint(i%500))), f("building", str("north"))}},
			{Type: "net.jini.lookup.entry.ServiceInfo", Supertypes: []string{"net.jini.entry.AbstractEntry"}, Fields: []service.Field{
				f("manufacturer", str("Acme")), f("model", str("LX-100")), f("serialNumber", str(fmt.Sprintf("SN%08d", i)))}},
		},
	}
}

// heap returns the bytes and objects live on the heap.
func heap() (bytes, objects uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.HeapObjects
}

// registerTypical registers n typical items and returns the heap bytes
// and objects the registry holds per item, indexes included. The objects
// are what the collector marks.
func registerTypical(tb testing.TB, n int) (bytes, objects float64) {
	b0, o0 := heap()
	r := newRegistry(tb, service.Limits{})
	for i := range n {
		if _, err := r.Register(typical(i), lid(1)); err != nil {
			tb.Fatal(err)
		}
	}
	b1, o1 := heap()
	runtime.KeepAlive(r)
	return float64(b1-b0) / float64(n), float64(o1-o0) / float64(n)
}

// TestMemoryPerItem reports the memory a typical registration costs. It
// asserts nothing: the figure is for the package doc and for comparisons.
func TestMemoryPerItem(t *testing.T) {
	n := 20000
	if testing.Short() {
		n = 2000
	}
	bytes, objects := registerTypical(t, n)
	t.Logf("%.0f bytes and %.1f heap objects per registered item (%d typical items)", bytes, objects, n)
}

func BenchmarkRegister(b *testing.B) {
	r := newRegistry(b, service.Limits{})
	items := make([]service.Item, 1000)
	for i := range items {
		items[i] = typical(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := r.Register(items[i%len(items)], lid(1)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	bytes, objects := registerTypical(b, 10000)
	b.ReportMetric(bytes, "bytes/item")
	b.ReportMetric(objects, "objects/item")
}

func BenchmarkLookupByType(b *testing.B) {
	r := newRegistry(b, service.Limits{})
	for i := range 10000 {
		it := typical(i)
		if i%100 == 0 {
			it.Types = append(it.Types, "Rare")
		}
		if _, err := r.Register(it, lid(1)); err != nil {
			b.Fatal(err)
		}
	}
	tmpl := service.Template{Types: []string{"com.example.Printer", "Rare"}}
	b.ReportAllocs()
	for b.Loop() {
		if n, _, _ := r.Lookup(tmpl, 1); n != 100 {
			b.Fatalf("%d matches", n)
		}
	}
}

// BenchmarkLookupByField is the bench's lookup as the server answers it:
// one item, in wire form, by a field value that names it alone, among
// 100,000 typical items.
func BenchmarkLookupByField(b *testing.B) {
	const n = 100000
	r := newRegistry(b, service.Limits{})
	for i := range n {
		if _, err := r.Register(typical(i), lid(1)); err != nil {
			b.Fatal(err)
		}
	}
	tmpls := make([]service.Template, 1024)
	for i := range tmpls {
		tmpls[i] = service.Template{Entries: []service.EntryTemplate{{
			Type:   "net.jini.lookup.entry.Name",
			Fields: []service.Field{f("name", str(fmt.Sprintf("printer-%d", i*97%n)))},
		}}}
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		total, items, err := r.LookupEncoded(tmpls[i%len(tmpls)], 1, true, rand.IntN)
		if err != nil || total != 1 || len(items) != 1 {
			b.Fatal(total, len(items), err)
		}
	}
}

// BenchmarkNotify is a change with many watches, few of which can match:
// the watch index keeps it from checking them all.
func BenchmarkNotify(b *testing.B) {
	r := newRegistry(b, service.Limits{})
	for i := range 10000 {
		var w djinn.ID
		w[0], w[1], w[15] = byte(i>>8), byte(i), 2
		if err := r.AddWatch(w, service.Template{Types: []string{fmt.Sprintf("Type%d", i)}}, service.AllTransitions); err != nil {
			b.Fatal(err)
		}
	}
	it := typical(1)
	it.Types = append(it.Types, "Type7")
	b.ReportAllocs()
	for b.Loop() {
		if evs, err := r.Register(it, lid(1)); err != nil || len(evs) != 1 {
			b.Fatal(evs, err)
		}
	}
}

// BenchmarkSnapshotItems is the items' part of a snapshot of 10,000
// typical items: written from the stored items (what a snapshot does), and
// as messages marshalled one by one (the way it is not done).
func BenchmarkSnapshotItems(b *testing.B) {
	r := newRegistry(b, service.Limits{})
	for i := range 10000 {
		if _, err := r.Register(typical(i), lid(1)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("encoded", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if regs := r.ExportEncoded(); len(regs) != 10000 {
				b.Fatalf("%d registrations", len(regs))
			}
		}
	})
	b.Run("messages", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, reg := range r.Export().Registrations {
				if _, err := proto.Marshal(wire.Item(reg.Item)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
