package bench

import (
	"context"
	"fmt"
	"io"
	"time"
)

// The leases workload: the server's memory holding many registrations,
// and while it takes a snapshot of them.

// memory is what the server's admin endpoint says of its memory and of
// the work its collector did.
type memory struct {
	rss, peakRSS float64 // bytes: resident now, and the most since it started
	live         float64 // bytes the last collection found live
	allocs       float64 // heap objects allocated since it started
	allocBytes   float64 // bytes allocated since it started
	cpu, gcCPU   float64 // seconds of CPU, all of it and the collector's
}

// memorySeries are the /metrics series readMemory reads.
var memorySeries = map[string]func(*memory) *float64{
	"process_resident_memory_bytes":             func(m *memory) *float64 { return &m.rss },
	"djinn_process_resident_memory_peak_bytes":  func(m *memory) *float64 { return &m.peakRSS },
	"go_gc_heap_live_bytes":                     func(m *memory) *float64 { return &m.live },
	"go_gc_heap_allocs_objects_total":           func(m *memory) *float64 { return &m.allocs },
	"go_gc_heap_allocs_bytes_total":             func(m *memory) *float64 { return &m.allocBytes },
	"go_cpu_classes_total_cpu_seconds_total":    func(m *memory) *float64 { return &m.cpu },
	"go_cpu_classes_gc_total_cpu_seconds_total": func(m *memory) *float64 { return &m.gcCPU },
}

// readMemory reads the server's memory figures. With collect, it has the
// server collect its garbage first (its heap profile does), so that the
// live heap is what is live now.
func readMemory(ctx context.Context, admin string, collect bool) (memory, error) {
	if collect {
		if _, err := adminGet(ctx, admin, "/debug/pprof/heap?gc=1"); err != nil {
			return memory{}, fmt.Errorf("collect the server's garbage at %s: %w", admin, err)
		}
	}
	got, err := adminMetrics(ctx, admin, func(n string) bool { return memorySeries[n] != nil })
	if err != nil {
		return memory{}, err
	}
	var m memory
	for name, field := range memorySeries {
		v, ok := got[name]
		if !ok {
			return memory{}, fmt.Errorf("the server at %s exports no %s: is it a djinn server of this version?", admin, name)
		}
		*field(&m) = v
	}
	return m, nil
}

// leaseMemory grants Leases registrations (each a logged lease grant of
// an hour), has the server take a snapshot of them, and reports its
// memory: the live heap after a collection, resident memory, the peak
// resident memory over the whole run (the snapshot included), and what
// each registration cost the write path in allocations and collector CPU.
func (b *Calls) leaseMemory(ctx context.Context, env Env, conns *Conns) (Result, error) {
	m0, err := readMemory(ctx, b.Admin, true)
	if err != nil {
		return Result{}, err
	}
	start := time.Now()
	regs, err := register(ctx, conns, b.Leases)
	took := time.Since(start)
	defer func() {
		cookies := make([][]byte, len(regs))
		for i, r := range regs {
			cookies[i] = r.GetLease().GetCookie()
		}
		cancelLeases(env, conns.For(0), "registrations", cookies)
	}()
	if err != nil {
		return Result{}, err
	}
	m1, err := readMemory(ctx, b.Admin, true)
	if err != nil {
		return Result{}, err
	}
	env.progress("leases: %d registrations in %.1fs; live heap %.1f MB; taking a snapshot", b.Leases, took.Seconds(), m1.live/(1<<20))
	snapStart := time.Now()
	var size countWriter
	if _, err := conns.clients[0].SaveSnapshot(ctx, &size); err != nil {
		return Result{}, fmt.Errorf("force a snapshot: %w", err)
	}
	snapTook := time.Since(snapStart)
	m2, err := readMemory(ctx, b.Admin, true)
	if err != nil {
		return Result{}, err
	}
	return b.memoryResult(took, snapTook, int64(size), m0, m1, m2), nil
}

// memoryResult is the leases workload's result from the server's memory
// before (m0), after the registrations (m1) and after the snapshot (m2).
func (b *Calls) memoryResult(took, snapTook time.Duration, snapBytes int64, m0, m1, m2 memory) Result {
	n := float64(b.Leases)
	const mb = 1 << 20
	gcShare := 0.0
	if cpu := m1.cpu - m0.cpu; cpu > 0 {
		gcShare = 100 * (m1.gcCPU - m0.gcCPU) / cpu
	}
	r := Result{Workload: "leases", Clients: 64, Unit: "registration", Ops: int64(b.Leases), Seconds: took.Seconds(),
		OpsPerS: n / took.Seconds(), Figures: []Figure{
			fig("live heap before", m0.live/mb, "MB"), fig("live heap after", m1.live/mb, "MB"),
			fig("live heap per registration", (m1.live-m0.live)/n, "B"),
			fig("RSS after", m1.rss/mb, "MB"),
			fig("allocations per registration", (m1.allocs-m0.allocs)/n, ""),
			fig("bytes allocated per registration", (m1.allocBytes-m0.allocBytes)/n, "B"),
			fig("GC share of server CPU while registering", gcShare, "%"),
			fig("snapshot", float64(snapBytes)/mb, "MB"), fig("snapshot time", snapTook.Seconds(), "s"),
			fig("live heap after the snapshot", m2.live/mb, "MB"), fig("RSS after the snapshot", m2.rss/mb, "MB"),
			fig("peak RSS (snapshot included)", m2.peakRSS/mb, "MB"),
		}}
	if b.Leases == 1000000 {
		r.Checks = append(r.Checks,
			target("live heap with 1M registrations", m1.live/mb, "≤ 150 MB", m1.live <= 150*mb),
			target("peak RSS with 1M registrations, snapshot included", m2.peakRSS/mb, "≤ 300 MB", m2.peakRSS <= 300*mb))
	}
	return r
}

// countWriter counts what is written to it, and keeps none of it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}

var _ io.Writer = (*countWriter)(nil)
