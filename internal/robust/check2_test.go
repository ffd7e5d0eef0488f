package robust

import (
	"strings"
	"testing"
	"time"
)

// TestLookupAndRenewalCheckersCatch: the lookup and renewal checkers
// report a history that breaks their promise, and pass one that keeps it.
func TestLookupAndRenewalCheckersCatch(t *testing.T) {
	ms := int64(time.Millisecond)
	reg := ItemEvent{Kind: itemRegister, Call: 0, Ret: 10 * ms, Outcome: Done, Version: 1}
	set2 := ItemEvent{Kind: itemSetAttr, Call: 20 * ms, Ret: 30 * ms, Outcome: Done, Version: 2}
	cancel := ItemEvent{Kind: itemCancel, Call: 100 * ms, Ret: 110 * ms, Outcome: Done}
	look := func(call int64, stale time.Duration, found bool, v int64) ItemEvent {
		return ItemEvent{Kind: itemLookup, Call: call, Ret: call + 5*ms, Outcome: Done, Found: found, Version: v, Stale: int64(stale)}
	}
	items := func(evs ...ItemEvent) func() []string {
		return func() []string { return CheckLookups([][]ItemEvent{evs}) }
	}

	granted := LeaseEvent{Kind: leaseGrant, Call: 0, Ret: 10 * ms, Outcome: Done, Duration: int64(clientLeaseLength)}
	added := LeaseEvent{Kind: leaseRenew, Call: 20 * ms, Ret: 30 * ms, Outcome: Done, Duration: 5000 * ms}
	seen := func(call int64, alive bool) LeaseEvent {
		e := LeaseEvent{Kind: leaseRemaining, Call: call, Ret: call + 5*ms, Outcome: Done, Duration: 1000 * ms}
		if !alive {
			e.Outcome, e.Gone, e.Duration = NotDone, true, 0
		}
		return e
	}
	renewals := func(cl ClientLease, failed bool, windows ...[2]int64) func() []string {
		cl.Cookie, cl.Granted, cl.Added = "c", granted, []LeaseEvent{added}
		return func() []string {
			v, _ := CheckRenewals([]ClientLease{cl}, map[string]bool{"c": failed}, true, windows)
			return v
		}
	}
	removed := []LeaseEvent{{Kind: leaseCancel, Call: 1000 * ms, Ret: 1010 * ms, Outcome: Done}}
	for _, tc := range []struct {
		name  string
		check func() []string
		want  string // "" for none
	}{
		{"lookup: a registered item found, its newest version", items(reg, set2, look(40*ms, 0, true, 2)), ""},
		{"lookup: a linearizable lookup misses a registered item", items(reg, look(40*ms, 0, false, 0)), "not found"},
		{"lookup: a stale lookup within its bound may miss it", items(reg, look(40*ms, time.Second, false, 0)), ""},
		{"lookup: a stale lookup staler than its bound", items(reg, look(2000*ms, time.Second, false, 0)), "not found"},
		{"lookup: found after its cancel was answered", items(reg, cancel, look(200*ms, 0, true, 1)), "after its cancel"},
		{"lookup: a lost cancel may take effect at any time", items(reg, ItemEvent{Kind: itemCancel, Call: 100 * ms, Ret: never, Outcome: Unknown}, look(200*ms, 0, false, 0)), ""},
		{"lookup: a version no call wrote", items(reg, look(40*ms, 0, true, 9)), "no call wrote"},
		{"lookup: an overwritten version", items(reg, set2, look(40*ms, 0, true, 1)), "older than version 2"},
		{"renewal: LR.2 kept alive through its membership, then let go", renewals(ClientLease{Seen: []LeaseEvent{seen(3000*ms, true), seen(5500*ms, false)}}, false), ""},
		{"renewal: LR.2 a lease in its set expires early", renewals(ClientLease{Seen: []LeaseEvent{seen(1000*ms, true), seen(3000*ms, false)}}, true), "renewed as long as in the set"},
		{"renewal: LR.2 an early expiry in an outage is allowed", renewals(ClientLease{Seen: []LeaseEvent{seen(1000*ms, true), seen(3000*ms, false)}}, true, [2]int64{1500 * ms, 2500 * ms}), ""},
		{"renewal: LR.2.1 an early expiry raises a failure event", renewals(ClientLease{Seen: []LeaseEvent{seen(1000*ms, true), seen(3000*ms, false)}}, false, [2]int64{1500 * ms, 2500 * ms}), "no renewal failure event"},
		{"renewal: LR.2 renewed after its removal", renewals(ClientLease{Removed: removed, Seen: []LeaseEvent{seen(4500*ms, true)}}, false), "after it left its set"},
		{"renewal: LR.2 renewed after its set was cancelled", renewals(ClientLease{SetEnd: removed, Seen: []LeaseEvent{seen(4500*ms, true)}}, false), "after it left its set"},
		{"renewal: LR.2 renewed past its desired expiration", renewals(ClientLease{Seen: []LeaseEvent{seen(6000*ms, true)}}, false), "desired expiration"},
		{"renewal: LR.2 a lease held to its horizon after a fault is no renewal", renewals(ClientLease{Seen: []LeaseEvent{seen(6000*ms, true)}}, false, [2]int64{500 * ms, 1500 * ms}), ""},
		{"renewal: LR.2 a definite renewal failure raises an event", renewals(ClientLease{Cancel: []LeaseEvent{{Kind: leaseCancel, Call: 500 * ms, Ret: 510 * ms, Outcome: Done}}}, false), "holder cancelled"},
		{"renewal: LR.2.1 the failure event reported", renewals(ClientLease{Cancel: []LeaseEvent{{Kind: leaseCancel, Call: 500 * ms, Ret: 510 * ms, Outcome: Done}}}, true), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.check()
			switch {
			case tc.want == "" && len(v) > 0:
				t.Errorf("violations %q, want none", v)
			case tc.want != "" && (len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), tc.want)):
				t.Errorf("violations %q, want one saying %q", v, tc.want)
			}
		})
	}
}
