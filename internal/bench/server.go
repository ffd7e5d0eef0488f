package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// What the bench reads of the server measured, from its admin endpoint,
// and of the machine it runs on.

// process is what the server's admin endpoint says of its process.
type process struct {
	rss float64 // bytes
	cpu float64 // seconds
}

// readProcess reads the server's memory and CPU from its /metrics.
func readProcess(ctx context.Context, admin string) (process, error) {
	m, err := adminMetrics(ctx, admin, func(n string) bool {
		return n == "process_resident_memory_bytes" || n == "process_cpu_seconds_total"
	})
	if err != nil {
		return process{}, err
	}
	rss, ok1 := m["process_resident_memory_bytes"]
	cpu, ok2 := m["process_cpu_seconds_total"]
	if !ok1 || !ok2 {
		return process{}, fmt.Errorf("no process metrics at %s", admin)
	}
	return process{rss: rss, cpu: cpu}, nil
}

// maybeProcess is readProcess, or nil without an admin address.
func maybeProcess(ctx context.Context, admin string) (*process, error) {
	if admin == "" {
		return nil, nil
	}
	p, err := readProcess(ctx, admin)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

// cpuCores is the server's CPU use from p0 to p1 over secs seconds, in
// cores; 0 when either was not read.
func cpuCores(p0, p1 *process, secs float64) float64 {
	if p0 == nil || p1 == nil || secs <= 0 {
		return 0
	}
	return (p1.cpu - p0.cpu) / secs
}

// adminMetrics reads the server's admin /metrics and returns the samples
// whose names (labels included) keep accepts.
func adminMetrics(ctx context.Context, admin string, keep func(name string) bool) (map[string]float64, error) {
	body, err := adminGet(ctx, admin, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("read server metrics from %s: %w", admin, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 || !keep(line[:i]) {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, nil
}

// heapInuseMB is the server's heap in use (go_memstats_heap_inuse_bytes),
// 0 when it cannot be read.
func heapInuseMB(ctx context.Context, admin string) float64 {
	m, err := adminMetrics(ctx, admin, func(n string) bool { return n == "go_memstats_heap_inuse_bytes" })
	if err != nil {
		return 0
	}
	return m["go_memstats_heap_inuse_bytes"] / (1 << 20)
}

// liveHeapBytes reads the server's heap in use right after a collection:
// the live data, without the garbage a reading of /metrics may include.
// It asks the admin endpoint's heap profile, which collects first (gc=1)
// and ends with the runtime's memory statistics.
func liveHeapBytes(ctx context.Context, admin string) (int64, error) {
	body, err := adminGet(ctx, admin, "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return 0, fmt.Errorf("read server heap from %s: %w", admin, err)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("no HeapInuse in the heap profile at %s", admin)
}

func adminGet(ctx context.Context, admin, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+admin+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// hostCPU is the machine's CPU time as /proc/stat counts it, in ticks:
// all of it, and the part stolen by the hypervisor for other machines.
// On a shared host, steal is time the bench and the server wanted the
// CPU and did not get it, which a reading of the figures must allow for.
type hostCPU struct {
	total, steal uint64
	ok           bool // read: Linux, and a /proc/stat as documented
}

// readHostCPU reads /proc/stat's cpu line; elsewhere it returns !ok.
func readHostCPU() hostCPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return hostCPU{}
	}
	return parseProcStat(string(b))
}

// parseProcStat reads the cpu line of /proc/stat's contents.
func parseProcStat(stat string) hostCPU {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	// cpu user nice system idle iowait irq softirq steal ...
	if len(f) < 9 || f[0] != "cpu" {
		return hostCPU{}
	}
	var h hostCPU
	for i, s := range f[1:] {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return hostCPU{}
		}
		if i < 8 { // guest time is counted in user time already
			h.total += n
		}
		if i == 7 {
			h.steal = n
		}
	}
	h.ok = true
	return h
}

// stealSince returns the fraction of the machine's CPU time stolen since
// h0, or 0 when either reading failed.
func (h hostCPU) stealSince(h0 hostCPU) float64 {
	if !h.ok || !h0.ok || h.total <= h0.total {
		return 0
	}
	return float64(h.steal-h0.steal) / float64(h.total-h0.total)
}
