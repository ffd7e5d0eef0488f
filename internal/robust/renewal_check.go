package robust

import (
	"fmt"
	"time"
)

// CheckRenewals checks the renewal-set workload's client leases against
// the lease renewal service's promises (the specification's sections in
// brackets):
//   - kept alive [LR.2, "Each client lease in a set will be renewed as
//     long as it is in the set"]: no client lease is found gone before its
//     membership (desired) duration ends while it is in a live set —
//     unless a fault (an outage: a member killed, a partition, a stalled
//     disk…) was under way within a lease length before it was found
//     gone, which can make renewal impossible in time; those are allowed
//     and counted (the second result), never hidden;
//   - let go [LR.2, remove; the set's lease "expires or is cancelled,
//     causing destruction of the set"; the renewal duration capped by the
//     remaining desired duration]: no client lease is found with time
//     left beyond a lease length (a renewal in flight) after its removal
//     or its set's cancel was answered, nor beyond its desired
//     expiration — judged where no fault came between its grant and the
//     answer (a new leader holds every lease to its horizon: late, never
//     early, and not a renewal);
//   - failures reported [LR.2, a renewal attempt "results in a definite
//     exception; this will generate a renewal failure event", and "the
//     client lease's actual expiration is reached; this will generate a
//     renewal failure event"; LR.2.1]: a client lease found gone while in
//     its set before its desired expiration, or cancelled by its holder
//     (the next renewal fails definitely) a lease length before it, is
//     named by a renewal failure event by the end of the run.
//
// windows are when each fault began and the cluster was whole again.
func CheckRenewals(cls []ClientLease, failures map[string]bool, pulled bool, windows [][2]int64) (v []string, excused int) {
	for i, cl := range cls {
		if len(cl.Added) == 0 || cl.Added[0].Outcome != Done {
			continue // never known to be in a set
		}
		lv, ex := checkClientLease(i, cl, failures, windows)
		v = append(v, lv...)
		if ex {
			excused++
		}
	}
	if !pulled && len(v) > 0 {
		v = append(v, "the renewal failure events were not all pulled before the run ended")
	}
	return v, excused
}

// renewalSlack is the time a renewal in flight may still extend a client
// lease by after it left its set; expirySlack the rounding allowed at the
// desired expiration.
const (
	renewalSlack = int64(clientLeaseLength + time.Second)
	expirySlack  = int64(500 * time.Millisecond)
)

// membership is when a client lease's set membership surely lasts and
// when it surely ended.
type membership struct {
	until    int64 // the earliest its desired expiration may be, or the first call that could end it
	end      int64 // the latest it surely ended (removal, set cancelled: answered), or never
	desired  int64 // the latest its desired expiration may be
	holderAt int64 // when its holder's cancel was answered, or never
}

func membershipOf(cl ClientLease) membership {
	add := cl.Added[0]
	m := membership{until: add.Call + add.Duration, end: never, desired: add.Ret + add.Duration, holderAt: never}
	for _, evs := range [][]LeaseEvent{cl.Removed, cl.SetEnd} {
		for _, e := range evs {
			m.until = min(m.until, e.Call)
			if e.Outcome == Done {
				m.end = min(m.end, e.Ret)
			}
		}
	}
	for _, e := range cl.Cancel {
		m.until = min(m.until, e.Call)
		if e.Outcome == Done {
			m.holderAt = min(m.holderAt, e.Ret)
		}
	}
	return m
}

// lostInSet returns the first answer that the client lease was gone while
// it was in its set, and the last answer before it that found it alive.
func lostInSet(cl ClientLease, m membership) (gone, alive *LeaseEvent) {
	for j := range cl.Seen {
		e := &cl.Seen[j]
		if e.Outcome == Done && !e.Gone {
			alive = e
		}
		if e.Gone && e.Ret < m.until {
			return e, alive
		}
	}
	return nil, nil
}

// inOutage reports whether a fault was under way at some time in [from, to].
func inOutage(windows [][2]int64, from, to int64) bool {
	for _, w := range windows {
		if w[0] <= to && w[1] >= from {
			return true
		}
	}
	return false
}

// failureDue reports whether a renewal failure event must name the client
// lease, and why.
func failureDue(cl ClientLease) (string, bool) {
	if len(cl.Added) == 0 || cl.Added[0].Outcome != Done {
		return "", false
	}
	m := membershipOf(cl)
	// Removal and the set's end, asked at any time, may come first.
	left := never
	for _, evs := range [][]LeaseEvent{cl.Removed, cl.SetEnd} {
		for _, e := range evs {
			left = min(left, e.Call)
		}
	}
	if gone, _ := lostInSet(cl, m); gone != nil && gone.Ret < left {
		return "it expired in its set before its desired expiration", true
	}
	if m.holderAt != never && m.holderAt+renewalSlack < cl.Added[0].Call+cl.Added[0].Duration && left == never {
		return "its holder cancelled it, so its renewal failed", true
	}
	return "", false
}

func checkClientLease(i int, cl ClientLease, failures map[string]bool, windows [][2]int64) (v []string, excused bool) {
	m := membershipOf(cl)
	add := cl.Added[0]
	if gone, alive := lostInSet(cl, m); gone != nil {
		from := add.Ret
		if alive != nil {
			from = alive.Call
		}
		switch {
		case add.Ret > cl.Granted.Call+int64(clientLeaseLength)/2:
			// Added too late in its lease for the service to be sure to
			// renew it in time.
		case inOutage(windows, from-int64(clientLeaseLength)-int64(time.Second), gone.Ret):
			excused = true
		default:
			v = append(v, fmt.Sprintf("client lease %d [LR.2 renewed as long as in the set]: %s found it gone %v before its membership ended (added %s)",
				i, gone, time.Duration(m.until-gone.Ret).Round(time.Millisecond), add))
		}
	}
	v = append(v, letGo(i, cl, m, windows)...)
	if why, due := failureDue(cl); due && !failures[cl.Cookie] {
		v = append(v, fmt.Sprintf("client lease %d [LR.2, LR.2.1 renewal failure event]: %s, but no renewal failure event named it", i, why))
	}
	return v, excused
}

// letGo reports the first answer whose remaining time reaches later than
// a renewal in flight could extend the client lease after it left its
// set, or past its desired expiration. (A lease past its expiration may
// be answered with no time left until the landlord reaps it: the time
// left is what counts.) Only answers with no fault since the lease was
// granted count: a new leader holds every lease to its horizon (never
// early, perhaps late), which is the landlord's doing, not a renewal.
func letGo(i int, cl ClientLease, m membership, windows [][2]int64) []string {
	for _, e := range cl.Seen {
		if e.Outcome != Done || e.Gone || inOutage(windows, cl.Granted.Call, e.Ret) {
			continue
		}
		exp := e.Ret + e.Duration
		if exp > m.end+renewalSlack {
			return []string{fmt.Sprintf("client lease %d [LR.2 remove, set destroyed]: %s found it alive with %v left, to %v after it left its set", i, e,
				time.Duration(e.Duration).Round(time.Millisecond), time.Duration(exp-m.end).Round(time.Millisecond))}
		}
		if exp > m.desired+expirySlack {
			return []string{fmt.Sprintf("client lease %d [LR.2 renewal duration capped at the remaining desired duration]: %s found it alive with %v left, to %v after its desired expiration", i, e,
				time.Duration(e.Duration).Round(time.Millisecond), time.Duration(exp-m.desired).Round(time.Millisecond))}
		}
	}
	return nil
}
