package renewal_test

import (
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/internal/lease"
	"github.com/djinn-go/djinn/internal/state"
	"github.com/djinn-go/djinn/internal/state/statetest"
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
