package robust

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Summary adds up the reports of many schedules into the suite's figures.
type Summary struct {
	Schedules  int
	Faults     map[string]int
	Histories  int
	Ops        map[string]int
	Violations map[string]int
	Unfinished map[string]int // linearizability checks that did not finish
	Counts     map[string]int
	Outages    map[string][]time.Duration
}

// Add adds a schedule's report.
func (s *Summary) Add(rep *Report) {
	if s.Faults == nil {
		s.Faults, s.Ops, s.Violations, s.Counts, s.Outages = map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}, map[string][]time.Duration{}
		s.Unfinished = map[string]int{}
	}
	s.Schedules++
	s.Histories += len(rep.Violations)
	for k, v := range rep.Faults {
		s.Faults[k] += v
	}
	for k, v := range rep.Ops {
		s.Ops[k] += v
	}
	for k, v := range rep.Violations {
		n, u := violations(v)
		s.Violations[k] += n
		s.Unfinished[k] += u
	}
	for k, v := range rep.Counts {
		s.Counts[k] += v
	}
	for k, v := range rep.Outages {
		s.Outages[k] = append(s.Outages[k], v...)
	}
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// String prints the figures as a table.
func (s *Summary) String() string {
	var b strings.Builder
	total := 0
	for _, v := range s.Faults {
		total += v
	}
	ops := 0
	for _, v := range s.Ops {
		ops += v
	}
	fmt.Fprintf(&b, "schedules               %d\n", s.Schedules)
	fmt.Fprintf(&b, "faults injected         %d\n", total)
	for _, k := range sortedKeys(s.Faults) {
		fmt.Fprintf(&b, "  %-21s %d\n", k, s.Faults[k])
	}
	fmt.Fprintf(&b, "histories checked       %d\n", s.Histories)
	fmt.Fprintf(&b, "operations recorded     %d\n", ops)
	for _, k := range sortedKeys(s.Ops) {
		fmt.Fprintf(&b, "  %-21s %d\n", k, s.Ops[k])
	}
	fmt.Fprintf(&b, "violations\n")
	for _, k := range sortedKeys(s.Violations) {
		fmt.Fprintf(&b, "  %-21s %d", k, s.Violations[k])
		if u := s.Unfinished[k]; u > 0 {
			fmt.Fprintf(&b, "  (and %d checks unfinished)", u)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "unavailability (first write after the fault)\n")
	for _, k := range sortedKeys(s.Outages) {
		o := s.Outages[k]
		fmt.Fprintf(&b, "  %-21s p50 %v  p99 %v  (%d)\n", k, percentile(o, 0.5).Round(time.Millisecond), percentile(o, 0.99).Round(time.Millisecond), len(o))
	}
	fmt.Fprintf(&b, "counts\n")
	for _, k := range sortedKeys(s.Counts) {
		fmt.Fprintf(&b, "  %-21s %d\n", k, s.Counts[k])
	}
	return b.String()
}
