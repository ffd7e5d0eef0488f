package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Bench is one family of workloads of djinn bench.
type Bench interface {
	// Check tests the settings, before anything is dialled.
	Check() error
	// Run measures. It returns what it measured even with an error, when
	// it measured something before it could not go on.
	Run(ctx context.Context, env Env) (Report, error)
}

// Result is one measurement: a workload at a number of clients, or a setup
// (lock sets created, lookup items loaded) measured once.
type Result struct {
	Workload string  `json:"workload"`
	Clients  int     `json:"clients"`
	Unit     string  `json:"unit"` // what one op is: call, cycle, grant, lookup, transaction, set, round
	Ops      int64   `json:"ops"`  // completed
	Seconds  float64 `json:"seconds"`
	OpsPerS  float64 `json:"ops_per_s"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
	// Phases are named parts of an operation (lock and unlock of a
	// cycle, create and commit of a transaction).
	Phases []Phase `json:"phases"`
	// CallsPerOp is the gRPC calls one op makes, to set its rate beside
	// the Baseline's (0: not measured against one).
	CallsPerOp float64 `json:"calls_per_op"`
	// Empty is the plain gRPC empty call at the same concurrency; nil
	// when the workload is not set beside one.
	Empty   *Baseline `json:"empty_call"`
	Figures []Figure  `json:"figures"`
	Checks  []Check   `json:"checks"`
	Notes   []string  `json:"notes"`
}

// MarshalJSON writes r with every field, lists as [] when empty, so that
// every result of every bench has one shape.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	p := plain(r)
	p.Phases, p.Figures, p.Checks, p.Notes = orEmpty(p.Phases), orEmpty(p.Figures), orEmpty(p.Checks), orEmpty(p.Notes)
	return json.Marshal(p)
}

// orEmpty returns s, or an empty list for nil.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Phase is the latency of a named part of an operation.
type Phase struct {
	Name  string  `json:"name"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
}

// Baseline is the empty gRPC call (a health check) at the same
// concurrency, measured just before: of a plain gRPC server when Server
// says so, of the server measured otherwise.
type Baseline struct {
	PerS   float64 `json:"per_s"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	Server string  `json:"server,omitempty"`
}

// Figure is a named figure: a count, a rate, a size, a CPU share.
type Figure struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// Check is a condition on what was measured. A must that fails is the
// bench's failure; a target that fails is reported, not an error.
type Check struct {
	Name string  `json:"name"`
	Got  float64 `json:"got"`
	Want string  `json:"want"`
	OK   bool    `json:"ok"`
	Must bool    `json:"must"`
}

// must is a check that fails the bench.
func must(name string, got float64, want string, ok bool) Check {
	return Check{Name: name, Got: got, Want: want, OK: ok, Must: true}
}

// mustZero is a must that got is 0.
func mustZero(name string, got float64) Check { return must(name, got, "0", got == 0) }

// target is a check that only reports.
func target(name string, got float64, want string, ok bool) Check {
	return Check{Name: name, Got: got, Want: want, OK: ok}
}

// fig is a Figure.
func fig(name string, v float64, unit string) Figure { return Figure{Name: name, Value: v, Unit: unit} }

// Figure returns the value of the named figure, and whether r has it.
func (r *Result) Figure(name string) (float64, bool) {
	for _, f := range r.Figures {
		if f.Name == name {
			return f.Value, true
		}
	}
	return 0, false
}

// Check returns the named check, and whether r has it.
func (r *Result) Check(name string) (Check, bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// withBaseline sets the baseline beside r, whose ops make callsPerOp calls.
func (r Result) withBaseline(b Baseline, callsPerOp float64) Result {
	r.Empty, r.CallsPerOp = &b, callsPerOp
	return r
}

// Report is everything a bench measured, in order.
type Report struct {
	Results []Result `json:"results"`
}

// Verdict is the bench's exit status: every must that failed.
func (r Report) Verdict() error {
	var errs []error
	for _, x := range r.Results {
		for _, c := range x.Checks {
			if c.Must && !c.OK {
				errs = append(errs, fmt.Errorf("%s: %s %s, want %s", x.title(), c.Name, num(c.Got), c.Want))
			}
		}
	}
	return errors.Join(errs...)
}

// title names a result: its workload, and its clients when it ran several.
func (r *Result) title() string {
	if r.Clients <= 0 {
		return r.Workload
	}
	return fmt.Sprintf("%s at %d clients", r.Workload, r.Clients)
}

// Print writes a result as text: the one printer of every bench.
func Print(w io.Writer, r Result) {
	fmt.Fprintf(w, "%-13s clients=%-3d %10.0f %s/s", r.Workload, r.Clients, r.OpsPerS, plural(r.Unit))
	if r.P50ms != 0 || r.P99ms != 0 {
		fmt.Fprintf(w, "  p50 %7.3f ms  p99 %7.3f ms", r.P50ms, r.P99ms)
	}
	fmt.Fprintln(w)
	line := []string{fmt.Sprintf("%d %s in %.2f s", r.Ops, plural(r.Unit), r.Seconds)}
	for _, p := range r.Phases {
		if p.P99ms == 0 {
			line = append(line, fmt.Sprintf("%s p50 %.3f ms", p.Name, p.P50ms))
			continue
		}
		line = append(line, fmt.Sprintf("%s p50 %.3f / p99 %.3f ms", p.Name, p.P50ms, p.P99ms))
	}
	printLine(w, line)
	if b := r.Empty; b != nil {
		calls := r.OpsPerS * r.CallsPerOp
		frac := 0.0
		if b.PerS > 0 {
			frac = calls / b.PerS
		}
		of := "the empty call's"
		if b.Server != "" {
			of = "the empty call's, " + b.Server + ","
		}
		fmt.Fprintf(w, "    %s calls/%s: %.0f calls/s = %.0f%% of %s %.0f/s (p50 %.3f ms, p99 %.3f ms)\n",
			num(r.CallsPerOp), r.Unit, calls, 100*frac, of, b.PerS, b.P50ms, b.P99ms)
	}
	var figs []string
	for _, f := range r.Figures {
		figs = append(figs, strings.TrimSpace(f.Name+" "+num(f.Value)+" "+f.Unit))
	}
	printLine(w, figs)
	var checks []string
	for _, c := range r.Checks {
		checks = append(checks, c.String())
	}
	printLine(w, checks)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "    %s\n", n)
	}
}

// String shows a check as name, value and verdict.
func (c Check) String() string {
	kind, verdict := "target", "ok"
	if c.Must {
		kind = "must be"
	}
	if !c.OK {
		verdict = "FAILED"
	}
	return fmt.Sprintf("%s %s (%s %s: %s)", c.Name, num(c.Got), kind, c.Want, verdict)
}

// printLine writes parts on indented lines of about 100 characters.
func printLine(w io.Writer, parts []string) {
	var b strings.Builder
	for _, p := range parts {
		if b.Len() > 0 && b.Len()+len(p) > 96 {
			fmt.Fprintf(w, "    %s\n", b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p)
	}
	if b.Len() > 0 {
		fmt.Fprintf(w, "    %s\n", b.String())
	}
}

// num prints a figure: whole numbers without decimals, others with three
// significant ones at least.
func num(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	if v >= 100 || v <= -100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// plural is a unit's plural: call → calls.
func plural(unit string) string {
	if strings.HasSuffix(unit, "s") {
		return unit
	}
	return unit + "s"
}
