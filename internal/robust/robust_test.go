package robust

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// startCluster starts a 3-member cluster of bin behind a Net, closed when
// the test ends.
func startCluster(t *testing.T, bin string) *Cluster {
	t.Helper()
	c, err := NewCluster(bin, t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s output:\n%s", n.ID, n.Output())
			}
		}
		c.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestShortSchedule: one fixed schedule injecting every kind of fault once
// under every workload; every checker finds nothing.
func TestShortSchedule(t *testing.T) {
	c := startCluster(t, binary(t, ""))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var faults []Fault
	for _, k := range AllFaults {
		faults = append(faults, Fault{Kind: k, Hold: 2 * time.Second})
	}
	r := NewRun(c, *seed, t.Logf)
	rep, err := r.Go(ctx, Workers{KV: 2, Lock: 3, Lease: 3, Txn: 1, Mailbox: true}, faults)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	t.Logf("counts %v outages %v", rep.Counts, rep.Outages)
	for _, v := range rep.Failed() {
		t.Error(v)
	}
}

// TestLongSchedules (-robust.long): -robust.schedules fault schedules of
// four random faults each, from -robust.seed on, against one cluster;
// prints the figures.
func TestLongSchedules(t *testing.T) {
	if !*long {
		t.Skip("the long mode runs with -robust.long")
	}
	c := startCluster(t, binary(t, ""))
	var sum Summary
	for i := range *schedules {
		s := *seed + int64(i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		r := NewRun(c, s, func(string, ...any) {})
		rep, err := r.Go(ctx, Workers{KV: 2, Lock: 3, Lease: 3, Txn: 1, Mailbox: true}, Schedule(rand.New(rand.NewPCG(uint64(s), 1)), 4))
		cancel()
		if err != nil {
			t.Fatalf("schedule %d (seed %d): %v", i, s, err)
		}
		t.Logf("schedule %d (seed %d): %v", i, s, rep)
		for _, v := range rep.Failed() {
			t.Errorf("schedule %d (seed %d): %s", i, s, v)
		}
		sum.Add(rep)
	}
	fmt.Print(sum.String())
}

// TestPlantedBugsAreCaught: the checkers find the bugs planted by build
// tag in the server's code paths — the suite fails against them.
func TestPlantedBugsAreCaught(t *testing.T) {
	for _, tc := range []struct {
		tag     string
		checker string
		w       Workers
		faults  []Fault
	}{
		{"djinn_planted_fence", "fencing", Workers{Lock: 3, For: 3 * time.Second}, nil},
		{"djinn_planted_txn", "transactions", Workers{Txn: 2, For: 3 * time.Second}, nil},
		{"djinn_planted_mailbox", "mailbox", Workers{Mailbox: true, For: 3 * time.Second}, nil},
		{"djinn_planted_lease", "lease safety", Workers{Lease: 6}, []Fault{{KillLeader, time.Second}, {PartitionLeader, time.Second}, {KillLeader, time.Second}}},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			c := startCluster(t, binary(t, tc.tag))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			rep, err := NewRun(c, *seed, t.Logf).Go(ctx, tc.w, tc.faults)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(rep)
			if len(rep.Violations[tc.checker]) == 0 {
				t.Errorf("the %s checker found nothing against the bug planted by %s", tc.checker, tc.tag)
			}
			for i, v := range rep.Failed() {
				if i == 5 {
					t.Logf("found %d more", len(rep.Failed())-i)
					break
				}
				t.Logf("found: %s", v)
			}
		})
	}
}
