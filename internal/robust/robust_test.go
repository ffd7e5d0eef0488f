package robust

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// suiteTags build the djinn the suite runs: with the stalled-fsync and
// stalled-snapshot failpoints, which do nothing until the suite creates
// their files.
const suiteTags = "djinn_failpoint_fsync,djinn_failpoint_snapshot"

// startCluster starts a 3-member cluster of bin behind a Net, closed when
// the test ends.
func startCluster(t *testing.T, bin string) *Cluster {
	t.Helper()
	c, err := NewCluster(bin, t.TempDir(), 3, NewCerts(t, 3))
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
	c := startCluster(t, binary(t, suiteTags))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var faults []Fault
	for _, k := range AllFaults {
		faults = append(faults, Fault{Kind: k, Hold: 2 * time.Second})
	}
	r := NewRun(c, *seed, t.Logf)
	rep, err := r.Go(ctx, Workers{KV: 2, Lock: 3, Lease: 3, Txn: 1, Lookup: 2, Renewal: 1, Mailbox: true, Delivery: 6, Isolation: 1}, faults)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	t.Logf("counts %v outages %v", rep.Counts, rep.Outages)
	for _, v := range rep.Failed() {
		t.Error(v)
	}
	for _, h := range []string{"kv", "lock", "lease", "mailbox", "delivery", "txn", "lookup", "renewal", "isolation"} {
		if rep.Ops[h] == 0 {
			t.Errorf("no %s operation recorded: that checker proved nothing", h)
		}
	}
	if rep.Counts["transactions committed"] == 0 {
		t.Errorf("no transaction committed: the transaction checker proved nothing")
	}
	if rep.Counts["raft TLS connections: sender told by its process"] == 0 {
		t.Errorf("no Raft connection's sender told: the faults between members applied to no Raft link")
	}
	if rep.Counts["isolation: resources found intact"] == 0 {
		t.Errorf("no isolation resource checked intact: the isolation checker proved nothing")
	}
}

// TestLongSchedules (-robust.long): -robust.schedules fault schedules of
// four random faults each, from -robust.seed on, against one cluster;
// prints the figures.
func TestLongSchedules(t *testing.T) {
	if !*long {
		t.Skip("the long mode runs with -robust.long")
	}
	c := startCluster(t, binary(t, suiteTags))
	var sum Summary
	began := time.Now()
	for i := range *schedules {
		if *longFor > 0 && time.Since(began) > *longFor {
			t.Logf("stopped after %d schedules: -robust.for %v passed", i, *longFor)
			break
		}
		s := *seed + int64(i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		r := NewRun(c, s, func(string, ...any) {})
		rep, err := r.Go(ctx, Workers{KV: 2, Lock: 3, Lease: 3, Txn: 1, Lookup: 2, Renewal: 1, Mailbox: true, Delivery: 6, Isolation: 1}, Schedule(rand.New(rand.NewPCG(uint64(s), 1)), 4))
		cancel()
		if err != nil {
			t.Fatalf("schedule %d (seed %d): %v", i, s, err)
		}
		t.Logf("schedule %d (seed %d): %v", i, s, rep)
		for _, v := range rep.Failed() {
			t.Errorf("schedule %d (seed %d): %s", i, s, v)
		}
		sum.Add(rep)
		if (i+1)%10 == 0 {
			fmt.Printf("after %d schedules (%v):\n%s", i+1, time.Since(began).Round(time.Second), sum.String())
		}
	}
	fmt.Print(sum.String())
}

// planted is each bug planted by build tag, and the checker that must
// catch it.
var planted = []struct {
	tag, checker string
	w            Workers
	faults       []Fault
}{
	{"djinn_planted_fence", "fencing", Workers{Lock: 3, For: 3 * time.Second}, nil},
	{"djinn_planted_txn", "transactions", Workers{Txn: 2, For: 3 * time.Second}, nil},
	{"djinn_planted_mailbox", "mailbox", Workers{Mailbox: true, For: 3 * time.Second}, nil},
	{"djinn_planted_lease", "lease safety", Workers{Lease: 6}, leaderFaults},
	{"djinn_planted_lookup", "lookup", Workers{Lookup: 2, For: 3 * time.Second}, nil},
	{"djinn_planted_renewal", "renewal", Workers{Renewal: 3, For: 10 * time.Second}, nil},
}

// leaderFaults move the leadership, which the planted lease bug needs.
var leaderFaults = []Fault{{KillLeader, time.Second}, {PartitionLeader, time.Second}, {KillLeader, time.Second}}

// TestPlantedBugsAreCaught: against a djinn built with every planted bug
// (each in its own service), every checker finds its bug — the suite fails
// against them. With -robust.long each bug is also built and run alone.
func TestPlantedBugsAreCaught(t *testing.T) {
	var tags []string
	for _, p := range planted {
		tags = append(tags, p.tag)
	}
	c := startCluster(t, binary(t, strings.Join(tags, ",")))
	// The tail leaves time after the last fault for a client lease the
	// planted renewal bug skips to be added, lapse and be found gone
	// outside every fault's window: the renewal checker excuses a lease
	// lost within a lease length of a fault.
	// The isolation workload's intruder calls as the owner herself: a
	// planted leak, every call of hers answered and taking effect.
	rep := runPlanted(t, c, Workers{Lock: 1, Lease: 6, Txn: 1, Lookup: 1, Renewal: 3, Mailbox: true, Delivery: 3, Isolation: 1,
		Tail: 5*clientLeaseLength + 2*time.Second}, leaderFaults, Alice)
	for _, p := range planted {
		if len(rep.Violations[p.checker]) == 0 {
			t.Errorf("the %s checker found nothing against the bug planted by %s", p.checker, p.tag)
		}
	}
	for _, want := range []string{"was answered OK", "another principal's calls took effect"} {
		if !slices.ContainsFunc(rep.Violations["isolation"], func(v string) bool { return strings.Contains(v, want) }) {
			t.Errorf("the isolation checker found no %q against an intruder calling as the owner: %q", want, rep.Violations["isolation"])
		}
	}
	// The planted mailbox bug stores no event whose sequence number is a
	// multiple of 50: the delivery streams must not receive them either.
	if !slices.ContainsFunc(rep.Violations["delivery"], func(v string) bool { return strings.Contains(v, "never delivered") }) {
		t.Errorf("the delivery checker found no lost event against the bug planted by djinn_planted_mailbox: %q", rep.Violations["delivery"])
	}
	if !*long {
		return
	}
	for _, p := range planted {
		t.Run(p.tag, func(t *testing.T) {
			rep := runPlanted(t, startCluster(t, binary(t, p.tag)), p.w, p.faults, Bob)
			if len(rep.Violations[p.checker]) == 0 {
				t.Errorf("the %s checker found nothing against the bug planted by %s", p.checker, p.tag)
			}
		})
	}
}

func runPlanted(t *testing.T, c *Cluster, w Workers, faults []Fault, intruder Principal) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := NewRun(c, *seed, t.Logf)
	r.intruder = intruder
	rep, err := r.Go(ctx, w, faults)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rep)
	for _, k := range sortedKeys(rep.Violations) {
		for i, v := range rep.Violations[k] {
			if i == 2 {
				t.Logf("found %d more by %s", len(rep.Violations[k])-i, k)
				break
			}
			t.Logf("found by %s: %s", k, v)
		}
	}
	return rep
}
