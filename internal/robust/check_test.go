package robust

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func op(client int, in, out any, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
}

// TestCheckersCatch: each checker reports a history that breaks its
// promise, and passes one that keeps it.
func TestCheckersCatch(t *testing.T) {
	put := func(v string) kvInput { return kvInput{Key: "k", Put: true, Value: v} }
	get := kvInput{Key: "k"}
	acq := func(c int) lockInput { return lockInput{Op: opAcquire, Client: c} }
	rel := func(c int) lockInput { return lockInput{Op: opRelease, Client: c} }
	ms := int64(time.Millisecond)
	lease := func(evs ...LeaseEvent) [][]LeaseEvent { return [][]LeaseEvent{evs} }
	granted := LeaseEvent{Kind: leaseGrant, Call: 0, Ret: 10 * ms, Outcome: Done, Duration: 1000 * ms}
	for _, tc := range []struct {
		name  string
		check func() []string
		want  string // "" for none
	}{
		{"kv: a read after a write sees it", func() []string {
			return CheckLinearizable("kv", KVModel, []porcupine.Operation{op(0, put("a"), kvOutput{}, 0, 10), op(1, get, kvOutput{Value: "a"}, 20, 30)}, time.Second)
		}, ""},
		{"kv: a stale read", func() []string {
			return CheckLinearizable("kv", KVModel, []porcupine.Operation{op(0, put("a"), kvOutput{}, 0, 10), op(0, put("b"), kvOutput{}, 11, 15), op(1, get, kvOutput{Value: "a"}, 20, 30)}, time.Second)
		}, "not linearizable"},
		{"kv: a lost write may land any time after its call", func() []string {
			return CheckLinearizable("kv", KVModel, []porcupine.Operation{op(0, put("a"), kvOutput{Unknown: true}, 0, never), op(1, get, kvOutput{}, 20, 30), op(1, get, kvOutput{Value: "a"}, 40, 50)}, time.Second)
		}, ""},
		{"kv: another principal's key of the same name is another register", func() []string {
			other := kvInput{As: 1, Key: "k"}
			return CheckLinearizable("kv", KVModel, []porcupine.Operation{op(0, put("a"), kvOutput{}, 0, 10), op(1, other, kvOutput{}, 20, 30)}, time.Second)
		}, ""},
		{"lock: two grants at once", func() []string {
			return CheckLinearizable("lock", LockModel, []porcupine.Operation{op(0, acq(0), lockOutput{OK: true, Fence: 1}, 0, 10), op(1, acq(1), lockOutput{OK: true, Fence: 2}, 20, 30)}, time.Second)
		}, "not linearizable"},
		{"lock: a token not above the last", func() []string {
			return CheckLinearizable("lock", LockModel, []porcupine.Operation{op(0, acq(0), lockOutput{OK: true, Fence: 5}, 0, 10), op(0, rel(0), lockOutput{OK: true}, 11, 15), op(1, acq(1), lockOutput{OK: true, Fence: 5}, 20, 30)}, time.Second)
		}, "not linearizable"},
		{"lock: grant, unlock, grant", func() []string {
			return CheckLinearizable("lock", LockModel, []porcupine.Operation{op(0, acq(0), lockOutput{OK: true, Fence: 1}, 0, 10), op(1, acq(1), lockOutput{}, 11, 12), op(0, rel(0), lockOutput{OK: true}, 13, 15), op(1, acq(1), lockOutput{OK: true, Fence: 2}, 20, 30)}, time.Second)
		}, ""},
		{"fencing: two holders at once", func() []string {
			return CheckFencing([]porcupine.Operation{op(0, acq(0), lockOutput{OK: true, Fence: 1}, 0, 10), op(1, acq(1), lockOutput{OK: true, Fence: 2}, 20, 30), op(0, rel(0), lockOutput{OK: true}, 40, 50)})
		}, "held the write lock at once"},
		{"fencing: a token given twice", func() []string {
			return CheckFencing([]porcupine.Operation{op(0, acq(0), lockOutput{OK: true, Fence: 1}, 0, 10), op(0, rel(0), lockOutput{OK: true}, 11, 12), op(1, acq(1), lockOutput{OK: true, Fence: 1}, 20, 30)})
		}, "granted twice"},
		{"fencing: tokens out of order", func() []string {
			return CheckFencing([]porcupine.Operation{op(0, acq(0), lockOutput{OK: true, Fence: 7}, 0, 10), op(0, rel(0), lockOutput{OK: true}, 11, 12), op(1, acq(1), lockOutput{OK: true, Fence: 3}, 20, 30)})
		}, "granted after"},
		{"lease: gone after its expiration", func() []string {
			return CheckLeases(lease(granted, LeaseEvent{Kind: leaseRemaining, Call: 1100 * ms, Ret: 1110 * ms, Outcome: NotDone, Gone: true}))
		}, ""},
		{"lease: gone before its expiration", func() []string {
			return CheckLeases(lease(granted, LeaseEvent{Kind: leaseRemaining, Call: 500 * ms, Ret: 510 * ms, Outcome: NotDone, Gone: true}))
		}, "expired early"},
		{"lease: less remaining than granted", func() []string {
			return CheckLeases(lease(granted, LeaseEvent{Kind: leaseRemaining, Call: 500 * ms, Ret: 510 * ms, Outcome: Done, Duration: 100 * ms}))
		}, "cut short"},
		{"lease: gone at once when cancelled", func() []string {
			return CheckLeases(lease(granted, LeaseEvent{Kind: leaseCancel, Call: 100 * ms, Ret: 110 * ms, Outcome: Done},
				LeaseEvent{Kind: leaseRemaining, Call: 120 * ms, Ret: 130 * ms, Outcome: NotDone, Gone: true}))
		}, ""},
		{"lease: alive after its cancel", func() []string {
			return CheckLeases(lease(granted, LeaseEvent{Kind: leaseCancel, Call: 100 * ms, Ret: 110 * ms, Outcome: Done},
				LeaseEvent{Kind: leaseRemaining, Call: 120 * ms, Ret: 130 * ms, Outcome: Done, Duration: 800 * ms}))
		}, "resurrected"},
		{"lease: renewed after it expired", func() []string {
			return CheckLeases(lease(granted, LeaseEvent{Kind: leaseRemaining, Call: 1100 * ms, Ret: 1110 * ms, Outcome: NotDone, Gone: true},
				LeaseEvent{Kind: leaseRenew, Call: 1200 * ms, Ret: 1210 * ms, Outcome: Done, Duration: 1000 * ms}))
		}, "resurrected"},
		{"mailbox: every event, some twice, in order", func() []string {
			return CheckMailbox(&MailboxLog{sent: 3, acked: []int64{1, 2, 3}, pulled: []pulledEvt{{1, 1}, {2, 2}, {3, 2}, {4, 3}, {3, 2}}})
		}, ""},
		{"mailbox: an acknowledged event lost", func() []string {
			return CheckMailbox(&MailboxLog{sent: 3, acked: []int64{1, 2, 3}, pulled: []pulledEvt{{1, 1}, {2, 3}}})
		}, "acknowledged but never pulled"},
		{"mailbox: order not kept", func() []string {
			return CheckMailbox(&MailboxLog{sent: 3, acked: []int64{1, 2, 3}, pulled: []pulledEvt{{1, 1}, {2, 3}, {3, 2}}})
		}, "out of order"},
		{"mailbox: an event never sent", func() []string {
			return CheckMailbox(&MailboxLog{sent: 2, acked: []int64{1, 2}, pulled: []pulledEvt{{1, 1}, {2, 2}, {3, 7}}})
		}, "never sent"},
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
