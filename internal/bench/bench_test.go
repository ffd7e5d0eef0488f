package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/djinn-go/djinn"
	"github.com/djinn-go/djinn/client"
	"github.com/djinn-go/djinn/internal/grpcerr"
	"github.com/djinn-go/djinn/proto/djinnpb"
)

// TestLoadCountsCompletedWork: a load counts the operations its clients
// completed, and only those: a step cut short by the end of the time is
// neither counted nor a failure; with Finish it runs to its end and counts.
func TestLoadCountsCompletedWork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		step := func(ctx context.Context, _ int, rec *Recorder) error {
			t0 := time.Now()
			select {
			case <-time.After(3 * time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
			rec.Phase("half", time.Since(t0)/2)
			rec.Count("steps", 1)
			rec.Op(time.Since(t0))
			return nil
		}
		m, err := Load{Clients: 4, Duration: 10 * time.Second, Step: step}.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if m.Ops != 12 || m.Count("steps") != 12 || m.Elapsed != 10*time.Second {
			t.Errorf("cut: %d ops, %d steps in %v; want 3 steps of each of 4 clients in 10s", m.Ops, m.Count("steps"), m.Elapsed)
		}
		if p := m.Percentile("", 0.99); p != 3000 {
			t.Errorf("p99 %v ms, want 3000", p)
		}
		if p := m.Percentile("half", 0.50); p != 1500 {
			t.Errorf("phase p50 %v ms, want 1500", p)
		}
		m, err = Load{Clients: 4, Duration: 10 * time.Second, Finish: true, Slack: time.Minute, Step: step}.Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if m.Ops != 16 || m.Elapsed != 12*time.Second {
			t.Errorf("finished: %d ops in %v; want the fourth step of each client counted, in 12s", m.Ops, m.Elapsed)
		}
		r := m.Result("w", "cycle", "half")
		if r.Ops != 16 || r.OpsPerS != 16/12.0 || len(r.Phases) != 1 || r.Phases[0].P50ms != 1500 {
			t.Errorf("result %+v", r)
		}
	})
}

// TestLoadFailure: a step's error ends the run for every client and is
// the run's error; an interrupted run returns the context's error.
func TestLoadFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		_, err := Load{Clients: 3, Duration: time.Hour, Step: func(ctx context.Context, c int, rec *Recorder) error {
			if c == 1 {
				time.Sleep(time.Second)
				return boom
			}
			<-ctx.Done()
			return ctx.Err()
		}}.Run(t.Context())
		if !errors.Is(err, boom) {
			t.Errorf("run: %v, want the step's error", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		_, err = Load{Clients: 2, Duration: time.Hour, Step: func(ctx context.Context, _ int, _ *Recorder) error {
			<-ctx.Done()
			return ctx.Err()
		}}.Run(ctx)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("interrupted run: %v, want canceled", err)
		}
	})
}

// TestPrintAndVerdict: the one printer shows the rate, latencies, phases,
// baseline, figures and checks; only a failed must is a verdict.
func TestPrintAndVerdict(t *testing.T) {
	r := Result{Workload: "contended", Clients: 64, Unit: "grant", Ops: 500, Seconds: 2, OpsPerS: 250, P50ms: 1.5, P99ms: 9,
		Phases: []Phase{{Name: "lock", P50ms: 1, P99ms: 2}}, Figures: []Figure{fig("server CPU", 1.25, "cores")},
		Checks: []Check{mustZero("fence violations", 0), target("grants/s", 250, ">= 11000", false)}, Notes: []string{"a note"}}
	r = r.withBaseline(Baseline{PerS: 1000, P50ms: 0.5, P99ms: 1}, 2)
	var b strings.Builder
	Print(&b, r)
	for _, want := range []string{"contended     clients=64", "250 grants/s", "p50   1.500 ms", "lock p50 1.000 / p99 2.000 ms",
		"2 calls/grant: 500 calls/s = 50% of the empty call's 1000/s", "server CPU 1.25 cores",
		"fence violations 0 (must be 0: ok)", "grants/s 250 (target >= 11000: FAILED)", "a note"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("printed:\n%s\nwant %q", b.String(), want)
		}
	}
	if err := (Report{Results: []Result{r}}).Verdict(); err != nil {
		t.Errorf("a missed target is no failure: %v", err)
	}
	r.Checks = append(r.Checks, must("left held", 2, "0", false))
	if err := (Report{Results: []Result{r}}).Verdict(); err == nil || !strings.Contains(err.Error(), "contended at 64 clients: left held 2, want 0") {
		t.Errorf("verdict %v", err)
	}
}

// TestHostSteal: the bench reads the machine's stolen CPU time from the
// cpu line of /proc/stat (proc(5): user nice system idle iowait irq
// softirq steal guest guest_nice, guest counted in user already), and
// reports nothing from a line it cannot read.
func TestHostSteal(t *testing.T) {
	h0 := parseProcStat("cpu  100 0 50 800 10 0 5 35 7 0\ncpu0 1 2 3\n")
	h1 := parseProcStat("cpu  200 0 100 1500 10 0 5 185 9 0\n")
	if !h0.ok || h0.total != 1000 || h0.steal != 35 {
		t.Fatalf("parsed %+v, want total 1000, steal 35", h0)
	}
	if got := h1.stealSince(h0); got != 0.15 {
		t.Errorf("steal since: %v, want 150 of 1000 ticks, 0.15", got)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x", "cpu0 1 2 3 4 5 6 7 8"} {
		if h := parseProcStat(bad); h.ok || h.stealSince(h0) != 0 || h0.stealSince(h) != 0 {
			t.Errorf("parseProcStat(%q) = %+v, want unread and no steal", bad, h)
		}
	}
	if got := h0.stealSince(h0); got != 0 {
		t.Errorf("steal over no time: %v, want 0", got)
	}
}

// TestRenewalCountsEvents: every renewal failure event counts, and the
// first one's error is kept for the report.
func TestRenewalCountsEvents(t *testing.T) {
	var r renewalRun
	payload, err := anypb.New(&djinnpb.RenewalFailure{Error: grpcerr.ToProto(djinn.Errorf(djinn.UnknownLease, "lease 12: gone"))})
	if err != nil {
		t.Fatal(err)
	}
	failure := int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_RENEWAL_FAILURE)
	for _, ev := range []*client.RemoteEvent{
		{ID: failure, Seq: 1, Payload: payload},
		{ID: failure, Seq: 2},
		{ID: int64(djinnpb.RenewalEventID_RENEWAL_EVENT_ID_EXPIRATION_WARNING), Seq: 1},
	} {
		if err := r.notify(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	if r.failures.Load() != 2 || r.warnings.Load() != 1 {
		t.Errorf("%d failures, %d warnings: want 2 and 1", r.failures.Load(), r.warnings.Load())
	}
	if first, _ := r.firstErr.Load().(string); first != "UNKNOWN_LEASE: lease 12: gone" {
		t.Errorf("first failure %q", first)
	}
}
