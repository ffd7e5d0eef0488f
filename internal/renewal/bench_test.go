package renewal_test

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/renewal"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
	"github.com/djinn-go/djinn/internal/wire"
	"github.com/djinn-go/djinn/proto/djinnpb"
	"github.com/djinn-go/djinn/proto/statepb"
)

// BenchmarkClientLeases measures the replicated state of client leases:
// memory per lease, and the time a snapshot holds the state's lock
// (gather) and takes to write (write), for b.N leases over sets of 100.
//
//	go test -run XXX -bench ClientLeases -benchtime 1000000x ./internal/renewal
func BenchmarkClientLeases(b *testing.B) {
	m := state.New()
	statetest.Add(m, newRenewalState(m))
	svc := djinn.NewID()
	m.Apply(1, &statepb.Command{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: svc[:]}}})
	now := time.Now().UnixNano()
	sets := make([][]byte, max(b.N/100, 1))
	for i := range sets {
		id, c := djinn.NewID(), djinn.NewID()
		sets[i] = id[:]
		m.Apply(2, &statepb.Command{NowUnixNanos: now, Op: &statepb.Command_RenewalCreate{RenewalCreate: &statepb.RenewalCreate{
			SetId: id[:], Cookie: c[:], ExpiresUnixNanos: now + int64(time.Hour)}}})
	}
	landlords := make([]*djinnpb.Ref, 4)
	for i := range landlords {
		s := djinn.NewID()
		landlords[i] = &djinnpb.Ref{Endpoint: "127.0.0.1:1234", ServiceId: s[:], ObjectId: lease.LandlordID[:]}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for i := range b.N {
		c := djinn.NewID()
		r := m.Apply(3, &statepb.Command{NowUnixNanos: now, Op: &statepb.Command_RenewalAdd{RenewalAdd: &statepb.RenewalAdd{
			SetId: sets[i%len(sets)], Landlord: landlords[i%len(landlords)], Cookie: c[:], ExpiresUnixNanos: now + int64(time.Minute),
			DesiredUnixNanos: int64(djinn.Forever), RenewNanos: int64(djinn.Forever),
		}}})
		if err, ok := r.(error); ok {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "B/lease")
	start := time.Now()
	write, err := m.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-gather")
	start = time.Now()
	if err := write(io.Discard); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds()), "ms-write")
}

// BenchmarkGetLeasesPage measures a page of GetLeases from one set of a
// million client leases (of 4 landlords): the time of a page, all of it
// under the state's lock, which every other call of the renewal service
// waits for, and the leases a page looks at; the memory per lease of the
// set, and the time a snapshot of it takes to restore. Pages are read in turn, from the first again after the last.
//
//	go test -run XXX -bench GetLeasesPage -benchtime 20x ./internal/renewal
func BenchmarkGetLeasesPage(b *testing.B) {
	const n = 1_000_000
	m := state.New()
	rs := statetest.Add(m, newRenewalState(m))
	svc := djinn.NewID()
	m.Apply(1, &statepb.Command{Op: &statepb.Command_Init{Init: &statepb.Init{ServiceId: svc[:]}}})
	now := time.Now().UnixNano()
	id, c := djinn.NewID(), djinn.NewID()
	m.Apply(2, &statepb.Command{NowUnixNanos: now, Op: &statepb.Command_RenewalCreate{RenewalCreate: &statepb.RenewalCreate{
		SetId: id[:], Cookie: c[:], ExpiresUnixNanos: now + int64(time.Hour)}}})
	landlords := make([]*djinnpb.Ref, 4)
	for i := range landlords {
		s := djinn.NewID()
		landlords[i] = &djinnpb.Ref{Endpoint: "127.0.0.1:1234", ServiceId: s[:], ObjectId: lease.LandlordID[:]}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		c := djinn.NewID()
		r := m.Apply(3, &statepb.Command{NowUnixNanos: now, Op: &statepb.Command_RenewalAdd{RenewalAdd: &statepb.RenewalAdd{
			SetId: id[:], Landlord: landlords[i%len(landlords)], Cookie: c[:], ExpiresUnixNanos: now + int64(time.Minute),
			DesiredUnixNanos: int64(djinn.Forever), RenewNanos: int64(djinn.Forever),
		}}})
		if err, ok := r.(error); ok {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perLease := float64(after.HeapAlloc-before.HeapAlloc) / n
	// A restore rebuilds the set, its key order with it.
	write, err := m.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	var snap bytes.Buffer
	if err := write(&snap); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	r := state.New()
	statetest.Add(r, newRenewalState(r))
	if err := r.Restore(&snap); err != nil {
		b.Fatal(err)
	}
	restore := float64(time.Since(start).Milliseconds())
	for _, max := range []int{1000, renewal.MostPage} {
		b.Run(fmt.Sprintf("max=%d", max), func(b *testing.B) {
			var after []byte
			visited, pages := rs.Visited(), 0
			for b.Loop() {
				p, err := rs.PageAfter(id, after, max, time.Unix(0, now), wire.MaxReply-1<<10)
				if err != nil {
					b.Fatal(err)
				}
				after = p.Next
				pages++
			}
			b.ReportMetric(float64(rs.Visited()-visited)/float64(pages), "visited/page")
			b.ReportMetric(perLease, "B/lease")
			b.ReportMetric(restore, "ms-restore")
		})
	}
}
