package robust

import (
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Checkers judge recorded histories. Each returns the violations it found,
// one line each, naming the operations involved; none means the history
// keeps the promise the checker stands for.

// ErrUnfinished is the prefix of the report of a linearizability check
// that did not finish in time: it proves nothing either way, and is
// counted apart from violations.
const ErrUnfinished = "unfinished: "

// CheckLinearizable checks a history against a model with porcupine. A
// check that does not finish within timeout is reported with the prefix
// ErrUnfinished.
func CheckLinearizable(name string, m porcupine.Model, ops []porcupine.Operation, timeout time.Duration) []string {
	res, info := porcupine.CheckOperationsVerbose(m, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return []string{fmt.Sprintf("%s%s: the linearizability check of %d operations did not finish in %v", ErrUnfinished, name, len(ops), timeout)}
	}
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	msg := fmt.Sprintf("%s: not linearizable (%d operations)", name, len(ops))
	if n := len(longest); n > 0 {
		last := longest[n-1]
		msg += fmt.Sprintf("; the longest linearizable prefix ends with %s", m.DescribeOperation(last.Input, last.Output))
	}
	return []string{msg}
}

// CheckFencing checks the lock history for two holders of a write lock at
// once: each grant holds its set from its answer to its unlock's call (for
// ever if the unlock's answer was lost); no two grants of a set may hold
// at once, tokens are never given twice, and a grant asked after another
// was answered has a larger token.
func CheckFencing(ops []porcupine.Operation) []string {
	type hold struct {
		client         int
		fence          uint64
		call, from, to int64
	}
	bySet := map[int][]*hold{}
	open := map[[2]int]*hold{} // set, client → the grant not yet unlocked
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	for _, op := range sorted {
		in, out := op.Input.(lockInput), op.Output.(lockOutput)
		k := [2]int{in.Set, in.Client}
		switch {
		case in.Op == opAcquire && out.OK && !out.Unknown:
			h := &hold{client: in.Client, fence: out.Fence, call: op.Call, from: op.Return, to: never}
			bySet[in.Set] = append(bySet[in.Set], h)
			open[k] = h
		case in.Op == opRelease && open[k] != nil:
			open[k].to = op.Call
			delete(open, k)
		}
	}
	var v []string
	for set, hs := range bySet {
		for i, a := range hs {
			if len(v) >= 100 {
				break // enough to show what is wrong
			}
			for _, b := range hs[i+1:] {
				switch {
				case a.fence == b.fence:
					v = append(v, fmt.Sprintf("set %d: token %d granted twice (clients %d and %d)", set, a.fence, a.client, b.client))
				case a.from < b.to && b.from < a.to && a.client != b.client:
					v = append(v, fmt.Sprintf("set %d: clients %d (token %d) and %d (token %d) held the write lock at once", set, a.client, a.fence, b.client, b.fence))
				case a.from < b.call && a.fence > b.fence, b.from < a.call && b.fence > a.fence:
					v = append(v, fmt.Sprintf("set %d: token %d granted after token %d was answered", set, min(a.fence, b.fence), max(a.fence, b.fence)))
				}
			}
		}
	}
	sort.Strings(v)
	return v
}

// CheckLeases checks each lease's events:
//   - never early: no answer that the lease is gone comes back before the
//     expiration of a grant or renewal answered earlier (the call's time
//     plus the duration granted: the landlord counted from later), unless
//     its holder had asked to cancel it; no remaining time reported ends
//     before that expiration either;
//   - never resurrected: once the landlord said it is gone, or answered a
//     cancel, no later question finds it alive.
func CheckLeases(leases [][]LeaseEvent) []string {
	var v []string
	for i, evs := range leases {
		v = append(v, checkLease(i, evs)...)
	}
	return v
}

func checkLease(i int, evs []LeaseEvent) []string {
	var v []string
	cancelAsked := never
	var gone *LeaseEvent // the first answer that the lease is gone
	for j, e := range evs {
		if e.Kind == leaseCancel && e.Call < cancelAsked {
			cancelAsked = e.Call
		}
		if (e.Gone || e.Kind == leaseCancel && e.Outcome == Done) && (gone == nil || e.Ret < gone.Ret) {
			gone = &evs[j]
		}
	}
	// promised(t) is the expiration the holder was given by answers that
	// came back before t.
	promised := func(t int64) int64 {
		var p int64
		for _, e := range evs {
			if (e.Kind == leaseGrant || e.Kind == leaseRenew) && e.Outcome == Done && e.Ret <= t {
				p = max(p, e.Call+e.Duration)
			}
		}
		return p
	}
	const rounding = int64(time.Millisecond)
	found := map[string]bool{} // one report of each kind per lease
	report := func(kind, msg string) {
		if !found[kind] {
			found[kind] = true
			v = append(v, fmt.Sprintf("lease %d %s", i, msg))
		}
	}
	for _, e := range evs {
		p := promised(e.Ret)
		switch {
		case e.Gone && e.Ret < cancelAsked && e.Ret+rounding < p:
			report("early", fmt.Sprintf("expired early: %s said gone %v before the expiration its holder was granted", e, time.Duration(p-e.Ret)))
		case e.Kind == leaseRemaining && e.Outcome == Done && e.Ret < cancelAsked && e.Ret+e.Duration+rounding < p:
			report("short", fmt.Sprintf("cut short: %s reported %v remaining, %v less than granted", e, time.Duration(e.Duration), time.Duration(p-e.Ret-e.Duration)))
		case gone != nil && e.Outcome == Done && e.Kind != leaseCancel && e.Call > gone.Ret:
			report("resurrected", fmt.Sprintf("resurrected: %s found it alive %v after %s said it was gone", e, time.Duration(e.Call-gone.Ret), gone))
		}
	}
	return v
}

// String names the question, the member that answered and when.
func (e LeaseEvent) String() string {
	kind := [...]string{"grant", "renew", "remaining", "cancel"}[e.Kind]
	ret := "never"
	if e.Ret != never {
		ret = time.Duration(e.Ret).Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%s at member %d (asked %v, answered %s)", kind, e.Node, time.Duration(e.Call).Round(time.Millisecond), ret)
}
